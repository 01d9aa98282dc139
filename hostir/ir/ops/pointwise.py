"""Pointwise ops: the table of unary and binary ops (one row per op: type
rule, Python and torch evaluation, CUDA spelling), their shared rules, and
where, cast and set.

Values compute as generated kernels do: operands converted to the op's
compute type (Float for Half/BFloat16), the result rounded to the node's type.
"""
from __future__ import annotations

import math
import operator
from functools import partial

import torch

from .. import scalar as S
from ..dtypes import DataType, cast_tensor, compute_dtype
from ..errors import DefinitionError, ExecutionError
from ..node import OPS, AxisKind, Family, Kind, Op, OpDef, Val, define
from ..printer import operand_text
from .common import (aligned_dims, broadcast_axes, describe, extent_agreement, frontend,
                     refuse_complex, require_tensor)


def _floordiv(a, b):
    """DIV: true division of floats, floor division of integers (torch)."""
    if isinstance(a, float) or isinstance(b, float):
        return a / b
    return a // b


def _torch_div(a, b):
    if a.dtype.is_floating_point or a.dtype.is_complex:
        return torch.div(a, b)
    return torch.div(a, b, rounding_mode="floor")


def _torch_ceildiv(a, b):
    return -torch.div(-a, b, rounding_mode="floor")


def _relu(x):
    return x if x > 0 else 0 * x


def _sign(x):
    return (x > 0) - (x < 0)


def _logical_rshift(a, b, bits: int):
    """a >> b with zeros shifted in (a read as unsigned of `bits` bits), as a signed value."""
    if isinstance(a, bool):
        return int(a) >> b
    if b >= bits:
        return 0
    u = (a % (1 << bits)) >> b
    return u - (1 << bits) if u >= 1 << (bits - 1) else u


def _torch_logical_rshift(a, b):
    bits = 8 * a.element_size()
    if a.dtype == torch.bool:
        return a.to(torch.int64) >> b
    b = torch.as_tensor(b, device=a.device).to(a.dtype)
    shifted = torch.bitwise_right_shift(a, b.clamp(0, bits - 1))
    mask = torch.bitwise_left_shift(torch.ones_like(shifted), (bits - b).clamp(0, bits - 1)) - 1
    out = torch.where(b == 0, a, shifted & mask)
    return torch.where(b >= bits, torch.zeros_like(out), out)


def _bitwise_not(x):
    return not x if isinstance(x, bool) else ~x  # ~True is -2


