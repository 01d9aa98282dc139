"""Factories: tensors made from scalars (full, iota)."""
from __future__ import annotations

import torch

from .. import scalar as S
from ..dtypes import DataType, compute_dtype
from ..errors import DefinitionError
from ..node import Axis, AxisKind, Family, Op, OpDef, Val, define
from ..printer import scalar_text
from .common import bound_arg, frontend, iter_axis, shape_arg


@frontend("full")
def full(shape, fill_value, dtype: DataType) -> Val:
    shape = shape_arg("full", shape)
    if dtype in (None, DataType.Null):
        raise DefinitionError("full: dtype is required")
    for e in shape:
        if S.is_const(e) and e.arg < 0:
            raise DefinitionError(f"full: negative extent {e.arg} in shape")
    fill = S.cast_scalar(S.as_val(fill_value), dtype)
    return Val(Op.FULL, dtype, (fill, *shape), axes=tuple(iter_axis(e) for e in shape))


def _full_text(v: Val, n) -> str:
    shape = ", ".join(scalar_text(e, n) for e in v.src[1:])
    return f"full(shape=[{shape}], fill={scalar_text(v.src[0], n)})"


define(OpDef(Op.FULL, Family.FACTORY, (1, None), build=full,
             rebuild=lambda v, src: full(list(src[1:]), src[0], v.dtype),
             reference=lambda v, args, env: torch.full(env.extents(v.logical), args[0],
                                                       dtype=v.dtype.torch, device=env.device),
             text=_full_text, dims=lambda v, k: (),
             kernel=lambda v, ix, pred, L: L.rounded(L.scalar(v.src[0]), v.dtype)))


@frontend("iota")
def iota(length, start=None, step=None, dtype: DataType = DataType.Int) -> Val:
    length = bound_arg("iota", length)
    if isinstance(dtype, DataType) and dtype.is_complex:  # (nvFuser: integer or floating types)
        raise DefinitionError(f"iota: dtype must be an integer or floating type, got {dtype!r}")
    start = S.cast_scalar(S.as_val(0 if start is None else start), dtype)
    step = S.cast_scalar(S.as_val(1 if step is None else step), dtype)
    return Val(Op.IOTA, dtype, (length, start, step), axes=(Axis(length, AxisKind.ITER),))


def _iota_reference(v: Val, args, env):
    n, start, step = args
    return torch.arange(n, device=env.device, dtype=v.dtype.torch) * step + start


def _iota_kernel(v: Val, ix, pred, L):
    c = compute_dtype(v.dtype)
    start, step = (L.cast(L.scalar(s), c) for s in v.src[1:])
    b = L.b
    return L.rounded(b.mk(Op.ADD, c, (start, b.mk(Op.MUL, c, (L.cast(ix[0], c), step)))), v.dtype)


define(OpDef(Op.IOTA, Family.FACTORY, (3, 3), build=iota,
             rebuild=lambda v, src: iota(src[0], src[1], src[2], v.dtype),
             reference=_iota_reference, kernel=_iota_kernel, dims=lambda v, k: ()))
