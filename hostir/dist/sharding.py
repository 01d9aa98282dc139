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
from .layout import Layout
from .mesh import DeviceMesh, ParallelType, Partial, Replicate, Shard


@dataclass(frozen=True)
class Sharding:
    mesh: DeviceMesh | None = None
    dims: tuple[tuple[int, int], ...] = ()      # (logical dim, mesh dim), by mesh dim
    partial: tuple[tuple[int, str], ...] = ()   # (mesh dim, combining op)
    stream: tuple[int, int] | None = None       # (logical dim, chunks) pipelined over streams
    layouts: tuple[tuple[int, Layout], ...] = ()  # (logical dim, its Layout) where not one block

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

    def layout(self, d: int) -> Layout | None:
        """How logical dim d lies over the ranks (None: whole on every rank)."""
        got = next((lay for dd, lay in self.layouts if dd == d), None)
        if got is not None:
            return got
        ms = [m for dd, m in self.dims if dd == d]
        return Layout.block(ms[0]) if ms else None

    def parts(self, d: int) -> int:
        """Into how many parts the ranks split logical dim d."""
        n = 1
        for dd, m in self.dims:
            if dd == d:
                n *= self.mesh.shape[m]
        return n

    def axis_sharded_on(self, ptype: ParallelType) -> int:
        """nvFuser's name: the logical dim split over `ptype`'s mesh dim (-1: none)."""
        if self.mesh is None:
            return -1
        d = self.dim_on(ptype.mesh_dim(self.mesh))
        return -1 if d is None else d

    @property
    def is_replicated(self) -> bool:
        return not self.dims and not self.partial

    def without_partial(self) -> "Sharding":
        return Sharding(self.mesh, self.dims, (), self.stream, self.layouts)

    def without_dim(self, d: int) -> "Sharding":
        return Sharding(self.mesh, tuple(e for e in self.dims if e[0] != d), self.partial,
                        self.stream, tuple(e for e in self.layouts if e[0] != d))

    def describe(self) -> str:
        if self.mesh is None or self.is_replicated:
            return "replicated"
        parts = [f"dim {d} on mesh dim {m}" for d, m in self.dims
                 if not any(dd == d for dd, _ in self.layouts)]
        parts += [f"dim {d} as {lay.describe(self.mesh.shape)}" for d, lay in self.layouts]
        parts += [f"partial ({op}) on mesh dim {m}" for m, op in self.partial]
        return ", ".join(parts)


def make_sharding(mesh, entries: dict[int, object], stream=None, layouts: dict | None = None) -> Sharding:
    """A Sharding from {mesh dim: ("dim", d) | ("partial", op)} and, for dims
    split over several mesh dims or not in contiguous blocks, {dim: Layout}
    (a dim on several mesh dims without one nests them in mesh-dim order, as
    DTensor placements do)."""
    dims = tuple(sorted(((e[1], m) for m, e in entries.items() if e and e[0] == "dim"),
                        key=lambda p: p[1]))
    partial = tuple(sorted((m, e[1]) for m, e in entries.items() if e and e[0] == "partial"))
    lays = {}
    for d in sorted({d for d, _ in dims}):
        ms = tuple(m for dd, m in dims if dd == d)
        lay = (layouts or {}).get(d)
        if lay is None or set(lay.order) != set(ms):
            lay = Layout.block(ms[0]) if len(ms) == 1 else Layout(ms, (1,) * len(ms) + (None,))
        if not lay.is_block:
            lays[d] = lay
    return Sharding(mesh, dims, partial, stream, tuple(sorted(lays.items(), key=lambda p: p[0])))


# ---------------------------------------------------------------- annotations

@dataclass(eq=False)
class LoopAxis:
    """One axis of a tensor's loop domain: a part of domain axis `source` (an
    index into Val.axes, reduction axes included) of static `size` (None: the
    rest of a symbolic extent)."""

    source: int
    size: int | None
    ptype: ParallelType | None = None


