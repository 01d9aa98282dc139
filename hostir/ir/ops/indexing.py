"""Indexing: ops that read their input where an index tensor says, as nvFuser's
`fd.ops.index_select(input, index, dim)`, `gather(input, index, dim)` (torch.gather),
`take_along_axis(input, index, dim)` (numpy's: the index broadcasts against the
input on the other dims) and `embedding_fwd` (made from index_select and a
reshape). Index tensors are Int or Int32; negative values count from the end of
the dim, as numpy and take_along_dim do (torch.index_select and torch.gather
reject them; hostir accepts them in all three). A value out of range is an
ExecutionError naming the op, the tensor, the value and the extent: always on
CPU (the interpreter checks every index), on GPUs with HOSTIR_DEBUG=indices
(the kernel checks, prints the offending value and traps); without it a GPU
kernel reads nothing out of range (the load is predicated, giving 0).

`scatter(input, index, src, dim)` (torch.scatter, out of place) writes instead:
see its docstring; it is a segment of its own (codegen/scatter.py)."""
from __future__ import annotations

import torch

from .. import scalar as S
from ..dtypes import DataType
from ..errors import DefinitionError, ExecutionError, UnsupportedError
from ..node import Axis, AxisKind, Family, Op, OpDef, Val, define
from ..printer import operand_text
from .common import check_same_extent, describe, extent_agreement, frontend, norm_dim, require_tensor
from .views import reshape

INDEX_TYPES = (DataType.Int, DataType.Int32)


def _index_arg(opname: str, index) -> Val:
    index = require_tensor(opname, index, "index")
    if index.dtype not in INDEX_TYPES:
        raise DefinitionError(f"{opname}: index {describe(index)} must be Int or Int32, "
                              f"got {index.dtype.short}")
    return index


@frontend("index_select")
def index_select(input, index, dim: int) -> Val:
    """Rows (along `dim`) of `input` in the order `index` (1-D) lists them."""
    input = require_tensor("index_select", input)
    index = _index_arg("index_select", index)
    if index.ndim != 1:
        raise DefinitionError(f"index_select: index {describe(index)} must be 1-D, has {index.ndim} dims")
    dim = norm_dim("index_select", input, dim)
    return _raw(Op.INDEX_SELECT, input, index, dim)


@frontend("gather")
def gather(input, index, dim: int) -> Val:
    """torch.gather: out[..., i_dim, ...] = input[..., index[..., i_dim, ...], ...];
    the index has the input's rank and, on the other dims, at most its extents."""
    return _along("gather", Op.GATHER, input, index, dim)


@frontend("take_along_axis")
def take_along_axis(input, index, dim: int) -> Val:
    """numpy.take_along_axis: as gather, with the index broadcast against the
    input on the other dims (a size-1 dim of either stretches)."""
    return _along("take_along_axis", Op.TAKE_ALONG_AXIS, input, index, dim)


def _along(opname, op, input, index, dim) -> Val:
    input = require_tensor(opname, input)
    index = _index_arg(opname, index)
    if index.ndim != input.ndim:
        raise DefinitionError(f"{opname}: index {describe(index)} must have the rank of the input "
                              f"{describe(input)} ({input.ndim}), has {index.ndim}")
    dim = norm_dim(opname, input, dim)
    return _raw(op, input, index, dim)


def _raw(op: Op, input: Val, index: Val, dim: int) -> Val:
    if op is Op.INDEX_SELECT:
        axes = list(input.logical)
        ix = index.logical[0]
        axes[dim] = Axis(ix.extent, AxisKind.BCAST if ix.is_broadcast else AxisKind.ITER)
    elif op is Op.GATHER:
        axes = list(index.logical)
    else:
        axes = []
        for d, (a, b) in enumerate(zip(input.logical, index.logical)):
            if d == dim or not b.is_broadcast or (a.is_broadcast and not a.is_expanded):
                axes.append(b)
            else:
                axes.append(a)
    return Val(op, input.dtype, (input, index), arg=dim, axes=tuple(axes))


