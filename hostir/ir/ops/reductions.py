"""Reductions: sum, max, min, prod, var/mean (made together by var_mean), and
argmax (an Int index). A reduction's output keeps the reduced axes as
reduction axes of its domain."""
from __future__ import annotations

from typing import NamedTuple

import torch

from .. import scalar as S
from ..dtypes import DataType, compute_dtype
from ..errors import DefinitionError, ExecutionError
from ..node import REDUCED, Axis, AxisKind, Family, Op, OpDef, Val, define
from .common import describe, frontend, norm_dim, norm_dims, refuse_complex, require_tensor
from .pointwise import cast, pointwise
from .views import broadcast


class ReductionArg(NamedTuple):
    """`arg` of a reduction node."""

    dims: tuple[int, ...]            # reduced dims of the input's logical dims
    correction: float | None = None  # var only


def _reduce_axes(t: Val, dims: tuple[int, ...]) -> tuple[Axis, ...]:
    return tuple(Axis(a.extent, AxisKind.REDUCE) if i in dims else a
                 for i, a in enumerate(t.logical))


def _keepdim(out: Val, dims: tuple[int, ...], ndim: int) -> Val:
    return broadcast(out, [i in dims for i in range(ndim)])


def _reduction_dims(opname: str, t: Val, dims) -> tuple[int, ...]:
    if dims is None:
        return tuple(range(t.ndim))
    dims = norm_dims(opname, t, dims)
    if not dims:
        raise DefinitionError(f"{opname}: dims is empty for {describe(t)}; pass dims=None to reduce all")
    return dims


def _dims_or_axes(opname: str, dims, axes):
    if dims is not None and axes is not None:
        raise DefinitionError(f"{opname}: pass dims or axes, not both")
    return dims if dims is not None else axes


def reduction(op: Op, t: Val, dims=None, keepdim: bool = False,
              dtype: DataType = DataType.Null, *, axes=None) -> Val:
    opname = op.value
    t = require_tensor(opname, t)
    dims = _reduction_dims(opname, t, _dims_or_axes(opname, dims, axes))
    unordered = "complex numbers have no order"
    if op in (Op.MAX, Op.MIN):
        refuse_complex(opname, [t], unordered)
    if dtype not in (None, DataType.Null):
        t = cast(t, dtype)  # an explicit dtype is kept, also Int32 (torch, nvFuser)
        if op in (Op.MAX, Op.MIN):
            refuse_complex(opname, [t], f"{unordered} (dtype={dtype!r})")
    elif op in (Op.SUM, Op.PROD) and not t.dtype.is_inexact:
        t = cast(t, DataType.Int)  # sums and products of integers and bools are Int by default
    elif t.dtype.is_float8:
        t = cast(t, DataType.Float)  # arithmetic on float8 is in (and gives) Float
    out = reduction_raw(op, t, ReductionArg(dims))
    return _keepdim(out, dims, t.ndim) if keepdim else out


def reduction_raw(op: Op, t: Val, arg: ReductionArg) -> Val:
    # a reduction keeps its source's dtype: `reduction` casts integer sums to Int first
    return Val(op, t.dtype, (t,), arg=arg, axes=_reduce_axes(t, arg.dims))


