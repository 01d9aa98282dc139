"""CUDA printers of scan kernels (scan.py): rows scanned by groups of threads
along the innermost dim, and columns scanned along an outer dim (few long
rows, chained tiles: cuda_chained_scan.py). Each prints the same kernel IR
the interpreter runs, reuses the reduction printer's row split, combine lines
and initial values, and combines in a fixed order."""
from __future__ import annotations

from .cuda import CTYPE, _closure, _offset
from .cuda_combine import _COMBINE, _reduce_init
from .cuda_schedules import _ReductionPrinter
from .row_loads import closure_of
from .kir import K, Kernel
from .scan import COLUMN_ROWS, COLUMN_WARPS


def scan_source(kern: Kernel, vec: int, idx: str, block: int, pdl: bool, name: str,
                threads: int, chunks: int, outer: bool) -> str:
    if outer:
        return _ColumnScanPrinter(kern, name, idx, block, pdl).source()
    if threads > 32:
        from .cuda_chained_scan import _ChainedScanPrinter  # (it builds on _RowScanPrinter here)
        return _ChainedScanPrinter(kern, name, idx, block, threads, pdl, vec, chunks).source()
    return _RowScanPrinter(kern, name, idx, block, threads, pdl, vec, chunks).source()


def _after_scans(kern: Kernel) -> set[int]:
    """SCAN nodes and every node computed from one (the epilogue)."""
    out: set[int] = set()
    for n in kern.order:
        if n.op == K.SCAN or any(id(s) in out for s in n.src):
            out.add(id(n))
    return out


def _moving(kern: Kernel, dim: int, after: set[int]) -> set[int]:
    """Nodes whose value moves along iteration dim `dim` (or follows a scan)."""
    out = set(after)
    for n in kern.order:
        if (n.op == K.INDEX and n.arg == dim) or any(id(s) in out for s in n.src):
            out.add(id(n))
    return out


class _ScanPrinter(_ReductionPrinter):
    """Shared pieces: each INDEX is named i<d> (declared by the schedule), the
    scans' values and accumulators, and the per-point epilogue."""

    points_held = False  # (a scan of vec 1 keeps no chunks)

    def setup(self) -> None:
        k = self.k
        self.inner = -1  # every index is named i<d>
        self.scans = [n for n in k.order if n.op == K.SCAN]
        self.after = _after_scans(k)
        self.moving = _moving(k, k.scanned, self.after)

    def combine(self, n, x: str, y: str) -> str:
        """`x` combined with the later `y` by SCAN node n's op (x first: a fixed order)."""
        ct = CTYPE[n.dtype]  # the operands are evaluated outside the lambda (no shadowing)
        return f"[]({ct} x, {ct} y) {{ return {_COMBINE[n.arg]}; }}({x}, {y})"

    def local_scan(self, arrs, names, j: str, inb: str | None, indent: str, seeds=None) -> None:
        """Element j of each scan's running array: the source there (the
        identity out of bounds, unless `inb` is None: no guard) combined after
        element j - 1, or for j == 0 after the scan's seed where `seeds` gives one."""
        L = self.lines
        for k, (n, arr) in enumerate(zip(self.scans, arrs)):
            src = names[id(n.src[0])]
            here = src if inb is None else f"{inb} ? {src} : {_reduce_init(n.arg, n.dtype)}"
            first = "here" if seeds is None else self.combine(n, seeds[k], "here")
            L.append(f"{indent}{{ const {CTYPE[n.dtype]} here = {here};")
            L.append(f"{indent}  if ({j} == 0) {arr}[{j}] = {first}; else {arr}[{j}] = "
                     f"{self.combine(n, f'{arr}[{j} - 1]', 'here')}; }}")

    def epilogue(self, values, names, indent: str) -> dict:
        """The stores' values at this point, with each SCAN named by `values`."""
        names = dict(names)
        for n, v in zip(self.scans, values):
            names[id(n)] = v
        roots = [x for _, v, ix in self.k.stores for x in (v, *ix)]
        self.emit_all(closure_of(roots, set(names)), names, "", indent)
        return names


