"""Tensor op constructors: each checks its arguments and computes the output's
dtype and axes (the op's shape rule). Errors name the op and the operands."""
from __future__ import annotations

from typing import Sequence

from . import scalar as S
from .dtypes import DataType, promote
from .errors import DefinitionError, UnsupportedError
from .node import BINARY, UNARY, Axis, AxisKind, Kind, Op, Val, const

ONE = const(1)
ZERO = const(0)


def describe(v: Val) -> str:
    """`T3 (float[i0, 8])`-style text for error messages."""
    from .printer import type_text
    return f"{v!r} ({type_text(v)})"


def extent_text(e: Val) -> str:
    from .printer import scalar_text
    return scalar_text(e)


def iter_axis(extent: Val) -> Axis:
    extent = S.as_val(extent)
    return Axis(extent, AxisKind.BCAST if S.is_const(extent, 1) else AxisKind.ITER)


def _norm_dim(opname: str, t: Val, dim: int, ndim: int | None = None) -> int:
    ndim = t.ndim if ndim is None else ndim
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise DefinitionError(f"{opname}: dim must be an int, got {dim!r}")
    if not -ndim <= dim < max(ndim, 1):
        raise DefinitionError(
            f"{opname}: dim {dim} is out of range for {describe(t)} with {ndim} dims "
            f"(expected -{ndim} <= dim < {ndim})")
    return dim % ndim if ndim else 0


def _norm_dims(opname: str, t: Val, dims, ndim: int | None = None) -> tuple[int, ...]:
    if isinstance(dims, int):
        dims = [dims]
    out = tuple(_norm_dim(opname, t, d, ndim) for d in dims)
    if len(set(out)) != len(out):
        raise DefinitionError(f"{opname}: repeated dims {list(dims)} for {describe(t)}")
    return out


def _require_tensor(opname: str, v, what: str = "input") -> Val:
    if not isinstance(v, Val) or not v.is_tensor:
        raise DefinitionError(f"{opname}: {what} must be a tensor, got {v!r}")
    return v


def _shape_arg(opname: str, shape) -> list[Val]:
    if isinstance(shape, Val):
        raise DefinitionError(f"{opname}: shape must be a list of ints or scalars, got {shape!r}")
    out = []
    for s in shape:
        if isinstance(s, Val):
            if s.is_tensor or not (s.dtype.is_int):
                raise DefinitionError(
                    f"{opname}: shape entries must be integers, got {describe(s) if s.is_tensor else repr(s)} "
                    f"of type {s.dtype.short}")
            out.append(s)
        elif isinstance(s, int) and not isinstance(s, bool):
            out.append(const(s))
        else:
            raise DefinitionError(f"{opname}: shape entries must be ints or Int scalars, got {s!r}")
    return out


def _check_same_extent(opname: str, a: Val, da: int, b: Val, db: int, ea: Val, eb: Val):
    if S.is_const(ea) and S.is_const(eb) and ea.arg != eb.arg:
        raise DefinitionError(
            f"{opname}: incompatible shapes: dim {da} of {describe(a)} has extent {ea.arg} "
            f"but dim {db} of {describe(b)} has extent {eb.arg}")


# ---------------------------------------------------------------- pointwise

def broadcast_axes(opname: str, tensors: list[Val]) -> tuple[Axis, ...]:
    """Align tensors from the right (rank broadcasting, as nvFuser's
    maybeBroadcast) and merge each dim's axes."""
    ndim = max(t.ndim for t in tensors)
    out = []
    for d in range(ndim):
        chosen: tuple[Val, int, Axis] | None = None
        expanded = None
        for t in tensors:
            td = d - (ndim - t.ndim)
            if td < 0:
                continue
            ax = t.logical[td]
            if ax.kind is AxisKind.ITER:
                if chosen is not None:
                    _check_same_extent(opname, chosen[0], chosen[1], t, td, chosen[2].extent, ax.extent)
                else:
                    chosen = (t, td, ax)
            elif ax.is_expanded and expanded is None:
                expanded = (t, td, ax)
        if chosen is not None and expanded is not None:
            _check_same_extent(opname, chosen[0], chosen[1], expanded[0], expanded[1],
                               chosen[2].extent, expanded[2].extent)
        if chosen is not None:
            out.append(Axis(chosen[2].extent, AxisKind.ITER))
        elif expanded is not None:
            out.append(Axis(expanded[2].extent, AxisKind.BCAST))
        else:
            out.append(Axis(ONE, AxisKind.BCAST))
    return tuple(out)


