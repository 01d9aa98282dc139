"""Sharding propagation over a fusion, and the resharding an edge needs.

See dist/sharding.py for the model. Every mesh dimension is handled on its
own: on mesh dim m a tensor is split along one logical dim, partial, or whole.
A fusion may use several meshes (pipeline stages): each tensor is on one
(`assign_meshes`), and a node takes shardings only from operands on its own
mesh; an operand on another mesh moves there (dist/meshes.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..ir.errors import UnsupportedError
from ..ir.fusion import Fusion
from ..ir.node import OPS, REDUCED, Op, Val
from .mesh import DeviceMesh
from .sharding import Sharding, make_sharding

_PRIORITY = {Op.LINEAR: (1, 2, 0), Op.MATMUL: (1, 0)}


@dataclass
class Propagation:
    mesh: DeviceMesh | None  # the fusion's one mesh (None: no mesh, or several)
    computed: dict        # tensor Val -> the sharding it is computed in
    final: dict           # tensor Val -> its sharding once its own annotation is met
    needs: dict           # (consumer Val, operand index) -> the sharding it reads the operand in
    outputs: list         # per fusion output, the sharding execute returns it in
    meshes: list = field(default_factory=list)  # every mesh, in the order annotations name them


def fusion_meshes(annotated: dict) -> list[DeviceMesh]:
    """The distinct meshes of the annotations, in definition order."""
    out: list[DeviceMesh] = []
    for s in annotated.values():
        if s.mesh is not None and s.mesh not in out:
            out.append(s.mesh)
    return out


def assign_meshes(fusion: Fusion, annotated: dict) -> dict:
    """The mesh of every tensor of `fusion` (id(Val) -> DeviceMesh or None), in
    nvFuser's order: its annotation's, else its operands' (linear: the
    weight's, then the bias's, then the input's; matmul: B's, then A's;
    otherwise the first operand's that has one). An input without one takes
    its first consumer's, and nodes still without one are computed on that;
    whatever is left is on the first mesh the annotations name."""
    meshes = fusion_meshes(annotated)
    tensors = [*(v for v in fusion.inputs if v.is_tensor), *fusion.tensor_exprs()]
    if len(meshes) <= 1:
        return {id(v): next(iter(meshes), None) for v in tensors}
    got = {id(v): s.mesh for v, s in annotated.items() if s.mesh is not None}
    nodes = fusion.tensor_exprs()

    def forward():
        for v in nodes:
            if id(v) not in got:
                order = _PRIORITY.get(v.op, range(len(v.src)))
                mesh = next((got[id(v.src[k])] for k in order
                             if k < len(v.src) and id(v.src[k]) in got), None)
                if mesh is not None:
                    got[id(v)] = mesh
    forward()
    for v in fusion.inputs:
        if v.is_tensor and id(v) not in got:
            mesh = next((got[id(c)] for c in nodes if id(c) in got and any(s is v for s in c.src)),
                        None)
            if mesh is not None:
                got[id(v)] = mesh
    forward()
    return {id(v): got.get(id(v), meshes[0]) for v in tensors}


def propagate(fusion: Fusion, annotated: dict) -> Propagation:
    """Shardings of every tensor of `fusion` given the user's annotations (their
    stream-parallel axes are not shardings: dist/stream_axis.py finds those)."""
    # a tensor computed chunk by chunk along a stream-parallel axis is computed
    # whole along it (the operands sharded there are gathered, block by block)
    streamed = {v: s.stream[0] for v, s in annotated.items() if s.stream is not None}
    annotated = {v: replace(s, stream=None) for v, s in annotated.items()}
    meshes = fusion_meshes(annotated)
    if len(meshes) > 1:  # (a stream axis alone says nothing of a mesh; refused with several)
        annotated = {v: s for v, s in annotated.items() if s.mesh is not None}
    mesh_of = assign_meshes(fusion, annotated)
    computed, final, needs = {}, {}, {}
    for v in fusion.inputs:
        if v.is_tensor:
            computed[v] = final[v] = annotated.get(v, Sharding(mesh_of[id(v)]))
    for v in fusion.tensor_exprs():
        mesh = mesh_of[id(v)]
        operands = {k: final[s] for k, s in enumerate(v.src) if s.is_tensor}
        c = _forward(v, {k: s for k, s in operands.items() if s.mesh == mesh}, mesh)
        a = annotated.get(v)
        if a is not None and v.op is not Op.RESULT:  # a result reads its tuple as computed
            c = _toward(c, a, mesh)
        if v in streamed and c.dim_on_any(streamed[v]):
            c = c.without_dim(streamed[v])
        computed[v] = c
        final[v] = a if a is not None else c
        for k in operands:
            if v.op is Op.RESULT:  # a tuple of results is never resharded (its results may be)
                needs[(v, k)] = computed[v.src[k]]
            else:
                has = operands[k] if operands[k].mesh == mesh else Sharding(mesh)
                needs[(v, k)] = _need(v, k, has, c, mesh)
    outputs = [annotated.get(o.val, final[o.val].without_partial()) for o in fusion.outputs]
    return Propagation(meshes[0] if len(meshes) == 1 else None, computed, final, needs, outputs,
                       meshes)


def _order(v: Val, operands: dict) -> list[int]:
    if v.op in _PRIORITY:
        return [k for k in _PRIORITY[v.op] if k in operands]
    return sorted(operands, key=lambda k: -len(operands[k].dims))


def _forward(v: Val, operands: dict, mesh) -> Sharding:
    """The sharding `v` is computed in, from its operands' (the first operand in
    priority order that says something for a mesh dim decides it; a dim takes
    the layout of the operand that first put it on a mesh dim)."""
    if mesh is None:
        return Sharding()
    d = OPS[v.op]
    entries, layouts = {}, {}
    for m in range(mesh.ndim):
        for k in _order(v, operands):
            e = operands[k].on(m)
            if e is None or e[0] == "partial":  # a partial operand is combined first
                continue
            od = d.dims(v, k)[e[1]]
            if isinstance(od, int) and not v.logical[od].is_broadcast:
                entries[m] = ("dim", od)
                layouts.setdefault(od, operands[k].layout(e[1]))
                break
            if od == REDUCED and d.partial is not None:
                entries[m] = ("partial", d.partial)
                break
    return make_sharding(mesh, _consistent(entries, layouts), layouts=layouts)


def _consistent(entries: dict, layouts: dict) -> dict:
    """Drop a dim from the mesh dims its layout does not name (two operands put
    it on different mesh dims: it stays whole there, read by a reshard)."""
    return {m: e for m, e in entries.items()
            if e[0] != "dim" or m in layouts[e[1]].order}


def _toward(c: Sharding, a: Sharding, mesh) -> Sharding:
    """Where the user annotated `v` sharded on a mesh dim its operands leave
    whole, compute it sharded there directly (operands are sliced locally)."""
    entries = {m: c.on(m) for m in range(mesh.ndim)}
    layouts = {dd: c.layout(dd) for dd, _ in c.dims}
    for dd, lay in ((dd, a.layout(dd)) for dd in sorted({dd for dd, _ in a.dims})):
        if dd in layouts or any(entries[m] is not None for m in lay.order):
            continue
        for m in lay.order:
            entries[m] = ("dim", dd)
        layouts[dd] = lay
    return make_sharding(mesh, entries, layouts=layouts)


def _need(v: Val, k: int, has: Sharding, c: Sharding, mesh) -> Sharding:
    """The sharding `v`, computed in `c`, reads operand k in."""
    if mesh is None:
        return Sharding()
    dmap = OPS[v.op].dims(v, k)
    s = v.src[k]
    entries, layouts = {}, {}
    for m in range(mesh.ndim):
        e = c.on(m)
        if e is None:
            continue
        if e[0] == "dim":
            sd = next((i for i, od in enumerate(dmap) if od == e[1] and not s.logical[i].is_broadcast),
                      None)
            entries[m] = ("dim", sd) if sd is not None else None
            if sd is not None:
                layouts[sd] = c.layout(e[1])
            continue
        reduced = [i for i, od in enumerate(dmap) if od == REDUCED]
        cur = has.dim_on(m)
        if cur in reduced:  # partial sums over any parts: keep the operand's layout
            entries[m] = ("dim", cur)
            layouts[cur] = has.layout(cur)
        elif len(reduced) == 1 and not s.logical[reduced[0]].is_broadcast:
            entries[m] = ("dim", reduced[0])
    return make_sharding(mesh, entries, layouts=layouts)


def reshard_steps(src: Sharding, dst: Sharding) -> list[tuple]:
    """How to turn a tensor sharded as `src` into `dst`, one mesh dim at a time:
    ("allgather", m, dim), ("allreduce", m, op), ("reduce_scatter", m, dim, op),
    ("all_to_all", m, from dim, to dim) (split along one dim, then along
    another: each rank sends the others their blocks, 1/n of the data an
    allgather and slice would move) or ("slice", m, dim) (this rank's block of
    a whole dim: no communication). A dim that is not in contiguous blocks on
    one mesh dim on either side, and differs, moves whole: ("gather", dim,
    Layout) collects it (an allgather per mesh dim, each laid into place),
    ("take", dim, Layout) keeps this rank's part."""
    mesh = dst.mesh or src.mesh
    dims = sorted({d for d, _ in src.dims} | {d for d, _ in dst.dims})
    odd = {d for d in dims if src.layout(d) != dst.layout(d) and not (
        _is_block(src.layout(d)) and _is_block(dst.layout(d)))}
    steps = [("gather", d, src.layout(d)) for d in sorted(odd) if src.layout(d) is not None]
    for m in range(mesh.ndim if mesh is not None else 0):
        s, t = src.on(m), dst.on(m)
        s = None if s is not None and s[0] == "dim" and s[1] in odd else s
        t = None if t is not None and t[0] == "dim" and t[1] in odd else t
        if s == t:
            continue
        if t is not None and t[0] == "partial":
            raise UnsupportedError(f"cannot make a {s or 'whole'} tensor partial on mesh dim {m}")
        if s is not None and s[0] == "partial":
            steps.append(("allreduce", m, s[1]) if t is None else ("reduce_scatter", m, t[1], s[1]))
            continue
        if s is not None and t is not None and _alone_on(m, (s[1], t[1]), src, dst):
            steps.append(("all_to_all", m, s[1], t[1]))
            continue
        if s is not None:
            steps.append(("allgather", m, s[1]))
        if t is not None:
            steps.append(("slice", m, t[1]))
    steps += [("take", d, dst.layout(d)) for d in sorted(odd) if dst.layout(d) is not None]
    return steps


def _is_block(layout) -> bool:
    return layout is None or layout.is_block


def _alone_on(m: int, dims, src: Sharding, dst: Sharding) -> bool:
    """Whether no mesh dim but m splits any of `dims` in `src` or `dst` (a dim
    split over two mesh dims at once nests its blocks: an all-to-all on one
    team would leave them in the wrong order, so those move by gather and slice)."""
    return not any(d in dims and mm != m for sh in (src, dst) for d, mm in sh.dims)
