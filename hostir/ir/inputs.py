"""Validation of the inputs passed to `execute`, before anything runs."""
from __future__ import annotations

import numbers

import torch

from .dtypes import DataType, from_torch
from .errors import InputError
from .fusion import Fusion
from .node import AxisKind, Op, Val


def _label(i: int, v: Val) -> str:
    return f"input {i} ({v.name})" if v.name else f"input {i}"


def allocation_order(ndim: int, stride_order) -> list[int]:
    """Dims from outermost to innermost. nvFuser's stride_order gives each dim's
    stride rank (0 the fastest)."""
    if stride_order is None:
        return list(range(ndim))
    return sorted(range(ndim), key=lambda d: -stride_order[d])


def strides_for(shape, stride_order) -> list[int]:
    """Dense strides for `shape` laid out in `stride_order`."""
    strides = [0] * len(shape)
    step = 1
    for d in reversed(allocation_order(len(shape), stride_order)):
        strides[d] = step
        step *= max(shape[d], 1)
    return strides


def dense_dims(shape, strides, order) -> list[tuple[bool | None, int]]:
    """Per dim: (is its stride the dense one, that dense stride), walking `order`
    (outermost first) from the innermost dim; size-1 dims get None and do not count."""
    out: list = [(None, 0)] * len(shape)
    expected = 1
    for d in reversed(order):
        if shape[d] == 1:
            out[d] = (None, expected)
            continue
        out[d] = (strides[d] == expected, expected)
        expected = strides[d] * shape[d]
    return out


def _check_layout(label: str, t: torch.Tensor, arg) -> None:
    if t.numel() == 0:
        return
    order = allocation_order(t.ndim, arg.stride_order)
    expanded = [d for d, c in enumerate(arg.contiguity) if c is None and t.shape[d] != 1]
    for d in expanded:
        if t.stride(d) != 0:
            raise InputError(
                f"{label}: dim {d} is declared an expanded broadcast (contiguity None, extent "
                f"{t.shape[d]}) and needs stride 0, but the tensor has strides {list(t.stride())} "
                f"for shape {list(t.shape)} (declare it True or False to pass any data)")
    walk = [1 if d in expanded else s for d, s in enumerate(t.shape)]  # stride 0: not in the walk
    dense = dense_dims(walk, t.stride(), order)
    for d in reversed(order):  # the innermost violation first
        flag, expected = dense[d]
        if arg.contiguity[d] and flag is False:
            raise InputError(
                f"{label}: dim {d} is declared contiguous (contiguity={list(arg.contiguity)}"
                f"{', stride_order=' + str(list(arg.stride_order)) if arg.stride_order else ''}) "
                f"and needs stride {expected}, but the tensor has strides {list(t.stride())} "
                f"for shape {list(t.shape)}")
    if arg.stride_order is not None:
        strides = [t.stride(d) for d in order if t.shape[d] != 1]
        if any(a < b for a, b in zip(strides, strides[1:])):
            raise InputError(
                f"{label}: declared stride_order {list(arg.stride_order)} but the tensor's strides "
                f"{list(t.stride())} are ordered differently")


def _check_tensor(i: int, v: Val, a) -> None:
    label = _label(i, v)
    if not isinstance(a, torch.Tensor):
        raise InputError(f"{label}: expected a tensor ({v.dtype.short}, {v.ndim} dims), "
                         f"got {type(a).__name__}")
    if a.ndim != v.ndim:
        raise InputError(f"{label}: expected {v.ndim} dims, got a tensor of shape {list(a.shape)}")
    got = from_torch(a.dtype)
    if got is not v.dtype:
        raise InputError(f"{label}: expected dtype {v.dtype.short}, got {a.dtype}")
    for d, ax in enumerate(v.axes):
        e = ax.extent
        if ax.kind is AxisKind.BCAST and a.shape[d] != 1:
            raise InputError(
                f"{label}: dim {d} is declared a broadcast dim (extent 1) but has extent {a.shape[d]}")
        if e.op is Op.CONST and a.shape[d] != e.arg:
            raise InputError(f"{label}: dim {d} is declared with static extent {e.arg}, got {a.shape[d]}")
    arg = v.arg
    if arg.is_cpu and a.ndim != 0:  # (the frontend moves 0-dim CPU tensors to the run's device)
        raise InputError(f"{label}: declared is_cpu=True, which needs a 0-dim CPU tensor; got "
                         f"shape {list(a.shape)} on {a.device}")
    _check_layout(label, a, arg)


def check_scalar(i: int, v: Val, a) -> None:
    label = _label(i, v)
    if isinstance(a, torch.Tensor):
        if a.ndim != 0:
            raise InputError(f"{label}: expected a {v.dtype.short} scalar, got a tensor of shape "
                             f"{list(a.shape)}")
        a = a.item()
    if not isinstance(a, numbers.Number):
        raise InputError(f"{label}: expected a {v.dtype.short} scalar, got {type(a).__name__}")
    if isinstance(a, numbers.Complex) and not isinstance(a, numbers.Real) and not v.dtype.is_complex:
        raise InputError(f"{label}: expected a {v.dtype.short} scalar, got the complex number {a!r}")
    if v.dtype is DataType.Bool and not isinstance(a, bool):
        raise InputError(f"{label}: expected a bool, got {a!r}")
    if v.dtype.is_int and not isinstance(a, numbers.Integral):
        raise InputError(f"{label}: expected an integer ({v.dtype.short}), got {a!r}")


def validate_inputs(fusion: Fusion, args) -> torch.device:
    """Check `args` against the fusion's inputs; return the device to run on."""
    if not isinstance(args, (list, tuple)):
        raise InputError(f"execute expects a list of inputs, got {type(args).__name__}")
    if len(args) != len(fusion.inputs):
        names = ", ".join(v.name or "?" for v in fusion.inputs)
        raise InputError(f"expected {len(fusion.inputs)} inputs ({names}), got {len(args)}")
    device = None
    first = None
    for i, (v, a) in enumerate(zip(fusion.inputs, args)):
        if v.op is Op.TENSOR_INPUT:
            _check_tensor(i, v, a)
            if v.arg.is_cpu:
                continue
            if device is None:
                device, first = a.device, _label(i, v)
            elif a.device != device:
                raise InputError(f"{_label(i, v)} is on {a.device} but {first} is on {device}; "
                                 f"all tensor inputs must be on one device")
        else:
            check_scalar(i, v, a)
    return device or torch.device("cpu")