def pointwise(op: Op, *operands) -> Val:
    opname = op.value
    vals = [S.as_val(v) for v in operands]
    kind = UNARY.get(op) or BINARY.get(op)
    if kind is Kind.INTEGRAL:
        for v in vals:
            if v.dtype.is_float:
                raise DefinitionError(
                    f"{opname}: operands must be integers or bools, got {describe(v) if v.is_tensor else repr(v)} "
                    f"of type {v.dtype.short}")
    tensors = [v for v in vals if v.is_tensor]
    if not tensors:
        return S.scalar_op(op, *vals)
    dtype = S.result_type(op, vals)
    return Val(op, dtype, tuple(vals), axes=broadcast_axes(opname, tensors))


def where(cond, a, b) -> Val:
    vals = [S.as_val(v) for v in (cond, a, b)]
    if vals[0].dtype is not DataType.Bool:
        raise DefinitionError(
            f"where: condition must be Bool, got {vals[0]!r} of type {vals[0].dtype.short}")
    tensors = [v for v in vals if v.is_tensor]
    if not tensors:
        return S.scalar_op(Op.WHERE, *vals)
    if any(v.is_tensor for v in vals[1:]):
        dtype = S.promote_vals(vals[1:])
    else:  # torch.where(cond, 1.5, 2.5): two numbers give the default dtype, as in torch
        dtype = (DataType.Bool, DataType.Int, DataType.Float)[max(v.dtype.category for v in vals[1:])]
    return Val(Op.WHERE, dtype, tuple(vals), axes=broadcast_axes("where", tensors))


def cast(v, dtype: DataType) -> Val:
    if not isinstance(dtype, DataType) or dtype is DataType.Null:
        raise DefinitionError(f"cast: dtype must be a DataType other than Null, got {dtype!r}")
    v = S.as_val(v)
    if v.is_scalar:
        return S.cast_scalar(v, dtype)
    return Val(Op.CAST, dtype, (v,), arg=dtype, axes=v.logical)


def set_(t: Val) -> Val:
    t = _require_tensor("set", t)
    return Val(Op.SET, t.dtype, (t,), axes=t.logical)


# ---------------------------------------------------------------- views

def broadcast(t: Val, is_broadcast_dim: Sequence[bool]) -> Val:
    t = _require_tensor("broadcast", t)
    flags = tuple(bool(f) for f in is_broadcast_dim)
    if sum(not f for f in flags) != t.ndim:
        raise DefinitionError(
            f"broadcast: is_broadcast_dim {list(is_broadcast_dim)} has {sum(not f for f in flags)} "
            f"False entries but {describe(t)} has {t.ndim} dims (expected one False per input dim)")
    it = iter(t.logical)
    axes = tuple(Axis(ONE, AxisKind.BCAST) if f else next(it) for f in flags)
    return Val(Op.BROADCAST, t.dtype, (t,), arg=flags, axes=axes)