@frontend("var_mean")
def var_mean(t: Val, dims=None, correction: int = 1, keepdim: bool = False, *,
             axes=None) -> tuple[Val, Val]:
    t = require_tensor("var_mean", t)
    dims = _reduction_dims("var_mean", t, _dims_or_axes("var_mean", dims, axes))
    if not isinstance(correction, (int, float)) or isinstance(correction, bool):
        raise DefinitionError(f"var_mean: correction must be a number, got {correction!r}")
    if t.dtype.is_complex:  # torch's variance of complex values is real: the real part's
        # plus the imaginary part's (each its own shifted one-pass sums); the mean is complex
        var = pointwise(Op.ADD, var_mean(pointwise(Op.REAL, t), dims, correction)[0],
                        var_mean(pointwise(Op.IMAG, t), dims, correction)[0])
        mean = reduction_raw(Op.MEAN, t, ReductionArg(dims))
        if keepdim:
            return _keepdim(var, dims, t.ndim), _keepdim(mean, dims, t.ndim)
        return var, mean
    if not t.dtype.is_float or t.dtype.is_float8:
        t = cast(t, DataType.Float)
    var = reduction_raw(Op.VAR, t, ReductionArg(dims, correction))
    mean = reduction_raw(Op.MEAN, t, ReductionArg(dims))
    if keepdim:
        return _keepdim(var, dims, t.ndim), _keepdim(mean, dims, t.ndim)
    return var, mean


@frontend("welford")
def welford(t: Val, dims=None, *, axes=None) -> tuple[Val, Val, Val]:
    """nvFuser's welford: (mean, the sum of squared deviations (var_sum), the
    count n as an Int tensor), over `dims`; made from var_mean (one pass in a
    generated kernel) and a fill."""
    from .factories import full
    t = require_tensor("welford", t)
    dims = _reduction_dims("welford", t, _dims_or_axes("welford", dims, axes))
    var, mean = var_mean(t, dims, correction=0)
    n = S.as_val(1)
    for d in dims:
        n = S.mul(n, t.logical[d].extent)
    kept = [a.extent for i, a in enumerate(t.logical) if i not in dims]
    var_sum = pointwise(Op.MUL, var, n)
    return mean, var_sum, full(kept, n, DataType.Int)


@frontend("var")
def var(t: Val, dims=None, correction: int = 1, keepdim: bool = False, *, axes=None) -> Val:
    return var_mean(t, dims, correction, keepdim, axes=axes)[0]


def _in_compute_type(fn):
    def reference(v: Val, args, env):
        t = args[0]
        if not v.arg.dims:
            return t.clone()
        return fn(v, t.to(compute_dtype(v.dtype).torch)).to(v.dtype.torch)
    return reference


def _text(v: Val, n) -> str:
    extra = f", correction={v.arg.correction}" if v.arg.correction is not None else ""
    return f"{v.op.value}({n(v.src[0])}, dims={list(v.arg.dims)}{extra})"


_RULES = {
    Op.SUM: lambda v, t: torch.sum(t, dim=v.arg.dims),
    Op.MAX: lambda v, t: torch.amax(t, dim=v.arg.dims),
    Op.MIN: lambda v, t: torch.amin(t, dim=v.arg.dims),
    Op.MEAN: lambda v, t: torch.mean(t, dim=v.arg.dims),
    Op.VAR: lambda v, t: torch.var(t, dim=v.arg.dims, correction=v.arg.correction),
    Op.PROD: lambda v, t: _prod(t, v.arg.dims),
}


def _prod(t: torch.Tensor, dims) -> torch.Tensor:
    for d in sorted(dims, reverse=True):  # torch.prod takes one dim at a time
        t = t.prod(d)
    return t
def _dims(v: Val, k: int) -> tuple:
    out, i = [], 0
    for d in range(v.src[0].ndim):
        out.append(REDUCED if d in v.arg.dims else i)
        i += d not in v.arg.dims
    return tuple(out)


