"""Pre-segmentation simplifications. Each pass is `Fusion -> Fusion`, written as
a table of local rules (node -> replacement or None) applied by `substitute`."""
from __future__ import annotations

from ..ir import ops as O
from ..ir import scalar as S
from ..ir.dtypes import exact_cast
from ..ir.fusion import Fusion
from ..ir.node import OPS, Family, Op, Val
from ..ir.rewrite import rebuild, substitute, uses_of

# ------------------------------------------------------------ broadcast / squeeze


def _squeeze_of_broadcast(v: Val, ctx) -> Val | None:
    if v.op is not Op.SQUEEZE or v.src[0].op is not Op.BROADCAST:
        return None
    b = v.src[0]
    x = b.src[0]
    inserted = {i for i, f in enumerate(b.arg) if f}
    removed = set(v.arg)
    if removed == inserted:
        return x
    if removed < inserted:
        return O.broadcast(x, [f for i, f in enumerate(b.arg) if i not in removed])
    if inserted < removed:
        x_pos = {}
        k = 0
        for i, f in enumerate(b.arg):
            if not f:
                x_pos[i] = k
                k += 1
        return O.squeeze(x, [x_pos[i] for i in sorted(removed - inserted)], squeeze_expanded=True)
    return None


def _broadcast_of_squeeze(v: Val, ctx) -> Val | None:
    if v.op is not Op.BROADCAST or v.src[0].op is not Op.SQUEEZE:
        return None
    s = v.src[0]
    x = s.src[0]
    if len(v.arg) != x.ndim or {i for i, f in enumerate(v.arg) if f} != set(s.arg):
        return None
    if any(x.logical[d].is_expanded for d in s.arg):
        return None
    return x


def _elementwise_unary(v: Val) -> bool:
    """A unary pointwise op or a cast (not set: a set is kept where the user put it)."""
    d = OPS[v.op]
    return d.family is Family.POINTWISE and d.arity == (1, 1) and v.op is not Op.SET


def _leads_to(v: Val, op: Op) -> bool:
    """Does a chain of unary ops and casts starting at `v` reach an `op` node?"""
    while v.is_tensor:
        if v.op is op:
            return True
        if not _elementwise_unary(v):
            return False
        v = v.src[0]
    return False


def _fixpoint(v: Val, rules, ctx) -> Val:
    changed = True
    while changed:
        changed = False
        for rule in rules:
            r = rule(v, ctx)
            if r is not None and r is not v:
                v, changed = r, True
                break
    return v


def _swap_through_unary(v: Val, ctx) -> Val | None:
    """squeeze(u(y)) -> u(squeeze(y)) when y leads to a broadcast, and
    broadcast(u(y)) -> u(broadcast(y)) when y leads to a squeeze (seed 004):
    moves the view towards its inverse so that the pair cancels."""
    if v.op not in (Op.SQUEEZE, Op.BROADCAST):
        return None
    u = v.src[0]
    if not _elementwise_unary(u) or u.is_scalar or uses_of(u, ctx) != 1:
        return None
    inverse = Op.BROADCAST if v.op is Op.SQUEEZE else Op.SQUEEZE
    if not _leads_to(u.src[0], inverse):
        return None
    inner = rebuild(v, (u.src[0],))
    inner = _fixpoint(inner, BCAST_SQUEEZE_RULES, ctx)
    return rebuild(u, (inner,))


BCAST_SQUEEZE_RULES = (_squeeze_of_broadcast, _broadcast_of_squeeze, _swap_through_unary)


def _apply(rules):
    def rule(v, ctx):
        for r in rules:
            out = r(v, ctx)
            if out is not None and out is not v:
                return out
        return None
    return rule


def remove_bcast_squeeze(fusion: Fusion) -> Fusion:
    """Cancel broadcast->squeeze pairs, also across unary ops and casts."""
    return substitute(fusion, _apply(BCAST_SQUEEZE_RULES))


# ------------------------------------------------------------ casts

def _cast_rule(v: Val, ctx) -> Val | None:
    if v.op is not Op.CAST:
        return None
    x = v.src[0]
    if x.dtype is v.dtype:
        return x
    if x.op is Op.CAST and exact_cast(x.src[0].dtype, x.dtype):
        inner = x.src[0]
        return inner if inner.dtype is v.dtype else O.cast(inner, v.dtype)
    return None


def fold_casts(fusion: Fusion) -> Fusion:
    """Drop no-op casts; fold cast chains whose middle step is exact
    (bf16 -> float -> bf16 is the identity; float -> bf16 -> float is not)."""
    return substitute(fusion, _cast_rule)


# ------------------------------------------------------------ trivial resizes and reshapes


def _trivial_rule(v: Val, ctx) -> Val | None:
    if not v.is_tensor or not v.src or not v.src[0].is_tensor:
        return None
    identity = OPS[v.op].identity
    return v.src[0] if identity is not None and identity(v) else None


def drop_trivial_ops(fusion: Fusion) -> Fusion:
    """Remove zero pads, full slices, one-input cats, identity permutes and
    reshapes/expands that change nothing."""
    return substitute(fusion, _trivial_rule)


# ------------------------------------------------------------ empty tensors


def _empty_rule(v: Val, ctx) -> Val | None:
    if not v.is_tensor or v.op in (Op.FULL, Op.TENSOR_INPUT) or OPS[v.op].results is not None:
        return None  # (a tuple of results stays: its RESULT nodes are replaced instead)
    shape = [a.extent for a in v.logical]
    if any(S.is_const(e, 0) for e in shape):
        return O.full(shape, 0, v.dtype).renamed(v.name)
    if v.op is Op.SUM and any(a.is_reduction and S.is_const(a.extent, 0) for a in v.axes):
        return O.full(shape, 0, v.dtype).renamed(v.name)
    return None


def remove_empty_tensors(fusion: Fusion) -> Fusion:
    """Tensors with a static zero extent (and sums over one) become `full`."""
    return substitute(fusion, _empty_rule)