def expand(t: Val, shape) -> Val:
    t = _require_tensor("expand", t)
    shape = _shape_arg("expand", shape)
    if len(shape) != t.ndim:
        raise DefinitionError(
            f"expand: shape has {len(shape)} entries but {describe(t)} has {t.ndim} dims")
    axes = []
    for d, (ax, e) in enumerate(zip(t.logical, shape)):
        if S.is_const(e, -1):
            axes.append(ax)
        elif ax.kind is AxisKind.BCAST:
            if S.is_const(e) and e.arg < 0:
                raise DefinitionError(f"expand: negative extent {e.arg} for dim {d} of {describe(t)}")
            axes.append(Axis(e, AxisKind.BCAST))
        else:
            if S.is_const(e) and S.is_const(ax.extent) and e.arg != ax.extent.arg:
                raise DefinitionError(
                    f"expand: dim {d} of {describe(t)} has extent {ax.extent.arg} and is not a "
                    f"broadcast axis; it cannot be expanded to {e.arg}")
            # a symbolic iteration dim keeps the requested extent, checked at run time
            axes.append(ax if S.is_const(ax.extent) or e is ax.extent else Axis(e, AxisKind.ITER))
    if all(a is b for a, b in zip(axes, t.logical)):
        return t
    return Val(Op.EXPAND, t.dtype, (t, *(a.extent for a in axes)), axes=tuple(axes))


def broadcast_in_dim(t: Val, shape, broadcast_dims: Sequence[int]) -> Val:
    t = _require_tensor("broadcast_in_dim", t)
    shape = _shape_arg("broadcast_in_dim", shape)
    bdims = list(broadcast_dims)
    if len(bdims) != t.ndim:
        raise DefinitionError(
            f"broadcast_in_dim: broadcast_dims {bdims} has {len(bdims)} entries but {describe(t)} "
            f"has {t.ndim} dims")
    bdims = [_norm_dim("broadcast_in_dim", t, d, len(shape)) for d in bdims]
    if any(b <= a for a, b in zip(bdims, bdims[1:])):
        raise DefinitionError(f"broadcast_in_dim: broadcast_dims must be increasing, got {list(broadcast_dims)}")
    flags = [True] * len(shape)
    for d in bdims:
        flags[d] = False
    out = broadcast(t, flags) if any(flags) else t
    targets = []
    for d, e in enumerate(shape):
        ax = out.logical[d]
        if ax.kind is AxisKind.BCAST and not S.is_const(e, 1) and not S.is_const(e, -1):
            targets.append(e)
        else:
            if not flags[d] and ax.kind is AxisKind.ITER:
                _check_same_extent("broadcast_in_dim", t, bdims.index(d), t, bdims.index(d),
                                   ax.extent, e if not S.is_const(e, -1) else ax.extent)
                targets.append(e)
            else:
                targets.append(const(-1))
    return expand(out, targets)


def squeeze(t: Val, dims, squeeze_expanded: bool = False) -> Val:
    t = _require_tensor("squeeze", t)
    dims = _norm_dims("squeeze", t, dims)
    for d in dims:
        ax = t.logical[d]
        if ax.kind is not AxisKind.BCAST:
            raise DefinitionError(
                f"squeeze: dim {d} of {describe(t)} is not a broadcast axis "
                f"(extent {extent_text(ax.extent)}); only size-1 broadcast dims can be squeezed")
        if ax.is_expanded and not squeeze_expanded:
            raise DefinitionError(
                f"squeeze: dim {d} of {describe(t)} is expanded to {extent_text(ax.extent)}; "
                f"pass squeeze_expanded=True to drop it")
    axes = tuple(a for i, a in enumerate(t.logical) if i not in dims)
    return Val(Op.SQUEEZE, t.dtype, (t,), arg=tuple(sorted(dims)), axes=axes)


def permute(t: Val, dims: Sequence[int]) -> Val:
    t = _require_tensor("permute", t)
    nd = _norm_dims("permute", t, list(dims))
    if sorted(nd) != list(range(t.ndim)):
        raise DefinitionError(
            f"permute: dims {list(dims)} is not a permutation of the {t.ndim} dims of {describe(t)}")
    return Val(Op.PERMUTE, t.dtype, (t,), arg=nd, axes=tuple(t.logical[d] for d in nd))


