"""Lowering: a segmented fusion becomes a host program — one launch per
segment in dependency order (alias segments make views and launch nothing),
intermediates freed after their last use."""
from __future__ import annotations

import math
import threading

import torch

from .. import config
from ..codegen.cuda import kernel_source, vector_loads, vector_width
from ..codegen.interpret import interpret
from ..codegen.kir import Kernel
from ..codegen.lower import lower_pointwise
from ..ir.errors import ExecutionError, UnsupportedError
from ..ir.node import Op
from ..ir.reference import Env, eval_node
from ..runtime.launch import (I32, I64, PTR, CompiledKernel, PackedArgs,
                              arch_of, param_ctype, sm_count)
from ..runtime.nvrtc import prefetch
from ..passes.alias import apply_view
from ..segment import Segment, SegmentedFusion
from . import ir as H


class SegmentLaunch:
    """A segment run by the reference evaluator (the kernel backends replace it)."""

    needs_args = False  # reads its inputs from the environment

    def __init__(self, seg: Segment):
        self.seg = seg
        self.name = f"seg{seg.id}_{seg.scheduler}"

    def launch(self, env: Env, args: list) -> list:
        for v in self.seg.exprs:
            env[v] = eval_node(v, env)
        return [env[o] for o in self.seg.outputs]


def _output(env: Env, val, shape, dtype) -> torch.Tensor:
    """The tensor a kernel writes `val` into: the caller's buffer when one was
    given for it (any strides; the kernel indexes through them), else a new one."""
    bufs = env.out_buffers
    if bufs:
        buf = bufs.get(val)
        if buf is not None and list(buf.shape) == shape and buf.dtype == dtype \
                and buf.device == env.device:
            return buf
    return torch.empty(shape, dtype=dtype, device=env.device)


_GRID_STRIDE = config.enabled("grid_stride")
_I32_MAX = 2 ** 31 - 1


def _span(t: torch.Tensor) -> int:
    """The largest element offset of `t` from its first element."""
    return sum((sz - 1) * abs(st) for sz, st in zip(t.shape, t.stride()))


class _Prepared:
    """What a kernel launch needs for one input signature, computed once: the
    output shapes, the grid, and the arguments packed in C storage, of which
    each call rewrites only the pointers and the scalar inputs' values."""

    __slots__ = ("compiled", "grid", "block", "tuning", "packed", "launcher", "outs", "in_ptr",
                 "out_ptr", "dyn", "lock", "alloc", "in_objs", "out_objs", "dyn_objs")

    @classmethod
    def make(cls, k: Kernel, outs: list, launch, tuning: tuple, device=None) -> "_Prepared":
        p = cls()
        p.tuning = tuning
        p.block = tuning[0]
        p.outs = [(kt.val, list(t.shape), t.dtype) for kt, t in zip(k.outputs, outs)]
        # new_empty on an empty tensor of the output's dtype and device: cheaper than
        # torch.empty(shape, dtype=, device=), whose keyword parsing costs more than the allocation
        # (a tuple shape parses faster than a list)
        p.alloc = [(t.new_empty(0), tuple(t.shape)) for t in outs]
        p.compiled = None
        if launch is None:
            return p
        p.compiled, p.grid, p.packed = launch
        p.launcher = p.compiled.launcher(device, p.grid, p.block)
        p.lock = threading.Lock()  # the packed arguments are shared: one launch at a time
        p.in_ptr, p.out_ptr, p.dyn = [], [], []
        pos = 0
        for t in k.inputs:
            p.in_ptr.append((pos, t.val))
            pos += 1 + t.ndim
        for j, t in enumerate(k.outputs):
            p.out_ptr.append((pos, j))
            pos += 1 + t.ndim
        for v in k.params:
            if v.op is Op.SCALAR_INPUT:  # may change between calls of one signature
                p.dyn.append((pos, v))
            pos += 1
        objs = p.packed.objs
        p.in_objs = [objs[pos] for pos, _ in p.in_ptr]
        p.out_objs = [objs[pos] for pos, _ in p.out_ptr]
        p.dyn_objs = [objs[pos] for pos, _ in p.dyn]
        return p

    def empty_outputs(self) -> list:
        return [t.new_empty(shape) for t, shape in self.alloc]

    def run(self, ins: list, outs: list, scalars, stream: int) -> None:
        """Launch with input tensors `ins` (in_ptr's order), output tensors
        `outs` and scalar input values `scalars` (dyn's order)."""
        with self.lock:
            for o, t in zip(self.in_objs, ins):
                o.value = t.data_ptr()
            for o, t in zip(self.out_objs, outs):
                o.value = t.data_ptr()
            for o, x in zip(self.dyn_objs, scalars):
                o.value = x
            self.launcher(stream, self.packed)


