"""Alias analysis: outputs that are views of inputs launch nothing.

An output is a view candidate when the chain from a tensor input to it holds
only view ops. Whether the view needs no copy depends on the input's layout
(stride order, which dims are dense, expanded stride-0 axes); the chain is
tried on a `meta` tensor with the input's sizes and strides using view-only
operations, so torch's own stride rules decide. The input's layout signature
is part of the concretization key, so a decision holds for every call that
hits the same plan.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..ir.fusion import Fusion, Output
from ..ir.inputs import strides_for
from ..ir.node import Op, Val

VIEW_OPS = frozenset({Op.RESHAPE, Op.PERMUTE, Op.SLICE, Op.SQUEEZE, Op.BROADCAST, Op.EXPAND,
                      Op.SET})


def view_chain(v: Val) -> list[Val] | None:
    """The view nodes from a tensor input to `v` (input first), or None."""
    chain = []
    while v.op is not Op.TENSOR_INPUT:
        if v.op not in VIEW_OPS:
            return None
        chain.append(v)
        v = v.src[0]
    chain.append(v)
    return chain[::-1]


def layout_signature(t: torch.Tensor) -> tuple:
    """What view feasibility depends on: size-1 dims, stride order, dense dims."""
    order = tuple(sorted(range(t.ndim), key=lambda d: (-t.stride(d), d)))
    dense = []
    expected = 1
    for d in reversed(order):
        if t.shape[d] == 1:
            dense.append(None)
            continue
        dense.append(t.stride(d) == expected)
        expected = t.stride(d) * t.shape[d]
    return (tuple(s == 1 for s in t.shape), order, tuple(dense), t.storage_offset() == 0)


def apply_view(v: Val, t: torch.Tensor, env) -> torch.Tensor:
    """Apply one view node to `t` without copying (raises RuntimeError if impossible)."""
    if v.op is Op.RESHAPE:
        return t.view(env.extents(v.logical))
    if v.op is Op.PERMUTE:
        return t.permute(v.arg)
    if v.op is Op.SLICE:
        n = v.src[0].ndim
        lo = [env.scalar(s) for s in v.src[1:1 + n]]
        hi = [env.scalar(s) for s in v.src[1 + n:]]
        return t[tuple(slice(a, b, st) for a, b, st in zip(lo, hi, v.arg))]
    if v.op is Op.SQUEEZE:
        for d in sorted(v.arg, reverse=True):
            t = t.select(d, 0)
        return t
    if v.op is Op.BROADCAST:
        for d, f in enumerate(v.arg):
            if f:
                t = t.unsqueeze(d)
        return t
    if v.op is Op.EXPAND:
        return t.expand(env.extents(v.logical))
    if v.op is Op.SET:
        return t
    raise RuntimeError(f"{v.op.value} is not a view")


def _layout_ok(t: torch.Tensor, out: Output) -> bool:
    if out.stride_order is None:
        return True
    want = strides_for(list(t.shape), out.stride_order)
    return all(s == w or n == 1 for s, w, n in zip(t.stride(), want, t.shape))


@dataclass(frozen=True)
class AliasPlan:
    """Outputs (by index) that are views, with their chains."""

    views: dict[int, list[Val]]

    def aliased_exprs(self) -> set[int]:
        return {id(v) for chain in self.views.values() for v in chain[1:]}


def analyze_aliases(fusion: Fusion, env) -> AliasPlan:
    """Decide which outputs are views, for the inputs bound in `env`."""
    views: dict[int, list[Val]] = {}
    for i, out in enumerate(fusion.outputs):
        if out.alias_input is not None:
            continue
        chain = view_chain(out.val)
        if chain is None:
            continue
        real = env[chain[0]]
        t = torch.empty_strided(real.shape, real.stride(), dtype=real.dtype, device="meta")
        try:
            for v in chain[1:]:
                t = apply_view(v, t, env)
        except RuntimeError:
            continue
        if _layout_ok(t, out):
            views[i] = chain
    return AliasPlan(views)
