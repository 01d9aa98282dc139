"""CPU interpreter of kernel IR: every node is evaluated for all iteration
points at once as a torch vector, so the generated kernels' index math,
predicates and rounding are exercised without a GPU. It reads its arguments
from the same packed parameter list a CUDA launch gets (`kir.layout`, with
tensors in the pointer slots), so CPU runs test the argument packing too."""
from __future__ import annotations

import torch

from ..ir.node import OPS, Op
from .kir import K, Kernel, Slot


def _flat(t: torch.Tensor) -> torch.Tensor:
    n = t.untyped_storage().nbytes() // t.element_size()
    return t.as_strided((n,), (1,), 0)


def _unpack(kern: Kernel, slots: tuple[Slot, ...], values: list):
    """(inputs, outputs, strides per tensor, params, extents, count) from packed values."""
    tensors = {"in": [None] * len(kern.inputs), "out": [None] * len(kern.outputs)}
    strides = {"in": [[0] * t.ndim for t in kern.inputs], "out": [[0] * t.ndim for t in kern.outputs]}
    params, extents, count = [None] * len(kern.params), [0] * len(kern.extent_vals), 0
    for s, v in zip(slots, values):
        if s.kind in ("in", "out"):
            tensors[s.kind][s.index] = v
        elif s.kind in ("in_stride", "out_stride"):
            strides[s.kind[:-7]][s.index][s.dim] = v
        elif s.kind == "param":
            params[s.index] = v
        elif s.kind == "extent":
            extents[s.index] = v
        else:
            count = v
    return tensors, strides, params, extents, count


def _offsets(t: torch.Tensor, strides, index, vals, device) -> torch.Tensor:
    off = torch.full((), t.storage_offset(), dtype=torch.int64, device=device)
    for i, st in zip(index, strides):
        off = off + vals[id(i)] * st
    return off


def _node(n, vals, tensors, strides, params, idx, numel, device):
    op = n.op
    if op == K.INDEX:
        return idx[n.arg]
    if op == K.CONST:
        return torch.tensor(n.arg, dtype=n.dtype.torch, device=device)
    if op == K.PARAM:
        return torch.tensor(params[n.arg], dtype=n.dtype.torch, device=device)
    if op == K.LOAD:
        t = tensors["in"][n.arg]
        pred = vals[id(n.src[0])]
        off = _offsets(t, strides["in"][n.arg], n.src[1:], vals, device)
        off = torch.where(pred, off, torch.zeros((), dtype=torch.int64, device=device))
        flat = _flat(t)
        v = flat[off.expand(numel)] if flat.numel() else torch.zeros(numel, dtype=t.dtype, device=device)
        return torch.where(pred, v, torch.zeros((), dtype=t.dtype, device=device))
    if op is Op.CAST:
        return vals[id(n.src[0])].to(n.dtype.torch)
    if op is Op.WHERE:
        c, a, b = (vals[id(s)] for s in n.src)
        return torch.where(c, a, b)
    return OPS[op].torch(*(vals[id(s)] for s in n.src)).to(n.dtype.torch)


def interpret(kern: Kernel, slots: tuple[Slot, ...], values: list, vec: int = 1) -> None:
    """Run `kern` on packed arguments `values` (laid out as `slots`): `count`
    slots of `vec` points each cover the iteration space."""
    tensors, strides, params, extents, count = _unpack(kern, slots, values)
    numel = count * vec
    if numel == 0:
        return
    device = tensors["out"][0].device
    rest = torch.arange(numel, device=device)
    idx = []
    for e in reversed(extents):
        idx.append(rest % e)
        rest = rest // e
    idx.reverse()
    vals: dict[int, object] = {}
    for n in kern.order:
        vals[id(n)] = _node(n, vals, tensors, strides, params, idx, numel, device)
    for k, node, ix in kern.stores:
        out = tensors["out"][k]
        off = _offsets(out, strides["out"][k], ix, vals, device)
        _flat(out)[off.expand(numel)] = vals[id(node)].expand(numel).to(out.dtype)
