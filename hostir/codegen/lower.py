"""Lowering a pointwise or reduction segment to kernel IR.

Every use of a producer is indexed through the maps of the ops between it
and the consumer (DESIGN rule 1): each op's `kernel` rule (in ir/ops/) gives
its value at an index in terms of its sources' values at their indices, and
`PointwiseLowering` is the `L` those rules build with. Values live in their
compute type (Float for Half/BFloat16) and are rounded to each node's dtype,
as the reference does.
"""
from __future__ import annotations

import itertools

from ..ir import scalar as S
from ..ir.dtypes import DataType, compute_dtype, exact_cast, promote
from ..ir.errors import ExecutionError, UnsupportedError
from ..ir.node import OPS, AxisKind, Family, Kind, Op, Val, const
from ..ir.ops.common import operand_index
from ..segment import Segment
from .halves import Halves
from .kir import K, Builder, Kernel, KNode, TensorParam

INT = DataType.Int


class PointwiseLowering:
    def __init__(self, seg: Segment, name: str):
        self.seg = seg
        self.b = Builder()
        self.k = Kernel(name)
        self.members = {id(v) for v in seg.exprs}
        self.in_slot: dict[int, int] = {}
        self.param_slot: dict[int, int] = {}
        self.memo: dict[tuple, KNode] = {}
        self.halves: Halves | None = None  # a symbolic paired kernel: Int scalars as a * H + c
        self.half: KNode | None = None     # ... and H, the launch's extent along the paired dim

    # ------------------------------------------------------------ scalars and types
    def scalar(self, v: Val) -> KNode:
        """A fusion-IR scalar expression as kernel IR (leaves become parameters)."""
        b = self.b
        if v.op is Op.CONST:
            return b.const(v.arg, v.dtype)
        form = self.halves.form(v) if self.halves is not None else None
        if form is not None:
            return self.cast(b.add(b.mul(self.half, b.i(form[0])), b.i(form[1])), v.dtype)
        if not v.src:
            slot = self.param_slot.get(id(v))
            if slot is None:
                slot = self.param_slot[id(v)] = len(self.k.params)
                self.k.params.append(v)
            return b.mk(K.PARAM, v.dtype, arg=slot)
        src = [self.scalar(s) for s in v.src]
        if v.op is Op.CAST:
            return self.cast(src[0], v.dtype)
        if v.op is Op.WHERE:
            return b.mk(Op.WHERE, v.dtype, (self.cast(src[0], DataType.Bool),
                                            self.cast(src[1], v.dtype), self.cast(src[2], v.dtype)))
        kind = OPS[v.op].kind
        c = promote([(s.dtype, False) for s in v.src])
        if kind is Kind.FLOAT and not c.is_inexact:
            c = DataType.Double
        out = b.mk(v.op, kind.result(c), [self.cast(x, c) for x in src])
        return self.cast(out, v.dtype)

    def cast(self, x: KNode, dtype: DataType) -> KNode:
        if x.dtype is dtype:
            return x
        if x.op is Op.CAST and x.src[0].dtype is dtype and exact_cast(dtype, x.dtype):
            return x.src[0]  # e.g. bf16 -> float -> bf16: the round trip is the identity
        if x.op == K.CONST and compute_dtype(dtype) is dtype:  # (not a float stored as bits)
            return self.b.const(x.arg, dtype)
        return self.b.mk(Op.CAST, dtype, (x,), arg=dtype)

    def rounded(self, x: KNode, dtype: DataType) -> KNode:
        """`x` converted to `dtype`, held in dtype's compute type."""
        c = compute_dtype(dtype)
        if dtype is not c:
            return self.cast(self.cast(self.cast(x, c), dtype), c)
        return self.cast(x, dtype)

    # ------------------------------------------------------------ values
    def load(self, v: Val, ix, pred) -> KNode:
        slot = self.in_slot.get(id(v))
        if slot is None:
            slot = self.in_slot[id(v)] = len(self.k.inputs)
            self.k.inputs.append(TensorParam(v, v.ndim, v.dtype))
        index = [self.b.i(0) if ax.kind is AxisKind.BCAST else i for ax, i in zip(v.logical, ix)]
        p = pred if pred is not None else self.b.const(True, DataType.Bool)
        raw = self.b.mk(K.LOAD, v.dtype, (p, *index), arg=slot)
        return self.cast(raw, compute_dtype(v.dtype))

    def value(self, v: Val, ix: tuple, pred) -> KNode:
        """v's value (in its compute type) at index `ix` of v's logical dims,
        where predicate `pred` holds (None: everywhere)."""
        if v.is_scalar:
            return self.scalar(v)
        key = (id(v), tuple(id(i) for i in ix), id(pred))
        hit = self.memo.get(key)
        if hit is None:
            hit = self._value(v, ix, pred)
            self.memo[key] = hit
        return hit

    def _value(self, v: Val, ix: tuple, pred) -> KNode:
        if id(v) not in self.members:
            return self.load(v, ix, pred)
        rule = OPS[v.op].kernel
        if rule is None:
            raise UnsupportedError(f"pointwise kernel: op {v.op.value} ({v!r}) cannot be generated")
        return rule(v, ix, pred, self)

    def operand(self, s: Val, v: Val, ix, pred) -> KNode:
        """Operand `s` of rank-broadcasting op `v`, at v's index `ix`."""
        if s.is_scalar:
            return self.scalar(s)
        return self.value(s, operand_index(s, v.ndim, ix, self.b.i(0)), pred)

    # ------------------------------------------------------------ kernel
    def run(self, extents: list[int] | None = None, pair_dims: tuple = (),
            halves: Halves | None = None) -> Kernel:
        """Lower the segment. `extents` (the plan's iteration extents) let index
        ranges fold predicates; for each dim of `pair_dims`, each thread computes
        the points i and i + H along it (H half its extent), so values both need,
        such as the two halves of a rotation, are read once. H is a constant
        from `extents`, or, given `halves` (a symbolic plan, one paired dim),
        the launch's extent along that dim (K.EXTENT), the scalars rewritten as
        forms in H and the kernel guarded by `halves.guards`."""
        seg, b, k = self.seg, self.b, self.k
        ref = seg.outputs[0]
        k.extent_vals = [a.extent for a in ref.logical]
        shifts = {}
        for d in pair_dims:
            if halves is None:
                k.extent_vals[d] = const(extents[d] // 2)
                b.ranges[d] = extents[d] // 2
                shifts[d] = b.i(extents[d] // 2)
            else:
                static = halves.half.op is Op.CONST
                self.halves = halves
                self.half = shifts[d] = b.i(halves.half.arg) if static else b.mk(K.EXTENT, INT, arg=d)
                k.extent_vals[d] = halves.half
                b.ranges[d] = halves.half.arg if static else self.half
        k.pairs = tuple((d, None if halves is not None else extents[d]) for d in pair_dims)
        ix0 = tuple(b.mk(K.INDEX, INT, arg=d) for d in range(ref.ndim))
        for o in seg.outputs:
            if o.ndim != ref.ndim:
                raise UnsupportedError(f"pointwise kernel: outputs of different rank ({o!r}, {ref!r})")
            k.outputs.append(TensorParam(o, o.ndim, o.dtype))
        for lanes in itertools.product(*((False, True) for _ in pair_dims)):
            moved = {d for d, second in zip(pair_dims, lanes) if second}
            ix = tuple(b.add(i, shifts[d]) if d in moved else i for d, i in enumerate(ix0))
            for slot, o in enumerate(seg.outputs):
                k.stores.append((slot, self.cast(self.value(o, ix, None), o.dtype), ix))
        k.order = _reachable(b.order, [n for _, v, ix in k.stores for n in (v, *ix)])
        k.guards = tuple(halves.guards) if halves is not None else ()
        return k

    def moving_loads(self, dim: int) -> list[KNode]:
        """Loads whose address moves along iteration dim `dim`: the reads that
        pairing can share. (Loads constant along it, a broadcast bias say, are
        cache hits anyway; pairing for them only costs parallelism.)"""
        moving: set[int] = set()
        for n in self.k.order:
            if (n.op == K.INDEX and n.arg == dim) or any(id(s) in moving for s in n.src):
                moving.add(id(n))
        return [n for n in self.k.order if n.op == K.LOAD and id(n) in moving]


    def full_index(self, kept_ix: tuple) -> tuple:
        raise UnsupportedError("a reduction in a pointwise kernel")

    def check(self, ok: KNode, value: KNode, message: str, index: KNode, extent: KNode,
              pred: KNode | None = None) -> KNode:
        """`value`, where an index that `ok` says is in range was used (K.CHECK)."""
        if self.b.is_const(ok, True):
            return value
        p = pred if pred is not None else self.b.const(True, DataType.Bool)
        return self.b.mk(K.CHECK, value.dtype, (ok, value, index, extent, p), arg=message)

    def moves(self, n: KNode) -> bool:
        """Whether `n` varies along a reduction kernel's rows (never: no rows)."""
        return False

    def reduce(self, op: str, value: KNode, index: KNode | None = None) -> KNode:
        raise UnsupportedError("a reduction in a pointwise kernel")


class ReductionLowering(PointwiseLowering):
    """A reduction or normalization segment: the iteration space is its
    reductions' input (all over the same dims), a prologue computed at every
    point of it, REDUCE nodes, and an epilogue of the kept shape; in a
    normalization, reduction results are read back at every point (and may
    feed further reductions: a softmax's sum of exp(x - max))."""

    def __init__(self, seg: Segment, name: str):
        super().__init__(seg, name)
        reds = [v for v in seg.exprs if OPS[v.op].family is Family.REDUCTION]
        if not reds:
            raise UnsupportedError("a reduction kernel without a reduction")
        r = reds[0]
        self.space = r.src[0]
        dims = tuple(sorted(r.arg.dims))  # row-major: the innermost reduced dim last
        for v in reds[1:]:
            if tuple(sorted(v.arg.dims)) != dims or v.src[0].ndim != self.space.ndim:
                raise UnsupportedError(f"reductions over different dims in one kernel ({v!r}, {r!r})")
        self.k.reduced = dims
        self._moves: dict[int, bool] = {}

    def full_index(self, kept_ix: tuple) -> tuple:
        """The space's index from the kept dims' index `kept_ix` (which must not
        move with the reduced dims: a REDUCE is one value per row)."""
        reduced = {id(self.b.mk(K.INDEX, INT, arg=d)) for d in self.k.reduced}
        stack, seen = list(kept_ix), set()
        while stack:
            n = stack.pop()
            if id(n) in reduced:
                raise UnsupportedError("a reduction read at an index that moves along the "
                                       "reduced dims")
            if id(n) not in seen:
                seen.add(id(n))
                stack.extend(n.src)
        it = iter(kept_ix)
        return tuple(self.b.mk(K.INDEX, INT, arg=d) if d in self.k.reduced else next(it)
                     for d in range(self.space.ndim))

    def first_index(self, kept_ix: tuple) -> tuple:
        """(the index of the row's first reduced point, the predicate that the
        row has one): a row value read at a fixed point (a shift)."""
        b, it = self.b, iter(kept_ix)
        nonempty = None
        for d in self.k.reduced:
            nonempty = b.land(nonempty, b.cmp(Op.GT, self.scalar(self.space.logical[d].extent), b.i(0)))
        ix = tuple(b.i(0) if d in self.k.reduced else next(it) for d in range(self.space.ndim))
        return ix, nonempty

    def moves(self, n: KNode) -> bool:
        """Whether `n` takes a different value along the reduced dims (a row's
        points); False for what is one value per row (a REDUCE's result)."""
        got = self._moves.get(id(n))
        if got is None:
            if n.op == K.INDEX:
                got = n.arg in self.k.reduced
            elif n.op == K.REDUCE:
                got = False
            else:
                got = any(self.moves(s) for s in n.src)
            self._moves[id(n)] = got
        return got

    def reduce(self, op: str, value: KNode, index: KNode | None = None) -> KNode:
        """A REDUCE of `value` over the reduced dims; with `index` (argmax) of
        (value, index) pairs, whose result is the chosen pair's index."""
        if value.dtype is DataType.Bool:
            value = self.cast(value, DataType.Int32)
        if index is not None:
            return self.b.mk(K.REDUCE, INT, (value, index), arg=op)
        return self.b.mk(K.REDUCE, value.dtype, (value,), arg=op)

    def reduced_index(self) -> KNode:
        """The point's row-major index among the reduced dims' points."""
        b, flat = self.b, None
        for d in self.k.reduced:
            i = b.mk(K.INDEX, INT, arg=d)
            flat = i if flat is None else b.add(b.mul(flat, self.scalar(self.space.logical[d].extent)), i)
        return flat

    def reduced_count(self) -> KNode:
        """The number of points reduced per kept point, as a kernel value."""
        n = self.b.i(1)
        for d in self.k.reduced:
            n = self.b.mul(n, self.scalar(self.space.logical[d].extent))
        return n

    def run(self, extents=None, pair_dims=()) -> Kernel:
        seg, b, k = self.seg, self.b, self.k
        space = self.space.logical
        k.extent_vals = [a.extent for a in space]
        ix = tuple(b.mk(K.INDEX, INT, arg=d) for d in range(len(space)))
        kept = tuple(ix[d] for d in k.kept)
        for slot, o in enumerate(seg.outputs):
            k.outputs.append(TensorParam(o, o.ndim, o.dtype))
            if o.ndim == len(space) and all(o.logical[d].is_broadcast and not o.logical[d].is_expanded
                                            for d in k.reduced):
                at = tuple(b.i(0) if d in k.reduced else i for d, i in enumerate(ix))  # keepdim
            elif o.ndim == len(space):
                at = ix
            elif o.ndim == len(kept):
                at = kept
            else:
                raise UnsupportedError(f"reduction kernel: output {o!r} is neither of the input "
                                       f"nor of the reduced shape")
            k.stores.append((slot, self.cast(self.value(o, at, None), o.dtype), at))
        k.order = _reachable(b.order, [n for _, v, ix in k.stores for n in (v, *ix)])
        return k


def _reachable(order: list[KNode], roots: list[KNode]) -> list[KNode]:
    need = set()
    stack = list(roots)
    while stack:
        n = stack.pop()
        if id(n) in need:
            continue
        need.add(id(n))
        stack.extend(n.src)
    return [n for n in order if id(n) in need]


def _index_deps(kern: Kernel) -> dict[int, frozenset]:
    """Per node, the iteration dims its value depends on."""
    deps: dict[int, frozenset] = {}
    for n in kern.order:
        own = frozenset((n.arg,)) if n.op == K.INDEX else frozenset()
        deps[id(n)] = own.union(*(deps[id(s)] for s in n.src))
    return deps


def _may_share(kern: Kernel, d: int, deps) -> bool:
    """Can pairing lanes along dim `d` make two loads one? Lane 1 reads at
    i + E/2 what some other load of the same input reads at i, so two loads of
    one input must differ where an operand depends on dim d."""
    by_slot: dict[int, list[KNode]] = {}
    for n in kern.order:
        if n.op == K.LOAD:
            by_slot.setdefault(n.arg, []).append(n)
    for loads in by_slot.values():
        for a, b in itertools.combinations(loads, 2):
            if any(x is not y and (d in deps[id(x)] or d in deps[id(y)])
                   for x, y in zip(a.src, b.src)):
                return True
    return False


def lower_pointwise(seg: Segment, name: str, extents: list[int] | None = None,
                    pairing: bool = True, at=None) -> tuple[Kernel, Kernel | None]:
    """The segment's kernel, and a paired-lane variant of it along the dim where
    that reads fewest elements per point (None where pairing reads no fewer).
    A specialized plan gives its `extents` (compiled into the variant); a
    symbolic one `at`, the values of the call it is made for (a function of a
    scalar Val): its variant holds for every call that meets `Kernel.guards`."""
    base = PointwiseLowering(seg, name)
    plain = base.run()
    if not pairing or (not extents and at is None):
        return plain, None
    best, best_gain = None, 0.0
    deps = _index_deps(plain)
    for d in range(len(plain.extent_vals)):
        if not _may_share(plain, d, deps):
            continue
        before = base.moving_loads(d)
        for low, cand in _paired(seg, name, d, extents, at):
            gain = len(before) - len(low.moving_loads(d)) / 2  # loads per point saved
            if gain > best_gain:
                best, best_gain = cand, gain
    return plain, best


def _paired(seg: Segment, name: str, d: int, extents, at):
    """(lowering, kernel) of each paired variant along dim `d` worth trying: the
    plan's extents compiled in; or, in a symbolic plan, the scalars as forms in
    H, first with only the extent's own leaf, then also with shape scalars that
    equal H or 2H at the plan's call (assumed to stay so)."""
    if extents is not None:
        if extents[d] >= 2 and extents[d] % 2 == 0:
            low = PointwiseLowering(seg, name)
            try:
                yield low, low.run(extents, pair_dims=(d,))
            except UnsupportedError:
                pass
        return
    extent, shape = seg.outputs[0].logical[d].extent, shape_leaves(seg)
    try:
        for relate in (False, True):
            halves = Halves(extent, at, shape, relate)
            if not halves.exact or (relate and not halves.relatable()):
                return
            low = PointwiseLowering(seg, name)
            try:
                cand = low.run(pair_dims=(d,), halves=halves)
            except UnsupportedError:
                continue
            if halves.ok:
                yield low, cand
    except ExecutionError:  # a value the plan's call does not have
        return


def shape_leaves(seg: Segment) -> dict[int, Val]:
    """The leaves of the segment's extents and resize bounds, by id: values in
    the input signature (a launch prepared for one signature may rely on them)."""
    roots = [a.extent for v in (*seg.inputs, *seg.exprs) if v.is_tensor for a in v.axes]
    for v in seg.exprs:
        bounds = OPS[v.op].bounds
        if bounds is not None:
            roots += list(bounds(v))
    return {id(x): x for r in roots for x in S.leaves(r)}
