"""Normalization composites with running statistics: nvFuser's
`fd.ops.batch_norm(arg, weight, bias, running_mean, running_var, momentum,
eps, training, channels_last=False) -> (output, mean, invstd)`, made from
var_mean, broadcasts and pointwise ops (one reduction segment and its
epilogue, as any normalization). The running statistics it updates in place
come back as (new value, input it replaces) pairs: the frontend makes them
hidden outputs aliasing those inputs (fd_ops.Ops.batch_norm), as nvFuser does."""
from __future__ import annotations

from .. import scalar as S
from ..dtypes import DataType
from ..errors import DefinitionError
from ..node import Op, Val
from .common import describe, require_tensor
from .pointwise import cast, pointwise, set_
from .reductions import var_mean
from .views import broadcast


def batch_norm(x, weight, bias, running_mean, running_var, momentum, eps, training: bool,
               channels_last: bool = False) -> tuple[Val, Val, Val, list]:
    """torch.nn.functional.batch_norm over x [N, C, ...] (C last with
    channels_last): statistics per channel over every other dim. Training (or
    no running statistics): the batch's mean and biased variance normalize x,
    and where running statistics are given they become (1 - momentum) * running
    + momentum * the batch's (the unbiased variance for running_var). Inference:
    the running statistics normalize x, `mean` is running_mean and `invstd`
    rsqrt(running_var + eps). weight and bias ([C]) are optional.
    Returns (output, mean, invstd, [(new running value, its input), ...])."""
    x = require_tensor("batch_norm", x, "arg")
    if not isinstance(training, bool) or not isinstance(channels_last, bool):
        raise DefinitionError(f"batch_norm: training and channels_last must be bools, got {training!r} "
                              f"and {channels_last!r}")
    if x.ndim < 2:
        raise DefinitionError(f"batch_norm: arg {describe(x)} must have at least 2 dims [N, C, ...]")
    if (running_mean is None) != (running_var is None):
        raise DefinitionError("batch_norm: running_mean and running_var come in pairs (both or neither)")
    c = x.ndim - 1 if channels_last else 1
    channel = x.logical[c].extent
    per_channel = [_channel_vector(what, t, channel) for what, t in
                   (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var))]
    weight, bias, running_mean, running_var = per_channel
    momentum, eps = (_number("batch_norm", what, v) for what, v in (("momentum", momentum), ("eps", eps)))
    others = [d for d in range(x.ndim) if d != c]
    mask = [d != c for d in range(x.ndim)]
    updates = []
    if training or running_mean is None:
        var, mean = var_mean(x, others, correction=0)
        invstd = pointwise(Op.RSQRT, pointwise(Op.ADD, var, eps))
        if running_mean is not None:
            n = S.product([x.logical[d].extent for d in others])
            unbiased = pointwise(Op.MUL, var, S.scalar_op(Op.TRUEDIV, n, S.sub(n, 1)))
            keep = pointwise(Op.SUB, 1.0, momentum)
            for run, batch in ((running_mean, mean), (running_var, unbiased)):
                new = pointwise(Op.ADD, pointwise(Op.MUL, run, keep), pointwise(Op.MUL, batch, momentum))
                updates.append((cast(new, run.dtype) if new.dtype is not run.dtype else new, run))
        centered = pointwise(Op.SUB, x, broadcast(mean, mask))
    else:
        mean = set_(running_mean)  # (a new tensor, as nvFuser's)
        invstd = pointwise(Op.RSQRT, pointwise(Op.ADD, running_var, eps))
        centered = pointwise(Op.SUB, x, broadcast(running_mean, mask))
    y = pointwise(Op.MUL, centered, broadcast(invstd, mask))
    if weight is not None:
        y = pointwise(Op.MUL, y, broadcast(weight, mask))
    if bias is not None:
        y = pointwise(Op.ADD, y, broadcast(bias, mask))
    return y, mean, invstd, updates


def _channel_vector(what: str, t, channels: Val) -> Val | None:
    """An optional [C] tensor of floats."""
    if t is None:
        return None
    t = require_tensor("batch_norm", t, what)
    if t.ndim != 1 or not t.dtype.is_float:
        raise DefinitionError(f"batch_norm: {what} {describe(t)} must be a 1-D float tensor [C]")
    e = t.logical[0].extent
    if S.is_const(e) and S.is_const(channels) and e.arg != channels.arg:
        raise DefinitionError(f"batch_norm: {what} {describe(t)} has {e.arg} entries, the arg has "
                              f"{channels.arg} channels")
    return t


def _number(opname: str, what: str, v) -> Val:
    v = S.as_val(v)
    if v.is_tensor or not (v.dtype.is_float or v.dtype.is_int):
        raise DefinitionError(f"{opname}: {what} must be a number or a Double scalar, got {v!r}")
    return v if v.dtype.is_float else S.cast_scalar(v, DataType.Double)
