"""Lowering a pointwise segment to kernel IR.

Every use of a producer is indexed through the maps of the ops between it
and the consumer (DESIGN rule 1): slice adds its start, pad subtracts its
left width under a predicate, cat picks the piece by range, broadcast drops
a dim, permute reorders, reshape linearizes and delinearizes, expand and
broadcast dims read index 0. Values live in their compute type (Float for
Half/BFloat16) and are rounded to each node's dtype, as the reference does.
"""
from __future__ import annotations

import itertools

from .. import config
from ..ir.dtypes import DataType, compute_dtype, promote
from ..ir.errors import UnsupportedError
from ..ir.node import BINARY, UNARY, AxisKind, Kind, Op, Val
from ..ir.reference import op_compute_type
from ..segment import Segment
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

    # ------------------------------------------------------------ leaves
    def scalar(self, v: Val) -> KNode:
        """A fusion-IR scalar expression as kernel IR (leaves become parameters)."""
        b = self.b
        if v.op is Op.CONST:
            return b.const(v.arg, v.dtype)
        if v.op in (Op.EXTENT, Op.SCALAR_INPUT):
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
        kind = UNARY.get(v.op) or BINARY.get(v.op)
        c = promote([(s.dtype, False) for s in v.src])
        if kind is Kind.FLOAT and not c.is_float:
            c = DataType.Double
        out = b.mk(v.op, DataType.Bool if kind is Kind.BOOL else c, [self.cast(x, c) for x in src])
        return self.cast(out, v.dtype)

    def cast(self, x: KNode, dtype: DataType) -> KNode:
        if x.dtype is dtype:
            return x
        if x.op is Op.CAST and x.src[0].dtype is dtype and _exact_widening(dtype, x.dtype):
            return x.src[0]  # e.g. bf16 -> float -> bf16: the round trip is the identity
        if x.op == K.CONST:
            return self.b.const(x.arg, dtype) if not dtype in (DataType.Half, DataType.BFloat16) \
                else self.b.mk(Op.CAST, dtype, (x,), arg=dtype)
        return self.b.mk(Op.CAST, dtype, (x,), arg=dtype)

    def rounded(self, x: KNode, dtype: DataType) -> KNode:
        """`x` converted to `dtype`, held in dtype's compute type."""
        c = compute_dtype(dtype)
        if dtype is not c:
            return self.cast(self.cast(self.cast(x, c), dtype), c)
        return self.cast(x, dtype)

    def load(self, v: Val, ix, pred) -> KNode:
        slot = self.in_slot.get(id(v))
        if slot is None:
            slot = self.in_slot[id(v)] = len(self.k.inputs)
            self.k.inputs.append(TensorParam(v, v.ndim, v.dtype))
        index = [self.b.i(0) if ax.kind is AxisKind.BCAST else i for ax, i in zip(v.logical, ix)]
        p = pred if pred is not None else self.b.const(True, DataType.Bool)
        raw = self.b.mk(K.LOAD, v.dtype, (p, *index), arg=slot)
        return self.cast(raw, compute_dtype(v.dtype))

    # ------------------------------------------------------------ values
    def value(self, v: Val, ix: tuple, pred) -> KNode:
        """v's value (in its compute type) at index `ix` of v's logical dims."""
        if v.is_scalar:
            return self.scalar(v)
        key = (id(v), tuple(id(i) for i in ix), id(pred))
        hit = self.memo.get(key)
        if hit is None:
            hit = self._value(v, ix, pred)
            self.memo[key] = hit
        return hit

    def _value(self, v: Val, ix: tuple, pred) -> KNode:
        b = self.b
        if id(v) not in self.members:
            return self.load(v, ix, pred)
        op = v.op
        if op is Op.POW and v.src[1].op is Op.CONST and v.src[1].arg in (1, 2, 3, -1) \
                and op_compute_type(v).is_float:
            # small integral exponents as multiplications (as torch does for 2 and 3)
            c = op_compute_type(v)
            x = self.cast(self._operand(v.src[0], v, ix, pred), c)
            e = int(v.src[1].arg)
            if e == -1:
                out = b.mk(Op.TRUEDIV, c, (b.const(1.0, c), x))
            else:
                out = x
                for _ in range(e - 1):
                    out = b.mk(Op.MUL, c, (out, x))
            return self.rounded(out, v.dtype)
        if op in UNARY or op in BINARY:
            c = op_compute_type(v)
            args = [self.cast(self._operand(s, v, ix, pred), c) for s in v.src]
            if op is Op.MUL and c.is_float:  # x * 1.0 is x exactly
                if args[0].op == K.CONST and args[0].arg == 1.0:
                    return self.rounded(args[1], v.dtype)
                if args[1].op == K.CONST and args[1].arg == 1.0:
                    return self.rounded(args[0], v.dtype)
            out_dtype = DataType.Bool if (UNARY.get(op) or BINARY.get(op)) is Kind.BOOL else c
            return self.rounded(b.mk(op, out_dtype, args), v.dtype)
        if op is Op.WHERE:
            c = compute_dtype(v.dtype)
            cond = self.cast(self._operand(v.src[0], v, ix, pred), DataType.Bool)
            x = self.cast(self._operand(v.src[1], v, ix, pred), c)
            y = self.cast(self._operand(v.src[2], v, ix, pred), c)
            return self.rounded(b.mk(Op.WHERE, c, (cond, x, y)), v.dtype)
        if op in (Op.CAST, Op.SET):
            return self.rounded(self._operand(v.src[0], v, ix, pred), v.dtype)
        src = v.src[0] if v.src and v.src[0].is_tensor else None
        if op is Op.BROADCAST:
            return self.value(src, tuple(i for i, f in zip(ix, v.arg) if not f), pred)
        if op is Op.SQUEEZE:
            it = iter(ix)
            full = tuple(b.i(0) if d in v.arg else next(it) for d in range(src.ndim))
            return self.value(src, full, pred)
        if op is Op.EXPAND:
            return self.value(src, tuple(b.i(0) if a.kind is AxisKind.BCAST else i
                                         for a, i in zip(src.logical, ix)), pred)
        if op is Op.PERMUTE:
            inner = [None] * src.ndim
            for i, d in enumerate(v.arg):
                inner[d] = ix[i]
            return self.value(src, tuple(inner), pred)
        if op is Op.SLICE:
            n = src.ndim
            starts = v.src[1:1 + n]
            inner = tuple(b.add(self.scalar(st), b.mul(i, b.i(step)))
                          for st, i, step in zip(starts, ix, v.arg))
            return self.value(src, inner, pred)
        if op is Op.PAD:
            return self._pad(v, src, ix, pred)
        if op is Op.CAT:
            return self._cat(v, ix, pred)
        if op is Op.RESHAPE:
            return self._reshape(v, src, ix, pred)
        if op is Op.FULL:
            return self.rounded(self.scalar(v.src[0]), v.dtype)
        if op is Op.IOTA:
            start, step = (self.cast(self.scalar(s), compute_dtype(v.dtype)) for s in v.src[1:])
            i = self.cast(ix[0], compute_dtype(v.dtype))
            return self.rounded(b.mk(Op.ADD, start.dtype, (start, b.mk(Op.MUL, start.dtype, (i, step)))),
                                v.dtype)
        raise UnsupportedError(f"pointwise kernel: op {op.value} ({v!r}) cannot be generated")

    def _operand(self, s: Val, v: Val, ix, pred) -> KNode:
        if s.is_scalar:
            return self.scalar(s)
        off = v.ndim - s.ndim
        sub = tuple(self.b.i(0) if ax.kind is AxisKind.BCAST else ix[off + d]
                    for d, ax in enumerate(s.logical))
        return self.value(s, sub, pred)

    def _pad(self, v: Val, src: Val, ix, pred) -> KNode:
        b = self.b
        w = v.src[2:]
        inner, inside = [], None
        for d, ax in enumerate(src.logical):
            lo, hi = w[2 * d], w[2 * d + 1]
            if lo.op is Op.CONST and hi.op is Op.CONST and lo.arg == 0 and hi.arg == 0:
                inner.append(ix[d])
                continue
            i = b.sub(ix[d], self.scalar(lo))
            inner.append(i)
            ok = b.land(b.cmp(Op.GE, i, b.i(0)), b.cmp(Op.LT, i, self.scalar(ax.extent)))
            inside = b.land(inside, ok)
        if inside is None:
            return self.value(src, tuple(inner), pred)
        if self.b.is_const(inside):
            if not inside.arg:
                return self.cast(self.scalar(v.src[1]), compute_dtype(v.dtype))
            return self.value(src, tuple(inner), pred)
        val = self.value(src, tuple(inner), b.land(pred, inside))
        fill = self.cast(self.scalar(v.src[1]), val.dtype)
        return b.where(inside, val, fill)

    def _cat(self, v: Val, ix, pred) -> KNode:
        b = self.b
        c = v.arg
        pieces, offsets = list(v.src), []
        off = b.i(0)
        for p in pieces:
            offsets.append(off)
            off = b.add(off, self.scalar(p.logical[c].extent))
        result = None
        for k in reversed(range(len(pieces))):
            p = pieces[k]
            sub = list(ix)
            sub[c] = b.sub(ix[c], offsets[k])
            lo_ok = b.cmp(Op.GE, ix[c], offsets[k]) if k > 0 else None
            hi_ok = b.cmp(Op.LT, ix[c], offsets[k + 1]) if k + 1 < len(pieces) else None
            in_range = b.land(lo_ok, hi_ok)
            if in_range is not None and b.is_const(in_range, False):
                continue  # this piece is never read at these indices
            val = self.value(p, tuple(sub), b.land(pred, in_range))
            val = self.cast(val, compute_dtype(v.dtype))
            result = val if result is None else b.where(hi_ok, val, result)
        return result

    def _reshape(self, v: Val, src: Val, ix, pred) -> KNode:
        b = self.b
        lin = b.i(0)
        for i, ax in zip(ix, v.logical):
            lin = b.add(b.mul(lin, self.scalar(ax.extent)), i)
        inner = []
        for ax in reversed(src.logical):
            e = self.scalar(ax.extent)
            inner.append(b.mod(lin, e))
            lin = b.floordiv(lin, e)
        return self.value(src, tuple(reversed(inner)), pred)

    # ------------------------------------------------------------ kernel
    def run(self, extents: list[int] | None = None, pair_dims: tuple = ()) -> Kernel:
        """Lower the segment. `extents` (the plan's iteration extents) let index
        ranges fold predicates; for each dim of `pair_dims`, each thread computes
        the points i and i + E/2 along it (E its extent), so values both need,
        such as the two halves of a rotation, are read once."""
        seg, b, k = self.seg, self.b, self.k
        ref = seg.outputs[0]
        k.extent_vals = [a.extent for a in ref.logical]
        offsets = []
        for d in pair_dims:
            half = extents[d] // 2
            k.extent_vals[d] = Val(Op.CONST, INT, arg=half)
            b.ranges[d] = half
            offsets.append((0, half))
        k.pairs = tuple((d, extents[d]) for d in pair_dims)
        if pair_dims:
            k.lane_dim, k.lanes = pair_dims[0], offsets[0]
        ix0 = tuple(b.mk(K.INDEX, INT, arg=d) for d in range(ref.ndim))
        for o in seg.outputs:
            if o.ndim != ref.ndim:
                raise UnsupportedError(f"pointwise kernel: outputs of different rank ({o!r}, {ref!r})")
            k.outputs.append(TensorParam(o, o.ndim, o.dtype))
        for combo in itertools.product(*offsets):
            shift = dict(zip(pair_dims, combo))
            ix = tuple(b.add(i, b.i(shift[d])) if d in shift else i for d, i in enumerate(ix0))
            for slot, o in enumerate(seg.outputs):
                val = self.cast(self.value(o, ix, None), o.dtype)
                k.stores.append((slot, val, ix))
        k.order = _reachable(b.order, [n for _, v, ix in k.stores for n in (v, *ix)])
        return k

    def load_count(self, dim: int) -> int:
        """Loads whose address moves along iteration dim `dim`: the reads that
        pairing can share. (Loads constant along it, a broadcast bias say, are
        cache hits anyway; pairing for them only costs parallelism.)"""
        moving: set[int] = set()
        for n in self.k.order:
            if (n.op == K.INDEX and n.arg == dim) or any(id(s) in moving for s in n.src):
                moving.add(id(n))
        return sum(1 for n in self.k.order if n.op == K.LOAD and id(n) in moving)


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


