"""View ops: broadcast, squeeze, expand, permute, reshape (and the composite
broadcast_in_dim). Each reindexes its input; alias analysis makes them torch
views where the layout allows (`view`), kernels read through their index maps."""
from __future__ import annotations

from typing import Sequence

from .. import scalar as S
from ..errors import DefinitionError, ExecutionError
from ..node import ONE, Axis, AxisKind, Family, Op, OpDef, Val, const, define
from ..printer import scalar_text
from .common import (check_same_extent, describe, extent_agreement, extent_text, frontend,
                     iter_axis, norm_dim, norm_dims, require_tensor, same_dims, same_extent,
                     shape_arg)


def _list(vals, namer) -> str:
    return "[" + ", ".join(scalar_text(v, namer) for v in vals) + "]"


def _through(fn):
    """A kernel rule from an index map: `fn(v, ix, L)` gives the source's index."""
    def kernel(v, ix, pred, L):
        return L.value(v.src[0], fn(v, ix, L), pred)
    return kernel


# ---------------------------------------------------------------- broadcast

@frontend("broadcast")
def broadcast(t: Val, is_broadcast_dim: Sequence[bool]) -> Val:
    t = require_tensor("broadcast", t)
    flags = tuple(bool(f) for f in is_broadcast_dim)
    if sum(not f for f in flags) != t.ndim:
        raise DefinitionError(
            f"broadcast: is_broadcast_dim {list(is_broadcast_dim)} has {sum(not f for f in flags)} "
            f"False entries but {describe(t)} has {t.ndim} dims (expected one False per input dim)")
    it = iter(t.logical)
    axes = tuple(Axis(ONE, AxisKind.BCAST) if f else next(it) for f in flags)
    return Val(Op.BROADCAST, t.dtype, (t,), arg=flags, axes=axes)


def _unsqueeze(v, t, env):
    for d, f in enumerate(v.arg):
        if f:
            t = t.unsqueeze(d)
    return t


define(OpDef(Op.BROADCAST, Family.VIEW, build=broadcast,
             rebuild=lambda v, src: broadcast(src[0], v.arg),
             view=_unsqueeze, dims=lambda v, k: tuple(i for i, f in enumerate(v.arg) if not f),
             text=lambda v, n: f"broadcast({n(v.src[0])}, is_broadcast_dim={list(v.arg)})",
             kernel=_through(lambda v, ix, L: tuple(i for i, f in zip(ix, v.arg) if not f))))


# ---------------------------------------------------------------- squeeze

@frontend("squeeze")
def squeeze(t: Val, dims, squeeze_expanded: bool = False) -> Val:
    t = require_tensor("squeeze", t)
    dims = norm_dims("squeeze", t, dims)
    for d in dims:
        ax = t.logical[d]
        if ax.kind is not AxisKind.BCAST:
            raise DefinitionError(
                f"squeeze: dim {d} of {describe(t)} is not a broadcast axis "
                f"(extent {extent_text(ax.extent)}); only size-1 broadcast dims can be squeezed")
        if ax.is_expanded and not squeeze_expanded:
            raise DefinitionError(
                f"squeeze: dim {d} of {describe(t)} is expanded to {extent_text(ax.extent)}; "
                f"pass squeeze_expanded=True to drop it")
    axes = tuple(a for i, a in enumerate(t.logical) if i not in dims)
    return Val(Op.SQUEEZE, t.dtype, (t,), arg=tuple(sorted(dims)), axes=axes)


def _select0(v, t, env):
    for d in reversed(v.arg):
        t = t.select(d, 0)
    return t


def _squeeze_dims(v, k) -> tuple:
    if k:
        return ()
    out, i = [], 0
    for d in range(v.src[0].ndim):
        out.append(None if d in v.arg else i)
        i += d not in v.arg
    return tuple(out)


def _squeeze_index(v, ix, L):
    it = iter(ix)
    return tuple(L.b.i(0) if d in v.arg else next(it) for d in range(v.src[0].ndim))


define(OpDef(Op.SQUEEZE, Family.VIEW, build=squeeze,
             rebuild=lambda v, src: squeeze(src[0], v.arg, squeeze_expanded=True),
             view=_select0, dims=_squeeze_dims,
             text=lambda v, n: f"squeeze({n(v.src[0])}, dims={list(v.arg)})",
             kernel=_through(_squeeze_index)))


