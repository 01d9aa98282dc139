"""CPU interpreter of kernel IR: every node is evaluated for all iteration
points at once as a torch vector, so the generated kernels' index math,
predicates and rounding are exercised without a GPU. It reads its arguments
from the same packed parameter list a CUDA launch gets (`kir.layout`, with
tensors in the pointer slots), so CPU runs test the argument packing too."""
from __future__ import annotations

import torch

from ..ir.dtypes import cast_tensor
from ..ir.errors import ExecutionError
from ..ir.node import OPS, Op
from .kir import ONLINE, K, Kernel, Slot, row_nodes, split_stores


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
        elif s.kind == "count":
            count = v  # (a split reduction's scratch slots mean nothing here)
    return tensors, strides, params, extents, count


def _offsets(t: torch.Tensor, strides, index, vals, device) -> torch.Tensor:
    off = torch.full((), t.storage_offset(), dtype=torch.int64, device=device)
    for i, st in zip(index, strides):
        off = off + vals[id(i)] * st
    return off


def _node(n, vals, tensors, strides, params, idx, numel, device, extents=()):
    op = n.op
    if op == K.INDEX:
        return idx[n.arg]
    if op == K.CONST:
        return torch.tensor(n.arg, dtype=n.dtype.torch, device=device)
    if op == K.PARAM:
        return torch.tensor(params[n.arg], dtype=n.dtype.torch, device=device)
    if op == K.EXTENT:
        return torch.tensor(extents[n.arg], dtype=n.dtype.torch, device=device)
    if op == K.LOAD:
        t = tensors["in"][n.arg]
        pred = vals[id(n.src[0])]
        off = _offsets(t, strides["in"][n.arg], n.src[1:], vals, device)
        off = torch.where(pred, off, torch.zeros((), dtype=torch.int64, device=device))
        flat = _flat(t)
        v = flat[off.expand(numel)] if flat.numel() else torch.zeros(numel, dtype=t.dtype, device=device)
        return torch.where(pred, v, torch.zeros((), dtype=t.dtype, device=device))
    if op == K.RNG:
        from ..ir import philox
        seed, offset, index = (vals[id(s)] for s in n.src)
        kind, stream = n.arg
        draw = philox.uniform if kind == "uniform" else philox.normal
        return draw(int(seed), int(offset), stream, index.expand(numel).to("cpu"),
                    n.dtype.torch == torch.float64).to(device=device, dtype=n.dtype.torch)
    if op == K.CHECK:
        ok, value, index, extent, pred = (vals[id(s)] for s in n.src)
        bad = (pred & ~ok).expand(numel) if numel else torch.zeros(0, dtype=torch.bool)
        if bool(bad.any()):
            at = int(bad.nonzero()[0, 0])
            raise ExecutionError(f"{n.arg}: index {int(index.expand(numel)[at])} is out of range "
                                 f"for extent {int(extent.expand(numel)[at])}")
        return value
    if op == K.PROJECT:
        m, s = vals[id(n.src[0])]
        if n.arg == "max":
            return m
        return torch.where(torch.isinf(m), m - m, s)  # inf - inf: the NaN of a term exp(x - M)
    if op is Op.CAST:
        return cast_tensor(vals[id(n.src[0])], n.dtype)
    if op is Op.WHERE:
        c, a, b = (vals[id(s)] for s in n.src)
        return torch.where(c, a, b)
    return OPS[op].torch(*(vals[id(s)] for s in n.src)).to(n.dtype.torch)


def _indices(extents: list[int], dims, numel: int, device) -> dict[int, torch.Tensor]:
    """Index of each of `dims` (row-major) at each of `numel` flat points."""
    rest = torch.arange(numel, device=device)
    idx = {}
    for d in reversed(list(dims)):
        idx[d] = rest % extents[d]
        rest = rest // extents[d]
    return idx


_REDUCE = {"sum": lambda x: x.sum(1), "max": lambda x: x.amax(1), "min": lambda x: x.amin(1),
           "prod": lambda x: x.prod(1)}


def _reduce(n, srcs: list, rows: int, per_row: int):
    x = srcs[0]
    if n.arg == "argmax":
        return _argmax(x, srcs[1], rows, per_row)
    if n.arg == ONLINE:
        return _online(x, srcs[1], rows, per_row)
    if per_row == 0:  # an empty reduction: its identity
        init = {"sum": 0, "prod": 1, "max": float("-inf"), "min": float("inf")}[n.arg]
        if not n.dtype.is_float and n.arg in ("max", "min"):
            info = torch.iinfo(n.dtype.torch)
            init = info.min if n.arg == "max" else info.max
        return torch.full((rows,), init, dtype=n.dtype.torch, device=x.device)
    x = x.expand(rows * per_row).reshape(rows, per_row)
    return _REDUCE[n.arg](x).to(n.dtype.torch)  # amax/amin: NaN wins, as in the kernel


def _argmax(x: torch.Tensor, index: torch.Tensor, rows: int, per_row: int) -> torch.Tensor:
    """The index of each row's first greatest value (torch.argmax: NaN the
    greatest), read from the REDUCE's index source at that point."""
    if per_row == 0:  # (the launch refuses these; the kernel's pair identity keeps no index)
        return torch.zeros(rows, dtype=torch.int64, device=x.device)
    x = x.expand(rows * per_row).reshape(rows, per_row)
    at = torch.argmax(x, dim=1, keepdim=True)
    return index.expand(rows * per_row).reshape(rows, per_row).gather(1, at).reshape(rows)


