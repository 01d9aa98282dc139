"""Runs host IR. A program is compiled once into Python closures over a
RunContext (Val -> value); scalar expressions are compiled too and
re-evaluated on every use, so a value that depends on a loop index is never
stale (seed 001's host-loop bug cannot happen: nothing is memoized across
iterations). Each launch looks its plan up by the current inputs.
"""
from __future__ import annotations

from typing import Callable

import torch

from .. import config
from ..dist.layout import take
from ..ir.errors import ExecutionError
from ..ir.node import Op, Val
from ..ir.scalar import apply_scalar
from . import ir as H
from . import tracing
from .collectives import peer_block, push_block, start_collective, wait_collective, world
from .context import RunContext
from .streams import StreamPool

Closure = Callable[[RunContext], None]


def compile_scalar(v) -> Callable[[RunContext], object]:
    """A closure computing scalar `v` from the leaves bound in env."""
    if not isinstance(v, Val):
        return lambda env, c=v: c
    if v.op is Op.CONST:
        return lambda env, c=v.arg: c
    if not v.src:
        def leaf(env, v=v):
            try:
                return env[v]
            except KeyError:
                raise ExecutionError(f"host program: {v!r} has no value here") from None
        return leaf
    args = [compile_scalar(s) for s in v.src]
    op, dtype = v.op, v.dtype
    if len(args) == 2:
        a, b = args
        return lambda env: apply_scalar(op, dtype, [a(env), b(env)])
    return lambda env: apply_scalar(op, dtype, [f(env) for f in args])


def _shape(v: Val):
    fs = [compile_scalar(a.extent) for a in v.logical]
    return lambda env: [f(env) for f in fs]


def _known_shape(v: Val):
    """`v`'s shape with None for each extent a received shape binds (H.sized_extents)."""
    sized = {d for d, _ in H.sized_extents(v)}
    fs = [None if d in sized else compile_scalar(a.extent) for d, a in enumerate(v.logical)]
    return lambda env: [None if f is None else f(env) for f in fs]


