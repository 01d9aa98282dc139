"""Resize ops: slice, pad, cat. Their bounds are scalar sources that
concretization compiles in by default (`bounds`); their index maps add
offsets (slice), subtract them under a predicate (pad) and pick a piece by
range (cat), per use (DESIGN rule 1)."""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from .. import scalar as S
from ..dtypes import compute_dtype, promote
from ..errors import DefinitionError, ExecutionError, UnsupportedError
from ..node import ZERO, AxisKind, Family, Op, OpDef, Val, define
from ..printer import scalar_text
from .common import (bound_arg, check_same_extent, describe, extent_agreement, extent_text, frontend, iter_axis,
                     norm_dim, require_tensor, same_extent, scalars)
from .pointwise import cast


def _list(vals, namer) -> str:
    return "[" + ", ".join(scalar_text(v, namer) for v in vals) + "]"


# ---------------------------------------------------------------- slice

def _normalize_index(i: Val, extent: Val) -> Val:
    """Python semantics: negative counts from the end; clamp to [0, extent]."""
    if S.is_const(i, 0):
        return i
    if S.is_const(i) and i.arg >= 0:
        return i if S.is_const(extent) and i.arg <= extent.arg else S.smin(i, extent)
    wrapped = S.where(S.lt(i, 0), S.add(i, extent), i)
    return S.smin(S.smax(wrapped, 0), extent)


@frontend("slice")
def slice_(t: Val, start_indices, end_indices, strides=None, manual_normalization: bool = False) -> Val:
    """nvFuser's slice. Indices are normalized as Python's (negative from the
    end, clamped to the extent); `manual_normalization=True` says the caller
    already did, so a negative static index is then an error."""
    t = require_tensor("slice", t)
    n = t.ndim
    if manual_normalization:
        for x in (*start_indices, *end_indices):
            if isinstance(x, int) and not isinstance(x, bool) and x < 0:
                raise DefinitionError(f"slice of {describe(t)}: index {x} is negative but "
                                      f"manual_normalization=True takes normalized indices")
    if len(start_indices) != n or len(end_indices) != n:
        raise DefinitionError(
            f"slice: {describe(t)} has {n} dims but got {len(start_indices)} start indices "
            f"and {len(end_indices)} end indices")
    strides = [1] * n if strides is None else list(strides)
    if len(strides) != n:
        raise DefinitionError(f"slice: {describe(t)} has {n} dims but got {len(strides)} strides")
    for s in strides:
        if not isinstance(s, int) or isinstance(s, bool) or s < 1:
            raise UnsupportedError(f"slice: strides must be positive Python ints, got {strides}")
    starts, stops = [], []
    for d, ax in enumerate(t.logical):
        lo = _normalize_index(bound_arg("slice", start_indices[d]), ax.extent)
        hi = S.smax(_normalize_index(bound_arg("slice", end_indices[d]), ax.extent), lo)
        if S.is_const(lo) and S.is_const(hi) and hi.arg < lo.arg:
            hi = lo
        starts.append(lo)
        stops.append(hi)
    return slice_raw(t, starts + stops, tuple(strides))


def slice_raw(t: Val, bounds, steps: tuple[int, ...]) -> Val:
    """A slice from normalized bounds (starts then stops, in [0, extent])."""
    n = t.ndim
    starts, stops = list(bounds[:n]), list(bounds[n:])
    axes = []
    for d, ax in enumerate(t.logical):
        lo, hi = starts[d], stops[d]
        if S.is_const(lo, 0) and hi is ax.extent and steps[d] == 1:
            axes.append(ax)
        else:
            axes.append(iter_axis(S.ceildiv(S.sub(hi, lo), steps[d])))
    return Val(Op.SLICE, t.dtype, (t, *starts, *stops), arg=tuple(steps), axes=tuple(axes))


def _slice_view(v: Val, t, env):
    n = v.src[0].ndim
    lo, hi = scalars(env, v.src[1:1 + n]), scalars(env, v.src[1 + n:])
    return t[tuple(slice(a, b, st) for a, b, st in zip(lo, hi, v.arg))]


def _slice_text(v: Val, n) -> str:
    k = v.src[0].ndim
    return (f"slice({n(v.src[0])}, starts={_list(v.src[1:1 + k], n)}, "
            f"stops={_list(v.src[1 + k:], n)}, strides={list(v.arg)})")


def _slice_index(v: Val, ix, L):
    b, starts = L.b, v.src[1:1 + v.src[0].ndim]
    return tuple(b.add(L.scalar(st), b.mul(i, b.i(step))) for st, i, step in zip(starts, ix, v.arg))


def _full_slice(v: Val) -> bool:
    x, n = v.src[0], v.src[0].ndim
    return all(S.is_const(lo, 0) and same_extent(hi, ax.extent) and st == 1
               for lo, hi, st, ax in zip(v.src[1:1 + n], v.src[1 + n:], v.arg, x.logical))