def _online(a: torch.Tensor, c: torch.Tensor, rows: int, per_row: int) -> tuple:
    """An online_softmax REDUCE: each row's (m, s) pair, its points (a, c)
    combined by the online rule in a tree (halves of the row at a time, an odd
    one out taking the identity (-inf, 0)), as the kernels' threads, warps and
    blocks combine theirs in some order."""
    m = a.expand(rows * per_row).reshape(rows, per_row)
    s = c.expand(rows * per_row).reshape(rows, per_row)
    if per_row == 0:
        m = torch.full((rows, 1), float("-inf"), dtype=a.dtype, device=a.device)
        s = torch.zeros((rows, 1), dtype=c.dtype, device=c.device)
    while m.shape[1] > 1:
        if m.shape[1] % 2:
            m = torch.cat([m, torch.full_like(m[:, :1], float("-inf"))], 1)
            s = torch.cat([s, torch.zeros_like(s[:, :1])], 1)
        h = m.shape[1] // 2
        m, s = _online_combine(m[:, :h], s[:, :h], m[:, h:], s[:, h:])
    return m[:, 0], s[:, 0]


def _online_combine(m1, s1, m2, s2) -> tuple:
    """hir_online (kernels/hostir.cuh) on tensors: the smaller max's sum scaled
    by exp(its max - the greater) (1 where they are equal, infinities too);
    a NaN max makes the comparison false and the scale NaN."""
    first = m1 >= m2
    big_s, small_s = torch.where(first, s1, s2), torch.where(first, s2, s1)
    big_m, small_m = torch.where(first, m1, m2), torch.where(first, m2, m1)
    e = torch.where(small_m == big_m, torch.ones_like(big_m), torch.exp(small_m - big_m))
    return torch.maximum(m1, m2), big_s + small_s * e


def interpret(kern: Kernel, slots: tuple[Slot, ...], values: list, vec: int = 1) -> None:
    """Run `kern` on packed arguments `values` (laid out as `slots`): `count`
    slots of `vec` points each cover the iteration space (a reduction kernel:
    every point of its space, and of its kept dims for what follows a REDUCE)."""
    tensors, strides, params, extents, count = _unpack(kern, slots, values)
    device = tensors["out"][0].device
    if kern.reduced:
        _interpret_reduction(kern, tensors, strides, params, extents, device)
        return
    numel = count * vec
    if kern.scanned >= 0:  # a scan kernel's slots are its rows; it computes every point
        numel = 1
        for e in extents:
            numel *= e
    if numel == 0:
        return
    idx = _indices(extents, range(len(extents)), numel, device)
    vals: dict[int, object] = {}
    for n in kern.order:
        if n.op == K.SCAN:
            vals[id(n)] = _scan(n, vals[id(n.src[0])], extents, kern.scanned)
        else:
            vals[id(n)] = _node(n, vals, tensors, strides, params, idx, numel, device, extents)
    _store(kern, kern.stores, tensors, strides, vals, numel, device, kern.guard)


_SCAN = {"sum": torch.cumsum, "prod": torch.cumprod,
         "max": lambda x, d: torch.cummax(x, d).values, "min": lambda x, d: torch.cummin(x, d).values}


def _scan(n, x: torch.Tensor, extents: list[int], dim: int) -> torch.Tensor:
    """A SCAN node: its source at every point (row-major), combined along `dim`."""
    x = x.expand(extents) if x.ndim == 0 else x.reshape(extents)
    return _SCAN[n.arg](x, dim).to(n.dtype.torch).reshape(-1)


def _store(kern, stores, tensors, strides, vals, numel, device, guard=None) -> None:
    """Each store at every point (where `guard` holds). Points storing to one
    place (a scatter's repeated index) leave one of their values there."""
    keep = vals[id(guard)].expand(numel) if guard is not None else slice(None)
    for k, node, ix in stores:
        out = tensors["out"][k]
        off = _offsets(out, strides["out"][k], ix, vals, device).expand(numel)[keep]
        _flat(out)[off] = vals[id(node)].expand(numel).to(out.dtype)[keep]


def _interpret_reduction(kern, tensors, strides, params, extents, device) -> None:
    """Nodes of the kept dims are evaluated once per row, the others at every
    (row, reduced point), row-major: a REDUCE combines each row's points."""
    rows = 1
    for d in kern.kept:
        rows *= extents[d]
    per_row = 1
    for d in kern.reduced:
        per_row *= extents[d]
    row_idx = _indices(extents, kern.kept, rows, device)
    full_idx = _indices(extents, (*kern.kept, *kern.reduced), rows * per_row, device)
    on_rows = row_nodes(kern)
    row_vals: dict[int, object] = {}
    full_vals: dict[int, object] = {}

    class _Full(dict):  # a row value read at every point: repeated over the row's points
        def __missing__(self, key):
            v = row_vals[key]
            got = v.repeat_interleave(per_row) if v.ndim else v
            self[key] = got
            return got
    full_vals = _Full()
    for n in kern.order:
        if id(n) in on_rows:
            if n.op == K.REDUCE:
                row_vals[id(n)] = _reduce(n, [full_vals[id(s)] for s in n.src], rows, per_row)
            else:
                row_vals[id(n)] = _node(n, row_vals, tensors, strides, params, row_idx, rows, device,
                                        extents)
        else:
            full_vals[id(n)] = _node(n, full_vals, tensors, strides, params, full_idx,
                                     rows * per_row, device, extents)
    full_stores, row_stores = split_stores(kern, on_rows)
    _store(kern, row_stores, tensors, strides, row_vals, rows, device)
    if per_row:
        _store(kern, full_stores, tensors, strides, full_vals, rows * per_row, device)
