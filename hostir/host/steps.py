"""What a lowered segment's launch statement runs (`LaunchKernel.target`):
a generated kernel (`KernelStep`), torch ops by each op's reference rule
(`TorchStep`, for segment kinds without a code generator yet), or views of
inputs (`AliasStep`). Each has `.name` and `.launch(ctx, args, out=None)`
returning the segment's outputs; `args` are the values of the segment's inputs."""
from __future__ import annotations

import math

import torch

from ..codegen.kir import K
from ..codegen.spec import KernelSpec
from ..ir.env import eval_node
from ..ir.errors import ExecutionError
from ..ir.node import OPS
from ..passes.alias import apply_views
from ..runtime import backend
from ..segment import Segment


class KernelStep:
    """A segment compiled to a generated kernel: NVRTC and a launch on CUDA
    tensors, the kernel-IR interpreter on CPU tensors. The first launch of an
    input signature is prepared (variant, grid, packed arguments) and kept in
    the run's bound plan; later launches rewrite pointers and scalars only."""

    def __init__(self, seg: Segment, spec: KernelSpec, inputs: tuple | None = None, part: str = ""):
        """`inputs`: what the launch passes (default: the segment's inputs);
        `part` names one of a segment's several kernels."""
        self.seg = seg
        self.spec = spec
        self.name = f"seg{seg.id}_{seg.scheduler}" + (f"_{part}" if part else "")
        where = {id(v): i for i, v in enumerate(seg.inputs if inputs is None else inputs)}
        # per kernel (plain, paired): positions of its tensor inputs among the launch's inputs
        self.positions = {id(k): [where[id(t.val)] for t in k.inputs] for k in spec.kernels}

    @property
    def source(self) -> str:
        return self.spec.source

    def launch(self, ctx, args: list, out=None) -> list:
        """The outputs; with `out`, the kernel writes into those buffers (a
        scatter's write kernel, into what its fill kernel made) and returns them."""
        bound = ctx.bound
        got = bound.prepared.get(self) if bound is not None else None
        if got is None:
            return self._first(ctx, args, out)
        prep, positions = got
        if out is not None:
            outs = out
        elif ctx.out_buffers:
            outs = [ctx.output(v, shape, dt) for v, shape, dt in prep.outs]
        else:
            outs = prep.empty_outputs()
        prep.run([args[p] for p in positions], outs, [ctx[v] for v in prep.dyn], ctx.pool.handle)
        return outs

    def _first(self, ctx, args: list, out=None) -> list:
        spec = self.spec
        full = [ctx.scalar(e) for e in spec.plain.extent_vals]
        kernel, extents = spec.kernel_for(full, [ctx.scalar(g) for g in spec.guards])
        positions = self.positions[id(kernel)]
        if kernel.reduced and not math.prod(full[d] for d in kernel.reduced) and any(
                n.op == K.REDUCE and n.arg in ("max", "min", "argmax", "online_softmax")
                for n in kernel.order):
            raise ExecutionError(f"{self.name}: max/min/argmax over empty dims {list(kernel.reduced)} "
                                 f"of a tensor of shape {full} (the result has no value), as in torch")
        shapes = [full]
        if kernel.reduced:  # also the kept dims' shape, without or with the reduced dims as 1
            shapes += [[full[d] for d in kernel.kept],
                       [1 if d in kernel.reduced else e for d, e in enumerate(full)]]
        if out is None:
            outs = [self._output(ctx, t.val, shapes, full) for t in kernel.outputs]
        else:  # the launch's buffers (a guarded kernel stores anywhere in them)
            outs = out
        params = [ctx.scalar(p) for p in kernel.params]
        prep = backend.start(spec, kernel, extents, [args[p] for p in positions], outs, params,
                             ctx.device, ctx.pool.handle)
        if ctx.bound is not None:
            ctx.bound.prepared[self] = (prep, positions)
        return outs

    def _output(self, ctx, val, shapes: list, full: list[int]):
        shape = ctx.extents(val.logical)
        if shape not in shapes:
            raise ExecutionError(f"{self.name}: output {val!r} has shape {shape} but the "
                                 f"kernel iterates over {full}")
        return ctx.output(val, shape, val.dtype.torch)

    def prefetch(self, env, args: list) -> None:
        """Start compiling the variant a first launch on these inputs will most
        likely use (CUDA only; an extent known only later waits for the launch)."""
        try:
            full = [env.scalar(e) for e in self.spec.plain.extent_vals]
            kernel, extents = self.spec.kernel_for(full, [env.scalar(g) for g in self.spec.guards])
            params = [env.scalar(p) for p in kernel.params]
        except ExecutionError:
            return
        ins = [args[p] if args[p] is not None else _fresh(t.val, env)
               for p, t in zip(self.positions[id(kernel)], kernel.inputs)]
        backend.prefetch(self.spec, kernel, extents, ins, params, env.device)