def _slice_dims(v: Val, k: int) -> tuple:
    """Dims taken whole keep their place; a dim cut has no counterpart."""
    if k:
        return ()
    x, n = v.src[0], v.src[0].ndim
    return tuple(d if (S.is_const(lo, 0) and same_extent(hi, ax.extent) and st == 1) else None
                 for d, (lo, hi, st, ax) in enumerate(zip(v.src[1:1 + n], v.src[1 + n:], v.arg,
                                                          x.logical)))


define(OpDef(Op.SLICE, Family.RESIZE, (1, None), build=slice_, dims=_slice_dims,
             rebuild=lambda v, src: slice_raw(src[0], src[1:], v.arg),
             view=_slice_view,
             text=_slice_text, kernel=lambda v, ix, pred, L: L.value(v.src[0], _slice_index(v, ix, L), pred),
             identity=_full_slice, bounds=lambda v: v.src[1:]))


# ---------------------------------------------------------------- pad

@frontend("pad")
def pad(t: Val, pad_widths, value=None) -> Val:
    """`pad_widths` in torch.nn.functional.pad order: last dim first, (left, right)."""
    t = require_tensor("pad", t)
    widths = list(pad_widths)
    if len(widths) % 2 or len(widths) > 2 * t.ndim:
        raise DefinitionError(
            f"pad: pad_widths must hold an even number of entries, at most 2 per dim "
            f"({2 * t.ndim} for {describe(t)}), got {len(widths)}")
    per_dim = [(ZERO, ZERO)] * t.ndim
    for k in range(len(widths) // 2):
        per_dim[t.ndim - 1 - k] = (bound_arg("pad", widths[2 * k]), bound_arg("pad", widths[2 * k + 1]))
    value = S.as_val(0 if value is None else value)
    if value.is_tensor:
        raise DefinitionError(f"pad: value must be a scalar, got {describe(value)}")
    for d, (ax, (lo, hi)) in enumerate(zip(t.logical, per_dim)):
        ext = S.add(S.add(ax.extent, lo), hi)
        if S.is_const(ext) and ext.arg < 0:
            raise DefinitionError(
                f"pad: dim {d} of {describe(t)} would get negative extent {ext.arg} "
                f"from widths ({lo.arg}, {hi.arg})")
    flat = [w for lr in per_dim for w in lr]
    return pad_raw(t, S.cast_scalar(value, t.dtype), flat)


def pad_raw(t: Val, value: Val, widths) -> Val:
    """A pad from its value (of t's dtype) and (left, right) widths per dim from dim 0."""
    axes = []
    for d, ax in enumerate(t.logical):
        lo, hi = widths[2 * d], widths[2 * d + 1]
        if S.is_const(lo, 0) and S.is_const(hi, 0):
            axes.append(ax)
        else:
            axes.append(iter_axis(S.add(S.add(ax.extent, lo), hi)))
    return Val(Op.PAD, t.dtype, (t, value, *widths), axes=tuple(axes))


def _pad_reference(v: Val, args, env):
    w = args[2:]
    torch_order = []
    for d in reversed(range(len(w) // 2)):
        torch_order += [w[2 * d], w[2 * d + 1]]
    return F.pad(args[0], torch_order, value=args[1])


def _pad_text(v: Val, n) -> str:
    w = v.src[2:]
    pairs = ", ".join(f"({scalar_text(w[2 * i], n)}, {scalar_text(w[2 * i + 1], n)})"
                      for i in range(len(w) // 2))
    return f"pad({n(v.src[0])}, widths=[{pairs}], value={scalar_text(v.src[1], n)})"


def _pad_kernel(v: Val, ix, pred, L):
    """Read the source at ix - left where inside it, else the pad value."""
    b, src, w = L.b, v.src[0], v.src[2:]
    inner, inside = [], None
    for d, ax in enumerate(src.logical):
        lo, hi = w[2 * d], w[2 * d + 1]
        if S.is_const(lo, 0) and S.is_const(hi, 0):
            inner.append(ix[d])
            continue
        i = b.sub(ix[d], L.scalar(lo))
        inner.append(i)
        inside = b.land(inside, b.land(b.cmp(Op.GE, i, b.i(0)), b.cmp(Op.LT, i, L.scalar(ax.extent))))
    if inside is None or b.is_const(inside, True):
        return L.value(src, tuple(inner), pred)
    if b.is_const(inside, False):
        return L.cast(L.scalar(v.src[1]), compute_dtype(v.dtype))
    val = L.value(src, tuple(inner), b.land(pred, inside))
    return b.where(inside, val, L.cast(L.scalar(v.src[1]), val.dtype))


def _pad_check(v: Val):
    """Negative widths may crop an axis below zero."""
    dims = [d for d, ax in enumerate(v.logical) if not (S.is_const(ax.extent) and ax.extent.arg >= 0)]
    if not dims:
        return None
    src = v.src[0]

    def check(env):
        for d in dims:
            n = env.scalar(v.logical[d].extent)
            if n < 0:
                w = scalars(env, v.src[2 + 2 * d:4 + 2 * d])
                raise ExecutionError(
                    f"pad -> {v!r}: dim {d} of {src!r} has extent "
                    f"{env.scalar(src.logical[d].extent)}; widths ({w[0]}, {w[1]}) "
                    f"would give it extent {n}")
    return check


define(OpDef(Op.PAD, Family.RESIZE, (2, None), build=pad,
             rebuild=lambda v, src: pad_raw(src[0], src[1], src[2:]),
             reference=_pad_reference, text=_pad_text, kernel=_pad_kernel,
             identity=lambda v: all(S.is_const(w, 0) for w in v.src[2:]),
             bounds=lambda v: v.src[2:], check=_pad_check,
             dims=lambda v, k: tuple(d if S.is_const(v.src[2 + 2 * d], 0) and S.is_const(v.src[3 + 2 * d], 0)
                                     else None for d in range(v.ndim)) if k == 0 else ()))


# ---------------------------------------------------------------- cat

@frontend("cat")
def cat(tensors: Sequence[Val], dim: int = 0, manual_padding: bool = False) -> Val:
    if not tensors:
        raise DefinitionError("cat: needs at least one tensor")
    tensors = [require_tensor("cat", t, "every input") for t in tensors]
    t0 = tensors[0]
    for t in tensors[1:]:
        if t.ndim != t0.ndim:
            raise DefinitionError(
                f"cat: all inputs must have the same number of dims: {describe(t0)} has {t0.ndim}, "
                f"{describe(t)} has {t.ndim}")
    d = norm_dim("cat", t0, dim)
    dtypes = {t.dtype for t in tensors}  # (one dtype stays: float8 would promote to Float)
    dtype = dtypes.pop() if len(dtypes) == 1 else promote([(t.dtype, True) for t in tensors])
    tensors = [cast(t, dtype) if t.dtype != dtype else t for t in tensors]
    axes = [None if i == d else _cat_axis(tensors, i) for i in range(t0.ndim)]
    for t in tensors:
        for i, ax in enumerate(t.logical):
            if i != d and ax.kind is AxisKind.BCAST and axes[i].kind is AxisKind.ITER:
                raise DefinitionError(
                    f"cat: dim {i} of {describe(t)} is a broadcast axis but other inputs have "
                    f"extent {extent_text(axes[i].extent)} there (cat does not broadcast)")
    axes[d] = iter_axis(S.total(t.logical[d].extent for t in tensors))
    return Val(Op.CAT, dtype, tuple(tensors), arg=d, axes=tuple(axes))


def _cat_axis(tensors, i: int):
    """Dim i of a cat's output, a dim the inputs must agree on."""
    ref = next((t for t in tensors if t.logical[i].kind is AxisKind.ITER), tensors[0])
    for t in tensors:
        if t.logical[i].kind is AxisKind.ITER:
            check_same_extent("cat", ref, i, t, i, ref.logical[i].extent, t.logical[i].extent)
    return ref.logical[i]


def _cat_check(v: Val):
    """The inputs agree on every dim but the cat dim at run time too (a static
    extent beside a symbolic one is compared per call)."""
    per_dim = [(i, [(s, s.logical[i].extent) for s in v.src if s.logical[i].kind is AxisKind.ITER])
               for i in range(v.ndim) if i != v.arg]
    return extent_agreement(v, per_dim, "cat")


def _cat_reference(v: Val, args, env):
    return torch.cat(args, dim=v.arg)


def _cat_kernel(v: Val, ix, pred, L):
    """Each piece where the index falls in its range along the cat dim."""
    b, c = L.b, v.arg
    offsets, off = [], b.i(0)
    for p in v.src:
        offsets.append(off)
        off = b.add(off, L.scalar(p.logical[c].extent))
    result = None
    for k in reversed(range(len(v.src))):
        sub = list(ix)
        sub[c] = b.sub(ix[c], offsets[k])
        lo_ok = b.cmp(Op.GE, ix[c], offsets[k]) if k > 0 else None
        hi_ok = b.cmp(Op.LT, ix[c], offsets[k + 1]) if k + 1 < len(v.src) else None
        in_range = b.land(lo_ok, hi_ok)
        if in_range is not None and b.is_const(in_range, False):
            continue  # this piece is never read at these indices
        val = L.cast(L.value(v.src[k], tuple(sub), b.land(pred, in_range)), compute_dtype(v.dtype))
        result = val if result is None else b.where(hi_ok, val, result)
    return result


define(OpDef(Op.CAT, Family.RESIZE, (1, None), build=cat,
             rebuild=lambda v, src: cat(list(src), v.arg), reference=_cat_reference,
             text=lambda v, n: f"cat({', '.join(n(s) for s in v.src)}, dim={v.arg})",
             kernel=_cat_kernel, identity=lambda v: len(v.src) == 1,
             dims=lambda v, k: tuple(None if d == v.arg else d for d in range(v.ndim)),
             bounds=lambda v: tuple(s.logical[v.arg].extent for s in v.src), check=_cat_check))