# op: (kind, Python evaluation, torch evaluation, CUDA format, printed symbol
#      [, C++ the CUDA format needs beyond kernels/hostir.cuh])
_K, _F, _B, _I, _R, _C = Kind.KEEP, Kind.FLOAT, Kind.BOOL, Kind.INTEGRAL, Kind.REAL, Kind.COMPLEX
UNARY_TABLE = {
    Op.NEG: (_K, operator.neg, torch.neg, "(-{0})", None),
    Op.ABS: (_R, abs, torch.abs, "hir_abs({0})", None),
    Op.RELU: (_K, _relu, torch.relu, "hir_relu({0})", None),
    Op.SIGN: (_K, _sign, torch.sign, "hir_sign({0})", None),
    Op.FLOOR: (_K, math.floor, torch.floor, "hir_floor({0})", None),
    Op.CEIL: (_K, math.ceil, torch.ceil, "hir_ceil({0})", None),
    Op.ROUND: (_K, lambda x: float(round(x)), torch.round, "hir_round({0})", None),
    Op.TRUNC: (_K, math.trunc, torch.trunc, "hir_trunc({0})", None),
    Op.EXP: (_F, math.exp, torch.exp, "hir_exp({0})", None),
    Op.EXP2: (_F, lambda x: 2.0 ** x, torch.exp2, "hir_exp2({0})", None),
    Op.EXPM1: (_F, math.expm1, torch.expm1, "hir_expm1({0})", None),
    Op.LOG: (_F, math.log, torch.log, "hir_log({0})", None),
    Op.LOG2: (_F, math.log2, torch.log2, "hir_log2({0})", None),
    Op.LOG10: (_F, math.log10, torch.log10, "hir_log10({0})", None),
    Op.LOG1P: (_F, math.log1p, torch.log1p, "hir_log1p({0})", None),
    Op.SQRT: (_F, math.sqrt, torch.sqrt, "hir_sqrt({0})", None),
    Op.RSQRT: (_F, lambda x: 1.0 / math.sqrt(x), torch.rsqrt, "hir_rsqrt({0})", None),
    Op.RECIPROCAL: (_F, lambda x: 1.0 / x, torch.reciprocal, "hir_reciprocal({0})", None),
    Op.TANH: (_F, math.tanh, torch.tanh, "hir_tanh({0})", None),
    Op.SIGMOID: (_F, lambda x: 1.0 / (1.0 + math.exp(-x)), torch.sigmoid, "hir_sigmoid({0})", None),
    Op.SIN: (_F, math.sin, torch.sin, "hir_sin({0})", None),
    Op.COS: (_F, math.cos, torch.cos, "hir_cos({0})", None),
    Op.TAN: (_F, math.tan, torch.tan, "hir_tan({0})", None),
    Op.ASIN: (_F, math.asin, torch.asin, "hir_asin({0})", None),
    Op.ACOS: (_F, math.acos, torch.acos, "hir_acos({0})", None),
    Op.ATAN: (_F, math.atan, torch.atan, "hir_atan({0})", None),
    Op.SINH: (_F, math.sinh, torch.sinh, "hir_sinh({0})", None),
    Op.COSH: (_F, math.cosh, torch.cosh, "hir_cosh({0})", None),
    Op.ERF: (_F, math.erf, torch.erf, "hir_erf({0})", None),
    Op.ERFC: (_F, math.erfc, torch.erfc, "hir_erfc({0})", None),
    Op.ISNAN: (_B, math.isnan, torch.isnan, "hir_isnan({0})", None),
    Op.ISINF: (_B, math.isinf, torch.isinf, "hir_isinf({0})", None),
    Op.ISFINITE: (_B, math.isfinite, torch.isfinite, "hir_isfinite({0})", None),
    Op.LOGICAL_NOT: (_B, operator.not_, torch.logical_not, "(!{0})", None),
    Op.BITWISE_NOT: (_I, _bitwise_not, torch.bitwise_not, "hir_bitwise_not({0})", None),
    Op.SIGNBIT: (_B, lambda x: math.copysign(1.0, x) < 0, torch.signbit, "hir_signbit({0})", None,
                 "template <typename T> __device__ __forceinline__ bool hir_signbit(T x) "
                 "{ return x < T(0); }\n"
                 "__device__ __forceinline__ bool hir_signbit(float x) { return signbit(x); }\n"
                 "__device__ __forceinline__ bool hir_signbit(double x) { return signbit(x); }"),
}
def _erfinv(x):
    return float(torch.erfinv(torch.tensor(float(x), dtype=torch.float64)))


def _erfcinv_torch(x):
    # erfc(y) = 2 * Phi(-y * sqrt(2)), so erfcinv(x) = -ndtri(x / 2) / sqrt(2): ndtri keeps
    # its precision for tiny x, where erfinv(1 - x) loses it in the subtraction. Above 1,
    # erfcinv(x) = -erfcinv(2 - x), 2 - x exact: ndtri near 1 would subtract from 1 too.
    upper = x > 1
    y = torch.special.ndtri(torch.where(upper, 2 - x, x) * 0.5) * -math.sqrt(0.5)
    return torch.where(upper, -y, y)


def _erfcinv(x):
    return float(_erfcinv_torch(torch.tensor(float(x), dtype=torch.float64)))


def _frac_torch(x):
    return torch.frac(x) if x.dtype.is_floating_point else torch.zeros_like(x)