class KernelLaunch:
    """A segment compiled to a generated kernel: NVRTC + launch on CUDA tensors,
    the kernel-IR interpreter on CPU tensors. Variants (points per thread with
    vector loads/stores, 32- or 64-bit indices) are compiled on first use and
    chosen per call from the actual extents, strides and alignment."""

    needs_args = False   # reads its inputs from the environment
    # tuning knobs, swept by benchmarks/tune_pointwise.py (findings in benchmarks/RESULTS.md);
    # a signature's prepared launches keep the knobs of its first call (the sweep resets them)
    BLOCK = 256          # threads per block
    STREAMING = False    # evict-first 16-byte stores
    # programmatic dependent launch: a kernel's blocks start while the previous kernel
    # of the stream drains, and wait on griddepcontrol before touching memory
    PDL = not config.disabled("pdl")

    def __init__(self, seg: Segment, kernel: Kernel):
        self.seg = seg
        self.kernel = kernel                       # maybe with paired lanes
        self.plain = getattr(kernel, "fallback", kernel)
        self.name = f"seg{seg.id}_{seg.scheduler}"
        self._variants: dict[tuple, tuple[CompiledKernel, frozenset]] = {}
        self._prepared: dict[int, _Prepared] = {}
        self._vec = {id(self.kernel): vector_width(self.kernel), id(self.plain): vector_width(self.plain)}
        self.vec = self._vec[id(self.kernel)]

    @property
    def source(self) -> str:
        """The general variant's source (one point per thread, 64-bit indices)."""
        return self.variant(1, "long long")[0].source

    @property
    def compiled(self) -> CompiledKernel:
        return self.variant(1, "long long")[0]

    @classmethod
    def tuning(cls) -> tuple:
        return cls.BLOCK, cls.STREAMING, cls.PDL

    def variant(self, vec: int, idx: str, kernel: Kernel | None = None):
        kernel = kernel or self.kernel
        key = (id(kernel), vec, idx) + self.tuning()
        got = self._variants.get(key)
        if got is None:
            lanes = "_pair" * len(kernel.pairs)
            tune = f"_b{self.BLOCK}{'cs' if self.STREAMING else ''}{'_pdl' if self.PDL else ''}"
            name = f"{kernel.name}{lanes}_v{vec}_{'i32' if idx == 'int' else 'i64'}{tune}"
            kernel.name, base = name, kernel.name
            try:
                src = kernel_source(kernel, vec, idx, self.BLOCK, self.STREAMING, self.PDL)
            finally:
                kernel.name = base
            slots = frozenset(n.arg for n in kernel.order if id(n) in vector_loads(kernel, vec))
            got = self._variants[key] = (CompiledKernel(name, src, pdl=self.PDL), slots)
        return got

    def launch(self, env: Env, args: list) -> list:
        token = env.token
        if token is not None:
            prep = self._prepared.get(token)
            if prep is not None and prep.tuning == self.tuning():
                return self._run_prepared(prep, env)
        full = [env.scalar(e) for e in self.plain.extent_vals]
        k, extents = self._kernel_for(full)
        params = [env.scalar(p) for p in k.params]
        ins = [env[t.val] for t in k.inputs]
        shapes = [env.extents(t.val.logical) for t in k.outputs]
        for t, shape in zip(k.outputs, shapes):
            if shape != full:
                raise ExecutionError(f"{self.name}: output {t.val!r} has shape {shape} but the "
                                     f"kernel iterates over {full}")
        outs = [_output(env, t.val, shape, t.dtype.torch) for t, shape in zip(k.outputs, shapes)]
        numel = math.prod(extents)
        launch = None
        if numel and env.device.type == "cuda":
            launch = self._launch_cuda(k, env.device, ins, outs, params, extents, numel,
                                       env.pool.handle)
        elif numel:
            interpret(k, ins, outs, params, extents)
        if token is not None and env.device.type == "cuda":
            if len(self._prepared) >= 64:  # the oldest signature's launch makes room
                del self._prepared[next(iter(self._prepared))]
            self._prepared[token] = _Prepared.make(k, outs, launch, self.tuning(), env.device)
        return outs

    def _run_prepared(self, prep: "_Prepared", env: Env) -> list:
        """A launch for inputs of a signature seen before: only pointers and
        scalar inputs change, everything else was computed then."""
        if env.out_buffers:
            outs = [_output(env, v, shape, dt) for v, shape, dt in prep.outs]
        else:
            outs = prep.empty_outputs()
        if prep.compiled is not None:
            prep.run([env[v] for _, v in prep.in_ptr], outs, [env[v] for _, v in prep.dyn],
                     env.pool.handle)
        return outs

    def prefetch(self, env: Env) -> None:
        """Start compiling, in the background, the variant the first launch on
        these inputs will most likely use (so a plan's kernels compile in parallel)."""
        try:
            full = [env.scalar(e) for e in self.plain.extent_vals]
        except Exception:  # an extent known only later: compile at the launch
            return
        k, _ = self._kernel_for(full)
        numel = math.prod(full)
        if not numel:
            return
        spans = [_span(t) for t in (env.get(p.val) for p in k.inputs) if isinstance(t, torch.Tensor)]
        idx = "int" if max([numel] + spans) <= _I32_MAX else "long long"
        compiled = self.variant(self._vec[id(k)], idx, k)[0]
        prefetch(compiled.source, arch_of(env.device), compiled.name)

    def _kernel_for(self, full: list) -> tuple:
        """(kernel, its iteration extents) for a launch over `full`: the paired-lane
        kernel (half of each paired dim) where its extents match, else the plain one."""
        k = self.kernel
        if k is self.plain:
            return k, full
        if not all(full[d] == e for d, e in k.pairs):
            return self.plain, full
        extents = list(full)
        for d, _ in k.pairs:
            extents[d] //= 2
        return k, extents

    def _vector_ok(self, vec, slots, ins, outs, extents) -> bool:
        if vec == 1 or not extents or extents[-1] % vec:
            return False
        for t in [ins[s] for s in slots] + outs:
            if t.ndim == 0 or t.stride(-1) != 1 or t.data_ptr() % (vec * t.element_size()):
                return False
            if any(st % vec for st in t.stride()[:-1]):
                return False
        return True

    def _launch_cuda(self, k, device, ins, outs, params, extents, numel, stream) -> None:
        limit = _I32_MAX
        fits = numel <= limit and all(_span(t) <= limit for t in ins + outs) and all(
            -limit - 1 <= v <= limit for v in params  # index parameters (slice bounds...)
            if isinstance(v, int) and not isinstance(v, bool))
        idx = "int" if fits else "long long"
        vec = self._vec[id(k)]
        compiled, slots = self.variant(vec, idx, k)
        if not self._vector_ok(vec, slots, ins, outs, extents):
            vec = 1
            compiled, slots = self.variant(1, idx, k)
        it = I32 if fits else I64
        values, types = [], []
        for t in ins + outs:
            values.append(t.data_ptr())
            types.append(PTR)
            values += list(t.stride())
            types += [it] * t.ndim
        for v, p in zip(params, k.params):
            values.append(v)
            types.append(param_ctype(p.dtype))
        nslots = numel // vec
        values += extents + [nslots]
        types += [it] * (len(extents) + 1)
        blocks = -(-nslots // self.BLOCK)
        # one thread per slot; HOSTIR_ENABLE=grid_stride caps the grid at 32 blocks per SM
        grid = max(1, min(blocks, sm_count(device) * 32 if _GRID_STRIDE else 2 ** 31 - 1))
        packed = PackedArgs(values, types)  # kept by the prepared launch of this signature
        compiled.launcher(device, grid, self.BLOCK)(stream, packed)
        if config.dumping("launch"):
            config.dump("launch", f"{self.name}: {compiled.name} grid={grid} block={self.BLOCK} "
                                  f"extents={extents} vector={vec} index={idx}")
        return compiled, grid, packed


def make_launch(seg: Segment, env: Env | None = None):
    """The launch target of a compute segment: a generated kernel where the
    segment's kind has a code generator, the reference evaluator otherwise.
    `env` (the inputs the plan is built for) lets the scheduler pick paired lanes."""
    if seg.scheduler == "pointwise":
        try:
            extents = [env.scalar(a.extent) for a in seg.outputs[0].logical] if env is not None else None
            kernel = lower_pointwise(seg, f"hir_seg{seg.id}_pointwise", extents)
        except UnsupportedError:
            return SegmentLaunch(seg)
        launch = KernelLaunch(seg, kernel)
        config.dump("kernels", launch.source)
        return launch
    return SegmentLaunch(seg)


class AliasViews:
    """Outputs that are views of inputs: torch views, no kernel."""

    needs_args = False

    def __init__(self, seg: Segment, views: dict):
        self.seg = seg
        self.name = f"seg{seg.id}_alias(no kernel)"
        self.chains = [views[i] for i in sorted(views)]

    def launch(self, env: Env, args: list) -> list:
        out = []
        for chain in self.chains:
            t = env[chain[0]]
            if len(chain) == 1:
                out.append(t.view_as(t))
                continue
            try:
                for v in chain[1:]:
                    t = apply_view(v, t, env)
            except RuntimeError:  # a layout the plan's key did not foresee: copy instead
                for v in chain[1:]:
                    env[v] = eval_node(v, env)
                t = env[chain[-1]]
            out.append(t)
        return out


def lower(sf: SegmentedFusion, env: Env | None = None) -> H.HostIR:
    fusion = sf.fusion
    outputs = {id(o.val) for o in fusion.outputs}
    last_use: dict[int, int] = {}
    for i, seg in enumerate(sf.segments):
        for v in seg.inputs:
            last_use[id(v)] = i
    body: list = []
    for i, seg in enumerate(sf.segments):
        if seg.scheduler == "alias":
            target = AliasViews(seg, sf.aliases.views)
        else:
            target = make_launch(seg, env)
        body.append(H.LaunchKernel(target, seg.inputs, seg.outputs))
        if isinstance(target, KernelLaunch) and env is not None and env.device.type == "cuda":
            target.prefetch(env)
        for v in seg.inputs:
            if (v.is_tensor and v.op is not Op.TENSOR_INPUT and id(v) not in outputs
                    and last_use[id(v)] == i):
                body.append(H.Deallocate(v))
    return H.HostIR(fusion.inputs, tuple(body), tuple(o.val for o in fusion.outputs))