def _check_range(v: Val, idx: torch.Tensor, extent: int, negative: bool = True, dim: int | None = None) -> None:
    """Every value of `idx` (v's index, addressing dim `dim` of v's input: v.arg
    unless given) in [0, extent), or from -extent where `negative`."""
    bad = (idx < (-extent if negative else 0)) | (idx >= extent)
    if bool(bad.any()):
        value = int(idx[bad].flatten()[0])
        raise ExecutionError(f"{v.op.value} -> {v!r}: index {value} in {v.src[1]!r} is out of range "
                             f"for dim {v.arg if dim is None else dim} of {v.src[0]!r}, which has "
                             f"extent {extent}")


def _reference(v: Val, args, env):
    x, idx = args
    dim = v.arg
    idx = idx.to(torch.int64)
    _check_range(v, idx, x.shape[dim])
    idx = torch.where(idx < 0, idx + x.shape[dim], idx)
    if v.op is Op.INDEX_SELECT:
        return torch.index_select(x, dim, idx)
    if v.op is Op.GATHER:
        for d in range(x.ndim):
            if d != dim and idx.shape[d] > x.shape[d]:
                raise ExecutionError(f"gather -> {v!r}: dim {d} of index {v.src[1]!r} has extent "
                                     f"{idx.shape[d]}, more than the input {v.src[0]!r}'s {x.shape[d]}")
        return torch.gather(x, dim, idx)
    return torch.take_along_dim(x, idx, dim)


def _kernel(v: Val, ix, pred, L):
    """The index value at this point (the index's own index: `ix` itself, or its
    dim alone for index_select), made non-negative and checked against the
    input's extent; the input read there (the read predicated on the check)."""
    b, x, index, dim = L.b, v.src[0], v.src[1], v.arg
    if v.op is Op.INDEX_SELECT:
        at = (ix[dim],)
    else:
        at = tuple(b.i(0) if a.is_broadcast else i for a, i in zip(index.logical, ix))
    raw = L.cast(L.value(index, at, pred), DataType.Int)
    n = L.scalar(x.logical[dim].extent)
    j = b.where(b.cmp(Op.LT, raw, b.i(0)), b.add(raw, n), raw)
    ok = b.land(b.cmp(Op.GE, j, b.i(0)), b.cmp(Op.LT, j, n))
    src_ix = tuple(j if d == dim else (b.i(0) if a.is_broadcast else i)
                   for d, (a, i) in enumerate(zip(x.logical, ix)))
    val = L.value(x, src_ix, b.land(pred, ok))
    message = f"{v.op.value} -> {v!r}: a value of {index!r} addressing dim {dim} of {x!r}"
    return L.check(ok, val, message, raw, n, pred)


def _check(v: Val):
    """gather: the index's other dims within the input's; take_along_axis: they
    broadcast (equal where neither is a broadcast)."""
    x, index, dim = v.src[0], v.src[1], v.arg
    if v.op is Op.TAKE_ALONG_AXIS:
        per_dim = [(d, [(x, x.logical[d].extent), (index, index.logical[d].extent)])
                   for d in range(x.ndim) if d != dim and not x.logical[d].is_broadcast
                   and not index.logical[d].is_broadcast]
        return extent_agreement(v, per_dim, "take_along_axis")
    if v.op is Op.GATHER:
        dims = [d for d in range(x.ndim) if d != dim]

        def check(env):
            for d in dims:
                a, b = env.scalar(index.logical[d].extent), env.scalar(x.logical[d].extent)
                if a > b:
                    raise ExecutionError(f"gather -> {v!r}: dim {d} of index {index!r} has extent {a}, "
                                         f"more than the input {x!r}'s {b}")
        return check if dims else None
    return None


def _text(v: Val, n) -> str:
    return f"{v.op.value}({n(v.src[0])}, {n(v.src[1])}, dim={v.arg})"