# ---------------------------------------------------------------- expand

@frontend("expand")
def expand(t: Val, shape) -> Val:
    t = require_tensor("expand", t)
    shape = shape_arg("expand", shape)
    if len(shape) != t.ndim:
        raise DefinitionError(
            f"expand: shape has {len(shape)} entries but {describe(t)} has {t.ndim} dims")
    axes = [_expanded_axis(t, d, ax, e) for d, (ax, e) in enumerate(zip(t.logical, shape))]
    if all(a is b for a, b in zip(axes, t.logical)):
        return t
    return Val(Op.EXPAND, t.dtype, (t, *(a.extent for a in axes)), axes=tuple(axes))


def _expanded_axis(t: Val, d: int, ax: Axis, e: Val) -> Axis:
    if S.is_const(e, -1):
        return ax
    if ax.kind is AxisKind.BCAST:
        if S.is_const(e) and e.arg < 0:
            raise DefinitionError(f"expand: negative extent {e.arg} for dim {d} of {describe(t)}")
        return Axis(e, AxisKind.BCAST)
    if S.is_const(e) and S.is_const(ax.extent) and e.arg != ax.extent.arg:
        raise DefinitionError(
            f"expand: dim {d} of {describe(t)} has extent {ax.extent.arg} and is not a "
            f"broadcast axis; it cannot be expanded to {e.arg}")
    # a symbolic iteration dim keeps the requested extent, checked at run time
    return ax if S.is_const(ax.extent) or e is ax.extent else Axis(e, AxisKind.ITER)


def _expand_check(v: Val):
    per_dim = [(d, [(v.src[0], a.extent), (v, b.extent)])
               for d, (a, b) in enumerate(zip(v.src[0].logical, v.logical))
               if a.kind is AxisKind.ITER]
    return extent_agreement(v, per_dim, "expand (from expand or broadcast_in_dim)")


def _same_shape(v: Val) -> bool:
    x = v.src[0]
    return x.ndim == v.ndim and all(a.kind is b.kind and same_extent(a.extent, b.extent)
                                    for a, b in zip(x.logical, v.logical))


def _view_text(v, n):
    return f"{v.op.value}({n(v.src[0])}, shape={_list(v.src[1:], n)})"


define(OpDef(Op.EXPAND, Family.VIEW, (1, None), build=expand,
             rebuild=lambda v, src: expand(src[0], list(src[1:])),
             view=lambda v, t, env: t.expand(env.extents(v.logical)), text=_view_text,
             kernel=_through(lambda v, ix, L: tuple(
                 L.b.i(0) if a.kind is AxisKind.BCAST else i for a, i in zip(v.src[0].logical, ix))),
             identity=_same_shape, check=_expand_check, dims=same_dims))


@frontend("broadcast_in_dim")
def broadcast_in_dim(t: Val, shape, broadcast_dims: Sequence[int]) -> Val:
    t = require_tensor("broadcast_in_dim", t)
    shape = shape_arg("broadcast_in_dim", shape)
    bdims = list(broadcast_dims)
    if len(bdims) != t.ndim:
        raise DefinitionError(
            f"broadcast_in_dim: broadcast_dims {bdims} has {len(bdims)} entries but {describe(t)} "
            f"has {t.ndim} dims")
    bdims = [norm_dim("broadcast_in_dim", t, d, len(shape)) for d in bdims]
    if any(b <= a for a, b in zip(bdims, bdims[1:])):
        raise DefinitionError(f"broadcast_in_dim: broadcast_dims must be increasing, got {list(broadcast_dims)}")
    flags = [True] * len(shape)
    for d in bdims:
        flags[d] = False
    out = broadcast(t, flags) if any(flags) else t
    targets = []
    for d, e in enumerate(shape):
        ax = out.logical[d]
        if ax.kind is AxisKind.BCAST and not S.is_const(e, 1) and not S.is_const(e, -1):
            targets.append(e)
        elif not flags[d] and ax.kind is AxisKind.ITER:
            check_same_extent("broadcast_in_dim", t, bdims.index(d), t, bdims.index(d),
                              ax.extent, e if not S.is_const(e, -1) else ax.extent)
            targets.append(e)
        else:
            targets.append(const(-1))
    return expand(out, targets)


