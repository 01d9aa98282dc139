"""The stream-parallel axis of a sharded fusion: which dim of every tensor it is.

A user marks one tensor's axis `ParallelType.stream` (the outer part of an
outer_split, whose factor is the number of chunks, or a whole axis of static
extent: one chunk per index). That axis is the same axis of every tensor it
flows through, by the ops' `dims` rules, forwards and backwards: the fusion
runs chunk by chunk along it, each chunk a host for-loop iteration on its own
stream (host/distributed.py). `stream_axis` finds the dim of each tensor, or
says why the fusion cannot be pipelined so.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.errors import UnsupportedError
from ..ir.fusion import Fusion
from ..ir.node import OPS, REDUCED, Val


@dataclass(frozen=True)
class StreamAxis:
    chunks: int
    dims: dict          # id(tensor) -> its dim along the stream axis (absent: it has none)

    def dim(self, v: Val) -> int | None:
        return self.dims.get(id(v))


def stream_axis(fusion: Fusion, annotated: dict) -> StreamAxis | None:
    """The stream axis the annotations mark (None when none does). Raises
    UnsupportedError, naming the tensor and op, when the axis cannot be one
    loop: two different axes or chunk counts marked, an op that reduces or
    reshapes the axis, a tensor that has it twice, an output without it."""
    marks = [(v, sh.stream) for v, sh in annotated.items() if sh.stream is not None]
    if not marks:
        return None
    tensors = [*(v for v in fusion.inputs if v.is_tensor), *fusion.tensor_exprs()]
    parent: dict = {}

    def find(x):
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    def union(a, b):
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb

    for v in fusion.tensor_exprs():
        for k, s in enumerate(v.src):
            if not s.is_tensor:
                continue
            for sd, od in enumerate(OPS[v.op].dims(v, k)):
                if isinstance(od, int):
                    union((id(s), sd), (id(v), od))
    (v0, (d0, chunks)), rest = marks[0], marks[1:]
    root = find((id(v0), d0))
    for v, (d, n) in rest:
        if n != chunks or find((id(v), d)) != root:
            raise UnsupportedError(
                f"stream-parallel axes of {v0!r} (dim {d0}, {chunks} chunks) and {v!r} (dim {d}, "
                f"{n} chunks) are not the same axis: a fusion is pipelined along one axis")
    dims: dict = {}
    for v in tensors:
        on = [d for d in range(v.ndim) if find((id(v), d)) == root]
        if len(on) > 1:
            raise UnsupportedError(f"{v!r} has the stream-parallel axis twice (dims {on}); hostir "
                                   f"pipelines a fusion when each tensor has it at most once")
        if on:
            dims[id(v)] = on[0]
    for v in fusion.tensor_exprs():
        for k, s in enumerate(v.src):
            if s.is_tensor and id(s) in dims:
                od = OPS[v.op].dims(v, k)[dims[id(s)]]
                if not isinstance(od, int):
                    raise UnsupportedError(
                        f"{v.op.name.lower()} {v!r} {'reduces' if od == REDUCED else 'reshapes or moves'} "
                        f"the stream-parallel axis (dim {dims[id(s)]} of {s!r}): each chunk must "
                        f"be computed from its own chunk of the inputs")
    for o in fusion.outputs:
        if id(o.val) not in dims:
            raise UnsupportedError(f"output {o.val!r} does not have the stream-parallel axis: each "
                                   f"chunk of the loop must write its own part of every output")
    return StreamAxis(chunks, dims)


__all__ = ["StreamAxis", "stream_axis"]
