"""matmul and linear: the reduction axis K comes last in the output's domain.
They run through ATen (no generated kernel)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import scalar as S
from ..dtypes import DataType
from ..errors import DefinitionError, ExecutionError, UnsupportedError
from ..node import REDUCED, Axis, AxisKind, Family, Op, OpDef, Val, define
from .common import broadcast_axes, check_same_extent, describe, frontend, iter_axis, require_tensor


def _float_operands(opname: str, *vals: Val):
    for v in vals:
        if not v.dtype.is_float:
            raise UnsupportedError(f"{opname}: operands must be floating point, got {describe(v)}")
        if v.dtype.is_float8:  # (ATen multiplies float8 only scaled, torch._scaled_mm)
            raise DefinitionError(f"{opname}: float8 operand {describe(v)}; cast it to a wider "
                                  f"float first")
    if len({v.dtype for v in vals}) != 1:
        raise DefinitionError(
            f"{opname}: operands must have the same dtype, got "
            + ", ".join(describe(v) for v in vals))


@frontend("matmul")
def matmul(a: Val, b: Val) -> Val:
    a = require_tensor("matmul", a, "first operand")
    b = require_tensor("matmul", b, "second operand")
    _float_operands("matmul", a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise DefinitionError(f"matmul: operands must have at least 1 dim, got {describe(a)} and {describe(b)}")
    ka = a.logical[-1]
    kb = b.logical[-1] if b.ndim == 1 else b.logical[-2]
    check_same_extent("matmul", a, a.ndim - 1, b, max(b.ndim - 2, 0), ka.extent, kb.extent)
    batch = _broadcast_batch(a, b)
    rows = (a.logical[-2],) if a.ndim >= 2 else ()
    cols = (b.logical[-1],) if b.ndim >= 2 else ()
    k = ka if ka.kind is AxisKind.ITER else kb
    axes = batch + rows + cols + (Axis(k.extent, AxisKind.REDUCE),)
    return Val(Op.MATMUL, a.dtype, (a, b), axes=axes)


def _broadcast_batch(a: Val, b: Val) -> tuple[Axis, ...]:
    """The batch dims of a matmul: those before the last two, broadcast."""
    batch_a = a.logical[:-2] if a.ndim >= 2 else ()
    batch_b = b.logical[:-2] if b.ndim >= 2 else ()
    if not batch_a and not batch_b:
        return ()
    fa = Val(Op.CONST, a.dtype, axes=batch_a, name=a.name)
    fb = Val(Op.CONST, b.dtype, axes=batch_b, name=b.name)
    return broadcast_axes("matmul", [x for x in (fa, fb) if x.ndim])


def _matmul_dims(v: Val, k: int) -> tuple:
    """Batch dims align from the right; a's rows and b's columns keep their
    place; the contracted dim K is REDUCED."""
    a, b = v.src
    n = v.ndim
    cols = n - 1 if b.ndim >= 2 else None
    rows = (n - 2 if b.ndim >= 2 else n - 1) if a.ndim >= 2 else None
    batch_end = (rows if rows is not None else cols if cols is not None else n)
    t = v.src[k]
    if t.ndim == 1:
        return (REDUCED,)
    batch = tuple(range(batch_end - (t.ndim - 2), batch_end))
    return batch + ((rows, REDUCED) if k == 0 else (REDUCED, cols))


def _matmul_into(v: Val, args, out) -> bool:
    a, b = args
    if a.ndim != 2 or b.ndim != 2 or out.dtype != a.dtype or out.stride(-1) != 1:
        return False
    torch.mm(a, b, out=out)
    return True


define(OpDef(Op.MATMUL, Family.MATMUL, (2, 2), build=matmul, rebuild=lambda v, src: matmul(*src),
             reference=lambda v, args, env: torch.matmul(args[0], args[1]), into=_matmul_into,
             dims=_matmul_dims, partial="sum"))


@frontend("linear")
def linear(a: Val, w: Val, bias: Val | None = None) -> Val:
    a = require_tensor("linear", a, "input")
    w = require_tensor("linear", w, "weight")
    _float_operands("linear", a, w, *([bias] if bias is not None else []))
    if a.ndim == 0 or w.ndim not in (1, 2):
        raise DefinitionError(
            f"linear: expected input with >= 1 dims and weight with 1 or 2 dims, got "
            f"{describe(a)} and {describe(w)}")
    check_same_extent("linear", a, a.ndim - 1, w, w.ndim - 1, a.logical[-1].extent, w.logical[-1].extent)
    out_axes = a.logical[:-1] + ((w.logical[0],) if w.ndim == 2 else ())
    if bias is not None:
        bias = require_tensor("linear", bias, "bias")
        if bias.ndim > 1 or (bias.ndim == 1 and w.ndim == 2 and S.is_const(bias.logical[0].extent)
                             and S.is_const(w.logical[0].extent)
                             and bias.logical[0].extent.arg != w.logical[0].extent.arg):
            raise DefinitionError(
                f"linear: bias {describe(bias)} does not match weight {describe(w)} "
                f"(expected a 1-D bias of the weight's out-features)")
    axes = out_axes + (Axis(a.logical[-1].extent, AxisKind.REDUCE),)
    src = (a, w) if bias is None else (a, w, bias)
    return Val(Op.LINEAR, a.dtype, src, axes=axes)


def _linear_reference(v: Val, args, env):
    x, w, bias = args[0], args[1], args[2] if len(args) > 2 else None
    if bias is not None and w.ndim == 1:  # F.linear refuses a bias with a 1-D weight
        return F.linear(x, w) + bias
    return F.linear(x, w, bias)


def _linear_dims(v: Val, k: int) -> tuple:
    """Input [..., K], weight [N, K] (or [K]), bias [N]: K is REDUCED."""
    t, n = v.src[k], v.ndim
    if k == 0:
        return tuple(range(t.ndim - 1)) + (REDUCED,)
    if k == 1:
        return (n - 1, REDUCED) if t.ndim == 2 else (REDUCED,)
    return (n - 1,) if t.ndim == 1 else ()


def _linear_into(v: Val, args, out) -> bool:
    """2-D input and weight: one GEMM writing straight into `out` (a row block, say)."""
    x, w = args[0], args[1]
    if x.ndim != 2 or w.ndim != 2 or out.dtype != x.dtype or out.stride(-1) != 1:
        return False
    if len(args) > 2:
        torch.addmm(args[2], x, w.t(), out=out)
    else:
        torch.mm(x, w.t(), out=out)
    return True


define(OpDef(Op.LINEAR, Family.MATMUL, (2, 3), build=linear, rebuild=lambda v, src: linear(*src),
             reference=_linear_reference, into=_linear_into, dims=_linear_dims, partial="sum"))


# ------------------------------------------------------------------ grouped_mm

@frontend("grouped_mm")
def grouped_mm(mat1: Val, mat2: Val, offsets: Val, scale1=None, scale2=None, dtype=None) -> Val:
    """nvFuser's grouped_mm (torch._grouped_mm): G matmuls, group g's rows,
    columns or contracted points being those from offsets[g - 1] to offsets[g]
    (offsets: G ascending Int32 ends, the first group starting at 0):
    - mat1 [M, K], mat2 [G, K, N]: rows of mat1 grouped, out [M, N];
    - mat1 [G, M, K], mat2 [K, N]: columns of mat2 grouped, out [M, N];
    - mat1 [M, K], mat2 [K, N]: the contracted points grouped, out [G, M, N].
    Through ATen, not a generated kernel. The scaled form (scale1, scale2:
    block-scaled float8 or float4 operands) is not supported."""
    if scale1 is not None or scale2 is not None or dtype is not None:
        raise UnsupportedError("grouped_mm: the scaled form (scale1, scale2, dtype: block-scaled float8 or "
                               "float4 operands) is not supported; pass mat1, mat2 and offsets")
    a = require_tensor("grouped_mm", mat1, "mat1")
    b = require_tensor("grouped_mm", mat2, "mat2")
    offs = require_tensor("grouped_mm", offsets, "offsets")
    _float_operands("grouped_mm", a, b)
    if offs.ndim != 1 or offs.dtype is not DataType.Int32:
        raise DefinitionError(f"grouped_mm: offsets {describe(offs)} must be a 1-D Int32 tensor of the "
                              f"groups' ends")
    if (a.ndim, b.ndim) not in ((2, 3), (3, 2), (2, 2)):
        raise DefinitionError(f"grouped_mm: mat1 {describe(a)} and mat2 {describe(b)}: expected ranks "
                              f"(2, 3), (3, 2) or (2, 2)")
    check_same_extent("grouped_mm", a, a.ndim - 1, b, b.ndim - 2, a.logical[-1].extent,
                      b.logical[-2].extent)
    groups = [(a, 0)] if a.ndim == 3 else [(b, 0)] if b.ndim == 3 else []
    for t, d in groups:  # mat1's or mat2's group dim has one entry per offset
        check_same_extent("grouped_mm", t, d, offs, 0, t.logical[d].extent, offs.logical[0].extent)
    return grouped_mm_node(a, b, offs)


def grouped_mm_node(a: Val, b: Val, offs: Val) -> Val:
    rows, cols = a.logical[-2], b.logical[-1]
    lead = (iter_axis(offs.logical[0].extent),) if a.ndim == 2 and b.ndim == 2 else ()
    axes = lead + tuple(Axis(x.extent, AxisKind.ITER) for x in (rows, cols))
    return Val(Op.GROUPED_MM, a.dtype, (a, b, offs), axes=axes)


def _grouped_mm_reference(v: Val, args, env):
    a, b, offs = args
    if env.checks_indices:
        _check_offsets(v, offs, a, b)
    return torch._grouped_mm(a, b, offs=offs)


def _check_offsets(v: Val, offs: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """offsets ascending from 0 up to the grouped extent (ATen reads past a
    tensor's end otherwise, or leaves rows unwritten)."""
    bound = a.shape[0] if b.ndim == 3 else b.shape[-1] if a.ndim == 3 else a.shape[-1]
    o = offs.to(torch.int64).cpu()
    prev = torch.cat([o.new_zeros(1), o[:-1]])
    bad = (o < prev) | (o > bound)
    if bool(bad.any()):
        g = int(bad.nonzero()[0])
        raise ExecutionError(f"grouped_mm -> {v!r}: offsets {v.src[2]!r}[{g}] = {int(o[g])} is out of "
                             f"order or past the grouped extent {bound} (offsets: {o.tolist()})")


def _grouped_mm_dims(v: Val, k: int) -> tuple:
    """Taken whole: the groups' bounds are data."""
    return (None,) * v.src[k].ndim


define(OpDef(Op.GROUPED_MM, Family.ATEN, (3, 3), build=grouped_mm,
             rebuild=lambda v, src: grouped_mm_node(*src), reference=_grouped_mm_reference,
             dims=_grouped_mm_dims))
