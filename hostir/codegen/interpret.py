"""CPU interpreter of kernel IR: every node is evaluated for all iteration
points at once as a torch vector, so the generated kernels' index math,
predicates and rounding are exercised without a GPU."""
from __future__ import annotations

import torch

from ..ir.node import Op
from ..ir.reference import TORCH_FN
from .kir import K, Kernel


def _flat(t: torch.Tensor) -> torch.Tensor:
    n = t.untyped_storage().nbytes() // t.element_size()
    return t.as_strided((n,), (1,), 0)


def interpret(kern: Kernel, inputs: list, outputs: list, params: list, extents: list) -> None:
    """Run `kern`, writing into `outputs` (tensors of the iteration shape)."""
    numel = 1
    for e in extents:
        numel *= e
    if numel == 0:
        return
    device = outputs[0].device
    lin = torch.arange(numel, device=device)
    idx = []
    rest = lin
    for e in reversed(extents):
        idx.append(rest % e)
        rest = rest // e
    idx.reverse()
    vals: dict[int, object] = {}
    for n in kern.order:
        op = n.op
        if op == K.INDEX:
            v = idx[n.arg]
        elif op == K.CONST:
            v = torch.tensor(n.arg, dtype=n.dtype.torch, device=device)
        elif op == K.PARAM:
            v = torch.tensor(params[n.arg], dtype=n.dtype.torch, device=device)
        elif op == K.LOAD:
            t = inputs[n.arg]
            pred = vals[id(n.src[0])]
            off = torch.full((), t.storage_offset(), dtype=torch.int64, device=device)
            for i, st in zip(n.src[1:], t.stride()):
                off = off + vals[id(i)] * st
            off = torch.where(pred, off, torch.zeros((), dtype=torch.int64, device=device))
            flat = _flat(t)
            v = flat[off.expand(numel)] if flat.numel() else torch.zeros(numel, dtype=t.dtype, device=device)
            v = torch.where(pred, v, torch.zeros((), dtype=t.dtype, device=device))
        elif op is Op.CAST:
            v = vals[id(n.src[0])].to(n.dtype.torch)
        elif op is Op.WHERE:
            c, a, b = (vals[id(s)] for s in n.src)
            v = torch.where(c, a, b)
        else:
            v = TORCH_FN[op](*(vals[id(s)] for s in n.src)).to(n.dtype.torch)
        vals[id(n)] = v
    for k, node, ix in kern.stores:
        out = outputs[k]
        off = torch.full((), out.storage_offset(), dtype=torch.int64, device=device)
        for i, st in zip(ix, out.stride()):
            off = off + vals[id(i)] * st
        _flat(out)[off.expand(numel)] = vals[id(node)].expand(numel).to(out.dtype)
