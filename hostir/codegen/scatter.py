"""Scatter kernels: a scatter segment (segment/segmenter.py) runs as two
launches of generated kernels on one buffer.

- fill: pointwise over the result's shape, it stores the scatter's input (its
  prologue computed in the kernel, indexed per use);
- write: over the index's shape, each point stores its src value where the
  op's `write` rule says (ir/ops/indexing.py: at the index value along the
  scattered dim), guarded by that position being in range.

Two launches, because a write may land anywhere: no thread could know that
the copy of the position it overwrites is done without a grid-wide sync. The
write kernel stores one point a thread (its store positions are data) and
always takes the plain schedule."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from ..ir.errors import UnsupportedError
from ..ir.node import OPS, Family
from ..segment import Segment
from .cuda import CTYPE, _offset, _Printer
from .kir import K, Kernel, KNode, TensorParam
from .lower import INT, PointwiseLowering, _reachable
from .launch_checks import vector_ok
from .options import KernelOptions, defines
from .spec import KernelSpec, Variant, _made, index_type


class ScatterLowering(PointwiseLowering):
    """One of a scatter segment's two kernels; its one output is the scatter."""

    def __init__(self, seg: Segment, name: str):
        super().__init__(seg, name)
        scatters = [v for v in seg.exprs if OPS[v.op].family is Family.SCATTER]
        if len(scatters) != 1 or tuple(seg.outputs) != (scatters[0],):
            raise UnsupportedError(f"a scatter segment makes one scatter, its only output "
                                   f"(has {scatters}, outputs {list(seg.outputs)})")
        self.v = scatters[0]

    def _space(self, t) -> tuple:
        """Iterate over `t`'s logical dims; the scatter is the output."""
        b, k, v = self.b, self.k, self.v
        k.extent_vals = [a.extent for a in t.logical]
        k.outputs.append(TensorParam(v, v.ndim, v.dtype))
        return tuple(b.mk(K.INDEX, INT, arg=d) for d in range(t.ndim))

    def fill(self) -> Kernel:
        v, k = self.v, self.k
        ix = self._space(v)
        k.stores.append((0, self.cast(self.value(v.src[0], ix, None), v.dtype), ix))
        k.order = _reachable(self.b.order, [n for _, x, at in k.stores for n in (x, *at)])
        return k

    def write(self) -> Kernel:
        v, k, b = self.v, self.k, self.b
        ix = self._space(v.src[1])
        at, value, ok = OPS[v.op].write(v, ix, self)
        k.stores.append((0, self.cast(value, v.dtype), at))
        k.guard = None if b.is_const(ok, True) else ok
        roots = [n for _, x, at in k.stores for n in (x, *at)] + ([k.guard] if k.guard is not None else [])
        k.order = _reachable(b.order, roots)
        return k


class ScatterSpec(KernelSpec):
    """The write kernel's launch rule: one point a thread, the plain schedule
    (no vectors, tiles or staging: its stores go where its index says)."""

    def choose(self, kernel: Kernel, extents: list[int], ins: list, outs, params: list) -> Variant:
        return self.variant(kernel, 1, index_type(extents, ins, outs, params))

    def typical_variants(self) -> list[Variant]:
        return [self.variant(self.plain, 1, "long long"), self.variant(self.plain, 1, "int")]


def scatter_specs(seg: Segment, name: str, options: KernelOptions) -> tuple[KernelSpec, KernelSpec]:
    """The (fill, write) specs of a scatter segment (UnsupportedError where a
    prologue op has no kernel rule)."""
    fill = KernelSpec(f"{name}_fill", ScatterLowering(seg, f"{name}_fill").fill(), None, options)
    kern = ScatterLowering(seg, f"{name}_write").write()
    return _made(fill), _made(ScatterSpec(f"{name}_write", kern, None, options))


# ---------------------------------------------------------------- rows kept in shared memory

