"""The online softmax: a kernel-IR rewrite (`Kernel -> Kernel`) that folds a
row's max M of a value `a` and the next pass's sum S of exp(a - M) into one
REDUCE of (m, s) pairs, so a softmax reads its row twice (the pair, then the
output), not three times. The launch rule (spec.KernelSpec.kernel_for) runs
the rewritten kernel where the persistent schedule does not keep the row in
registers.

The rule (as flash attention's): a thread keeps (m, s), the max so far and
the sum of c * exp(a - m) so far; two partial pairs combine as
m = max(m1, m2), s = s1 * exp(m1 - m) + s2 * exp(m2 - m), and a point is the
pair (a, c). Of the two scales one is 1 (the greater max's), so a combine
costs one exp (hir_online in kernels/hostir.cuh; the interpreter's
`_online_combine`). Where the two maxima are equal the scale is 1, also when
both are -inf or +inf: a row's leading -inf points (a masked prefix) add
their c to s instead of making it NaN (exp(-inf - -inf)), and a finite max
that arrives later scales that by exp(-inf) = 0.

What the passes computed, the projections give exactly (up to rounding of
finite sums): PROJECT[max] is M; PROJECT[sum] is s, except where M is
infinite: a row all -inf, or one with a +inf, has a NaN term exp(x - M) in
every pass-by-pass sum, so S is NaN there (as torch's softmax gives NaN
rows). A NaN anywhere makes M NaN (max propagates it) and every combine after
it NaN. Empty rows never run (a max over empty dims is an error, as in torch).

What is folded (`foldable`):
- S = REDUCE[sum](exp(a - M)) or REDUCE[sum](exp(a - M) * c), c either
  operand of the product, with M = REDUCE[max](a) of the same node `a`
  (nodes are interned: a prologue's scale, cast or mask is one node);
- a, M, a - M, the exp, c and S all of one type, Float or Double, nothing
  rounded between (a Half or BFloat16 computation rounds each term, which
  depends on M: those kernels keep their passes);
- c computed in M's pass (its level at most a's, so it does not depend on M).
Not folded: a temperature after the shift (exp(k * (a - M))), a max masked
where infinite before the shift (exp(a - where(isinf(M), 0, M)), as Thunder's
logsumexp), exp2, a second sum over the same max (it keeps its pass, reading
PROJECT[max]).
"""
from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from ..ir.dtypes import DataType
from ..ir.node import Op
from .kir import ONLINE, Builder, K, Kernel, KNode, levels, topological


class Online(NamedTuple):
    """A max and a sum that fold into one online_softmax REDUCE."""

    max: KNode                 # REDUCE[max](value)
    sum: KNode                 # REDUCE[sum](exp(value - max) [* factor])
    value: KNode               # a
    factor: KNode | None       # c (None: 1)


def foldable(kern: Kernel) -> list[Online]:
    """The (max, sum) pairs of a reduction kernel that fold (see the module's
    docstring), each max and each sum in at most one."""
    if not kern.reduced:
        return []
    level = levels(kern)
    found, taken = [], set()
    for s in kern.order:
        if s.op != K.REDUCE or s.arg != "sum":
            continue
        f = _match(s, level)
        if f is not None and id(f.max) not in taken:
            taken.add(id(f.max))
            found.append(f)
    return found


def _match(s: KNode, level: dict) -> Online | None:
    v, t = s.src[0], s.dtype
    if t not in (DataType.Float, DataType.Double) or v.dtype is not t:
        return None
    e, c = v, None
    if v.op is Op.MUL:
        e, c = v.src if _shifted_exp(v.src[0]) is not None else reversed(v.src)
    got = _shifted_exp(e)
    if got is None or (c is not None and c.dtype is not t):
        return None
    a, m = got
    if a.dtype is not t or m.dtype is not t or e.dtype is not t or e.src[0].dtype is not t:
        return None
    if c is not None and level[id(c)] > level[id(a)]:
        return None
    return Online(m, s, a, c)


def shifted_exp(e: KNode):
    """(a, M) where `e` is exp(a - M), M the row's max of a: REDUCE[max](a), or
    an online pair's max (PROJECT[max] of REDUCE[online](a, c)); else None. Its
    argument is 0 or less (cuda_combine.shifted_exps prints it so)."""
    if e.op is not Op.EXP or e.src[0].op is not Op.SUB:
        return None
    a, m = e.src[0].src
    r = m.src[0] if m.op == K.PROJECT and m.arg == "max" else m
    if r.op != K.REDUCE or r.arg not in ("max", ONLINE) or r.src[0] is not a:
        return None
    return a, m


def _shifted_exp(e: KNode):
    """shifted_exp where M is a REDUCE[max] (what folds into an online pair)."""
    got = shifted_exp(e)
    return got if got is not None and got[1].op == K.REDUCE and got[1].arg == "max" else None


def online_softmax(kern: Kernel) -> Kernel:
    """`kern` with each foldable (max, sum) pair one online_softmax REDUCE, its
    max and sum PROJECT nodes of it (a kernel named <name>_online); `kern`
    itself where nothing folds."""
    found = foldable(kern)
    if not found:
        return kern
    by_max = {id(f.max): f for f in found}
    by_sum = {id(f.sum): f for f in found}

    def deps(n: KNode) -> tuple:
        f = by_max.get(id(n))
        if f is not None:  # the pair's REDUCE, built where its max was, takes a and c
            return (f.value,) if f.factor is None else (f.value, f.factor)
        f = by_sum.get(id(n))
        return (f.max,) if f is not None else n.src

    roots = [x for _, v, ix in kern.stores for x in (v, *ix)]
    if kern.guard is not None:
        roots.append(kern.guard)
    b, new, pair = Builder(), {}, {}
    for n in topological(roots, deps):
        f = by_max.get(id(n))
        if f is not None:
            c = new[id(f.factor)] if f.factor is not None else b.const(1.0, n.dtype)
            pair[id(n)] = b.mk(K.REDUCE, n.dtype, (new[id(f.value)], c), arg=ONLINE)
            new[id(n)] = b.mk(K.PROJECT, n.dtype, (pair[id(n)],), arg="max")
        elif id(n) in by_sum:
            new[id(n)] = b.mk(K.PROJECT, n.dtype, (pair[id(by_sum[id(n)].max)],), arg="sum")
        else:
            new[id(n)] = b.mk(n.op, n.dtype, tuple(new[id(x)] for x in n.src), n.arg)
    stores = [(slot, new[id(v)], tuple(new[id(i)] for i in ix)) for slot, v, ix in kern.stores]
    guard = new[id(kern.guard)] if kern.guard is not None else None
    return replace(kern, name=f"{kern.name}_online", stores=stores, order=list(b.order), guard=guard)
