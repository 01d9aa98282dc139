"""Shardings, the annotations users write, and sharding propagation.

A `Sharding` says how a tensor lies over the ranks of a mesh: which logical
dims are split in equal contiguous blocks over which mesh dimension, and over
which mesh dimensions its values are partial results (with the op that
combines them). Users annotate tensors in nvFuser's loop-domain vocabulary
(`set_device_mesh`, `outer_split`, `axis(i).parallelize`) or with DTensor
placements; `LoopDomain` records that and gives the Sharding.

`propagate` assigns every tensor of a fusion the sharding it is computed in,
following nvFuser: a node takes its operands' shardings through its op's
`dims` rule (for linear the weight, then the bias, then the input decide; for
matmul B, then A; otherwise the operand with the most sharded dims), never
changes what the user annotated, and says for each operand the sharding the
node needs it in. Where a producer's sharding differs from what a consumer
needs, `reshard_steps` says how to get there: allgather, allreduce,
reduce-scatter, or a local slice.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.errors import DefinitionError, UnsupportedError
from ..ir.node import AxisKind, Op, Val
from .mesh import DeviceMesh, ParallelType, Partial, Replicate, Shard


@dataclass(frozen=True)
class Sharding:
    mesh: DeviceMesh | None = None
    dims: tuple[tuple[int, int], ...] = ()      # (logical dim, mesh dim), by mesh dim
    partial: tuple[tuple[int, str], ...] = ()   # (mesh dim, combining op)
    stream: tuple[int, int] | None = None       # (logical dim, chunks) pipelined over streams

    def dim_on(self, m: int) -> int | None:
        return next((d for d, mm in self.dims if mm == m), None)

    def dim_on_any(self, d: int) -> bool:
        """Whether logical dim d is split over some mesh dimension."""
        return any(dd == d for dd, _ in self.dims)

    def partial_on(self, m: int) -> str | None:
        return next((op for mm, op in self.partial if mm == m), None)

    def on(self, m: int):
        """What this sharding does on mesh dim m: ("dim", d), ("partial", op) or None."""
        d = self.dim_on(m)
        if d is not None:
            return ("dim", d)
        op = self.partial_on(m)
        return ("partial", op) if op is not None else None

    @property
    def is_replicated(self) -> bool:
        return not self.dims and not self.partial

    def without_partial(self) -> "Sharding":
        return Sharding(self.mesh, self.dims, (), self.stream)

    def describe(self) -> str:
        if self.mesh is None or self.is_replicated:
            return "replicated"
        parts = [f"dim {d} on mesh dim {m}" for d, m in self.dims]
        parts += [f"partial ({op}) on mesh dim {m}" for m, op in self.partial]
        return ", ".join(parts)


def make_sharding(mesh, entries: dict[int, object], stream=None) -> Sharding:
    """A Sharding from {mesh dim: ("dim", d) | ("partial", op)}."""
    dims = tuple(sorted(((e[1], m) for m, e in entries.items() if e and e[0] == "dim"),
                        key=lambda p: p[1]))
    partial = tuple(sorted((m, e[1]) for m, e in entries.items() if e and e[0] == "partial"))
    return Sharding(mesh, dims, partial, stream)


# ---------------------------------------------------------------- annotations

@dataclass
class LoopAxis:
    """One axis of a tensor's loop domain: a domain axis (`source`, an index
    into Val.axes, reduction axes included), whole or one part of a split."""

    source: int
    part: str = "whole"          # whole | outer | inner
    factor: int | None = None    # the split's factor
    inner_split: bool = True     # which part the factor sizes
    ptype: ParallelType | None = None


@dataclass
class LoopDomain:
    """A tensor's annotations: its mesh and its loop axes (nvFuser's loop domain)."""

    val: Val
    mesh: DeviceMesh | None = None
    axes: list[LoopAxis] = field(default_factory=list)

    def __post_init__(self):
        if not self.axes:
            self.axes = [LoopAxis(i) for i in range(len(self.val.axes))]

    def index(self, i: int, what: str) -> int:
        n = len(self.axes)
        if not isinstance(i, int) or not -n <= i < n:
            raise DefinitionError(f"{what}: axis {i} is out of range for {self.val!r}, whose loop "
                                  f"domain has {n} axes")
        return i % n

    def split(self, i: int, factor: int, inner_split: bool = True) -> None:
        i = self.index(i, "split")
        ax = self.axes[i]
        if ax.part != "whole":
            raise UnsupportedError(f"split of {self.val!r}: axis {i} is already part of a split; "
                                   f"hostir shards each dim with at most one split")
        if not isinstance(factor, int) or factor < 1:
            raise DefinitionError(f"split of {self.val!r}: factor must be a positive int, got {factor!r}")
        self.axes[i:i + 1] = [LoopAxis(ax.source, "outer", factor, inner_split),
                              LoopAxis(ax.source, "inner", factor, inner_split)]

    def sharding(self) -> Sharding:
        """The Sharding these annotations describe (errors name the tensor and axis)."""
        if self.mesh is None:
            if any(a.ptype is not None and a.ptype.is_device for a in self.axes):
                raise DefinitionError(f"{self.val!r}: a device-parallel axis needs set_device_mesh first")
        logical = _logical_index(self.val)
        entries, stream, used = {}, None, {}
        for pos, ax in enumerate(self.axes):
            if ax.ptype is None or ax.ptype is ParallelType.serial:
                continue
            kind = self.val.axes[ax.source].kind
            if ax.ptype is ParallelType.stream:
                if kind is AxisKind.REDUCE:
                    raise UnsupportedError(f"{self.val!r}: stream-parallel axis {pos} is a reduction "
                                           f"axis; hostir pipelines along an axis the outputs keep")
                stream = _stream_axis(self.val, pos, ax, logical)
                continue
            if self.mesh is None:
                continue
            m = ax.ptype.mesh_dim(self.mesh)
            if kind is AxisKind.REDUCE:  # a reduction over the ranks: implied by its sharded input
                continue
            if m in used:
                raise DefinitionError(f"{self.val!r}: {ax.ptype.name} parallelizes two axes "
                                      f"({used[m]} and {pos}) of its loop domain")
            used[m] = pos
            entries[m] = ("dim", _device_dim(self.val, pos, ax, logical, self.mesh.shape[m]))
        return make_sharding(self.mesh, entries, stream)


def _logical_index(v: Val) -> dict[int, int]:
    out, k = {}, 0
    for i, a in enumerate(v.axes):
        if a.kind is not AxisKind.REDUCE:
            out[i] = k
            k += 1
    return out


def _device_dim(v: Val, pos: int, ax: LoopAxis, logical: dict, n: int) -> int:
    """The logical dim a device-parallel loop axis shards in blocks over n ranks."""
    extent = v.axes[ax.source].extent
    if ax.part == "inner":
        raise UnsupportedError(f"{v!r}: axis {pos} is the inner part of a split; hostir shards a "
                               f"dim in contiguous blocks (parallelize the outer part)")
    if ax.part == "outer":
        if not ax.inner_split and ax.factor != n:
            raise DefinitionError(f"{v!r}: axis {pos} is outer_split by {ax.factor} but the mesh "
                                  f"dimension has {n} ranks")
        if ax.inner_split and extent.op is Op.CONST and extent.arg != n * ax.factor:
            raise DefinitionError(f"{v!r}: axis {pos} splits extent {extent.arg} into "
                                  f"{extent.arg // ax.factor} blocks of {ax.factor}, but the mesh "
                                  f"dimension has {n} ranks")
    elif extent.op is Op.CONST and extent.arg != n:
        raise DefinitionError(f"{v!r}: axis {pos} of extent {extent.arg} is parallelized over {n} "
                              f"ranks without a split (each rank would hold one index: the extent "
                              f"must be {n}; or outer_split it by {n})")
    return logical[ax.source]


def _stream_axis(v: Val, pos: int, ax: LoopAxis, logical: dict) -> tuple[int, int]:
    """(logical dim, chunks) of a stream-parallel loop axis: the outer part of a
    split (outer_split by the chunk count; split by a chunk size of a static
    extent) or a whole axis of static extent (a chunk per index)."""
    extent = v.axes[ax.source].extent
    static = extent.arg if extent.op is Op.CONST else None
    if ax.part == "inner":
        raise UnsupportedError(f"{v!r}: stream-parallel axis {pos} is the inner part of a split; "
                               f"parallelize the outer part (its extent is the number of chunks)")
    if ax.part == "outer" and not ax.inner_split:
        chunks = ax.factor
    elif static is None:
        raise UnsupportedError(f"{v!r}: stream-parallel axis {pos} has a symbolic number of chunks; "
                               f"outer_split the dim by the number of chunks instead")
    else:
        chunks = static if ax.part == "whole" else -(-static // ax.factor)
    return (logical[ax.source], chunks)


def placements_sharding(v: Val, mesh: DeviceMesh, placements) -> Sharding:
    """The Sharding of DTensor-style placements, one per mesh dimension."""
    placements = list(placements)
    if len(placements) != mesh.ndim:
        raise DefinitionError(f"{v!r}: {len(placements)} placements for a mesh of {mesh.ndim} "
                              f"dimensions (one each)")
    entries = {}
    for m, p in enumerate(placements):
        if isinstance(p, Shard):
            if not -v.ndim <= p.dim < v.ndim:
                raise DefinitionError(f"{v!r}: Shard({p.dim}) is out of range for {v.ndim} dims")
            entries[m] = ("dim", p.dim % v.ndim)
        elif isinstance(p, Partial):
            entries[m] = ("partial", p.reduce_op)
        elif not isinstance(p, Replicate):
            raise DefinitionError(f"{v!r}: placement {p!r} is not Shard, Replicate or Partial")
    if len({e[1] for e in entries.values() if e[0] == "dim"}) < sum(
            e[0] == "dim" for e in entries.values()):
        raise UnsupportedError(f"{v!r}: one dim sharded over two mesh dimensions")
    return make_sharding(mesh, entries)