UNARY_TABLE.update({
    Op.ACOSH: (_F, math.acosh, torch.acosh, "hir_acosh({0})", None),
    Op.ASINH: (_F, math.asinh, torch.asinh, "hir_asinh({0})", None),
    Op.ATANH: (_F, math.atanh, torch.atanh, "hir_atanh({0})", None),
    Op.ERFINV: (_F, _erfinv, torch.erfinv, "hir_erfinv({0})", None),
    Op.ERFCINV: (_F, _erfcinv, _erfcinv_torch, "hir_erfcinv({0})", None),
    Op.LGAMMA: (_F, math.lgamma, torch.lgamma, "hir_lgamma({0})", None),
    Op.FRAC: (_K, lambda x: x - math.trunc(x), _frac_torch, "hir_frac({0})", None),
    Op.SILU: (_F, lambda x: x / (1.0 + math.exp(-x)), torch.nn.functional.silu, "hir_silu({0})", None),
    Op.ISNEGINF: (_B, lambda x: math.isinf(x) and x < 0, torch.isneginf, "hir_isneginf({0})", None),
    Op.ISPOSINF: (_B, lambda x: math.isinf(x) and x > 0, torch.isposinf, "hir_isposinf({0})", None),
    # complex parts (real and imag of a complex value: its parts' type; kernels/hostir.cuh)
    Op.REAL: (_R, lambda x: x, torch.real, "hir_real({0})", None),
    Op.IMAG: (_R, lambda x: 0 * x, torch.imag, "hir_imag({0})", None),
    Op.ISREAL: (_B, lambda x: True, torch.isreal, "hir_isreal({0})", None),
})
BINARY_TABLE = {
    Op.ADD: (_K, operator.add, torch.add, "({0} + {1})", "+"),
    Op.SUB: (_K, operator.sub, torch.sub, "({0} - {1})", "-"),
    Op.MUL: (_K, operator.mul, torch.mul, "({0} * {1})", "*"),
    Op.DIV: (_K, _floordiv, _torch_div, "hir_div({0}, {1})", lambda dt: "/" if dt.is_inexact else "//"),
    Op.TRUEDIV: (_F, operator.truediv, torch.true_divide, "({0} / {1})", None),
    Op.FMOD: (_K, math.fmod, torch.fmod, "hir_fmod({0}, {1})", None),
    Op.REMAINDER: (_K, operator.mod, torch.remainder, "hir_remainder({0}, {1})", "%"),
    Op.POW: (_K, operator.pow, torch.pow, "hir_pow({0}, {1})", None),
    Op.ATAN2: (_F, math.atan2, torch.atan2, "hir_atan2({0}, {1})", None),
    Op.MAXIMUM: (_K, max, torch.maximum, "hir_max({0}, {1})", "max"),
    Op.MINIMUM: (_K, min, torch.minimum, "hir_min({0}, {1})", "min"),
    Op.CEILDIV: (_I, lambda a, b: -((-a) // b), _torch_ceildiv, "hir_ceildiv({0}, {1})", None),
    Op.LT: (_B, operator.lt, torch.lt, "({0} < {1})", "<"),
    Op.LE: (_B, operator.le, torch.le, "({0} <= {1})", "<="),
    Op.GT: (_B, operator.gt, torch.gt, "({0} > {1})", ">"),
    Op.GE: (_B, operator.ge, torch.ge, "({0} >= {1})", ">="),
    Op.EQ: (_B, operator.eq, torch.eq, "({0} == {1})", "=="),
    Op.NE: (_B, operator.ne, torch.ne, "({0} != {1})", "!="),
    Op.LOGICAL_AND: (_B, lambda a, b: bool(a) and bool(b), torch.logical_and, "({0} && {1})", None),
    Op.LOGICAL_OR: (_B, lambda a, b: bool(a) or bool(b), torch.logical_or, "({0} || {1})", None),
    Op.LOGICAL_XOR: (_B, lambda a, b: bool(a) != bool(b), torch.logical_xor,
                     "((bool)({0}) != (bool)({1}))", None),
    Op.BITWISE_AND: (_I, operator.and_, torch.bitwise_and, "({0} & {1})", None),
    Op.BITWISE_OR: (_I, operator.or_, torch.bitwise_or, "({0} | {1})", None),
    Op.BITWISE_XOR: (_I, operator.xor, torch.bitwise_xor, "({0} ^ {1})", None),
    Op.BITWISE_LEFT_SHIFT: (_I, operator.lshift, torch.bitwise_left_shift, "({0} << {1})", None),
    Op.BITWISE_RIGHT_SHIFT: (_I, operator.rshift, torch.bitwise_right_shift, "({0} >> {1})", None),
    Op.LOGICAL_RIGHT_SHIFT: (_I, lambda a, b: _logical_rshift(a, b, 64), _torch_logical_rshift,
                             "hir_logical_rshift({0}, {1})", None,
                             "template <typename T> __device__ __forceinline__ T hir_logical_rshift(T a, T b) {\n"
                             "  return b >= (T)(8 * sizeof(T)) ? T(0) : (T)((unsigned long long)a "
                             "<< (64 - 8 * sizeof(T)) >> (64 - 8 * sizeof(T)) >> b);\n}"),
    Op.GCD: (_I, math.gcd, torch.gcd, "hir_gcd({0}, {1})", None,
             "template <typename T> __device__ __forceinline__ T hir_gcd(T a, T b) {\n"
             "  a = a < 0 ? -a : a; b = b < 0 ? -b : b;\n"
             "  while (b != 0) { T r = a % b; a = b; b = r; }\n  return a;\n}"),
    Op.NEXTAFTER: (_K, math.nextafter, torch.nextafter, "hir_nextafter({0}, {1})", None,
                   "__device__ __forceinline__ float hir_nextafter(float a, float b) "
                   "{ return nextafterf(a, b); }\n"
                   "__device__ __forceinline__ double hir_nextafter(double a, double b) "
                   "{ return nextafter(a, b); }"),
    Op.COMPLEX: (_C, complex, torch.complex, "hir_complex_of({0}, {1})", None,
                 "template <typename T> __device__ __forceinline__ hir_complex<T> hir_complex_of(T re, T im) "
                 "{ return hir_complex<T>(re, im); }"),
}


# ---------------------------------------------------------------- shared rules

COMPLEX_OPS = frozenset({
    Op.NEG, Op.ABS, Op.EXP, Op.LOG, Op.SQRT, Op.RSQRT, Op.RECIPROCAL, Op.SIN, Op.COS, Op.TANH,
    Op.ISNAN, Op.ISINF, Op.ISFINITE, Op.LOGICAL_NOT, Op.REAL, Op.IMAG, Op.ISREAL,
    Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.TRUEDIV, Op.EQ, Op.NE,
    Op.LOGICAL_AND, Op.LOGICAL_OR, Op.LOGICAL_XOR, Op.WHERE,
})
"""The pointwise ops that take complex operands, with torch's meaning (generated
kernels compute them with kernels/hostir.cuh's hir_complex overloads)."""
_UNORDERED = frozenset({Op.LT, Op.LE, Op.GT, Op.GE, Op.MAXIMUM, Op.MINIMUM})


def _check_complex(op: Op, vals: list[Val]) -> None:
    """Complex operands only for COMPLEX_OPS, and only of a type they promote to."""
    if not any(v.dtype.is_complex for v in vals):
        return
    if op not in COMPLEX_OPS:
        why = "complex numbers have no order" if op in _UNORDERED else \
            f"{op.value} is not defined for complex values"
        refuse_complex(op.value, vals, f"{why} (complex operands take "
                                       f"{', '.join(sorted(o.value for o in COMPLEX_OPS))})")
    try:
        S.promote_vals(vals)
    except DefinitionError as e:
        raise DefinitionError(f"{op.value}: {e}") from None


def pointwise(op: Op, *operands) -> Val:
    """`op` applied to tensors and scalars (tensors broadcast like nvFuser's)."""
    opname = op.value
    vals = [S.as_val(v) for v in operands]
    _check_complex(op, vals)
    if op is Op.NEXTAFTER and any(v.dtype not in (DataType.Float, DataType.Double) for v in vals):
        # the next representable value of the operands' own type: computing in float
        # and rounding back to half or bfloat16 would give the operand itself
        raise DefinitionError(f"nextafter: operands must be float or double, got "
                              f"{', '.join(v.dtype.short for v in vals)}")
    if OPS[op].kind is Kind.INTEGRAL:
        for v in vals:
            if v.dtype.is_float:
                raise DefinitionError(
                    f"{opname}: operands must be integers or bools, got "
                    f"{describe(v) if v.is_tensor else repr(v)} of type {v.dtype.short}")
    tensors = [v for v in vals if v.is_tensor]
    if not tensors:
        return S.scalar_op(op, *vals)
    return Val(op, S.result_type(op, vals), tuple(vals), axes=broadcast_axes(opname, tensors))


def compute_type(v: Val) -> DataType:
    """The type a pointwise op computes in (generated kernels use it too)."""
    kind = OPS[v.op].kind
    if kind is not None:
        operand = S.promote_vals(v.src)
        if kind is Kind.FLOAT and not operand.is_inexact:
            operand = DataType.Float
        return compute_dtype(operand)
    return compute_dtype(v.dtype)


def as_tensor(x, dtype: torch.dtype, device) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.to(dtype)
    if torch.device(device).type == "cuda":  # a fill kernel: no host copy (CUDA graphs can hold it)
        return torch.full((), x, dtype=dtype, device=device)
    return torch.tensor(x, dtype=dtype, device=device)


def _check_operands(v: Val, args: list, env) -> None:
    """torch would silently broadcast a size-1 operand into an iteration axis."""
    out_shape = env.extents(v.logical)
    for s, a in zip(v.src, args):
        if not s.is_tensor:
            continue
        off = len(out_shape) - s.ndim
        for d, ax in enumerate(s.logical):
            if ax.kind is AxisKind.ITER and a.shape[d] != out_shape[off + d]:
                raise ExecutionError(
                    f"{v.op.value} -> {v!r}: dim {d} of operand {s!r} has extent {a.shape[d]} at run "
                    f"time, but the other operands give {out_shape[off + d]}")


def _reference(v: Val, args: list, env):
    _check_operands(v, args, env)
    ct = compute_type(v).torch
    return OPS[v.op].torch(*(as_tensor(a, ct, env.device) for a in args)).to(v.dtype.torch)


def _kernel(v: Val, ix, pred, L):
    c = compute_type(v)
    args = [L.cast(L.operand(s, v, ix, pred), c) for s in v.src]
    return L.rounded(L.b.mk(v.op, OPS[v.op].kind.result(c), args), v.dtype)


def _mul_kernel(v: Val, ix, pred, L):
    c = compute_type(v)
    if c.is_float:  # x * 1.0 is x exactly
        a, b = (L.cast(L.operand(s, v, ix, pred), c) for s in v.src)
        if L.b.is_const(a, 1.0):
            return L.rounded(b, v.dtype)
        if L.b.is_const(b, 1.0):
            return L.rounded(a, v.dtype)
    return _kernel(v, ix, pred, L)


def _div_kernel(v: Val, ix, pred, L):
    """A float division of what varies along a row by what is one value per row
    (a softmax's sum) multiplies by the row's reciprocal: one IEEE division a
    row instead of one a point (within an ulp of dividing; the arithmetic, not
    memory, bounds such kernels)."""
    c = compute_type(v)
    if c.is_float:
        a, b = (L.cast(L.operand(s, v, ix, pred), c) for s in v.src)
        if L.moves(a) and not L.moves(b) and not L.b.is_const(b):
            recip = L.b.mk(Op.TRUEDIV, c, (L.b.const(1.0, c), b))
            return L.rounded(L.b.mk(Op.MUL, c, (a, recip)), v.dtype)
    return _kernel(v, ix, pred, L)


def _pow_kernel(v: Val, ix, pred, L):
    """Small integral exponents as multiplications (as torch does for 2 and 3)."""
    e, c = v.src[1].const, compute_type(v)
    if e not in (1, 2, 3, -1) or not c.is_float:
        return _kernel(v, ix, pred, L)
    x = L.cast(L.operand(v.src[0], v, ix, pred), c)
    if e == -1:
        return L.rounded(L.b.mk(Op.TRUEDIV, c, (L.b.const(1.0, c), x)), v.dtype)
    out = x
    for _ in range(int(e) - 1):
        out = L.b.mk(Op.MUL, c, (out, x))
    return L.rounded(out, v.dtype)


def operand_agreement(v: Val):
    """The run-time check that tensor operands agree on each dim of `v` where
    their symbolic extents differ (None when nothing needs checking)."""
    per_dim = []
    n = v.ndim
    for d in range(n):
        pairs = []
        for s in v.src:
            if not s.is_tensor:
                continue
            sd = d - (n - s.ndim)
            if sd >= 0 and (s.logical[sd].kind is AxisKind.ITER or s.logical[sd].is_expanded):
                pairs.append((s, s.logical[sd].extent))
        per_dim.append((d, pairs))
    return extent_agreement(v, per_dim, v.op.value)


def _real(x) -> Val:
    """nvFuser's real: a complex value's real part; of a real tensor, a copy (set)."""
    v = S.as_val(x)
    if v.dtype.is_complex:
        return pointwise(Op.REAL, v)
    return set_(v) if v.is_tensor else v


def _imag(x) -> Val:
    """nvFuser's imag: a complex value's imaginary part (complex values only, as nvFuser)."""
    v = S.as_val(x)
    if not v.dtype.is_complex:
        raise DefinitionError(f"imag: {describe(v) if v.is_tensor else repr(v)} is {v.dtype.short}, "
                              f"not complex (imag takes complex values only)")
    return pointwise(Op.IMAG, v)


def _complex(real, imag) -> Val:
    """nvFuser's complex (torch.complex): the complex value real + imag i, parts
    kept as they are (an infinite or NaN part stays in its place). Both parts
    Float (ComplexFloat) or both Double (ComplexDouble), both tensors or both
    scalars."""
    re, im = S.as_val(real), S.as_val(imag)
    for what, v in (("real", re), ("imag", im)):
        if v.dtype not in (DataType.Float, DataType.Double):
            raise DefinitionError(f"complex: {what} part {describe(v) if v.is_tensor else repr(v)} is "
                                  f"{v.dtype.short}; expected float or double")
    if re.dtype is not im.dtype:
        raise DefinitionError(f"complex: parts must have the same dtype, got {re.dtype.short} and "
                              f"{im.dtype.short}")
    if re.is_tensor != im.is_tensor:
        raise DefinitionError(f"complex: parts must be both tensors or both scalars, got {re!r} and {im!r}")
    return pointwise(Op.COMPLEX, re, im)


def _wide_complex(fn):
    """`fn` with complex64 operands computed in complex128 (its callers round the
    result to the node's type once). torch's CPU complex64 kernels round
    differently in their vectorized body and their scalar tail, so an element's
    abs could differ by an ulp with its position in the tensor, and the
    interpreter (which evaluates over a kernel's whole iteration space) with
    the reference evaluator (over each op's own shape): seed 146 of the random
    fusions, |w| ~ 80 then cos, 3.8e-6 apart."""
    def wide(*args):
        return fn(*(a.to(torch.complex128) if isinstance(a, torch.Tensor) and a.dtype == torch.complex64 else a
                    for a in args))
    return wide


def _define_table(table: dict, arity: tuple) -> None:
    kernels = {Op.MUL: _mul_kernel, Op.POW: _pow_kernel, Op.DIV: _div_kernel}
    builders = {Op.REAL: _real, Op.IMAG: _imag, Op.COMPLEX: _complex}
    for op, (kind, py, fn, cuda, sym, *cuda_def) in table.items():
        build = builders.get(op, partial(pointwise, op))
        define(OpDef(op, Family.POINTWISE, arity, build=build,
                     rebuild=lambda v, src: pointwise(v.op, *src), reference=_reference,
                     kernel=kernels.get(op, _kernel), check=operand_agreement, dims=aligned_dims,
                     kind=kind, py=py, torch=_wide_complex(fn) if op in COMPLEX_OPS else fn, cuda=cuda, sym=sym,
                     cuda_def=cuda_def[0] if cuda_def else None))
        frontend(op.value)(build)


_define_table(UNARY_TABLE, (1, 1))
_define_table(BINARY_TABLE, (2, 2))


# ---------------------------------------------------------------- where

def where(cond, a, b) -> Val:
    vals = [S.as_val(v) for v in (cond, a, b)]
    if vals[0].dtype is not DataType.Bool:
        raise DefinitionError(
            f"where: condition must be Bool, got {vals[0]!r} of type {vals[0].dtype.short}")
    _check_complex(Op.WHERE, vals[1:])
    tensors = [v for v in vals if v.is_tensor]
    if not tensors:
        return S.scalar_op(Op.WHERE, *vals)
    if any(v.is_tensor for v in vals[1:]):
        dtype = S.promote_vals(vals[1:])
    else:  # torch.where(cond, 1.5, 2.5): two numbers give the default dtype, as in torch
        dtype = (DataType.Bool, DataType.Int, DataType.Float,
                 DataType.ComplexFloat)[max(v.dtype.category for v in vals[1:])]
    return Val(Op.WHERE, dtype, tuple(vals), axes=broadcast_axes("where", tensors))


def _where_reference(v: Val, args: list, env):
    _check_operands(v, args, env)
    ct = compute_dtype(v.dtype).torch
    c = as_tensor(args[0], torch.bool, env.device)
    return torch.where(c, as_tensor(args[1], ct, env.device),
                       as_tensor(args[2], ct, env.device)).to(v.dtype.torch)


def _where_kernel(v: Val, ix, pred, L):
    c = compute_dtype(v.dtype)
    cond = L.cast(L.operand(v.src[0], v, ix, pred), DataType.Bool)
    x, y = (L.cast(L.operand(s, v, ix, pred), c) for s in v.src[1:])
    return L.rounded(L.b.mk(Op.WHERE, c, (cond, x, y)), v.dtype)


define(OpDef(Op.WHERE, Family.POINTWISE, (3, 3), build=where, rebuild=lambda v, src: where(*src),
             reference=_where_reference, kernel=_where_kernel, check=operand_agreement,
             dims=aligned_dims,
             py=lambda c, a, b: a if c else b, torch=torch.where, cuda="({0} ? {1} : {2})"))
frontend("where")(where)


# ---------------------------------------------------------------- cast and set

def cast(v, dtype: DataType) -> Val:
    if not isinstance(dtype, DataType) or dtype is DataType.Null:
        raise DefinitionError(f"cast: dtype must be a DataType other than Null, got {dtype!r}")
    v = S.as_val(v)
    if v.is_scalar:
        return S.cast_scalar(v, dtype)
    return Val(Op.CAST, dtype, (v,), arg=dtype, axes=v.logical)


def _cast_text(v: Val, namer) -> str:
    return f"cast({operand_text(v.src[0], namer)}, dtype={v.dtype.short})"


def _copy_kernel(v: Val, ix, pred, L):
    return L.rounded(L.operand(v.src[0], v, ix, pred), v.dtype)


define(OpDef(Op.CAST, Family.POINTWISE, build=cast, rebuild=lambda v, src: cast(src[0], v.arg),
             reference=lambda v, args, env: cast_tensor(as_tensor(args[0], v.src[0].dtype.torch,
                                                                  env.device), v.dtype),
             text=_cast_text, kernel=_copy_kernel, py=lambda x: x, dims=aligned_dims))
frontend("cast")(cast)


def set_(t: Val) -> Val:
    t = require_tensor("set", t)
    return Val(Op.SET, t.dtype, (t,), axes=t.logical)


define(OpDef(Op.SET, Family.POINTWISE, build=set_, rebuild=lambda v, src: set_(src[0]),
             reference=lambda v, args, env: args[0].clone(), kernel=_copy_kernel,
             view=lambda v, t, env: t, dims=aligned_dims))
frontend("set")(set_)
frontend("segment_set")(set_)


# ---------------------------------------------------------------- composites

@frontend("clamp")
def clamp(t, min=None, max=None) -> Val:  # noqa: A002 - nvFuser's keyword names
    out = t
    if min is not None:
        out = pointwise(Op.MAXIMUM, out, min)
    if max is not None:
        out = pointwise(Op.MINIMUM, out, max)
    return out


@frontend("lerp")
def lerp(start, end, weight) -> Val:
    return pointwise(Op.ADD, start, pointwise(Op.MUL, weight, pointwise(Op.SUB, end, start)))


@frontend("mod")
def mod(a, b) -> Val:
    """nvFuser's mod: C++'s %, the remainder with the dividend's sign (torch.fmod)."""
    return pointwise(Op.FMOD, a, b)


@frontend("threshold")
def threshold(t, threshold, value) -> Val:  # noqa: A002 - nvFuser's / torch's argument names
    """torch.nn.functional.threshold: t where t > threshold, else value."""
    return where(pointwise(Op.GT, t, threshold), t, value)


@frontend("addcmul")
def addcmul(t, tensor1, tensor2, value=1.0) -> Val:
    """t + value * tensor1 * tensor2 (torch.addcmul, nvFuser's fd.ops.addcmul)."""
    return pointwise(Op.ADD, t, pointwise(Op.MUL, value, pointwise(Op.MUL, tensor1, tensor2)))



@frontend("add_alpha")
def add_alpha(a, b, alpha) -> Val:
    """a + alpha * b (torch.add(a, b, alpha=alpha), nvFuser's fd.ops.add_alpha)."""
    return _with_alpha("add_alpha", Op.ADD, a, b, alpha)


@frontend("sub_alpha")
def sub_alpha(a, b, alpha) -> Val:
    """a - alpha * b (torch.sub(a, b, alpha=alpha), nvFuser's fd.ops.sub_alpha)."""
    return _with_alpha("sub_alpha", Op.SUB, a, b, alpha)


def _with_alpha(opname: str, op: Op, a, b, alpha) -> Val:
    """As torch: the result has a's and b's promoted type (alpha's takes no
    part; an integral result refuses a float alpha), computed in its compute
    type and rounded once (half and bfloat16 products are not rounded first)."""
    a, b, alpha = (S.as_val(v) for v in (a, b, alpha))
    if alpha.is_tensor:
        raise DefinitionError(f"{opname}: alpha must be a number or a scalar, got {describe(alpha)}")
    dtype = S.promote_vals([a, b])
    if alpha.dtype.category > max(dtype.category, 1):  # (torch: the result's type must hold alpha)
        kind = "an integral result takes an integral alpha" if dtype.category <= 1 else \
            "a real result takes a real alpha"
        raise DefinitionError(f"{opname}: alpha {alpha!r} is {alpha.dtype.short}, but the operands are "
                              f"{dtype.short}: {kind}")
    ct = compute_dtype(dtype)
    if ct is dtype:
        return pointwise(op, a, pointwise(Op.MUL, b, S.cast_scalar(alpha, dtype)))
    out = pointwise(op, cast(a, ct), pointwise(Op.MUL, cast(b, ct), alpha))
    return cast(out, dtype)


@frontend("triu")
def triu(t, offset: int = 0) -> Val:
    """The upper triangle of the last two dims of `t` (torch.triu): elements with
    column - row >= offset, zeros elsewhere; a mask of two iotas, in one kernel."""
    from .factories import iota
    from .views import broadcast
    t = require_tensor("triu", t)
    if t.ndim < 2:
        raise DefinitionError(f"triu: {describe(t)} needs at least 2 dims")
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise DefinitionError(f"triu: offset must be an int, got {offset!r}")
    rows, cols = (iota(t.logical[d].extent) for d in (-2, -1))
    keep = pointwise(Op.GE, pointwise(Op.SUB, broadcast(cols, [True, False]),
                                      broadcast(rows, [False, True])), offset)
    zero = 0.0 if t.dtype.is_float else False if t.dtype.is_bool else 0
    return where(keep, t, zero)  # zeros also where t is inf or nan