ROW_SCATTER = True
"""A scatter along the innermost dim whose result rows fit in shared memory
runs as one kernel on GPUs (RowScatterSpec): a block a row fills the row in
shared memory, writes the row's src values where its index says, then stores
the row once. The fill and write launches wrote each result sector twice, the
second time a few bytes at a time after the first had left L2 (a read, a
merge and a write again in DRAM): H100 scatter fp32 [8192, 8192], 4096
positions a row, 30.7 % of copy before, 76.2 % in one kernel (torch eager 19.5,
torch.compile 28.8, same run), 79.5 % with ROW_SCATTER_AHEAD, 91.7 % with the
fill of a copied input in 16-byte vectors too (torch.compile 29.2, 3.14x).
Blocks of 512 threads: 256 gave 60.5 %, 1024 71.3; unrolling the row's loops
1, 4 or 8 times, or storing the row in 16-byte vectors, changed nothing
measurable; an L2 prefetch of the index's and src's rows before the fill lost
(75.9 -> 71.3). CPU runs keep the two kernels (the same values)."""
ROW_SCATTER_BYTES = 96 * 1024  # a result row's bytes at most (two blocks an SM)
ROW_SCATTER_BLOCK = 512
ROW_SCATTER_UNROLL = 4  # iterations of the row's loops unrolled (loads in flight)
ROW_SCATTER_AHEAD = 4
"""The write's first iterations a thread reads into registers before the fill
(their loads in flight with the fill's, not after its barrier). H100 scatter
fp32 [8192, 8192], 4096 positions a row, % of copy, same run: 0: 75.8, 2:
78.6, 4: 79.5, 6: 70.8, 8: 59.7 (40 registers and spills); at 1024 threads a
block 73.5 / 75.1 / 51.6 for 2 / 4 / 6."""


def _rebased(write: Kernel, inputs: int, params: int, dims: int) -> tuple[dict, list]:
    """The write kernel's nodes with its tensor, parameter and extent numbers
    moved past the fill kernel's (`inputs`, `params`, `dims` of them): {id(old): new}, new order."""
    new: dict[int, KNode] = {}
    order = []
    shift = {K.LOAD: inputs, K.PARAM: params, K.INDEX: dims, K.EXTENT: dims}
    for n in write.order:
        arg = n.arg + shift[n.op] if n.op in shift else n.arg
        m = KNode(n.op, n.dtype, tuple(new[id(s)] for s in n.src), arg)
        new[id(n)] = m
        order.append(m)
    return new, order


def row_scatter_kernel(fill: Kernel, write: Kernel, name: str) -> Kernel | None:
    """One kernel of a scatter's fill and write (their parameters side by side:
    the fill's tensors, scalars and dims, then the write's), where the scatter
    runs along the result's innermost dim and each point of the index writes
    into the result row of its own leading coordinates; None elsewhere. Its
    stores: the fill's (slot 0: at every point of the row), then the write's
    (at its index value, where the write's guard holds)."""
    n = len(fill.extent_vals)
    if not ROW_SCATTER or n == 0 or len(write.extent_vals) != n or len(fill.stores) != 1 \
            or len(write.stores) != 1 or any(x.op == K.RNG for x in fill.order + write.order):
        return None
    (_, _, fix), (_, _, wix) = fill.stores[0], write.stores[0]
    if any(i.op != K.INDEX or i.arg != d for d, i in enumerate(fix)):
        return None
    if any(wix[d].op != K.INDEX or wix[d].arg != d for d in range(n - 1)):
        return None  # (a write into another row than its own: along a leading dim)
    new, order = _rebased(write, len(fill.inputs), len(fill.params), n)
    s, value, at = write.stores[0]
    fused = Kernel(name, inputs=fill.inputs + write.inputs, outputs=list(fill.outputs),
                   params=fill.params + write.params, extent_vals=fill.extent_vals + write.extent_vals)
    fused.order = list(fill.order) + order
    fused.stores = [fill.stores[0], (s, new[id(value)], tuple(new[id(i)] for i in at))]
    fused.guard = new[id(write.guard)] if write.guard is not None else None
    return fused


def copied_input(kern: Kernel) -> int | None:
    """The input a fused scatter's fill copies unchanged (its value a load at
    the row's point, always read, of the result's dtype), or None."""
    fv, n = kern.stores[0][1], len(kern.extent_vals) // 2
    if fv.op != K.LOAD or len(fv.src) != n + 1 or not (fv.src[0].op == K.CONST and fv.src[0].arg is True):
        return None
    if any(x.op != K.INDEX or x.arg != d for d, x in enumerate(fv.src[1:])):
        return None
    return fv.arg