class _RowScanPrinter(_ScanPrinter):
    """The innermost dim scanned: each group of `threads` consecutive lanes of
    a warp takes a row at a time and walks it in tiles of threads x chunks
    vectors. A tile's vectors are loaded first (vector loads, all in flight);
    then, chunk by chunk, each thread scans its vector's points in registers,
    the group scans the threads' totals with warp shuffles (hir_warp_scan), and
    each point's result is the row's carry, then the earlier threads' totals,
    then its own prefix, combined in that order; the epilogue follows and the
    chunk is stored (vector stores). The carry takes the chunk's total."""

    def __init__(self, kern, name, idx, block, threads, pdl, vec, chunks):
        super().__init__(kern, name, idx, block, threads, pdl, vec, chunks)
        self.vec = vec if self.n else 1
        self.chunks = chunks
        self.vend = f"e{kern.scanned}"  # where the row's whole vectors end
        self.setup()

    def source(self) -> str:
        k, idx, L, T, v, C = self.k, self.idx, self.lines, self.threads, self.vec, self.chunks
        d = k.scanned
        groups = self.block // T
        self.pdl_wait()
        L.append(f"  const int lane = threadIdx.x % {T};")
        L.append(f"  for ({idx} base = ({idx})blockIdx.x * {groups}; base < nslots; "
                 f"base += ({idx})gridDim.x * {groups}) {{")
        # a group past the last row scans row 0 again (its lanes take part in the
        # shuffles) and stores nothing
        L.append(f"    const bool active = base + threadIdx.x / {T} < nslots;")
        L.append(f"    const {idx} row = active ? base + threadIdx.x / {T} : 0;")
        self._split("row", [x for x in range(self.n) if x != d], "    ")
        names: dict[int, str] = {}
        self.emit_all([n for n in k.order if id(n) not in self.moving], names, "", "    ")
        carry = [self.fresh() for _ in self.scans]
        for n, c in zip(self.scans, carry):
            L.append(f"    {CTYPE[n.dtype]} {c} = {_reduce_init(n.arg, n.dtype)};")
        L.append(f"    for ({idx} t0 = 0; t0 < e{d}; t0 += {T * v * C}) {{")
        cache = self._load_tile(names)
        L.append("      #pragma unroll")
        L.append(f"      for (int c = 0; c < {C}; ++c) {{")
        L.append(f"        const {idx} r = t0 + (c * {T} + lane) * {v};")
        L.append(f"        const bool inb = r < e{d};")
        L.append(f"        const {idx} i{d} = inb ? r : 0;")  # a valid point out of bounds
        local = dict(names)
        for n, arr in cache.items():
            local[n] = f"({arr} + c * {v})[u]"
        stores_at = [x for _, _, ix in k.stores for x in ix]
        base = dict(local)  # store offsets at the vector's first point
        self.emit_all([n for n in _closure(stores_at, set()) + stores_at if n.op != K.LOAD],
                      base, "", "        ")
        arrs = self._chunk_scan(local)
        pre = self._group_scan(arrs, carry, v)
        outs = []
        for s, _, _ in k.stores:
            outs.append(self.fresh())
            L.append(f"        alignas(16) {CTYPE[k.outputs[s].dtype]} {outs[-1]}[{v}];")
        self._points(v, d, "        ")
        self.store_points([self.combine(n, p, f"{a}[u]") for n, p, a in zip(self.scans, pre, arrs)],
                          local, outs, base, "active && inb")
        L.append("      }")
        L.append("    }")
        L.append("  }")
        return self.wrap()

    def _chunk_scan(self, local, guard: bool = True, seeds=None) -> list[str]:
        """Chunk c's points scanned in registers (the prologue on the cached
        loads, then the thread's inclusive scan): per scan, the array. Without
        `guard`, points out of bounds are not replaced by the identity (their
        values are not used); `seeds` start each scan (local_scan)."""
        L, v, d = self.lines, self.vec, self.k.scanned
        arrs = [self.fresh() for _ in self.scans]
        for n, arr in zip(self.scans, arrs):
            L.append(f"        {CTYPE[n.dtype]} {arr}[{v}];")
        self._points(v, d, "        ")
        pro = dict(local)
        self.emit_all(closure_of([n.src[0] for n in self.scans], set(pro)), pro, "", "          ")
        self.local_scan(arrs, pro, "u", "inb" if guard else None, "          ", seeds)
        L.append("        }")
        return arrs

    def store_points(self, values, local, outs, base, guard: str) -> None:
        """Point u of a vector: the epilogue of the scans' `values` into the
        outputs' arrays `outs` (closing the loop over the points); then, where
        `guard` holds, each output stored (a vector store, or its one point)."""
        L, k, v = self.lines, self.k, self.vec
        done = self.epilogue(values, local, "          ")
        for (s, node, _), arr in zip(k.stores, outs):
            L.append(f"          {arr}[u] = {done[id(node)]};")
        L.append("        }")
        L.append(f"        if ({guard}) {{")
        for (s, node, ix), arr in zip(k.stores, outs):
            off = _offset([base[id(x)] for x in ix], f"out{s}")
            if v > 1:
                self.vector_store(s, arr, off)
            else:
                L.append(f"          out{s}[{off}] = {arr}[0];")
        L.append("        }")

    def _points(self, v: int, d: int, indent: str) -> None:
        """Open the unrolled loop over the vector's points (i<d> each point's)."""
        self.lines.append(f"{indent}#pragma unroll")
        self.lines.append(f"{indent}for (int u = 0; u < {v}; ++u) {{")
        self.lines.append(f"{indent}  const {self.idx} i{d} = (inb ? r : 0) + u;")

    def _load_tile(self, names) -> dict:
        """The tile's vector loads, chunk by chunk into register arrays (every
        load in flight before the scans); returns load node id -> array."""
        k, idx, L, T, v, C, d = self.k, self.idx, self.lines, self.threads, self.vec, self.chunks, \
            self.k.scanned
        loads = [n for n in k.order if id(n) in self.vloads]
        if v == 1 or not loads:
            return {}
        cache = {}
        for n in loads:
            cache[id(n)] = arr = self.fresh()
            L.append(f"      alignas(16) {CTYPE[n.dtype]} {arr}[{C * v}];")
        L.append("      #pragma unroll")
        L.append(f"      for (int c = 0; c < {C}; ++c) {{")
        L.append(f"        const {idx} i{d} = t0 + (c * {T} + lane) * {v};")
        L.append(f"        if (i{d} < {self.vend}) {{")
        base = dict(names)
        self.emit_all([x for x in _closure(loads, set()) if x.op != K.LOAD], base, "", "          ")
        for n in loads:
            self.vector_load(n, base, f"{cache[id(n)]} + c * {v}")
        L.append("        }")
        L.append("      }")
        return cache

    def _group_scan(self, arrs, carry, v: int) -> list[str]:
        """Scan the threads' totals over the group; returns, per scan, what
        precedes this thread's points (the carry, then the earlier threads'
        totals) and adds the chunk's total to the carry."""
        L, T = self.lines, self.threads
        pre = []
        for n, arr, c in zip(self.scans, arrs, carry):
            ct = CTYPE[n.dtype]
            incl, before = self.fresh(), self.fresh()
            L.append(f"        const {ct} {incl} = hir_warp_scan<{T}>({arr}[{v - 1}], []({ct} x, {ct} y) "
                     f"{{ return {_COMBINE[n.arg]}; }});")
            L.append(f"        const {ct} {before} = __shfl_up_sync(0xffffffffu, {incl}, 1, {T});")
            p = self.fresh()
            L.append(f"        const {ct} {p} = lane == 0 ? {c} : {self.combine(n, c, before)};")
            L.append(f"        {c} = {self.combine(n, c, f'__shfl_sync(0xffffffffu, {incl}, {T - 1}, {T})')};")
            pre.append(p)
        return pre