def lower_pointwise(seg: Segment, name: str, extents: list[int] | None = None) -> Kernel:
    """The segment's kernel; with the plan's `extents`, paired lanes along a dim
    are used where that reads fewer elements per point (shared reads)."""
    base = PointwiseLowering(seg, name)
    kern = base.run()
    if not extents or config.disabled("paired_lanes"):
        return kern
    best, best_gain, best_dims = kern, 0.0, ()
    for d, e in enumerate(extents):
        if e < 2 or e % 2:
            continue
        try:
            low = PointwiseLowering(seg, name)
            cand = low.run(extents, pair_dims=(d,))
        except UnsupportedError:
            continue
        before, after = base.load_count(d), low.load_count(d) / 2  # per point
        if after < before and before - after > best_gain:
            best, best_gain, best_dims = cand, before - after, (d,)
    if best is not kern:
        best.fallback = kern  # used when a launch's extents along the paired dims differ
        best.paired_extent = extents[best.lane_dim]
    return best


_EXACT = {DataType.Half: (DataType.Float, DataType.Double),
          DataType.BFloat16: (DataType.Float, DataType.Double),
          DataType.Float: (DataType.Double,),
          DataType.Int32: (DataType.Int, DataType.Double)}


def _exact_widening(src: DataType, dst: DataType) -> bool:
    """Does every `src` value convert to `dst` and back unchanged?"""
    return dst in _EXACT.get(src, ()) or (src is DataType.Bool and dst is not DataType.Bool)