def _kernel(combine: str, mean: bool = False):
    """The kernel rule: the source at every reduced point (the lowering `L`
    adds the reduced dims' indices to the kept index `ix`), combined by a
    REDUCE node in the compute type; a mean divides by the count. (Tried,
    2026-11-29: multiplying by the count's reciprocal, one division a kernel
    out of the row loop instead of up to three a row. It held a register more
    across the loop, so short rows at 32 registers spilled. H200 % of copy,
    same run, divide / multiply: var_mean bf16 300007x77 58.0 / 56.7, fp16
    664444x101 78.3 / 77.1, bf16 1048576x64 83.5 / 82.1, 181866x369 80.5 / 83.0,
    fp32 466033x143 92.7 / 93.6.)"""
    def rule(v: Val, ix, pred, L):
        c = compute_dtype(v.dtype)
        if mean and _has_var_beside(v, L):  # var_mean: the mean from the var's shifted sum
            c, k, n, s1, _ = _shifted_sums(v, ix, L)
            out = L.b.mk(Op.ADD, c, (k, L.b.mk(Op.DIV, c, (s1, n))))
            return L.rounded(out, v.dtype)
        x = L.cast(L.value(v.src[0], L.full_index(ix), None), c)
        acc = L.reduce(combine, x)
        if mean:
            acc = L.b.mk(Op.DIV, c, (L.cast(acc, c), L.cast(L.reduced_count(), c)))
        return L.rounded(L.cast(acc, c), v.dtype)
    return rule


def _has_var_beside(v: Val, L) -> bool:
    """Whether the kernel's segment also takes the variance of v's source over
    v's dims (var_mean): then the mean shares its shifted sum."""
    seg = getattr(L, "seg", None)
    return seg is not None and any(e.op is Op.VAR and e.src[0] is v.src[0] and e.arg.dims == v.arg.dims
                                   for e in seg.exprs)


def _shifted_sums(v: Val, ix, L):
    """(compute type, k, n, sum of d, sum of d * d) with k the row's first value
    and d = x - k (nodes are interned: a var and a mean of one source share them)."""
    c = compute_dtype(v.dtype)
    b = L.b
    x = L.cast(L.value(v.src[0], L.full_index(ix), None), c)
    first, nonempty = L.first_index(ix)
    k = L.cast(L.value(v.src[0], first, nonempty), c)
    d = b.mk(Op.SUB, c, (x, k))
    n = L.cast(L.reduced_count(), c)
    s1 = L.cast(L.reduce("sum", d), c)
    s2 = L.cast(L.reduce("sum", b.mk(Op.MUL, c, (d, d))), c)
    return c, k, n, s1, s2


def _var_kernel(v: Val, ix, pred, L):
    """One pass over shifted data: with k the row's first value, the sums of
    d = x - k and of d * d give var = (sum d^2 - (sum d)^2 / n) / max(0, n -
    correction), and var_mean's mean is k + (sum d) / n. The shift keeps d on
    the scale of the deviations, so the subtraction does not cancel as the
    unshifted E[x^2] - E[x]^2 does."""
    b = L.b
    c, k, n, s1, s2 = _shifted_sums(v, ix, L)
    ss = b.mk(Op.SUB, c, (s2, b.mk(Op.DIV, c, (b.mk(Op.MUL, c, (s1, s1)), n))))
    ss = b.mk(Op.MAXIMUM, c, (ss, b.const(0, c)))  # rounding may leave it a hair below 0
    dof = b.mk(Op.MAXIMUM, c, (b.mk(Op.SUB, c, (n, b.const(v.arg.correction, c))), b.const(0, c)))
    return L.rounded(b.mk(Op.DIV, c, (ss, dof)), v.dtype)


_KERNELS = {Op.SUM: _kernel("sum"), Op.MAX: _kernel("max"), Op.MIN: _kernel("min"),
            Op.MEAN: _kernel("sum", mean=True), Op.VAR: _var_kernel, Op.PROD: _kernel("prod")}
# how results over parts of the reduced dims combine (var does not combine so)
_PARTIAL = {Op.SUM: "sum", Op.MAX: "max", Op.MIN: "min", Op.MEAN: "avg", Op.VAR: None, Op.PROD: None}
for _op, _fn in _RULES.items():
    define(OpDef(_op, Family.REDUCTION, rebuild=lambda v, src: reduction_raw(v.op, src[0], v.arg),
                 reference=_in_compute_type(_fn), text=_text, dims=_dims, partial=_PARTIAL[_op],
                 kernel=_KERNELS.get(_op)))