def _product(vals: list[Val]) -> Val:
    out = ONE
    for v in vals:
        out = S.mul(out, v)
    return out


def reshape(t: Val, new_shape) -> Val:
    t = _require_tensor("reshape", t)
    shape = _shape_arg("reshape", new_shape)
    infer = [i for i, e in enumerate(shape) if S.is_const(e, -1)]
    if len(infer) > 1:
        raise DefinitionError(f"reshape: at most one -1 in new_shape, got {list(new_shape)}")
    for e in shape:
        if S.is_const(e) and e.arg < -1:
            raise DefinitionError(f"reshape: invalid extent {e.arg} in new_shape {list(new_shape)}")
    numel = _product([a.extent for a in t.logical])
    known = _product([e for i, e in enumerate(shape) if i not in infer])
    if infer:
        if S.is_const(numel) and S.is_const(known) and (known.arg == 0 or numel.arg % known.arg):
            raise DefinitionError(
                f"reshape: cannot infer the -1 in new_shape {list(new_shape)} for {describe(t)} "
                f"with {numel.arg} elements")
        shape[infer[0]] = S.floordiv(numel, known)
    elif S.is_const(numel) and S.is_const(known) and numel.arg != known.arg:
        raise DefinitionError(
            f"reshape: {describe(t)} has {numel.arg} elements but new_shape {list(new_shape)} "
            f"has {known.arg}")
    axes = tuple(iter_axis(e) for e in shape)
    return Val(Op.RESHAPE, t.dtype, (t, *shape), axes=axes)


# ---------------------------------------------------------------- resizes

def _bound(opname: str, v) -> Val:
    if isinstance(v, Val):
        if v.is_tensor or not v.dtype.is_int:
            raise DefinitionError(f"{opname}: bounds must be Int scalars or ints, got {v!r}")
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return const(v)
    raise DefinitionError(f"{opname}: bounds must be ints or Int scalars, got {v!r}")


def _normalize_index(i: Val, extent: Val) -> Val:
    """Python semantics: negative counts from the end; clamp to [0, extent]."""
    if S.is_const(i, 0):
        return i
    if S.is_const(i) and i.arg >= 0:
        return i if S.is_const(extent) and i.arg <= extent.arg else S.smin(i, extent)
    wrapped = S.where(S.lt(i, 0), S.add(i, extent), i)
    return S.smin(S.smax(wrapped, 0), extent)


def slice_(t: Val, start_indices, end_indices, strides=None) -> Val:
    t = _require_tensor("slice", t)
    n = t.ndim
    if len(start_indices) != n or len(end_indices) != n:
        raise DefinitionError(
            f"slice: {describe(t)} has {n} dims but got {len(start_indices)} start indices "
            f"and {len(end_indices)} end indices")
    strides = [1] * n if strides is None else list(strides)
    if len(strides) != n:
        raise DefinitionError(f"slice: {describe(t)} has {n} dims but got {len(strides)} strides")
    for s in strides:
        if not isinstance(s, int) or isinstance(s, bool) or s < 1:
            raise UnsupportedError(f"slice: strides must be positive Python ints, got {strides}")
    starts, stops, axes = [], [], []
    for d, ax in enumerate(t.logical):
        e = ax.extent
        lo = _normalize_index(_bound("slice", start_indices[d]), e)
        hi = S.smax(_normalize_index(_bound("slice", end_indices[d]), e), lo)
        if S.is_const(lo) and S.is_const(hi) and hi.arg < lo.arg:
            hi = lo
        starts.append(lo)
        stops.append(hi)
        ext = S.ceildiv(S.sub(hi, lo), strides[d])
        axes.append(ax if (S.is_const(lo, 0) and hi is e and strides[d] == 1) else iter_axis(ext))
    return Val(Op.SLICE, t.dtype, (t, *starts, *stops), arg=tuple(strides), axes=tuple(axes))