def _under(roots) -> set[int]:
    """ids of `roots` and every node they are computed from."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        x = stack.pop()
        if id(x) not in seen:
            seen.add(id(x))
            stack.extend(x.src)
    return seen


class _RowScatterPrinter(_Printer):
    """A block a result row (grid-stride over rows): the fill's values into
    the row in shared memory, then the write's at its index values, then the
    row to the result, with barriers between. The write's dims alias the
    row's leading coordinates; its innermost runs over the index's row."""

    def __init__(self, kern: Kernel, name: str, idx: str, block: int, pdl: bool, vec: int = 1):
        super().__init__(kern, name, 1, idx, block, False, pdl)
        self.n = len(kern.extent_vals) // 2
        self.inner = -1  # every index is named i<d>
        self.rvec = vec  # >1: the row stored (and a copied input filled) in vectors of this many points

    def source(self) -> str:
        k, idx, L, n = self.k, self.idx, self.lines, self.n
        ct = CTYPE[k.outputs[0].dtype]
        (_, fv, fix), (_, wv, wix) = k.stores
        fill_nodes = _under([fv, *fix])
        write_nodes = _under([wv, *wix] + ([k.guard] if k.guard is not None else [])) - fill_nodes
        self.pdl_wait()
        L.append("  extern __shared__ __align__(16) unsigned char hir_dsmem[];")
        L.append(f"  {ct}* const srow = reinterpret_cast<{ct}*>(hir_dsmem);")
        L.append(f"  for ({idx} row = blockIdx.x; row < nslots; row += gridDim.x) {{")
        L.append(f"    {idx} rest = row;")
        for d in reversed(range(n - 1)):
            L.append(f"    const {idx} i{d} = rest % e{d}; rest /= e{d};" if d else f"    const {idx} i0 = rest;")
        inside = " && ".join(f"i{d} < e{n + d}" for d in range(n - 1)) or "true"
        ahead = ROW_SCATTER_AHEAD
        if ahead:  # the write's first iterations read before the fill (their loads in flight with its)
            wt = CTYPE[k.outputs[0].dtype]
            L.append(f"    {wt} pv_[{ahead}]; long long pp_[{ahead}]; bool pk_[{ahead}];")
            L.append("    #pragma unroll")
            L.append(f"    for (int c = 0; c < {ahead}; ++c) {{")
            for d in range(n - 1):
                L.append(f"      const {idx} i{n + d} = i{d};")
            L.append(f"      const {idx} i{2 * n - 1} = threadIdx.x + c * blockDim.x;")
            L.append("      pk_[c] = false;")
            L.append(f"      if ({inside} && i{2 * n - 1} < e{2 * n - 1}) {{")
            pnames: dict[int, str] = {}
            self.emit_all([x for x in k.order if id(x) in write_nodes], pnames, "", "        ")
            L.append(f"        pv_[c] = {pnames[id(wv)]}; pp_[c] = {pnames[id(wix[-1])]}; "
                     f"pk_[c] = {pnames[id(k.guard)] if k.guard is not None else 'true'};")
            L.append("      }")
            L.append("    }")
        # the fill: every point of the row (a copied input in vectors where the launch allows)
        copied, per = copied_input(k), self.rvec
        if copied is not None and per > 1:
            src = f"in{copied} + " + _offset([f"i{d}" for d in range(n)], f"in{copied}")
            self._row_loop(per, f"*reinterpret_cast<uint4*>(srow + i{n - 1}) = *reinterpret_cast<const uint4*>({src});")
        else:
            self._row_loop(1, None)
            names: dict[int, str] = {}
            self.emit_all([x for x in k.order if id(x) in fill_nodes], names, "", "      ")
            L.append(f"      srow[i{n - 1}] = {names[id(fv)]};")
            L.append("    }")
        L.append("    __syncthreads();")
        # the write: the index's row of the same leading coordinates, if the index has it
        if ahead:
            L.append("    #pragma unroll")
            L.append(f"    for (int c = 0; c < {ahead}; ++c) if (pk_[c]) srow[pp_[c]] = pv_[c];")
        L.append(f"    if ({inside}) {{")
        for d in range(n - 1):
            L.append(f"      const {idx} i{n + d} = i{d};")
        L.append(f"      #pragma unroll {ROW_SCATTER_UNROLL}")
        L.append(f"      for ({idx} i{2 * n - 1} = threadIdx.x + {ahead} * blockDim.x; i{2 * n - 1} < e{2 * n - 1}; "
                 f"i{2 * n - 1} += blockDim.x) {{")
        wnames: dict[int, str] = {}
        self.emit_all([x for x in k.order if id(x) in write_nodes], wnames, "", "        ")
        when = f"if ({wnames[id(k.guard)]}) " if k.guard is not None else ""
        L.append(f"        {when}srow[{wnames[id(wix[-1])]}] = {wnames[id(wv)]};")
        L.append("      }")
        L.append("    }")
        L.append("    __syncthreads();")
        # the row, once (in vectors where the launch allows)
        off = _offset([f"i{d}" for d in range(n)], "out0")
        if per > 1:
            self._row_loop(per, f"*reinterpret_cast<uint4*>(out0 + {off}) = *reinterpret_cast<const uint4*>(srow + i{n - 1});")
        else:
            self._row_loop(1, f"out0[{off}] = srow[i{n - 1}];")
        L.append("    __syncthreads();  // the row's slots are free for the next row")
        L.append("  }")
        return self.wrap()


    def _row_loop(self, per: int, body: str | None) -> None:
        """A loop of the block's threads over the row's points, `per` a thread
        at a time (`body`: its one statement, the loop closed; None: left open)."""
        n, idx = self.n, self.idx
        self.lines.append(f"    #pragma unroll {ROW_SCATTER_UNROLL}")
        self.lines.append(f"    for ({idx} i{n - 1} = threadIdx.x * {per}; i{n - 1} < e{n - 1}; "
                          f"i{n - 1} += blockDim.x * {per}) {{")
        if body is not None:
            self.lines += [f"      {body}", "    }"]


@dataclass(eq=False)
class RowScatterVariant(Variant):
    """The fused scatter's one form: its source, and the row's shared memory."""

    row_bytes: int = 0
    row_block: int = ROW_SCATTER_BLOCK

    @property
    def block(self) -> int:
        return self.row_block

    @cached_property
    def smem(self) -> int:
        return self.row_bytes

    @cached_property
    def source(self) -> str:
        o = self.options
        return defines(o, self.kernel) + _RowScatterPrinter(self.kernel, self.name, self.idx, self.block,
                                                           o.pdl, self.vec).source()


class RowScatterSpec(KernelSpec):
    """The launch rule of the fused scatter (row_scatter_kernel): a block a
    result row, at most 32 an SM's worth at once; the row's bytes of shared memory."""

    def fits(self, extents: list[int]) -> bool:
        """Does a result row of these extents (the fill's then the write's) fit
        in shared memory?"""
        n = len(extents) // 2
        row = extents[n - 1] * self.plain.outputs[0].dtype.itemsize
        return 0 < row <= ROW_SCATTER_BYTES

    def choose(self, kernel: Kernel, extents: list[int], ins: list, outs, params: list) -> Variant:
        """16-byte vectors along the rows where the result (and the input the
        fill copies) allow them (vector_ok; `outs` None: new contiguous ones)."""
        n = len(extents) // 2
        idx = index_type(extents[:n], ins, outs, params)
        size = kernel.outputs[0].dtype.itemsize
        row_bytes = -(-extents[n - 1] * size // 16) * 16
        per, copied = 16 // size if size < 16 else 1, copied_input(kernel)
        tensors = ([ins[copied]] if copied is not None else []) + list(outs or ())
        vec = per if per > 1 and vector_ok(per, tensors, extents[:n]) else 1
        return self._row_variant(idx, row_bytes, vec)

    def _row_variant(self, idx: str, row_bytes: int, vec: int = 1) -> Variant:
        key = ("row", idx, row_bytes, vec)
        got = self._variants.get(key)
        if got is None:
            name = (f"{self.plain.name}_v{vec}_{'i32' if idx == 'int' else 'i64'}_rows"
                    f"{'_pdl' if self.options.pdl else ''}")
            got = self._variants[key] = RowScatterVariant(self.plain, vec, idx, self.options, name,
                                                          row_bytes=row_bytes, row_block=ROW_SCATTER_BLOCK)
        return got

    @staticmethod
    def count(kernel: Kernel, extents: list[int], vec: int, tile: int = -1) -> int:
        """The result's rows (none where it is empty)."""
        n = len(extents) // 2
        return math.prod(extents[:n - 1]) if math.prod(extents[:n]) else 0

    def grid(self, variant: Variant, count: int, sm_count: int, split: int = 1,
             extents: list[int] | None = None, resident: int = 0) -> int:
        return max(1, min(count, sm_count * 32))

    def typical_variants(self) -> list[Variant]:
        size = self.plain.outputs[0].dtype.itemsize
        wide = [self._row_variant("int", 4096, 16 // size)] if size < 16 else []
        return [self._row_variant("int", 4096), self._row_variant("long long", 4096)] + wide


def row_scatter_spec(fill: KernelSpec, write: KernelSpec, name: str, options: KernelOptions) -> RowScatterSpec | None:
    """The fused spec of a scatter's (fill, write) specs, where one applies."""
    kern = row_scatter_kernel(fill.plain, write.plain, name)
    return None if kern is None else _made(RowScatterSpec(name, kern, None, options))