@dataclass
class LoopDomain:
    """A tensor's annotations: its mesh and its loop axes (nvFuser's loop
    domain), and per domain axis the chain its splits made (outermost part
    first; reorder moves loop axes, not the chain)."""

    val: Val
    mesh: DeviceMesh | None = None
    axes: list[LoopAxis] = field(default_factory=list)
    chains: dict = field(default_factory=dict)

    def __post_init__(self):
        if not self.axes:
            for i, a in enumerate(self.val.axes):
                ax = LoopAxis(i, a.extent.arg if a.extent.op is Op.CONST else None)
                self.axes.append(ax)
                self.chains[i] = [ax]

    def index(self, i: int, what: str) -> int:
        n = len(self.axes)
        if not isinstance(i, int) or not -n <= i < n:
            raise DefinitionError(f"{what}: axis {i} is out of range for {self.val!r}, whose loop "
                                  f"domain has {n} axes")
        return i % n

    def split(self, i: int, factor: int, inner_split: bool = True) -> None:
        i = self.index(i, "split")
        ax = self.axes[i]
        if not isinstance(factor, int) or factor < 1:
            raise DefinitionError(f"split of {self.val!r}: factor must be a positive int, got {factor!r}")
        rest = None if ax.size is None else -(-ax.size // factor)
        outer, inner = (LoopAxis(ax.source, rest), LoopAxis(ax.source, factor)) if inner_split else \
            (LoopAxis(ax.source, factor), LoopAxis(ax.source, rest))
        self.axes[i:i + 1] = [outer, inner]
        chain = self.chains[ax.source]
        k = chain.index(ax)
        chain[k:k + 1] = [outer, inner]

    def sharding(self) -> Sharding:
        """The Sharding these annotations describe (errors name the tensor and axis)."""
        if self.mesh is None:
            if any(a.ptype is not None and a.ptype.is_device for a in self.axes):
                raise DefinitionError(f"{self.val!r}: a device-parallel axis needs set_device_mesh first")
        logical = _logical_index(self.val)
        entries, layouts, stream, used = {}, {}, None, {}
        for src, chain in self.chains.items():
            kind = self.val.axes[src].kind
            marked = [ax for ax in chain if ax.ptype not in (None, ParallelType.serial)]
            for ax in marked:
                if ax.ptype is ParallelType.stream:
                    if kind is AxisKind.REDUCE:
                        raise UnsupportedError(f"{self.val!r}: stream-parallel axis {self._pos(ax)} is a "
                                               f"reduction axis; hostir pipelines along an axis the "
                                               f"outputs keep")
                    stream = (logical[src], _chunks(self, ax, chain))
            devices = [ax for ax in marked if ax.ptype.is_device]
            if devices and len(devices) < len(marked) and self.mesh is not None:
                raise UnsupportedError(f"{self.val!r}: dim {logical.get(src, src)} is split into "
                                       f"device-parallel and stream-parallel parts in one tensor; "
                                       f"hostir pipelines a sharded dim by its ranks' blocks: mark "
                                       f"the stream axis on a tensor that has the dim whole")
            if self.mesh is None or kind is AxisKind.REDUCE or not devices:
                continue  # (a reduction over the ranks: implied by its sharded input)
            seg = []
            for ax in chain:
                m = ax.ptype.mesh_dim(self.mesh) if ax in devices else None
                if m is not None:
                    if m in used:
                        raise DefinitionError(f"{self.val!r}: {ax.ptype.name} parallelizes two axes "
                                              f"({used[m]} and {self._pos(ax)}) of its loop domain")
                    used[m] = self._pos(ax)
                    _check_device_size(self, ax, self.mesh.shape[m], len(chain))
                    entries[m] = ("dim", logical[src])
                seg.append((ax.size, m))
            layouts[logical[src]] = Layout.from_chain(seg)
        return make_sharding(self.mesh, entries, stream, layouts)

    def _pos(self, ax: LoopAxis) -> int:
        return next(i for i, a in enumerate(self.axes) if a is ax)


def _logical_index(v: Val) -> dict[int, int]:
    out, k = {}, 0
    for i, a in enumerate(v.axes):
        if a.kind is not AxisKind.REDUCE:
            out[i] = k
            k += 1
    return out


def _check_device_size(domain: LoopDomain, ax: LoopAxis, n: int, parts: int) -> None:
    """A device-parallel axis holds one index per rank: its size is the mesh
    dimension's (a symbolic one is taken to be)."""
    if ax.size is None or ax.size == n:
        return
    v, pos = domain.val, domain._pos(ax)
    if parts == 1:
        raise DefinitionError(f"{v!r}: axis {pos} of extent {ax.size} is parallelized over {n} ranks "
                              f"without a split (each rank would hold one index: the extent must be "
                              f"{n}; or outer_split it by {n})")
    raise DefinitionError(f"{v!r}: axis {pos} has extent {ax.size} but is parallelized over a mesh "
                          f"dimension of {n} ranks (split the dim by {n})")


def _chunks(domain: LoopDomain, ax: LoopAxis, chain: list) -> int:
    """The number of chunks of a stream-parallel loop axis: its static size. It
    must be the outermost part of its dim that is not device-parallel, so each
    chunk is one block of every rank's part."""
    v, pos = domain.val, domain._pos(ax)
    before = chain[:chain.index(ax)]
    if any(a.ptype is None or not a.ptype.is_device for a in before if a.size != 1):
        raise UnsupportedError(f"{v!r}: stream-parallel axis {pos} is the inner part of a split; "
                               f"parallelize the outer part (its extent is the number of chunks)")
    if ax.size is None:
        raise UnsupportedError(f"{v!r}: stream-parallel axis {pos} has a symbolic number of chunks; "
                               f"outer_split the dim by the number of chunks instead")
    return ax.size


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
    return make_sharding(mesh, entries)  # a dim on several mesh dims: nested in mesh-dim order