def _frontend_reduction(op: Op):
    def build(t, dims=None, keepdim: bool = False, dtype: DataType = DataType.Null, *, axes=None):
        return reduction(op, t, dims, keepdim, dtype, axes=axes)
    build.__name__ = op.value
    return build


for _op in (Op.SUM, Op.MAX, Op.MIN, Op.PROD):
    frontend(_op.value)(_frontend_reduction(_op))


# ---------------------------------------------------------------- argmax

@frontend("argmax")
def argmax(t: Val, dim=None, keepdim: bool = False, *, keep_dim: bool | None = None) -> Val:
    """torch.argmax: the Int index of the greatest value along `dim` (of the
    flattened tensor when dim is None); the first one of equal values, and a
    NaN counts as the greatest (the first NaN). `keep_dim` is the spelling of
    nvFuser's reduction bindings."""
    t = require_tensor("argmax", t)
    keepdim = keepdim if keep_dim is None else keep_dim
    if t.dtype.is_bool:
        raise DefinitionError(f"argmax: {describe(t)} is Bool, which argmax does not order "
                              f"(as torch.argmax); cast it to an integer type first")
    if dim is not None and (not isinstance(dim, int) or isinstance(dim, bool)):
        raise DefinitionError(f"argmax: dim must be an int or None (one dim, or the flattened "
                              f"tensor), got {dim!r} for {describe(t)}")
    if t.ndim == 0:
        from .factories import full
        norm_dim("argmax", t, 0 if dim in (None, -1) else dim)  # dim 0 or -1 of a 0-dim tensor
        return full([], 0, DataType.Int)
    dims = tuple(range(t.ndim)) if dim is None else (norm_dim("argmax", t, dim),)
    for d in dims:
        if S.is_const(t.logical[d].extent, 0):
            raise DefinitionError(f"argmax: dim {d} of {describe(t)} has extent 0; argmax over an "
                                  f"empty dim has no value (as torch.argmax)")
    out = argmax_raw(t, ReductionArg(dims))
    return _keepdim(out, dims, t.ndim) if keepdim else out


def argmax_raw(t: Val, arg: ReductionArg) -> Val:
    return Val(Op.ARGMAX, DataType.Int, (t,), arg=arg, axes=_reduce_axes(t, arg.dims))


def _argmax_reference(v: Val, args, env):
    t = args[0].to(compute_dtype(v.src[0].dtype).torch)  # (half and bfloat16 order as floats)
    dims = v.arg.dims
    kept = [d for d in range(t.ndim) if d not in dims]
    rows = t.permute(*kept, *dims).reshape(*(t.shape[d] for d in kept), -1)
    return torch.argmax(rows, dim=-1)  # the first greatest, NaN the greatest


def _argmax_check(v: Val):
    """argmax over a dim that is empty at run time has no value: an error naming
    the op and the tensor, as torch raises."""
    extents = [(d, v.src[0].logical[d].extent) for d in v.arg.dims]

    def check(env):
        for d, e in extents:
            if env.scalar(e) == 0:
                raise ExecutionError(f"argmax -> {v!r}: dim {d} of {v.src[0]!r} has extent 0 at "
                                     f"run time; argmax over an empty dim has no value (as torch)")
    return check


def _argmax_kernel(v: Val, ix, pred, L):
    """A REDUCE of (value, row-major index over the reduced dims) pairs: one
    combine keeps the greater value (NaN the greatest), of equal values the
    smaller index, so every order of combining gives the first greatest."""
    x = L.cast(L.value(v.src[0], L.full_index(ix), None), compute_dtype(v.src[0].dtype))
    return L.reduce("argmax", x, L.reduced_index())


define(OpDef(Op.ARGMAX, Family.REDUCTION, rebuild=lambda v, src: argmax_raw(src[0], v.arg),
             reference=_argmax_reference, text=_text, dims=_dims, partial=None,
             kernel=_argmax_kernel, check=_argmax_check))