def pad(t: Val, pad_widths, value=None) -> Val:
    """`pad_widths` in torch.nn.functional.pad order: last dim first, (left, right)."""
    t = _require_tensor("pad", t)
    widths = list(pad_widths)
    if len(widths) % 2 or len(widths) > 2 * t.ndim:
        raise DefinitionError(
            f"pad: pad_widths must hold an even number of entries, at most 2 per dim "
            f"({2 * t.ndim} for {describe(t)}), got {len(widths)}")
    per_dim = [(ZERO, ZERO)] * t.ndim
    for k in range(len(widths) // 2):
        d = t.ndim - 1 - k
        per_dim[d] = (_bound("pad", widths[2 * k]), _bound("pad", widths[2 * k + 1]))
    value = S.as_val(0 if value is None else value)
    if value.is_tensor:
        raise DefinitionError(f"pad: value must be a scalar, got {describe(value)}")
    axes = []
    for d, (ax, (lo, hi)) in enumerate(zip(t.logical, per_dim)):
        if S.is_const(lo, 0) and S.is_const(hi, 0):
            axes.append(ax)
            continue
        ext = S.add(S.add(ax.extent, lo), hi)
        if S.is_const(ext) and ext.arg < 0:
            raise DefinitionError(
                f"pad: dim {d} of {describe(t)} would get negative extent {ext.arg} "
                f"from widths ({lo.arg}, {hi.arg})")
        axes.append(iter_axis(ext))
    flat = [w for lr in per_dim for w in lr]
    return Val(Op.PAD, t.dtype, (t, S.cast_scalar(value, t.dtype), *flat), axes=tuple(axes))


def cat(tensors: Sequence[Val], dim: int) -> Val:
    if not tensors:
        raise DefinitionError("cat: needs at least one tensor")
    tensors = [_require_tensor("cat", t, "every input") for t in tensors]
    t0 = tensors[0]
    for t in tensors[1:]:
        if t.ndim != t0.ndim:
            raise DefinitionError(
                f"cat: all inputs must have the same number of dims: {describe(t0)} has {t0.ndim}, "
                f"{describe(t)} has {t.ndim}")
    d = _norm_dim("cat", t0, dim)
    dtype = promote([(t.dtype, True) for t in tensors])
    tensors = [cast(t, dtype) if t.dtype != dtype else t for t in tensors]
    # the other dims must agree; the cat dim's extents may differ
    axes: list = []
    for i in range(t0.ndim):
        if i == d:
            axes.append(None)
            continue
        ref = next((t for t in tensors if t.logical[i].kind is AxisKind.ITER), t0)
        for t in tensors:
            if t.logical[i].kind is AxisKind.ITER:
                _check_same_extent("cat", ref, i, t, i, ref.logical[i].extent, t.logical[i].extent)
        axes.append(ref.logical[i])
    for t in tensors:
        for i, ax in enumerate(t.logical):
            if i != d and ax.kind is AxisKind.BCAST and axes[i].kind is AxisKind.ITER:
                raise DefinitionError(
                    f"cat: dim {i} of {describe(t)} is a broadcast axis but other inputs have "
                    f"extent {extent_text(axes[i].extent)} there (cat does not broadcast)")
    axes[d] = iter_axis(_product_sum([t.logical[d].extent for t in tensors]))
    return Val(Op.CAT, dtype, tuple(tensors), arg=d, axes=tuple(axes))


def _product_sum(vals: list[Val]) -> Val:
    out = ZERO
    for v in vals:
        out = S.add(out, v)
    return out


# ---------------------------------------------------------------- reductions

def _reduce_axes(t: Val, dims: tuple[int, ...]) -> tuple[Axis, ...]:
    return tuple(Axis(a.extent, AxisKind.REDUCE) if i in dims else a
                 for i, a in enumerate(t.logical))


def _keepdim(out: Val, dims: tuple[int, ...], ndim: int) -> Val:
    return broadcast(out, [i in dims for i in range(ndim)])


def _reduction_dims(opname: str, t: Val, dims) -> tuple[int, ...]:
    if dims is None:
        return tuple(range(t.ndim))
    dims = _norm_dims(opname, t, dims)
    if not dims:
        raise DefinitionError(f"{opname}: dims is empty for {describe(t)}; pass dims=None to reduce all")
    return dims


def reduction(op: Op, t: Val, dims=None, keepdim: bool = False,
              dtype: DataType = DataType.Null) -> Val:
    opname = op.value
    t = _require_tensor(opname, t)
    dims = _reduction_dims(opname, t, dims)
    if dtype not in (None, DataType.Null):
        t = cast(t, dtype)  # an explicit dtype is kept, also Int32 (torch, nvFuser)
    elif op is Op.SUM and not t.dtype.is_float:
        t = cast(t, DataType.Int)  # sums of integers and bools are Int by default
    out = Val(op, t.dtype, (t,), arg=dims, axes=_reduce_axes(t, dims))
    return _keepdim(out, dims, t.ndim) if keepdim else out


def var_mean(t: Val, dims=None, correction: int = 1, keepdim: bool = False) -> tuple[Val, Val]:
    t = _require_tensor("var_mean", t)
    dims = _reduction_dims("var_mean", t, dims)
    if not isinstance(correction, (int, float)) or isinstance(correction, bool):
        raise DefinitionError(f"var_mean: correction must be a number, got {correction!r}")
    if not t.dtype.is_float:
        t = cast(t, DataType.Float)
    axes = _reduce_axes(t, dims)
    var = Val(Op.VAR, t.dtype, (t,), arg=(dims, correction), axes=axes)
    mean = Val(Op.MEAN, t.dtype, (t,), arg=dims, axes=axes)
    if keepdim:
        return _keepdim(var, dims, t.ndim), _keepdim(mean, dims, t.ndim)
    return var, mean


# ---------------------------------------------------------------- matmul

def _float_operands(opname: str, *vals: Val):
    for v in vals:
        if not v.dtype.is_float:
            raise UnsupportedError(f"{opname}: operands must be floating point, got {describe(v)}")
    if len({v.dtype for v in vals}) != 1:
        raise DefinitionError(
            f"{opname}: operands must have the same dtype, got "
            + ", ".join(describe(v) for v in vals))


def matmul(a: Val, b: Val) -> Val:
    a = _require_tensor("matmul", a, "first operand")
    b = _require_tensor("matmul", b, "second operand")
    _float_operands("matmul", a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise DefinitionError(f"matmul: operands must have at least 1 dim, got {describe(a)} and {describe(b)}")
    ka = a.logical[-1]
    kb = b.logical[-1] if b.ndim == 1 else b.logical[-2]
    _check_same_extent("matmul", a, a.ndim - 1, b, max(b.ndim - 2, 0), ka.extent, kb.extent)
    batch_a = a.logical[:-2] if a.ndim >= 2 else ()
    batch_b = b.logical[:-2] if b.ndim >= 2 else ()
    batch = _broadcast_batch("matmul", a, batch_a, b, batch_b)
    rows = (a.logical[-2],) if a.ndim >= 2 else ()
    cols = (b.logical[-1],) if b.ndim >= 2 else ()
    k = ka if ka.kind is AxisKind.ITER else kb
    axes = batch + rows + cols + (Axis(k.extent, AxisKind.REDUCE),)
    return Val(Op.MATMUL, a.dtype, (a, b), axes=axes)


def _broadcast_batch(opname, a, batch_a, b, batch_b) -> tuple[Axis, ...]:
    if not batch_a and not batch_b:
        return ()
    fa = Val(Op.CONST, a.dtype, axes=batch_a, name=a.name)
    fb = Val(Op.CONST, b.dtype, axes=batch_b, name=b.name)
    return broadcast_axes(opname, [x for x in (fa, fb) if x.ndim])


def linear(a: Val, w: Val, bias: Val | None = None) -> Val:
    a = _require_tensor("linear", a, "input")
    w = _require_tensor("linear", w, "weight")
    _float_operands("linear", a, w, *([bias] if bias is not None else []))
    if a.ndim == 0 or w.ndim not in (1, 2):
        raise DefinitionError(
            f"linear: expected input with >= 1 dims and weight with 1 or 2 dims, got "
            f"{describe(a)} and {describe(w)}")
    _check_same_extent("linear", a, a.ndim - 1, w, w.ndim - 1, a.logical[-1].extent, w.logical[-1].extent)
    out_axes = a.logical[:-1] + ((w.logical[0],) if w.ndim == 2 else ())
    if bias is not None:
        bias = _require_tensor("linear", bias, "bias")
        if bias.ndim > 1 or (bias.ndim == 1 and w.ndim == 2 and S.is_const(bias.logical[0].extent)
                             and S.is_const(w.logical[0].extent)
                             and bias.logical[0].extent.arg != w.logical[0].extent.arg):
            raise DefinitionError(
                f"linear: bias {describe(bias)} does not match weight {describe(w)} "
                f"(expected a 1-D bias of the weight's out-features)")
    axes = out_axes + (Axis(a.logical[-1].extent, AxisKind.REDUCE),)
    src = (a, w) if bias is None else (a, w, bias)
    return Val(Op.LINEAR, a.dtype, src, axes=axes)


# ---------------------------------------------------------------- factories

def full(shape, fill_value, dtype: DataType) -> Val:
    shape = _shape_arg("full", shape)
    if dtype in (None, DataType.Null):
        raise DefinitionError("full: dtype is required")
    for e in shape:
        if S.is_const(e) and e.arg < 0:
            raise DefinitionError(f"full: negative extent {e.arg} in shape")
    fill = S.cast_scalar(S.as_val(fill_value), dtype)
    return Val(Op.FULL, dtype, (fill, *shape), axes=tuple(iter_axis(e) for e in shape))


def iota(length, start=None, step=None, dtype: DataType = DataType.Int) -> Val:
    length = _bound("iota", length)
    start = S.cast_scalar(S.as_val(0 if start is None else start), dtype)
    step = S.cast_scalar(S.as_val(1 if step is None else step), dtype)
    return Val(Op.IOTA, dtype, (length, start, step), axes=(Axis(length, AxisKind.ITER),))


# ---------------------------------------------------------------- raw constructors
# Used when rebuilding a node whose arguments are already normalized.

def slice_raw(t: Val, bounds, steps: tuple[int, ...]) -> Val:
    n = t.ndim
    starts, stops = list(bounds[:n]), list(bounds[n:])
    axes = []
    for d, ax in enumerate(t.logical):
        lo, hi = starts[d], stops[d]
        if S.is_const(lo, 0) and hi is ax.extent and steps[d] == 1:
            axes.append(ax)
        else:
            axes.append(iter_axis(S.ceildiv(S.sub(hi, lo), steps[d])))
    return Val(Op.SLICE, t.dtype, (t, *starts, *stops), arg=tuple(steps), axes=tuple(axes))


def pad_raw(t: Val, value: Val, widths) -> Val:
    axes = []
    for d, ax in enumerate(t.logical):
        lo, hi = widths[2 * d], widths[2 * d + 1]
        if S.is_const(lo, 0) and S.is_const(hi, 0):
            axes.append(ax)
        else:
            axes.append(iter_axis(S.add(S.add(ax.extent, lo), hi)))
    return Val(Op.PAD, t.dtype, (t, value, *widths), axes=tuple(axes))


def reduction_raw(op: Op, t: Val, arg) -> Val:
    dims = arg[0] if op is Op.VAR else arg
    # a reduction keeps its source's dtype: `reduction` casts integer sums to Int first
    return Val(op, t.dtype, (t,), arg=arg, axes=_reduce_axes(t, dims))