def _dims(v: Val, k: int) -> tuple:
    src = v.src[k]
    if k == 0:  # the addressed dim has no counterpart; the others go through
        return tuple(None if d == v.arg else d for d in range(src.ndim))
    if v.op is Op.INDEX_SELECT:
        return (v.arg,)
    return tuple(range(src.ndim))


for _op in (Op.INDEX_SELECT, Op.GATHER, Op.TAKE_ALONG_AXIS):
    define(OpDef(_op, Family.INDEXING, (2, 2), rebuild=lambda v, src: _raw(v.op, src[0], src[1], v.arg),
                 reference=_reference, text=_text, kernel=_kernel, check=_check, dims=_dims))


@frontend("embedding_fwd")
def embedding_fwd(input, weight, padding_idx=None, max_norm=None, norm_type=None,
                  scale_grad_by_freq=None, sparse=None) -> Val:
    """torch.nn.functional.embedding's forward: the rows of `weight` [V, D] that
    `input` (Int or Int32 of any shape) lists, shaped input's shape + [D].
    `padding_idx`, `scale_grad_by_freq` and `sparse` only change the backward;
    `max_norm` (renormalizing the rows in place) is not supported."""
    input = _index_arg("embedding_fwd", input)
    weight = require_tensor("embedding_fwd", weight, "weight")
    if weight.ndim != 2:
        raise DefinitionError(f"embedding_fwd: weight {describe(weight)} must be 2-D [rows, dim], "
                              f"has {weight.ndim} dims")
    if max_norm is not None:
        raise UnsupportedError("embedding_fwd: max_norm renormalizes weight rows in place; not "
                               "supported (pass None)")
    flat = input if input.ndim == 1 else reshape(input, [_numel(input)])
    rows = _raw(Op.INDEX_SELECT, weight, flat, 0)
    if input.ndim == 1:
        return rows
    return reshape(rows, [a.extent for a in input.logical] + [weight.logical[1].extent])


@frontend("select")
def select(input, index, dim: int) -> Val:
    """nvFuser's select: the slice of `input` at scalar `index` along `dim`, that
    dim removed (negative indices count from the end; out of range is an
    ExecutionError naming the value). An index_select of one row, reshaped."""
    from .factories import full
    input = require_tensor("select", input)
    dim = norm_dim("select", input, dim)
    index = S.as_val(index)
    if index.is_tensor or not index.dtype.is_int:
        raise DefinitionError(f"select: index must be an Int scalar, got {index!r}")
    rows = _raw(Op.INDEX_SELECT, input, full([1], index, DataType.Int), dim)
    return reshape(rows, [a.extent for d, a in enumerate(input.logical) if d != dim])


def _numel(t: Val) -> Val:
    n = S.as_val(1)
    for a in t.logical:
        n = S.mul(n, a.extent)
    return n


@frontend("scatter")
def scatter(input, index, src, dim: int) -> Val:
    """torch.scatter(input, dim, index, src), out of place, in nvFuser's argument
    order: `input` with src[i][j][k] written at index[i][j][k] along `dim` (for
    dim 0: out[index[i][j][k]][j][k] = src[i][j][k]), for every point of
    `index`. index, input and src (a tensor of input's dtype, or a scalar
    written everywhere the index says) have one rank; on each dim the index is
    no larger than src, and no larger than input except along `dim`.

    Index values must lie in [0, extent of dim), as torch.scatter requires:
    unlike the gathers', negative values do not count from the end (a
    scatter's misplaced write would go unnoticed). A value out of range is an
    ExecutionError naming the op, the tensors, the value and the extent on CPU,
    a trap on GPUs with HOSTIR_DEBUG=indices; without it a GPU kernel skips
    that write. Where the index names one position more than once, which of
    the values lands there is unspecified (as in torch; on GPUs, whichever
    thread writes last)."""
    input = require_tensor("scatter", input)
    index = _index_arg("scatter", index)
    if input.ndim == 0:
        raise DefinitionError(f"scatter: input {describe(input)} must have at least one dim")
    if index.ndim != input.ndim:
        raise DefinitionError(f"scatter: index {describe(index)} must have the rank of the input "
                              f"{describe(input)} ({input.ndim}), has {index.ndim}")
    src = _src_arg(input, src)
    dim = norm_dim("scatter", input, dim)
    for d, other, what in _bounding(input, src, dim):
        a, b = index.logical[d].extent, other.logical[d].extent
        if S.is_const(a) and S.is_const(b) and a.arg > b.arg:
            raise DefinitionError(f"scatter: dim {d} of index {describe(index)} has extent {a.arg}, "
                                  f"more than the {what} {describe(other)}'s {b.arg}")
    return _scatter_raw(input, index, src, dim)


