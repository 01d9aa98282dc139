"""Scalars of a symbolic plan in terms of a paired dim's half extent.

A paired kernel computes the points i and i + H along one dim (H half its
extent E), so that reads both lanes need are one load. In a specialized plan
E and the resize bounds are constants and index math folds. In a symbolic plan
(seed 001's fallback once the bounds keep changing) they are expressions of
the call's sizes; to fold the same way they are rewritten as exact affine
functions a * H + c, valid for every call that meets preconditions: the
guards, Bool scalar Vals evaluated at launch (the plain kernel runs where one
fails). E.g. the rotation `cat(t0[N//2:], t0[:N//2])`: with N = 2H, N // 2 is
H and the Python-style normalization of the bounds (`min(max(where(s < 0,
s + N, s), 0), N)`) folds to H for every H >= 1, so its preconditions are only
N even and N >= 2.

What cannot be decided for every H >= 1 (a min of H and 8, say) is decided
as it is at the call the plan is made for, and that outcome becomes a guard.
Guards are functions of the sizes and shape scalars only (the leaves of
extents and resize bounds, all in the input signature), so a launch prepared
for one signature stays right for every call of it.
"""
from __future__ import annotations

from typing import Callable

from ..ir import scalar as S
from ..ir.node import Op, Val

Form = tuple[int, int]  # (a, c): a * H + c

_INT_OPS = (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.CEILDIV, Op.REMAINDER, Op.NEG, Op.MINIMUM,
            Op.MAXIMUM, Op.WHERE, Op.ABS, Op.CAST)
_COMPARES = (Op.LT, Op.GE, Op.LE, Op.GT, Op.EQ, Op.NE)


