"""Alias analysis: outputs that are views of inputs launch nothing.

An output is a view candidate when the chain from a tensor input to it holds
only view ops (ops whose record has a `view` rule). Whether the view needs no
copy depends on the input's layout (stride order, which dims are dense,
expanded stride-0 axes); the chain is tried on a `meta` tensor with the
input's sizes and strides using the view rules, so torch's own stride rules
decide. The input's layout signature is part of the concretization key, so a
decision holds for every call that hits the same plan.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..ir.fusion import Fusion, Output
from ..ir.inputs import dense_dims, strides_for
from ..ir.node import OPS, Op, Val
from ..ir.printer import Namer


def view_chain(v: Val) -> list[Val] | None:
    """The view nodes from a tensor input to `v` (input first), or None."""
    chain = []
    while v.op is not Op.TENSOR_INPUT:
        if OPS[v.op].view is None:
            return None
        chain.append(v)
        v = v.src[0]
    chain.append(v)
    return chain[::-1]


def layout_signature(t: torch.Tensor) -> tuple:
    """What view feasibility depends on: size-1 dims, stride order, dense dims."""
    order = tuple(sorted(range(t.ndim), key=lambda d: (-t.stride(d), d)))
    dense = tuple(flag for flag, _ in dense_dims(t.shape, t.stride(), order))
    return (tuple(s == 1 for s in t.shape), order, dense, t.storage_offset() == 0)


def apply_views(chain: list[Val], t: torch.Tensor, env) -> torch.Tensor:
    """`t` (the value of chain[0]) viewed through the rest of the chain without
    copying; raises RuntimeError where a view is impossible for t's layout."""
    for v in chain[1:]:
        t = OPS[v.op].view(v, t, env)
    return t


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

    def __str__(self) -> str:
        if not self.views:
            return "no output is a view of an input"
        namer = Namer()
        return "\n".join(f"output {i}: {' -> '.join(namer(v) for v in chain)} (a view, no kernel)"
                         for i, chain in sorted(self.views.items()))


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
            t = apply_views(chain, t, env)
        except RuntimeError:
            continue
        if _layout_ok(t, out):
            views[i] = chain
    return AliasPlan(views)
