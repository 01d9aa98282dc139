"""Reference evaluator: runs a fusion op by op with torch (CPU or CUDA).

The oracle for every test, and the execution path until kernels exist.
Pointwise ops compute as generated kernels do: operands converted to the
op's compute type (Float for Half/BFloat16), result rounded to the node's type.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .dtypes import DataType, compute_dtype
from .errors import ExecutionError
from .fusion import Fusion
from .node import BINARY, UNARY, AxisKind, Kind, Op, Val
from .scalar import coerce, evaluate_scalar, promote_vals


def _floor_div(a, b):
    if a.dtype.is_floating_point:
        return torch.div(a, b)
    return torch.div(a, b, rounding_mode="floor")


def _ceil_div(a, b):
    return -torch.div(-a, b, rounding_mode="floor")


TORCH_FN = {
    Op.NEG: torch.neg, Op.ABS: torch.abs, Op.EXP: torch.exp, Op.EXP2: torch.exp2,
    Op.EXPM1: torch.expm1, Op.LOG: torch.log, Op.LOG2: torch.log2, Op.LOG10: torch.log10,
    Op.LOG1P: torch.log1p, Op.SQRT: torch.sqrt, Op.RSQRT: torch.rsqrt,
    Op.RECIPROCAL: torch.reciprocal, Op.TANH: torch.tanh, Op.SIGMOID: torch.sigmoid,
    Op.RELU: torch.relu, Op.SIN: torch.sin, Op.COS: torch.cos, Op.TAN: torch.tan,
    Op.ASIN: torch.asin, Op.ACOS: torch.acos, Op.ATAN: torch.atan, Op.SINH: torch.sinh,
    Op.COSH: torch.cosh, Op.ERF: torch.erf, Op.ERFC: torch.erfc, Op.FLOOR: torch.floor,
    Op.CEIL: torch.ceil, Op.ROUND: torch.round, Op.TRUNC: torch.trunc, Op.SIGN: torch.sign,
    Op.ISNAN: torch.isnan, Op.ISINF: torch.isinf, Op.ISFINITE: torch.isfinite,
    Op.LOGICAL_NOT: torch.logical_not, Op.BITWISE_NOT: torch.bitwise_not,
    Op.ADD: torch.add, Op.SUB: torch.sub, Op.MUL: torch.mul, Op.DIV: _floor_div,
    Op.TRUEDIV: torch.true_divide, Op.FMOD: torch.fmod, Op.REMAINDER: torch.remainder,
    Op.POW: torch.pow, Op.ATAN2: torch.atan2, Op.MAXIMUM: torch.maximum,
    Op.MINIMUM: torch.minimum, Op.CEILDIV: _ceil_div, Op.LT: torch.lt, Op.LE: torch.le,
    Op.GT: torch.gt, Op.GE: torch.ge, Op.EQ: torch.eq, Op.NE: torch.ne,
    Op.LOGICAL_AND: torch.logical_and, Op.LOGICAL_OR: torch.logical_or,
    Op.LOGICAL_XOR: torch.logical_xor, Op.BITWISE_AND: torch.bitwise_and,
    Op.BITWISE_OR: torch.bitwise_or, Op.BITWISE_XOR: torch.bitwise_xor,
    Op.BITWISE_LEFT_SHIFT: torch.bitwise_left_shift,
    Op.BITWISE_RIGHT_SHIFT: torch.bitwise_right_shift,
}


class Env(dict):
    """Values of nodes (identity-keyed), plus the device tensors are made on.
    `token` names the input signature of a call (launches cache per token)."""

    token = None
    out_buffers = None  # output Val -> a tensor the caller wants the result written into

    def __init__(self, device: torch.device):
        super().__init__()
        self.device = device

    def scalar(self, v: Val):
        return evaluate_scalar(v, self)

    def extents(self, axes) -> list[int]:
        return [self.scalar(a.extent) for a in axes]


def bind_inputs(fusion: Fusion, args: list, device: torch.device) -> Env:
    env = Env(device)
    for v, a in zip(fusion.inputs, args):
        if v.op is Op.TENSOR_INPUT:
            env[v] = a
            for d, ax in enumerate(v.axes):
                if ax.extent.op is Op.EXTENT:
                    env[ax.extent] = a.shape[d]
        else:
            env[v] = coerce(a.item() if isinstance(a, torch.Tensor) else a, v.dtype)
    return env


def op_compute_type(v: Val) -> DataType:
    """The type a pointwise op computes in (generated kernels use it too)."""
    if v.op in UNARY or v.op in BINARY:
        kind = UNARY.get(v.op) or BINARY.get(v.op)
        operand = promote_vals(v.src)
        if kind is Kind.FLOAT and not operand.is_float:
            operand = DataType.Float
        return compute_dtype(operand)
    return compute_dtype(v.dtype)


def _as_tensor(x, dtype: torch.dtype, device) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.to(dtype)
    if torch.device(device).type == "cuda":  # a fill kernel: no host copy (CUDA graphs can hold it)
        return torch.full((), x, dtype=dtype, device=device)
    return torch.tensor(x, dtype=dtype, device=device)


def _check_operand_extents(v: Val, args: list, out_shape: list[int]):
    """torch would silently broadcast a size-1 operand into an iteration axis."""
    for s, a in zip(v.src, args):
        if not s.is_tensor:
            continue
        off = len(out_shape) - s.ndim
        for d, ax in enumerate(s.logical):
            if ax.kind is AxisKind.ITER and a.shape[d] != out_shape[off + d]:
                raise ExecutionError(
                    f"{v.op.value} -> {v!r}: dim {d} of operand {s!r} has extent {a.shape[d]} at run "
                    f"time, but the other operands give {out_shape[off + d]}")


def _pointwise(v: Val, args: list, env: Env) -> torch.Tensor:
    out_shape = env.extents(v.logical)
    _check_operand_extents(v, args, out_shape)
    if v.op is Op.CAST:
        return _as_tensor(args[0], v.dtype.torch, env.device)
    if v.op is Op.SET:
        return args[0].clone()
    if v.op is Op.WHERE:
        c = _as_tensor(args[0], torch.bool, env.device)
        ct = compute_dtype(v.dtype).torch
        return torch.where(c, _as_tensor(args[1], ct, env.device),
                           _as_tensor(args[2], ct, env.device)).to(v.dtype.torch)
    ct = op_compute_type(v).torch
    ops = [_as_tensor(a, ct, env.device) for a in args]
    return TORCH_FN[v.op](*ops).to(v.dtype.torch)


def _squeeze(t: torch.Tensor, dims) -> torch.Tensor:
    for d in sorted(dims, reverse=True):
        t = t.select(d, 0)
    return t


def _broadcast(t: torch.Tensor, flags) -> torch.Tensor:
    for d, f in enumerate(flags):
        if f:
            t = t.unsqueeze(d)
    return t


def _reduce(v: Val, t: torch.Tensor) -> torch.Tensor:
    dims = v.arg[0] if v.op is Op.VAR else v.arg
    if not dims:
        return t.clone()
    ct = compute_dtype(v.dtype).torch
    if v.op is Op.SUM:
        return torch.sum(t.to(ct), dim=dims).to(v.dtype.torch)
    if v.op is Op.MAX:
        return torch.amax(t, dim=dims)
    if v.op is Op.MIN:
        return torch.amin(t, dim=dims)
    if v.op is Op.MEAN:
        return torch.mean(t.to(ct), dim=dims).to(v.dtype.torch)
    return torch.var(t.to(ct), dim=dims, correction=v.arg[1]).to(v.dtype.torch)


def _tensor_op(v: Val, env: Env) -> torch.Tensor:
    op = v.op
    src = v.src
    if op in UNARY or op in BINARY or op in (Op.WHERE, Op.CAST, Op.SET):
        return _pointwise(v, [env[s] if s.is_tensor else env.scalar(s) for s in src], env)
    if op in (Op.SUM, Op.MAX, Op.MIN, Op.VAR, Op.MEAN):
        return _reduce(v, env[src[0]])
    t = env[src[0]] if src and src[0].is_tensor else None
    if op is Op.BROADCAST:
        return _broadcast(t, v.arg)
    if op is Op.SQUEEZE:
        return _squeeze(t, v.arg)
    if op is Op.EXPAND:
        return t.expand(env.extents(v.logical))
    if op is Op.RESHAPE:
        return t.reshape(env.extents(v.logical))
    if op is Op.PERMUTE:
        return t.permute(v.arg)
    if op is Op.SLICE:
        n = src[0].ndim
        lo = [env.scalar(s) for s in src[1:1 + n]]
        hi = [env.scalar(s) for s in src[1 + n:]]
        return t[tuple(slice(a, b, st) for a, b, st in zip(lo, hi, v.arg))]
    if op is Op.PAD:
        w = [env.scalar(s) for s in src[2:]]
        torch_order = []
        for d in reversed(range(len(w) // 2)):
            torch_order += [w[2 * d], w[2 * d + 1]]
        return F.pad(t, torch_order, value=env.scalar(src[1]))
    if op is Op.CAT:
        return torch.cat([env[s] for s in src], dim=v.arg)
    if op is Op.MATMUL:
        return torch.matmul(env[src[0]], env[src[1]])
    if op is Op.LINEAR:
        bias = env[src[2]] if len(src) > 2 else None
        if bias is not None and src[1].ndim == 1:  # F.linear refuses a bias with a 1-D weight
            return F.linear(env[src[0]], env[src[1]]) + bias
        return F.linear(env[src[0]], env[src[1]], bias)
    if op is Op.FULL:
        return torch.full(env.extents(v.logical), env.scalar(src[0]), dtype=v.dtype.torch,
                          device=env.device)
    if op is Op.IOTA:
        n, start, step = (env.scalar(s) for s in src)
        ar = torch.arange(n, device=env.device, dtype=v.dtype.torch)
        return ar * step + start
    raise ExecutionError(f"reference evaluator: no rule for op {op.value}")


def eval_node(v: Val, env: Env):
    if v.is_scalar:
        return env.scalar(v)
    try:
        out = _tensor_op(v, env)
    except ExecutionError:
        raise
    except (RuntimeError, ValueError, IndexError, ZeroDivisionError) as e:
        raise ExecutionError(f"{v.op.value} -> {v!r}: {e}") from e
    expected = env.extents(v.logical)
    if list(out.shape) != expected:
        raise ExecutionError(
            f"{v.op.value} -> {v!r}: produced shape {list(out.shape)}, expected {expected}")
    return out


def evaluate(fusion: Fusion, args: list, device: torch.device) -> list[torch.Tensor]:
    """Values of the fusion's outputs (in order, alias_input outputs included)."""
    env = bind_inputs(fusion, args, device)
    for v in fusion.exprs():
        env[v] = eval_node(v, env)
    return [env[o.val] for o in fusion.outputs]