def _src_arg(input: Val, src) -> Val:
    """A tensor src of the input's rank and dtype, or a scalar in that dtype."""
    if not (isinstance(src, Val) and src.is_tensor):
        return S.cast_scalar(S.as_val(src), input.dtype)
    if src.ndim != input.ndim:
        raise DefinitionError(f"scatter: src {describe(src)} must have the rank of the input "
                              f"{describe(input)} ({input.ndim}), has {src.ndim}")
    if src.dtype is not input.dtype:
        raise DefinitionError(f"scatter: src {describe(src)} must have the dtype of the input "
                              f"{describe(input)}, {input.dtype.short}")
    return src


def _bounding(input: Val, src: Val, dim: int) -> list:
    """(dim, tensor, its role) whose extents bound the index's on that dim."""
    out = [(d, input, "input") for d in range(input.ndim) if d != dim]
    return out + ([(d, src, "src") for d in range(src.ndim)] if src.is_tensor else [])


def _scatter_raw(input: Val, index: Val, src: Val, dim: int) -> Val:
    # an expanded (stride-0) dim of the input takes distinct values once written
    axes = tuple(Axis(a.extent, AxisKind.ITER) if a.is_expanded else a for a in input.logical)
    return Val(Op.SCATTER, input.dtype, (input, index, src), arg=dim, axes=axes)


def _scatter_reference(v: Val, args, env):
    x, idx, src = args
    idx = idx.to(torch.int64)
    _check_range(v, idx, x.shape[v.arg], negative=False)
    return torch.scatter(x, v.arg, idx, src)  # (src a tensor or a number)


def _scatter_write(v: Val, ix, L):
    """Point `ix` of the index writes src there (a scalar src everywhere) at the
    position the index value gives along dim, where it is in range."""
    b, (x, index, src), dim = L.b, v.src, v.arg
    raw = L.cast(L.value(index, ix, None), DataType.Int)
    n = L.scalar(x.logical[dim].extent)
    ok = b.land(b.cmp(Op.GE, raw, b.i(0)), b.cmp(Op.LT, raw, n))
    message = f"scatter -> {v!r}: a value of {index!r} addressing dim {dim} of {x!r}"
    at = tuple(L.check(ok, raw, message, raw, n) if d == dim else i for d, i in enumerate(ix))
    value = L.value(src, ix, None) if src.is_tensor else L.rounded(L.scalar(src), v.dtype)
    return at, value, ok


def _scatter_check(v: Val):
    """The index no larger than src on every dim, than the input off dim."""
    x, index, src = v.src

    def check(env):
        for d, other, what in _bounding(x, src, v.arg):
            a, b = env.scalar(index.logical[d].extent), env.scalar(other.logical[d].extent)
            if a > b:
                raise ExecutionError(f"scatter -> {v!r}: dim {d} of index {index!r} has extent {a}, "
                                     f"more than the {what} {other!r}'s {b}")
    return check


def _scatter_text(v: Val, n) -> str:
    return f"scatter({n(v.src[0])}, {n(v.src[1])}, {operand_text(v.src[2], n)}, dim={v.arg})"