# ---------------------------------------------------------------- permute

@frontend("permute")
def permute(t: Val, dims: Sequence[int]) -> Val:
    t = require_tensor("permute", t)
    nd = norm_dims("permute", t, list(dims))
    if sorted(nd) != list(range(t.ndim)):
        raise DefinitionError(
            f"permute: dims {list(dims)} is not a permutation of the {t.ndim} dims of {describe(t)}")
    return Val(Op.PERMUTE, t.dtype, (t,), arg=nd, axes=tuple(t.logical[d] for d in nd))


def _permute_index(v, ix, L):
    inner = [None] * len(ix)
    for i, d in enumerate(v.arg):
        inner[d] = ix[i]
    return tuple(inner)


define(OpDef(Op.PERMUTE, Family.VIEW, build=permute,
             rebuild=lambda v, src: permute(src[0], v.arg),
             view=lambda v, t, env: t.permute(v.arg),
             text=lambda v, n: f"permute({n(v.src[0])}, dims={list(v.arg)})",
             kernel=_through(_permute_index), identity=lambda v: list(v.arg) == list(range(v.ndim)),
             dims=lambda v, k: tuple(v.arg.index(d) for d in range(v.ndim)) if k == 0 else ()))


# ---------------------------------------------------------------- reshape

@frontend("reshape")
def reshape(t: Val, new_shape) -> Val:
    t = require_tensor("reshape", t)
    shape = shape_arg("reshape", new_shape)
    infer = [i for i, e in enumerate(shape) if S.is_const(e, -1)]
    if len(infer) > 1:
        raise DefinitionError(f"reshape: at most one -1 in new_shape, got {list(new_shape)}")
    for e in shape:
        if S.is_const(e) and e.arg < -1:
            raise DefinitionError(f"reshape: invalid extent {e.arg} in new_shape {list(new_shape)}")
    numel = S.product(a.extent for a in t.logical)
    known = S.product(e for i, e in enumerate(shape) if i not in infer)
    if infer:
        if S.is_const(numel) and S.is_const(known) and (known.arg == 0 or numel.arg % known.arg):
            raise DefinitionError(
                f"reshape: cannot infer the -1 in new_shape {list(new_shape)} for {describe(t)} "
                f"with {numel.arg} elements")
        shape[infer[0]] = S.floordiv(numel, known)
    elif S.is_const(numel) and S.is_const(known) and numel.arg != known.arg:
        raise DefinitionError(
            f"reshape: {describe(t)} has {numel.arg} elements but new_shape {list(new_shape)} "
            f"has {known.arg}")
    return Val(Op.RESHAPE, t.dtype, (t, *shape), axes=tuple(iter_axis(e) for e in shape))


def _reshape_index(v, ix, L):
    """Linearize over the output's extents, delinearize over the input's."""
    b = L.b
    lin = b.i(0)
    for i, ax in zip(ix, v.logical):
        lin = b.add(b.mul(lin, L.scalar(ax.extent)), i)
    inner = []
    for ax in reversed(v.src[0].logical):
        e = L.scalar(ax.extent)
        inner.append(b.mod(lin, e))
        lin = b.floordiv(lin, e)
    return tuple(reversed(inner))


def _reshape_check(v: Val):
    src = v.src[0]

    def check(env):
        old, new = env.extents(src.logical), env.extents(v.logical)
        n_old, n_new = _prod(old), _prod(new)
        if n_old != n_new:
            raise ExecutionError(
                f"reshape -> {v!r}: {src!r} of shape {old} has {n_old} elements but "
                f"the new shape {new} has {n_new}")
    return check


def _prod(xs):
    out = 1
    for x in xs:
        out *= x
    return out


define(OpDef(Op.RESHAPE, Family.VIEW, (1, None), build=reshape,
             rebuild=lambda v, src: reshape(src[0], list(src[1:])),
             reference=lambda v, args, env: args[0].reshape(env.extents(v.logical)),
             view=lambda v, t, env: t.view(env.extents(v.logical)), text=_view_text,
             kernel=_through(_reshape_index), identity=_same_shape, check=_reshape_check,
             dims=lambda v, k: (same_dims(v, k) if _same_shape(v) else (None,) * v.src[0].ndim)
             if k == 0 else ()))