class ScatterFillStep(KernelStep):
    """A scatter's fill kernel; on GPUs, where the fused row kernel applies
    (codegen/scatter.py, RowScatterSpec: the scatter along the innermost dim,
    a result row in shared memory), that kernel instead, which also does the
    write (its ScatterWriteStep then launches nothing). The launch passes every
    input of the segment where the fused kernel exists."""

    def __init__(self, seg: Segment, spec: KernelSpec, inputs: tuple, rows=None):
        super().__init__(seg, spec, inputs, "fill")
        self.rows = None if rows is None else _RowsStep(seg, rows, inputs)

    def launch(self, ctx, args: list, out=None) -> list:
        if self.rows is not None and self.rows.applies(ctx):
            got = self.rows.launch(ctx, args)
            if ctx.bound is not None:  # (the direct runner finds it under this step)
                ctx.bound.prepared[self] = ctx.bound.prepared[self.rows]
            return got
        return super().launch(ctx, args, out)

    def prefetch(self, env, args: list) -> None:
        if self.rows is not None and env.device.type == "cuda":
            self.rows.prefetch(env, args)
        else:
            super().prefetch(env, args)


class _RowsStep(KernelStep):
    """The fused scatter kernel's launches: its iteration extents are the
    fill's then the write's, its output the result (the fill's extents)."""

    def __init__(self, seg: Segment, spec: KernelSpec, inputs: tuple):
        super().__init__(seg, spec, inputs, "rows")

    def applies(self, env) -> bool:
        if env.device.type != "cuda":
            return False
        try:
            return self.spec.fits([env.scalar(e) for e in self.spec.plain.extent_vals])
        except ExecutionError:
            return False

    def _output(self, ctx, val, shapes: list, full: list[int]):
        return super()._output(ctx, val, [full[:len(full) // 2]], full[:len(full) // 2])


class ScatterWriteStep(KernelStep):
    """A scatter's write kernel into its fill's result; nothing where its
    ScatterFillStep ran the fused kernel, which wrote the values already."""

    def __init__(self, seg: Segment, spec: KernelSpec, inputs: tuple, fill: ScatterFillStep):
        super().__init__(seg, spec, inputs, "write")
        self.fill = fill

    def launch(self, ctx, args: list, out=None) -> list:
        if self.fill.rows is not None and self.fill.rows.applies(ctx):
            if ctx.bound is not None:
                ctx.bound.prepared[self] = (_DONE, [])
            return out
        return super().launch(ctx, args, out)

    def prefetch(self, env, args: list) -> None:
        if self.fill.rows is None or env.device.type != "cuda":
            super().prefetch(env, args)


class _Done:
    """The prepared launch of a step with nothing to launch."""

    dyn = ()
    outs = ()

    def run(self, ins, outs, scalars, stream) -> None:
        pass


_DONE = _Done()


def _fresh(val, env):
    """A stand-in for an intermediate not computed yet: a new contiguous tensor
    of its shape (what its producer will allocate), without memory."""
    return torch.empty(env.extents(val.logical), dtype=val.dtype.torch, device="meta")


class TorchStep:
    """A segment run op by op by each op's reference rule (torch)."""

    def __init__(self, seg: Segment):
        self.seg = seg
        self.name = f"seg{seg.id}_{seg.scheduler}"
        # the tuples of several-result nodes: only this segment's RESULT nodes read them
        self.tuples = [v for v in seg.exprs if OPS[v.op].results is not None]

    def launch(self, ctx, args: list, out=None) -> list:
        bufs = ctx.out_buffers
        for v in self.seg.exprs:
            buf = bufs.get(v) if bufs else None
            if buf is not None and _into(v, ctx, buf):
                ctx[v] = buf
            else:
                ctx[v] = eval_node(v, ctx)
        for v in self.tuples:  # so that a result is freed when its last reader is done
            del ctx[v]
        return [ctx[o] for o in self.seg.outputs]


def _into(v, ctx, buf) -> bool:
    """Evaluate `v` straight into the caller's buffer where its op can."""
    into = OPS[v.op].into
    if into is None or list(buf.shape) != ctx.extents(v.logical):
        return False
    return into(v, [ctx[s] if s.is_tensor else ctx.scalar(s) for s in v.src], buf)


class AliasStep:
    """Outputs that are views of inputs: torch views, no kernel."""

    def __init__(self, seg: Segment, views: dict):
        self.seg = seg
        self.name = f"seg{seg.id}_alias(no kernel)"
        self.chains = [views[i] for i in sorted(views)]

    def launch(self, ctx, args: list, out=None) -> list:
        out = []
        for chain in self.chains:
            t = ctx[chain[0]]
            if len(chain) == 1:
                out.append(t.view_as(t))
                continue
            try:
                t = apply_views(chain, t, ctx)
            except RuntimeError:  # a layout the plan's key did not foresee: copy instead
                for v in chain[1:]:
                    ctx[v] = eval_node(v, ctx)
                t = ctx[chain[-1]]
            out.append(t)
        return out
