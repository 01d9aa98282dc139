"""Segmentation: cut a concrete fusion into kernels by scheduler kind.

Consumer-first greedy merging (each expr tries to join a group of its
consumers), then horizontal merging of independent groups of one kind.
Every cut records a reason. Kinds:

- pointwise: one iteration space (its outputs' shape); pointwise ops, views,
  resizes and factories of any shape may feed it (each use is indexed).
- reduction: reductions over one (input shape, reduced dims); a prologue of
  input shape and an epilogue of output shape.
- normalization: a reduction whose result is broadcast back into the input's
  shape and combined there (softmax, layer norm).
- scan: one or more scans along one dim of one shape (cumsum, ...); a
  prologue indexed per use, an epilogue of pointwise ops of the scan's shape
  that read the scan at their own point.
- scatter: one scatter, its result an output of the segment (its writes land
  at positions read from its index: a read of the result in the same kernel
  would need a grid-wide sync); a prologue of pointwise ops that only it
  reads, indexed per use.
- matmul: one matmul/linear, run through ATen.
- aten: one call of another op that runs through ATen (sdpfa_fwd, topk, ...),
  with the RESULT nodes that read its several results.
- alias: views of inputs returned as outputs; launches nothing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..ir import scalar as S
from ..ir.fusion import Fusion
from ..ir.node import OPS, AxisKind, Family, Op, Val
from ..ir.printer import Namer, type_text
from ..passes.alias import AliasPlan
from .segments import Segment, SegmentedFusion


class ExtentUnionFind:
    """Union-find over extents that the fusion proves equal at run time
    (operands of a pointwise op are checked to agree). A class holding a
    constant is represented by it."""

    def __init__(self, fusion: Fusion):
        self.parent: dict = {}
        for v in fusion.tensor_exprs():
            self._unite_node(v)

    @staticmethod
    def _k(e: Val):
        return ("c", e.arg) if S.is_const(e) else ("v", id(e))

    def _find(self, k):
        while self.parent.get(k, k) != k:
            k = self.parent[k]
        return k

    def union(self, a: Val, b: Val):
        ra, rb = self._find(self._k(a)), self._find(self._k(b))
        if ra == rb:
            return
        if ra[0] == "c":
            ra, rb = rb, ra
        self.parent[ra] = rb

    def key(self, e: Val):
        return self._find(self._k(e))

    def _unite_node(self, v: Val):
        if v.op is Op.CAT:
            for s in v.src:
                for d, (a, b) in enumerate(zip(s.logical, v.logical)):
                    if d != v.arg and a.kind is AxisKind.ITER:
                        self.union(a.extent, b.extent)
            return
        if OPS[v.op].family is not Family.POINTWISE:
            return
        out = v.logical
        for s in v.src:
            if not s.is_tensor:
                continue
            off = len(out) - s.ndim
            for d, ax in enumerate(s.logical):
                if ax.kind is AxisKind.ITER or ax.is_expanded:
                    self.union(ax.extent, out[off + d].extent)

    def shape(self, axes) -> tuple:
        return tuple("b" if a.kind is AxisKind.BCAST and not a.is_expanded else self.key(a.extent)
                     for a in axes)


_REF = re.compile("\x00g(\\d+)\x00")


def _ref(g: "_Group") -> str:
    """A group reference in a reason, renumbered to its segment id at the end."""
    return f"\x00g{g.id}\x00"


def expr_kind(v: Val) -> str:
    family = OPS[v.op].family
    if family is Family.MATMUL:
        return "matmul"
    if family is Family.ATEN:
        return "aten"
    if family is Family.REDUCTION:
        return "reduction"
    if family is Family.SCAN:
        return "scan"
    if family is Family.SCATTER:
        return "scatter"
    return "pointwise"


@dataclass
class _Group:
    id: int
    kind: str                      # pointwise | reduction | normalization | scan | scatter | matmul
    space: tuple                   # iteration shape (pointwise: outputs; reduction: its input)
    reduced: frozenset = frozenset()  # reduced dims (a scan: its scanned dim)
    out_space: tuple | None = None  # reduction output shape
    call: Val | None = None         # aten: the ATen call's node
    members: list = field(default_factory=list)
    reasons: list = field(default_factory=list)


class Segmenter:
    def __init__(self, fusion: Fusion, aliases: AliasPlan):
        self.fusion = fusion
        self.aliases = aliases
        self.classes = ExtentUnionFind(fusion)
        self.namer = Namer()
        self.group_of: dict[int, _Group] = {}
        self.groups: list[_Group] = []
        self.merged_into: dict[int, _Group] = {}  # group id -> the group it was merged into
        self.aten_home: dict[int, _Group] = {}    # id(ATen call node) -> its segment's group
        aliased = aliases.aliased_exprs()
        view_outputs = {id(fusion.outputs[i].val) for i in aliases.views}
        self.exprs = [v for v in fusion.tensor_exprs()]
        self.consumers: dict[int, list[Val]] = {}
        for v in self.exprs:
            for s in v.src:
                self.consumers.setdefault(id(s), []).append(v)
        self.outputs = {id(o.val) for i, o in enumerate(fusion.outputs) if i not in aliases.views}
        # exprs needed only to make view outputs are left to the alias segment
        needed = set()
        stack = [fusion.outputs[i].val for i in range(len(fusion.outputs)) if i not in aliases.views]
        while stack:
            v = stack.pop()
            if id(v) in needed or v.is_scalar or v.op is Op.TENSOR_INPUT:
                continue
            needed.add(id(v))
            stack.extend(v.src)
        self.compute = [v for v in self.exprs if id(v) in needed]
        self.needed = needed
        self.alias_exprs = [v for v in self.exprs if id(v) in aliased and id(v) not in needed]
        self.view_outputs = view_outputs

    def name(self, v: Val) -> str:
        return self.namer(v)

    def shape(self, v: Val) -> tuple:
        return self.classes.shape(v.logical)

    def shape_text(self, v: Val) -> str:
        return type_text(v, self.namer)

    # ---------------------------------------------------------------- joining
    def _why_not(self, e: Val, g: _Group, internal: bool) -> str | None:
        """None if `e` may join `g`, else the reason."""
        k = expr_kind(e)
        name = f"{self.name(e)} ({e.op.value})"
        if k == "matmul":
            return f"{name} is a matmul; it runs through ATen in its own segment"
        if g.kind == "matmul":
            return f"{name} feeds a matmul, which runs through ATen"
        if k == "aten" or g.kind == "aten":
            return self._why_not_aten(e, g, name)
        if k == "scatter":
            return (f"{name} writes at positions read from its index: segment {_ref(g)} reads it "
                    f"after its kernels (in one kernel that would need a grid-wide sync)")
        if g.kind == "scatter":  # a prologue, computed in the kernel that reads it
            if k != "pointwise":
                return f"{name} feeds the scatter of segment {_ref(g)}; it needs its own kernel"
            return None if internal else (f"{name} feeds the scatter of segment {_ref(g)} and is "
                                          f"used outside it")
        shape = self.shape(e)
        if k == "scan":
            return self._why_not_scan(e, g, name, shape)
        if g.kind == "scan" and k != "pointwise":
            return f"{name} feeds a scan in segment {_ref(g)}; it needs its own kernel"
        if k == "pointwise":
            if internal:
                return None
            allowed = {g.space} | ({g.out_space} if g.out_space is not None else set())
            if shape in allowed:
                return None
            return (f"{name} {self.shape_text(e)} is also used outside segment {_ref(g)}, whose "
                    f"iteration shape differs")
        in_shape = self.classes.shape(e.src[0].logical)
        dims = frozenset(e.arg.dims)
        if g.kind == "pointwise":
            if shape == g.space or in_shape == g.space:
                return None
            return (f"{name}: reduction of {self.shape_text(e.src[0])} does not match the "
                    f"iteration shape of consumer segment {_ref(g)}")
        if in_shape == g.space and dims == g.reduced:
            return None
        return (f"{name}: reduces other dims or another shape than segment {_ref(g)} "
                f"(a reduction of a reduction needs its own kernel)")

    @staticmethod
    def _why_not_aten(e: Val, g: _Group, name: str) -> str | None:
        """An ATen call's segment holds the call and the RESULT nodes reading it."""
        if expr_kind(e) != "aten":
            return f"{name} feeds {g.call.op.value}, which runs through ATen"
        if g.kind == "aten" and _call(e) is g.call:
            return None
        return f"{name} is part of {_call(e).op.value}, which runs through ATen in a segment of its own"

    def _why_not_scan(self, e: Val, g: _Group, name: str, shape: tuple) -> str | None:
        """A scan joins a pointwise or scan group of its own shape (and scanned
        dim) whose members read it only through pointwise ops of that shape
        (each at its own point: the epilogue)."""
        if g.kind not in ("pointwise", "scan") or shape != g.space:
            return (f"{name}: a scan of {self.shape_text(e)} does not fuse into {g.kind} segment "
                    f"{_ref(g)} (another kind or iteration shape)")
        if g.kind == "scan" and g.reduced != frozenset((e.arg.dim,)):
            return f"{name}: scans another dim than segment {_ref(g)}"
        stack, seen = [e], set()
        while stack:
            v = stack.pop()
            for c in self.consumers.get(id(v), []):
                if self.group_of.get(id(c)) is not g or id(c) in seen:
                    continue
                if OPS[c.op].family is not Family.POINTWISE or self.shape(c) != shape:
                    return (f"{name}: {self.name(c)} ({c.op.value}) in segment {_ref(g)} reads the "
                            f"scan other than pointwise at its own point")
                seen.add(id(c))
                stack.append(c)
        return None

    def _join(self, e: Val, g: _Group):
        if expr_kind(e) == "scan":
            g.kind, g.reduced = "scan", frozenset((e.arg.dim,))
        if expr_kind(e) == "reduction":
            in_shape = self.classes.shape(e.src[0].logical)
            dims = frozenset(e.arg.dims)
            if g.kind == "pointwise":
                if self.shape(e) == g.space:
                    g.kind, g.out_space, g.space = "reduction", g.space, in_shape
                else:
                    g.kind = "normalization"
                g.reduced = dims
            elif g.kind == "reduction" and self._feeds_broadcast_back(e, g):
                g.kind = "normalization"
        g.members.append(e)
        self.group_of[id(e)] = g

    def _feeds_broadcast_back(self, e: Val, g: _Group) -> bool:
        return any(self.shape(c) == g.space for c in self.consumers.get(id(e), [])
                   if self.group_of.get(id(c)) is g and expr_kind(c) == "pointwise")

    def _reaches(self, a: _Group, b: _Group) -> bool:
        """Does data flow from group a to group b?"""
        seen, stack = set(), [a]
        while stack:
            g = stack.pop()
            if g is b:
                return True
            if g.id in seen:
                continue
            seen.add(g.id)
            for v in g.members:
                for c in self.consumers.get(id(v), []):
                    cg = self.group_of.get(id(c))
                    if cg is not None and cg is not g:
                        stack.append(cg)
        return False

    def _new_group(self, e: Val, reasons: list[str]) -> _Group:
        k = expr_kind(e)
        if k == "reduction":
            g = _Group(len(self.groups), "reduction", self.classes.shape(e.src[0].logical),
                       frozenset(e.arg.dims), self.shape(e))
        elif k == "scan":
            g = _Group(len(self.groups), "scan", self.shape(e), frozenset((e.arg.dim,)))
        else:
            g = _Group(len(self.groups), k, self.shape(e))
        if k == "aten":
            g.call = _call(e)
            self.aten_home[id(g.call)] = g
        g.members.append(e)
        g.reasons.extend(reasons)
        self.group_of[id(e)] = g
        self.groups.append(g)
        return g

    def run(self) -> list[Segment]:
        for e in reversed(self.compute):
            cons = [c for c in self.consumers.get(id(e), []) if id(c) in self.group_of]
            # an ATen call's results join the segment of the first one placed
            home = self.aten_home.get(id(_call(e))) if expr_kind(e) == "aten" else None
            cgroups = [home] if home is not None else []
            for c in cons:
                g = self.group_of[id(c)]
                if g not in cgroups:
                    cgroups.append(g)
            if expr_kind(e) == "pointwise" and len(cgroups) > 1:
                cgroups = self._merge_siblings(cgroups)
            is_output = id(e) in self.outputs or id(e) in self.view_outputs
            reasons = []
            placed = False
            for g in cgroups:
                internal = all(self.group_of[id(c)] is g for c in cons) and not is_output
                why = self._why_not(e, g, internal)
                if why is None and any(self._reaches(h, g) for h in cgroups if h is not g):
                    why = f"{self.name(e)} joining segment {_ref(g)} would create a cycle"
                if why is None:
                    self._join(e, g)
                    placed = True
                    break
                reasons.append(why)
            if not placed:
                self._new_group(e, reasons)
        self._merge_horizontal()
        return self._segments()

    @staticmethod
    def _alike(a: _Group, b: _Group) -> bool:
        """Could groups a and b run as one kernel side by side (same kind, iteration space and reduced dims)?"""
        return (a.kind == b.kind and a.kind in ("pointwise", "reduction", "normalization")
                and a.space == b.space and a.reduced == b.reduced and a.out_space == b.out_space)

    def _absorb(self, a: _Group, b: _Group) -> None:
        """Group b joins group a (horizontally: neither reads the other)."""
        self.merged_into[b.id] = a
        for v in b.members:
            self.group_of[id(v)] = a
        a.members.extend(b.members)
        a.reasons.extend(b.reasons)
        self.groups.remove(b)

    def _merge_siblings(self, cgroups: list) -> list:
        """The groups reading one pointwise value, those alike merged first (a
        var_mean's mean and var: one kernel reading the input once, not a
        kernel storing the value for another to read it again)."""
        out: list = []
        for g in cgroups:
            home = next((a for a in out if self._alike(a, g) and not self._reaches(a, g)
                         and not self._reaches(g, a)), None)
            if home is None:
                out.append(g)
            else:
                self._absorb(home, g)
        return out

    def _merge_horizontal(self):
        i = 0
        while i < len(self.groups):
            a = self.groups[i]
            j = i + 1
            while j < len(self.groups):
                b = self.groups[j]
                same = self._alike(a, b)
                if same and not self._reaches(a, b) and not self._reaches(b, a):
                    self._absorb(a, b)
                    continue
                if not same and not self._reaches(a, b) and not self._reaches(b, a):
                    b.reasons.append(
                        f"independent of segment {_ref(a)}; not fused horizontally "
                        f"({a.kind} {self._space_text(a)} vs {b.kind} {self._space_text(b)})")
                j += 1
            i += 1

    def _space_text(self, g: _Group) -> str:
        v = g.members[0]
        return self.shape_text(v.src[0] if g.kind in ("reduction", "normalization")
                               and expr_kind(v) == "reduction" else v)

    def _segments(self) -> list[Segment]:
        order = {id(v): i for i, v in enumerate(self.exprs)}
        # topological order of groups by their first dependence
        ordered: list[_Group] = []
        remaining = list(self.groups)
        while remaining:
            for g in remaining:
                if not any(h is not g and self._reaches(h, g) for h in remaining):
                    ordered.append(g)
                    remaining.remove(g)
                    break
            else:
                raise AssertionError("segment graph has a cycle")
        # reasons name groups by id; segments are numbered in execution order
        sid_of = {g.id: sid for sid, g in enumerate(ordered)}
        for gid, g in self.merged_into.items():
            while g.id in self.merged_into:
                g = self.merged_into[g.id]
            sid_of[gid] = sid_of[g.id]

        def renumber(reason: str) -> str:
            return _REF.sub(lambda m: str(sid_of[int(m.group(1))]), reason)

        segments = []
        for sid, g in enumerate(ordered):
            members = sorted(g.members, key=lambda v: order[id(v)])
            segments.append(self._make_segment(sid, g.kind, members,
                                               [renumber(r) for r in g.reasons]))
        if self.alias_exprs or self.aliases.views:
            segments.append(self._make_segment(len(segments), "alias", self.alias_exprs, []))
        return segments

    def _make_segment(self, sid, kind, members, reasons) -> Segment:
        ids = {id(v) for v in members}
        inputs, seen = [], set()
        for v in members:
            for s in v.src:
                if id(s) in ids or id(s) in seen:
                    continue
                # a symbolic bound such as min(max(S1, 0), i0) reads scalar input S1
                for x in ([s] if s.is_tensor else _scalar_inputs(s)):
                    if id(x) not in seen:
                        seen.add(id(x))
                        inputs.append(x)
        # consumers that only make views of inputs do not count: the alias
        # segment rebuilds its views from the input itself
        outputs = [v for v in members
                   if id(v) in self.outputs or id(v) in self.view_outputs
                   or any(id(c) not in ids and id(c) in self.needed
                          for c in self.consumers.get(id(v), []))]
        if kind == "alias":
            outputs = [self.fusion.outputs[i].val for i in sorted(self.aliases.views)]
            inputs = []
            for i in sorted(self.aliases.views):
                inp = self.aliases.views[i][0]
                if inp not in inputs:
                    inputs.append(inp)
        return Segment(sid, kind, tuple(members), tuple(inputs), tuple(outputs), tuple(reasons))


def _call(v: Val) -> Val:
    """The ATen call a node belongs to: a RESULT node's source, else itself."""
    return v.src[0] if v.op is Op.RESULT else v


def _scalar_inputs(v: Val) -> list[Val]:
    """The scalar inputs a scalar expression reads, in first-use order."""
    return [x for x in S.leaves(v) if x.op is Op.SCALAR_INPUT]


def segment(fusion: Fusion, aliases: AliasPlan, notes=()) -> SegmentedFusion:
    segs = Segmenter(fusion, aliases).run()
    return SegmentedFusion(fusion, tuple(segs), tuple(notes), aliases)
