"""Scans (inclusive prefix combines along one dim): cumsum, cumprod, cummax,
cummin, as nvFuser's `fd.ops.cumsum(t, dim)`. The result has the input's
shape. Sums and products of integers and bools are Int unless `dtype` is
given (torch's rule; nvFuser's cumsum has no dtype argument, hostir accepts
torch's keyword); max and min keep the input's dtype and return the values
only (nvFuser's cummax/cummin return one tensor, not torch's (values,
indices) pair). Half and BFloat16 accumulate in Float and round each result
at the store, as torch does. Complex values scan by sums and products (cummax
and cummin refuse them: complex numbers have no order)."""
from __future__ import annotations

from typing import NamedTuple

import torch

from ..dtypes import DataType, compute_dtype
from ..errors import DefinitionError
from ..node import Family, Op, OpDef, Val, define
from .common import describe, frontend, norm_dim, refuse_complex, require_tensor
from .pointwise import cast


class ScanArg(NamedTuple):
    """`arg` of a scan node."""

    dim: int        # the scanned logical dim
    combine: str    # "sum" | "prod" | "max" | "min" (the kernel's combine, as REDUCE's)


SCAN_OPS = {Op.CUMSUM: "sum", Op.CUMPROD: "prod", Op.CUMMAX: "max", Op.CUMMIN: "min"}


def scan(op: Op, t, dim, dtype=None) -> Val:
    opname = op.value
    t = require_tensor(opname, t)
    if t.ndim == 0:
        raise DefinitionError(f"{opname}: input {describe(t)} is a 0-dim tensor; scan a tensor "
                              f"with at least one dim")
    if dim is None:
        raise DefinitionError(f"{opname}: dim is required for {describe(t)}")
    dim = norm_dim(opname, t, dim)
    _refuse_complex(op, t)
    if dtype not in (None, DataType.Null):
        if not isinstance(dtype, DataType):
            raise DefinitionError(f"{opname}: dtype must be a DataType, got {dtype!r}")
        if op in (Op.CUMMAX, Op.CUMMIN):
            raise DefinitionError(f"{opname}: no dtype argument (the result keeps the input's "
                                  f"dtype {t.dtype.short})")
        t = cast(t, dtype)
    elif op in (Op.CUMSUM, Op.CUMPROD) and not t.dtype.is_inexact:
        t = cast(t, DataType.Int)  # torch: integer and bool sums and products are int64
    elif t.dtype.is_float8:
        t = cast(t, DataType.Float)  # arithmetic on float8 is in (and gives) Float
    if t.logical[dim].is_expanded:
        raise DefinitionError(f"{opname}: dim {dim} of {describe(t)} is an expanded broadcast; "
                              f"scan a materialized tensor")
    return scan_raw(op, t, ScanArg(dim, SCAN_OPS[op]))


def _refuse_complex(op: Op, t: Val) -> None:
    """cummax and cummin take no complex values (as torch: they have no order);
    complex sums and products scan as any other."""
    if op not in (Op.CUMMAX, Op.CUMMIN):
        return
    why = "complex numbers have no order"
    refuse_complex(op.value, [t], why)


def scan_raw(op: Op, t: Val, arg: ScanArg) -> Val:
    return Val(op, t.dtype, (t,), arg=arg, axes=t.logical)


_TORCH = {
    Op.CUMSUM: lambda x, d: torch.cumsum(x, d),
    Op.CUMPROD: lambda x, d: torch.cumprod(x, d),
    Op.CUMMAX: lambda x, d: torch.cummax(x, d).values,
    Op.CUMMIN: lambda x, d: torch.cummin(x, d).values,
}


def _reference(v: Val, args, env):
    x = args[0]
    c = compute_dtype(v.dtype)
    if x.dtype is torch.bool:  # cummax/cummin of bools: as 0/1
        return _TORCH[v.op](x.to(torch.int32), v.arg.dim).to(torch.bool)
    return _TORCH[v.op](x.to(c.torch), v.arg.dim).to(v.dtype.torch)


def _kernel(v: Val, ix, pred, L):
    """The source at this point, combined with every earlier point along the
    scanned dim by a SCAN node (in the compute type); rounded at the store."""
    c = compute_dtype(v.dtype)
    x = L.cast(L.value(v.src[0], ix, pred), c)
    return L.rounded(L.cast(L.scan(v.arg.combine, x, ix, pred), c), v.dtype)


def _text(v: Val, n) -> str:
    return f"{v.op.value}({n(v.src[0])}, dim={v.arg.dim})"


def _dims(v: Val, k: int) -> tuple:
    # the scanned dim has no counterpart a shard could keep: each point needs all before it
    return tuple(None if d == v.arg.dim else d for d in range(v.ndim))


for _op in SCAN_OPS:
    define(OpDef(_op, Family.SCAN, rebuild=lambda v, src: scan_raw(v.op, src[0], v.arg),
                 reference=_reference, text=_text, kernel=_kernel,
                 dims=_dims))


def _frontend_scan(op: Op):
    def build(arg, dim=None, *, dtype=None):
        return scan(op, arg, dim, dtype)
    build.__name__ = op.value
    return build


for _op in SCAN_OPS:
    frontend(_op.value)(_frontend_scan(_op))

__all__ = ["SCAN_OPS", "ScanArg", "scan", "scan_raw"]
