"""Sorting: nvFuser's `fd.ops.topk(arg, k, dim=-1, largest=True, sorted=False)`
-> (values, indices) and `fd.ops.argsort(arg, dim, descending=False,
stable=False)` -> indices (Int). They run through torch (torch.topk,
torch.argsort) in an ATen segment of their own, not generated kernels; topk is
one node with two results (ir/ops/results.py), so one call makes both.

As torch: with sorted=False topk's order is unspecified, and without stable
ties come in an unspecified order. `k` is a Python int or an Int scalar (its
value may change between calls: the result's extent follows it); 0 <= k <=
the dim's extent, checked where the definition knows both, else per call.
Sharding: every dim but the sorted one passes through; that one is taken whole.
"""
from __future__ import annotations

import torch

from .. import scalar as S
from ..dtypes import DataType
from ..errors import DefinitionError, InputError, UnsupportedError
from ..node import Family, Op, OpDef, ResultType, Val, define
from ..printer import operand_text
from .common import describe, frontend, iter_axis, norm_dim, require_tensor
from .results import results


def _flag(opname: str, what: str, x) -> bool:
    if not isinstance(x, bool):
        raise DefinitionError(f"{opname}: {what} must be a bool, got {x!r}")
    return x


def _sortable(opname: str, t) -> Val:
    t = require_tensor(opname, t, "arg")
    if t.ndim == 0:
        raise DefinitionError(f"{opname}: arg must have at least 1 dim, got {describe(t)}")
    return t


# ------------------------------------------------------------------ topk

@frontend("topk")
def topk(arg, k, dim: int = -1, largest: bool = True, sorted: bool = False) -> tuple[Val, Val]:
    """The k largest (or smallest) entries of `arg` along `dim` and their
    indices (Int), as torch.topk; through torch, not a generated kernel."""
    t = _sortable("topk", arg)
    dim = norm_dim("topk", t, dim)
    return results(topk_node(t, _k_arg(k), (dim, _flag("topk", "largest", largest),
                                            _flag("topk", "sorted", sorted))))


def _k_arg(k) -> Val:
    if isinstance(k, Val):
        if k.is_tensor or not k.dtype.is_int:
            raise DefinitionError(f"topk: k must be an int or an Int scalar, got {k!r}")
        return k
    if isinstance(k, bool) or not isinstance(k, int):
        raise DefinitionError(f"topk: k must be an int or an Int scalar, got {k!r}")
    return S.as_val(k)


def topk_node(t: Val, k: Val, arg: tuple) -> Val:
    dim = arg[0]
    if t.dtype.is_bool:
        raise UnsupportedError(f"topk: Bool tensors are not supported (torch.topk refuses them), "
                               f"got {describe(t)}")
    extent = t.logical[dim].extent
    if S.is_const(k) and (k.arg < 0 or (S.is_const(extent) and k.arg > extent.arg)):
        raise DefinitionError(_k_range(t, dim, k.arg, extent.arg if S.is_const(extent) else None))
    axes = list(t.logical)
    axes[dim] = iter_axis(k)
    return Val(Op.TOPK, t.dtype, (t, k), arg=arg, axes=tuple(axes))


def _k_range(t: Val, dim: int, k, extent) -> str:
    of = f" with extent {extent}" if extent is not None else ""
    return (f"topk: k={k} is out of range for dim {dim} of arg {describe(t)}{of} "
            f"(expected 0 <= k <= extent)")


def _topk_results(node: Val) -> tuple[ResultType, ...]:
    same = tuple(range(node.ndim))
    return (ResultType(node.dtype, node.axes, same), ResultType(DataType.Int, node.axes, same))


def _topk_reference(v: Val, args, env):
    x, k = args
    dim, largest, sorted_ = v.arg
    values, indices = torch.topk(x, k, dim, largest=largest, sorted=sorted_)
    return values, indices


def _topk_check(v: Val):
    """k in [0, extent], per call, where the definition could not tell."""
    t, k = v.src
    dim = v.arg[0]
    extent = t.logical[dim].extent
    if S.is_const(k) and S.is_const(extent):
        return None

    def check(env):
        kv, ev = env.scalar(k), env.scalar(extent)
        if not 0 <= kv <= ev:
            raise InputError(_k_range(t, dim, kv, ev))
    return check


# ------------------------------------------------------------------ argsort

@frontend("argsort")
def argsort(arg, dim: int, descending: bool = False, stable: bool = False) -> Val:
    """Indices (Int) that sort `arg` along `dim`, as torch.argsort; through
    torch, not a generated kernel."""
    t = _sortable("argsort", arg)
    return argsort_node(t, (norm_dim("argsort", t, dim), _flag("argsort", "descending", descending),
                            _flag("argsort", "stable", stable)))


def argsort_node(t: Val, arg: tuple) -> Val:
    return Val(Op.ARGSORT, DataType.Int, (t,), arg=arg, axes=t.logical)


def _argsort_reference(v: Val, args, env):
    dim, descending, stable = v.arg
    return torch.argsort(args[0], dim=dim, descending=descending, stable=stable)


# ------------------------------------------------------------------ records

def _text(names: tuple):
    def text(v: Val, n) -> str:
        args = [operand_text(s, n) for s in v.src]
        kw = [f"{name}={x}" for name, x in zip(names, args[1:] + list(v.arg))]
        return f"{v.op.value}({', '.join([args[0]] + kw)})"
    return text


def _sorted_dim_whole(v: Val, k: int) -> tuple:
    s = v.src[k]
    return tuple(None if d == v.arg[0] else d for d in range(s.ndim)) if s.is_tensor else ()


define(OpDef(Op.TOPK, Family.ATEN, (2, 2), rebuild=lambda v, src: topk_node(src[0], src[1], v.arg),
             reference=_topk_reference, text=_text(("k", "dim", "largest", "sorted")),
             dims=_sorted_dim_whole, check=_topk_check, results=_topk_results))
define(OpDef(Op.ARGSORT, Family.ATEN, rebuild=lambda v, src: argsort_node(src[0], v.arg),
             reference=_argsort_reference, text=_text(("dim", "descending", "stable")),
             dims=_sorted_dim_whole))