class Halves:
    """Int scalars as forms a * H + c under `guards`, H = x // 2 with x the
    one leaf of the paired dim's extent E (checked: E's form is 2H, so E = x),
    or H = E // 2 where E is a constant. `shape_leaves` (by id) are the leaves
    whose values are part of the input signature; only they may appear in a
    form. With `relate`, such a leaf whose value at the plan's call is H or 2H
    is assumed to stay so (a guard): a slice point given as a scalar input, say."""

    def __init__(self, extent: Val, at: Callable[[Val], int], shape_leaves: dict[int, Val],
                 relate: bool = False):
        self.at = at
        self.shape_leaves = shape_leaves
        self.relate = relate
        self.guards: list[Val] = []
        self.forms: dict[int, tuple[Val, Form | None]] = {}
        self.never = False  # a guard that never holds was met: no paired kernel
        self.x = None
        if extent.op is Op.CONST:  # a static extent (a dim made static by its size-1 pieces, say)
            self.half = S.as_val(extent.arg // 2)
            self.h0 = max(1, extent.arg // 2)
            self.exact = extent.arg >= 2 and extent.arg % 2 == 0
            return
        xs = [x for x in S.leaves(extent) if x.dtype.is_int]
        self.exact = False
        if len(xs) != 1 or id(xs[0]) not in shape_leaves:
            return
        self.x = xs[0]
        self.half = S.floordiv(self.x, 2)
        self.h0 = max(1, at(self.x) // 2)  # H at the plan's call, for choices the forms leave open
        self._guard(S.scalar_op(Op.EQ, S.scalar_op(Op.REMAINDER, self.x, 2), 0))
        self._guard(S.scalar_op(Op.GE, self.x, 2))
        self.forms[id(self.x)] = (self.x, (2, 0))
        self.exact = self.form(extent) == (2, 0)

    @property
    def ok(self) -> bool:
        """Does a paired kernel built on these forms hold where the guards do?"""
        return self.exact and not self.never

    def relatable(self) -> bool:
        """Is a shape leaf other than x H or 2H at the plan's call (may `relate` matter)?"""
        return any(v is not self.x and v.dtype.is_int and self.at(v) in (self.h0, 2 * self.h0)
                   for v in self.shape_leaves.values())

    # ------------------------------------------------------------ forms
    def form(self, v: Val) -> Form | None:
        """v as (a, c) with v == a * H + c wherever the guards hold, or None."""
        got = self.forms.get(id(v))
        if got is None:  # (the Val is kept with its form: its id is not reused while memoized)
            got = self.forms[id(v)] = (v, self._form(v) if v.is_scalar and v.dtype.is_int else None)
        return got[1]

    def _form(self, v: Val) -> Form | None:
        if v.op is Op.CONST:
            return (0, int(v.arg))
        if not v.src:
            return self._leaf(v)
        if v.op not in _INT_OPS:
            return None
        if v.op is Op.WHERE:
            cond = self.truth(v.src[0])
            return None if cond is None else self.form(v.src[1] if cond else v.src[2])
        fs = [self.form(s) for s in v.src]
        if any(f is None for f in fs):
            return None
        if v.op is Op.CAST:
            return fs[0]
        if v.op is Op.NEG:
            return (-fs[0][0], -fs[0][1])
        if v.op is Op.ABS:
            return fs[0] if self.nonneg(fs[0]) else (-fs[0][0], -fs[0][1])
        (a, c), (b, d) = fs
        if v.op is Op.ADD:
            return (a + b, c + d)
        if v.op is Op.SUB:
            return (a - b, c - d)
        if v.op is Op.MUL:
            return (a * d, c * d) if b == 0 else (b * c, c * d) if a == 0 else None
        if v.op in (Op.MINIMUM, Op.MAXIMUM):
            first = self.nonneg((b - a, d - c)) == (v.op is Op.MINIMUM)  # x <= y picks x for min
            return (a, c) if first else (b, d)
        if b != 0 or d == 0 or a % d:  # divisions by constants that divide H's coefficient
            return None
        if v.op is Op.DIV:
            return (a // d, c // d)
        if v.op is Op.CEILDIV:
            return (a // d, -((-c) // d))
        return (0, c % d)  # REMAINDER (floor semantics, as the kernels' hir_remainder)

    def _leaf(self, v: Val) -> Form | None:
        """A shape leaf other than x: related to H only where asked and its
        value at the plan's call is H or 2H."""
        if not self.relate or id(v) not in self.shape_leaves or not v.dtype.is_int:
            return None
        value = self.at(v)
        for a in (1, 2):
            if value == a * self.h0:
                self._guard(S.scalar_op(Op.EQ, v, self._val((a, 0))))
                return (a, 0)
        return None

    # ------------------------------------------------------------ predicates
    def truth(self, p: Val) -> bool | None:
        """A Bool scalar's value wherever the guards hold (adding one where
        only the plan's call decides it), or None."""
        if p.op is Op.CONST:
            return bool(p.arg)
        if p.op is Op.LOGICAL_NOT:
            t = self.truth(p.src[0])
            return None if t is None else not t
        if p.op in (Op.LOGICAL_AND, Op.LOGICAL_OR):
            ts = [self.truth(s) for s in p.src]
            return None if None in ts else (all(ts) if p.op is Op.LOGICAL_AND else any(ts))
        if p.op not in _COMPARES:
            return None
        fa, fb = self.form(p.src[0]), self.form(p.src[1])
        if fa is None or fb is None:
            return None
        (a, c), (b, d) = fa, fb
        if p.op in (Op.EQ, Op.NE):
            return self.zero((a - b, c - d)) == (p.op is Op.EQ)
        if p.op in (Op.LT, Op.GE):  # x < y: not x - y >= 0
            return self.nonneg((a - b, c - d)) == (p.op is Op.GE)
        return self.nonneg((b - a, d - c)) == (p.op is Op.LE)  # x <= y: y - x >= 0

    def nonneg(self, f: Form) -> bool:
        """Is a * H + c >= 0? Decided for every H >= 1 where the form allows,
        else as at the plan's call (a guard)."""
        a, c = f
        if a >= 0 and a + c >= 0:
            return True
        if a <= 0 and a + c < 0:
            return False
        holds = a * self.h0 + c >= 0
        self._guard(S.scalar_op(Op.GE if holds else Op.LT, self._val(f), 0))
        return holds

    def zero(self, f: Form) -> bool:
        """Is a * H + c == 0? As `nonneg`."""
        a, c = f
        if a == 0 or c % a or -c // a < 1:  # no H >= 1 where it changes
            return a == 0 and c == 0
        holds = a * self.h0 + c == 0
        self._guard(S.scalar_op(Op.EQ if holds else Op.NE, self._val(f), 0))
        return holds

    # ------------------------------------------------------------ guards
    def _val(self, f: Form) -> Val:
        """The form as a scalar Val of x (what a guard evaluates at launch)."""
        a, c = f
        if a < 0:
            return S.sub(c, S.mul(self.half, -a))
        return S.add(S.mul(self.half, a), c)

    def _guard(self, g: Val) -> None:
        if g.op is Op.CONST:
            self.never = self.never or not g.arg
            return
        if not any(S.same(g, h) for h in self.guards):
            self.guards.append(g)