class Compiler:
    """Turns statements into closures over a RunContext."""

    def block(self, stmts) -> Closure:
        closures = [self.stmt(s) for s in stmts]

        def run(env):
            for c in closures:
                c(env)
        return run

    def __init__(self):
        self.nvtx = config.enabled("nvtx")
        self.tracer = tracing.tracer()

    def stmt(self, s) -> Closure:
        method = getattr(self, "_" + type(s).__name__)
        run = method(s)
        if self.nvtx and isinstance(s, (H.LaunchKernel, H.Communication, H.Wait)):
            run = _nvtx_range(_range_name(s), run)
        if self.tracer is not None and isinstance(s, (H.LaunchKernel, H.Communication, H.Wait,
                                                      H.PushBlock)):
            run = _traced(self.tracer, s, run)
        return run

    def _Allocate(self, s: H.Allocate) -> Closure:
        shape, out, dtype = _shape(s.out), s.out, s.out.dtype.torch

        def run(env):
            env[out] = torch.empty(shape(env), dtype=dtype, device=env.device)
        return run

    def _Deallocate(self, s: H.Deallocate) -> Closure:
        t = s.tensor

        def run(env):
            env.pop(t, None)
        return run

    def _ForLoop(self, s: H.ForLoop) -> Closure:
        start, stop, step = (compile_scalar(x) for x in (s.start, s.stop, s.step))
        body, index = self.block(s.body), s.index

        def run(env):
            for k in range(start(env), stop(env), step(env)):
                env[index] = k
                body(env)
            env.pop(index, None)
        return run

    def _OnRanks(self, s: H.OnRanks) -> Closure:
        if world()[1] not in s.ranks:
            return lambda env: None
        return self.block(s.body)

    def _SetCurrentStream(self, s: H.SetCurrentStream) -> Closure:
        k = compile_scalar(s.stream)
        return lambda env: env.pool.set_current(k(env))

    def _Synchronize(self, s: H.Synchronize) -> Closure:
        k = compile_scalar(s.stream)
        return lambda env: env.pool.wait_for(k(env))

    def _LaunchKernel(self, s: H.LaunchKernel) -> Closure:
        target, outs, into = s.target, s.outputs, s.into
        getters = [(lambda env, v=v: env[v]) if v.is_tensor else compile_scalar(v) for v in s.inputs]

        def run(env):
            pool = env.pool
            args = [g(env) for g in getters]
            if pool.current:
                pool.record_inputs(args)
            if not into:
                for o, r in zip(outs, target.launch(env, args)):
                    env[o] = r
                return
            bufs = [env[o] for o in outs]
            for o, buf, r in zip(outs, bufs, target.launch(env, args, bufs)):
                if r is buf:  # the kernel wrote straight into the buffer
                    continue
                if buf.shape != r.shape:
                    raise ExecutionError(
                        f"launch {target.name}: result has shape {list(r.shape)} but the "
                        f"output buffer {o!r} has shape {list(buf.shape)}")
                buf.copy_(r)
        return run

    def _PeerBlock(self, s: H.PeerBlock) -> Closure:
        index, out, comm = compile_scalar(s.index), s.out, s.comm

        def run(env):
            env[out] = peer_block(comm, env, index(env))
        return run

    def _PushBlock(self, s: H.PushBlock) -> Closure:
        index, comm = compile_scalar(s.index), s.comm
        return lambda env: push_block(comm, env, index(env))

    def _Select(self, s: H.Select) -> Closure:
        idx, out, src, dim = compile_scalar(s.index), s.out, s.src, s.dim

        def run(env):
            t, i = env[src], idx(env)
            if not -t.shape[dim] <= i < t.shape[dim]:
                raise ExecutionError(
                    f"select of {src!r}: index {i} out of range for dim {dim} of extent "
                    f"{t.shape[dim]}")
            env[out] = t.select(dim, i)
        return run

    def _Slice(self, s: H.Slice) -> Closure:
        lo, hi = compile_scalar(s.start), compile_scalar(s.stop)
        out, src, dim = s.out, s.src, s.dim

        def run(env):
            t = env[src]
            a, b = lo(env), hi(env)
            if not 0 <= a <= b <= t.shape[dim]:
                raise ExecutionError(
                    f"slice of {src!r}: bounds [{a}, {b}) out of range for dim {dim} of extent "
                    f"{t.shape[dim]}")
            env[out] = t.narrow(dim, a, b - a)
        return run

    def _Chunk(self, s: H.Chunk) -> Closure:
        k, n = compile_scalar(s.index), compile_scalar(s.count)
        out, src, dim = s.out, s.src, s.dim
        if s.within is not None:
            a, b = s.within

            def part(env):
                env[out] = take(env[src], dim, k(env), n(env), a, b)
            return part

        def run(env):
            t = env[src]
            size = t.shape[dim]
            chunk = -(-size // n(env))
            start = min(k(env) * chunk, size)
            env[out] = t.narrow(dim, start, min(chunk, size - start))
        return run

    def _Communication(self, s: H.Communication) -> Closure:
        peer = compile_scalar(s.peer) if s.peer is not None else (lambda env: None)
        shapes = [_known_shape(out) for out, _ in s.recvs]
        if s.kind == "reduce_scatter_blocks" or (s.kind == "broadcast" and s.with_shape):
            shapes = [_known_shape(s.output)]
        return lambda env: start_collective(s, env, peer(env), [f(env) for f in shapes])

    def _Wait(self, s: H.Wait) -> Closure:
        return lambda env: wait_collective(s.comm, env)


def _range_name(s) -> str:
    if isinstance(s, H.LaunchKernel):
        return f"hostir: launch {getattr(s.target, 'name', type(s.target).__name__)}"
    if isinstance(s, H.Communication):
        return f"hostir: {s.kind} start"
    return f"hostir: wait {s.comm.kind}"


def _traced(tracer, s, run: Closure) -> Closure:
    """`run` recorded in the HOSTIR_TRACE trace: a launch or a wait as a span on
    its stream's track; a collective from its start to the wait that ends it,
    on the rank's communication track."""
    if isinstance(s, H.LaunchKernel):
        name, cat = getattr(s.target, "name", type(s.target).__name__), "launch"
    elif isinstance(s, H.Communication):
        key, kind = ("comm", id(s)), s.kind

        def started(env):
            tracer.begin(key, kind, "collective", "communication", env.device)
            run(env)
        return started
    elif isinstance(s, H.PushBlock):
        name, cat = f"push_block {s.comm.kind}", "collective"
    else:
        key, name, cat = ("comm", id(s.comm)), f"wait {s.comm.kind}", "wait"

        def waited(env):
            tracer.span(name, cat, tracer.stream_track(env), env.device, run, env)
            tracer.end(key, env.device)
        return waited
    return lambda env: tracer.span(name, cat, tracer.stream_track(env), env.device, run, env)


def _nvtx_range(name: str, run: Closure) -> Closure:
    """`run` inside an NVTX range named `name` (HOSTIR_ENABLE=nvtx), so Nsight
    Systems shows each launch and collective; CUDA programs only."""
    def ranged(env):
        if env.device.type != "cuda":
            return run(env)
        torch.cuda.nvtx.range_push(name)
        try:
            run(env)
        finally:
            torch.cuda.nvtx.range_pop()
    return ranged


def run_block(run: Closure, env: RunContext) -> None:
    """Run compiled statements with a fresh stream pool; end on the main stream."""
    env.pool = StreamPool(env.device)
    try:
        run(env)
    finally:
        env.pool.finish()
