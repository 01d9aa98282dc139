"""Scalar expressions: construction with constant folding, and evaluation.

Extents, slice bounds and pad widths are scalar `Val`s; so are the scalar
values of a user's fusion. `scalar_op` folds constants and trivial identities
so that static shapes print as plain numbers. Each op's evaluation on Python
numbers is its record's `py` rule (ir/ops/pointwise.py).
"""
from __future__ import annotations

import torch

from .dtypes import ZERO_DIM, DataType, coerce, promote
from .errors import ExecutionError
from .node import OPS, Kind, Op, Val, const


def apply_scalar(op: Op, dtype: DataType, args: list):
    """Evaluate one scalar op on Python values; the result has type `dtype`.
    Complex values compute with the op's torch rule, in complex128."""
    try:
        if (dtype.is_complex and op is not Op.COMPLEX) or any(isinstance(a, complex) for a in args):
            result = OPS[op].torch(*(torch.tensor(a, dtype=torch.bool if isinstance(a, bool)
                                                  else torch.complex128) for a in args)).item()
        else:
            result = OPS[op].py(*args)
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
    kind = OPS[op].kind
    dtype = promote_vals(operands)
    if kind is Kind.FLOAT and not dtype.is_inexact:
        dtype = DataType.Float if any(v.is_tensor for v in operands) else DataType.Double
    return kind.result(dtype)


def _fold_identity(op: Op, dtype: DataType, a: Val, b: Val | None) -> Val | None:
    """x + 0, x * 1, (x + c) - x and the like, where types allow."""
    if b is None or not a.dtype == b.dtype == dtype:
        return None
    if op is Op.SUB and a.op is Op.ADD:
        if a.src[0] is b:      # (x + c) - x -> c
            return a.src[1]
        if a.src[1] is b:      # (c + x) - x -> c
            return a.src[0]
    if op is Op.REMAINDER and a.op is Op.REMAINDER and b.op is Op.CONST and b.arg > 0 \
            and a.src[1].const == b.arg:
        return a  # (x % n) % n
    if op in (Op.ADD, Op.SUB) and b.const == 0:
        return a
    if op is Op.ADD and a.const == 0:
        return b
    if op in (Op.MUL, Op.DIV, Op.CEILDIV) and b.const == 1:
        return a
    if op is Op.MUL and a.const == 1:
        return b
    return None


def scalar_op(op: Op, *operands) -> Val:
    """Build a scalar op node, folding constants and trivial identities."""
    vals = [as_val(v) for v in operands]
    if op is Op.WHERE:
        dtype = promote([(v.dtype, False) for v in vals[1:]])
    else:
        dtype = result_type(op, vals)
    if all(v.op is Op.CONST for v in vals):
        return const(apply_scalar(op, dtype, [v.arg for v in vals]), dtype)
    if op is Op.WHERE and vals[0].op is Op.CONST:
        return vals[1] if vals[0].arg else vals[2]
    folded = _fold_identity(op, dtype, vals[0], vals[1] if len(vals) > 1 else None)
    if folded is not None:
        return folded
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


def product(vals) -> Val:
    out = const(1)
    for v in vals:
        out = mul(out, v)
    return out


def total(vals) -> Val:
    out = const(0)
    for v in vals:
        out = add(out, v)
    return out


def same(a: Val, b: Val) -> bool:
    """Structural equality of scalar expressions (equal constants, or the same
    op and arg over equal sources); leaves are equal only to themselves."""
    if a is b:
        return True
    if a.op is not b.op or a.dtype is not b.dtype or a.arg != b.arg or len(a.src) != len(b.src):
        return False
    if a.op is Op.CONST:
        return True
    if not a.src or a.is_tensor or b.is_tensor:
        return False
    return all(same(x, y) for x, y in zip(a.src, b.src))


def evaluate_scalar(v: Val, env: dict):
    """Evaluate a scalar Val; `env` maps leaf Vals (inputs, extents) to values
    and memoizes every node evaluated."""
    hit = env.get(v, env)
    if hit is not env:
        return hit
    if v.op is Op.CONST:
        return v.arg
    if not v.src:
        raise ExecutionError(f"scalar {v!r} ({v.op.value}) has no value bound")
    args = [evaluate_scalar(s, env) for s in v.src]
    result = apply_scalar(v.op, v.dtype, args)
    env[v] = result
    return result


def leaves(v: Val) -> list[Val]:
    """The leaves (no sources, not constants: inputs, extents) of scalar
    expression `v`, in first-use order."""
    out, seen, stack = [], set(), [v]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if not x.src and x.op is not Op.CONST:
            out.append(x)
        stack.extend(reversed(x.src))
    return out