class _ColumnScanPrinter(_ScanPrinter):
    """An outer dim scanned: a block takes 32 consecutive points of the other
    dims (threadIdx.x % 32: coalesced along the innermost dim) and walks the
    scanned dim in tiles of COLUMN_WARPS x COLUMN_ROWS points; warp w scans
    points [w * R, (w + 1) * R) of the tile in registers, the warps' totals go
    through shared memory, and each point's result is the column's carry, then
    the earlier warps' totals, then its own prefix, in that order."""

    def __init__(self, kern, name, idx, block, pdl):
        super().__init__(kern, name, idx, block, 32, pdl)
        self.setup()

    def source(self) -> str:
        k, idx, L = self.k, self.idx, self.lines
        d, W, R = k.scanned, COLUMN_WARPS, COLUMN_ROWS
        assert self.block == 32 * W
        self.pdl_wait()
        L.append("  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;")
        tots = []
        for n in self.scans:
            tots.append(self.fresh())
            L.append(f"  __shared__ {CTYPE[n.dtype]} {tots[-1]}[{W}][32];")
        L.append(f"  for ({idx} b = blockIdx.x; b < (nslots + 31) / 32; b += gridDim.x) {{")
        L.append("    const bool active = b * 32 + tx < nslots;")
        L.append(f"    const {idx} col = active ? b * 32 + tx : 0;")
        self._split("col", [x for x in range(self.n) if x != d], "    ")
        names: dict[int, str] = {}
        self.emit_all([n for n in k.order if id(n) not in self.moving], names, "", "    ")
        carry = [self.fresh() for _ in self.scans]
        for n, c in zip(self.scans, carry):
            L.append(f"    {CTYPE[n.dtype]} {c} = {_reduce_init(n.arg, n.dtype)};")
        L.append(f"    for ({idx} t0 = 0; t0 < e{d}; t0 += {W * R}) {{")
        arrs = [self.fresh() for _ in self.scans]
        for n, arr in zip(self.scans, arrs):
            L.append(f"      {CTYPE[n.dtype]} {arr}[{R}];")
        self._points(R, d)
        pro = dict(names)
        self.emit_all(closure_of([n.src[0] for n in self.scans], set(pro)), pro, "", "        ")
        self.local_scan(arrs, pro, "u", "inb", "        ")
        L.append("      }")
        for arr, t in zip(arrs, tots):
            L.append(f"      {t}[ty][tx] = {arr}[{R - 1}];")
        L.append("      __syncthreads();")
        pre = []
        for n, c, t in zip(self.scans, carry, tots):
            p = self.fresh()
            pre.append(p)
            L.append(f"      {CTYPE[n.dtype]} {p} = {c};")
            L.append(f"      for (int w = 0; w < {W}; ++w) {{")
            L.append(f"        if (w == ty) {c} = {p};  // what precedes this warp's points")
            L.append(f"        {p} = {self.combine(n, p, f'{t}[w][tx]')};")
            L.append("      }")
            # now p is the tile's carry out, c what precedes this thread: swap them
            L.append(f"      {{ const {CTYPE[n.dtype]} x = {p}; {p} = {c}; {c} = x; }}")
        L.append("      __syncthreads();  // the totals are rewritten by the next tile")
        self._points(R, d)
        done = self.epilogue([self.combine(n, p, f"{a}[u]") for n, p, a in zip(self.scans, pre, arrs)],
                             names, "        ")
        L.append("        if (active && inb) {")
        for s, node, ix in k.stores:
            off = _offset([done[id(x)] for x in ix], f"out{s}")
            L.append(f"          out{s}[{off}] = {done[id(node)]};")
        L.append("        }")
        L.append("      }")
        L.append("    }")
        L.append("  }")
        return self.wrap()

    def _points(self, R: int, d: int) -> None:
        idx, L = self.idx, self.lines
        L.append("      #pragma unroll")
        L.append(f"      for (int u = 0; u < {R}; ++u) {{")
        L.append(f"        const {idx} r = t0 + ty * {R} + u;")
        L.append(f"        const bool inb = r < e{d};")
        L.append(f"        const {idx} i{d} = inb ? r : 0;")  # a valid point out of bounds
