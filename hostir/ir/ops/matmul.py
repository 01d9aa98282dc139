"""matmul and linear: the reduction axis K comes last in the output's domain.
They run through ATen (no generated kernel)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import scalar as S
from ..errors import DefinitionError, UnsupportedError
from ..node import REDUCED, Axis, AxisKind, Family, Op, OpDef, Val, define
from .common import broadcast_axes, check_same_extent, describe, frontend, require_tensor


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