# Sharded operands are gathered whole first: the index's and src's extents need
# not match the input's, so no dim of theirs is one of the result's.
define(OpDef(Op.SCATTER, Family.SCATTER, (3, 3), build=scatter,
             rebuild=lambda v, src: _scatter_raw(src[0], src[1], src[2], v.arg),
             reference=_scatter_reference, text=_scatter_text, write=_scatter_write,
             check=_scatter_check, dims=lambda v, k: (None,) * v.src[k].ndim if v.src[k].is_tensor else ()))


@frontend("index_put_accumulate")
def index_put_accumulate(acc, index, value) -> Val:
    """nvFuser's index_put_accumulate (torch.index_put(acc, (index,), value,
    accumulate=True), out of place): `acc` with value[i] added to row index[i]
    of its dim 0, for each i; rows listed more than once get every value
    added. acc [R, ...], index [N] (Int or Int32; negative values count from
    the end), value [N, ...] of acc's dtype and trailing shape. Through ATen
    (deterministic: its sums run in a fixed order); an index out of range is an
    ExecutionError naming the value, on CPU always, on GPUs with
    HOSTIR_DEBUG=indices."""
    acc = require_tensor("index_put_accumulate", acc, "acc")
    index = _index_arg("index_put_accumulate", index)
    value = require_tensor("index_put_accumulate", value, "value")
    if acc.ndim == 0:
        raise DefinitionError(f"index_put_accumulate: acc {describe(acc)} must have at least one dim")
    if index.ndim != 1:
        raise DefinitionError(f"index_put_accumulate: index {describe(index)} must be 1-D, has "
                              f"{index.ndim} dims")
    if value.ndim != acc.ndim or value.dtype is not acc.dtype:
        raise DefinitionError(f"index_put_accumulate: value {describe(value)} must have acc's rank "
                              f"({acc.ndim}) and dtype ({acc.dtype.short})")
    for a, d in [(index, 0)] + [(acc, d) for d in range(1, acc.ndim)]:
        check_same_extent("index_put_accumulate", a, d, value, d, a.logical[d].extent,
                          value.logical[d].extent)
    return _put_raw(acc, index, value)


def _put_raw(acc: Val, index: Val, value: Val) -> Val:
    axes = tuple(Axis(a.extent, AxisKind.ITER) if a.is_expanded else a for a in acc.logical)
    return Val(Op.INDEX_PUT_ACCUMULATE, acc.dtype, (acc, index, value), axes=axes)


def _put_reference(v: Val, args, env):
    acc, idx, value = args
    rows = acc.shape[0]
    if idx.shape[0] != value.shape[0] or list(value.shape[1:]) != list(acc.shape[1:]):
        raise ExecutionError(f"index_put_accumulate -> {v!r}: value {v.src[2]!r} has shape "
                             f"{list(value.shape)}, expected [{idx.shape[0]}] + {list(acc.shape[1:])} "
                             f"(index {v.src[1]!r}'s length, then acc {v.src[0]!r}'s trailing dims)")
    idx = idx.to(torch.int64)
    if env.checks_indices:
        _check_range(v, idx, rows, dim=0)
    return acc.index_put((idx,), value, accumulate=True)


def _put_text(v: Val, n) -> str:
    return f"index_put_accumulate({n(v.src[0])}, {n(v.src[1])}, {n(v.src[2])})"


def _put_dims(v: Val, k: int) -> tuple:
    """acc's and value's trailing dims pass through; the rows index addresses are whole."""
    return (None,) if k == 1 else (None,) + tuple(range(1, v.src[k].ndim))


define(OpDef(Op.INDEX_PUT_ACCUMULATE, Family.ATEN, (3, 3), build=index_put_accumulate,
             rebuild=lambda v, src: _put_raw(*src), reference=_put_reference, text=_put_text,
             dims=_put_dims))


__all__ = ["embedding_fwd", "gather", "index_put_accumulate", "index_select", "scatter", "select",
           "take_along_axis"]
