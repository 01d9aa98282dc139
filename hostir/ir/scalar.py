"""Scalar expressions: construction with constant folding, and evaluation.

Extents, slice bounds and pad widths are scalar `Val`s; so are the scalar
values of a user's fusion. `scalar_op` folds constants and trivial identities
so that static shapes print as plain numbers.
"""
from __future__ import annotations

import math
import operator

from .dtypes import ZERO_DIM, DataType, promote
from .errors import ExecutionError
from .node import BINARY, UNARY, Kind, Op, Val, const


def _floordiv(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return math.floor(a / b)
    return a // b


def _ceildiv(a, b):
    return -((-a) // b)


def _round_half_even(x):
    return float(round(x))


PY_SCALAR = {
    Op.NEG: operator.neg, Op.ABS: abs, Op.EXP: math.exp, Op.EXP2: lambda x: 2.0 ** x,
    Op.EXPM1: math.expm1, Op.LOG: math.log, Op.LOG2: math.log2, Op.LOG10: math.log10,
    Op.LOG1P: math.log1p, Op.SQRT: math.sqrt, Op.RSQRT: lambda x: 1.0 / math.sqrt(x),
    Op.RECIPROCAL: lambda x: 1.0 / x, Op.TANH: math.tanh,
    Op.SIGMOID: lambda x: 1.0 / (1.0 + math.exp(-x)), Op.RELU: lambda x: x if x > 0 else 0 * x,
    Op.SIN: math.sin, Op.COS: math.cos, Op.TAN: math.tan, Op.ASIN: math.asin,
    Op.ACOS: math.acos, Op.ATAN: math.atan, Op.SINH: math.sinh, Op.COSH: math.cosh,
    Op.ERF: math.erf, Op.ERFC: math.erfc, Op.FLOOR: math.floor, Op.CEIL: math.ceil,
    Op.ROUND: _round_half_even, Op.TRUNC: math.trunc,
    Op.SIGN: lambda x: (x > 0) - (x < 0), Op.ISNAN: math.isnan, Op.ISINF: math.isinf,
    Op.ISFINITE: math.isfinite, Op.LOGICAL_NOT: operator.not_,
    Op.BITWISE_NOT: lambda x: not x if isinstance(x, bool) else ~x,  # ~True is -2
    Op.ADD: operator.add, Op.SUB: operator.sub, Op.MUL: operator.mul,
    Op.DIV: None,  # depends on the result type, see _div
    Op.TRUEDIV: operator.truediv, Op.FMOD: math.fmod, Op.REMAINDER: operator.mod,
    Op.POW: operator.pow, Op.ATAN2: math.atan2, Op.MAXIMUM: max, Op.MINIMUM: min,
    Op.CEILDIV: _ceildiv, Op.LT: operator.lt, Op.LE: operator.le, Op.GT: operator.gt,
    Op.GE: operator.ge, Op.EQ: operator.eq, Op.NE: operator.ne,
    Op.LOGICAL_AND: lambda a, b: bool(a) and bool(b),
    Op.LOGICAL_OR: lambda a, b: bool(a) or bool(b),
    Op.LOGICAL_XOR: lambda a, b: bool(a) != bool(b),
    Op.BITWISE_AND: operator.and_, Op.BITWISE_OR: operator.or_,
    Op.BITWISE_XOR: operator.xor, Op.BITWISE_LEFT_SHIFT: operator.lshift,
    Op.BITWISE_RIGHT_SHIFT: operator.rshift,
}


def coerce(value, dtype: DataType):
    """A Python value converted to the Python type that represents `dtype`."""
    if dtype.is_bool:
        return bool(value)
    if dtype.is_int:
        return int(value)
    return float(value)


def apply_scalar(op: Op, dtype: DataType, args: list):
    """Evaluate one scalar op on Python values; the result has type `dtype`."""
    if op is Op.DIV:
        try:
            result = args[0] / args[1] if dtype.is_float else _floordiv(args[0], args[1])
        except ZeroDivisionError:
            raise ExecutionError(f"scalar div{tuple(args)}: division by zero") from None
    elif op is Op.WHERE:
        result = args[1] if args[0] else args[2]
    elif op is Op.CAST:
        result = args[0]
    else:
        try:
            result = PY_SCALAR[op](*args)
        except (ZeroDivisionError, ValueError, OverflowError) as e:
            raise ExecutionError(f"scalar {op.value}{tuple(args)}: {e}") from None
    return coerce(result, dtype)


def as_val(x) -> Val:
    if isinstance(x, Val):
        return x
    return const(x)


def promote_vals(vals: list[Val]) -> DataType:
    """`promote` for Vals: tensors with dims, 0-dim tensors and scalars rank as in torch."""
    return promote([(v.dtype, (ZERO_DIM if v.ndim == 0 else True) if v.is_tensor else False)
                    for v in vals])


def result_type(op: Op, operands: list[Val]) -> DataType:
    """Type rule shared by scalars and tensors (see `Kind`)."""
    kind = UNARY.get(op) or BINARY.get(op)
    dtype = promote_vals(operands)
    if kind is Kind.BOOL:
        return DataType.Bool
    if kind is Kind.FLOAT and not dtype.is_float:
        return DataType.Float if any(v.is_tensor for v in operands) else DataType.Double
    return dtype


def scalar_op(op: Op, *operands) -> Val:
    """Build a scalar op node, folding constants and trivial identities."""
    vals = [as_val(v) for v in operands]
    dtype = result_type(op, vals) if op is not Op.WHERE else promote(
        [(v.dtype, False) for v in vals[1:]])
    if all(v.op is Op.CONST for v in vals):
        return const(apply_scalar(op, dtype, [v.arg for v in vals]), dtype)
    if op is Op.WHERE and vals[0].op is Op.CONST:
        return vals[1] if vals[0].arg else vals[2]
    a = vals[0]
    b = vals[1] if len(vals) > 1 else None
    if op is Op.SUB and a.op is Op.ADD and a.dtype == b.dtype == dtype:
        if a.src[0] is b:      # (x + c) - x -> c
            return a.src[1]
        if a.src[1] is b:      # (c + x) - x -> c
            return a.src[0]
    if b is not None and a.dtype == b.dtype == dtype:
        if op in (Op.ADD, Op.SUB) and b.const == 0:
            return a
        if op is Op.ADD and a.const == 0:
            return b
        if op in (Op.MUL, Op.DIV, Op.CEILDIV) and b.const == 1:
            return a
        if op is Op.MUL and a.const == 1:
            return b
    return Val(op, dtype, tuple(vals))


def cast_scalar(v, dtype: DataType) -> Val:
    v = as_val(v)
    if v.dtype == dtype:
        return v
    if v.op is Op.CONST:
        return const(coerce(v.arg, dtype), dtype)
    return Val(Op.CAST, dtype, (v,), arg=dtype)


def add(a, b): return scalar_op(Op.ADD, a, b)
def sub(a, b): return scalar_op(Op.SUB, a, b)
def mul(a, b): return scalar_op(Op.MUL, a, b)
def floordiv(a, b): return scalar_op(Op.DIV, a, b)
def ceildiv(a, b): return scalar_op(Op.CEILDIV, a, b)
def smin(a, b): return scalar_op(Op.MINIMUM, a, b)
def smax(a, b): return scalar_op(Op.MAXIMUM, a, b)
def lt(a, b): return scalar_op(Op.LT, a, b)
def where(c, a, b): return scalar_op(Op.WHERE, c, a, b)


def is_const(v: Val, value=None) -> bool:
    return v.op is Op.CONST and (value is None or v.arg == value)


def evaluate_scalar(v: Val, env: dict):
    """Evaluate a scalar Val; `env` maps leaf Vals (inputs, extents) to values
    and memoizes every node evaluated."""
    hit = env.get(v, env)
    if hit is not env:
        return hit
    if v.op is Op.CONST:
        return v.arg
    if v.op in (Op.SCALAR_INPUT, Op.EXTENT, Op.LOOP_INDEX):
        raise ExecutionError(f"scalar {v!r} ({v.op.value}) has no value bound")
    args = [evaluate_scalar(s, env) for s in v.src]
    result = apply_scalar(v.op, v.dtype, args)
    env[v] = result
    return result

