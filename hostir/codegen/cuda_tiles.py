"""CUDA printers of pointwise kernels that go through shared memory: transposes
(32 x 32 tiles read along one dim and written along the innermost) and
staged gathers (the input row a gather reads from copied in first). The
launch rule in spec.py picks them (`Variant.tile`); cuda_schedules.py
dispatches to them."""
from __future__ import annotations

from .cuda import CTYPE, _affine, _inner_deps, _offset, _Printer
from .kir import K, Kernel, KNode, topological

STAGED = -2  # a Variant's `tile` for the staged-gather schedule (_StagePrinter)
STAGE_BYTES = 40 * 1024  # the largest input row a staged gather holds in shared memory
STAGE_BLOCK = 512        # threads of a staged gather's block (a row's loads in flight)
STAGE_PREFETCH = 8       # points a thread reads its gather's index for before the row's copy,
STAGE_PREFETCH_BLOCK = 1024  # ... in blocks of this many threads (index rows read from memory)
STAGE_VECTOR = True      # the row copied in 16-byte vectors where aligned


def tile_loads(kern: Kernel, t: int) -> list[KNode]:
    """Loads of a pointwise kernel whose innermost index is `i_t + c` (t not
    the innermost iteration dim) and whose other indices move along the
    innermost iteration dim: a transpose when the tensor is contiguous in its
    innermost dim (a value broadcast along the innermost dim is not one)."""
    n = len(kern.extent_vals)
    if kern.reduced or n < 2 or t == n - 1:
        return []
    dep = _inner_deps(kern, n - 1)
    return [node for node in kern.order
            if node.op == K.LOAD and len(node.src) > 2 and _affine(node.src[-1], t) is not None
            and any(id(x) in dep for x in node.src[1:-1])]


TRANSPOSE_TILES = 2
"""32 x 32 tiles a transpose's block takes at once, side by side along the
innermost dim (their loads in flight together: 8 a thread), where their
shared arrays take TRANSPOSE_BYTES at most (transpose_tiles). H200 % of copy,
same run, 1 / 2 / 4 (torch.compile): transpose fp32 8192x8192 85.0 / 93.1 /
65.6 (90.4), 4096x16384 85.3 / 93.3 / 65.7 (92.7), 16384x2048 81.6 / 90.1 /
64.1 (92.4), 3000x5001 79.0 / 84.0 / 57.7 (65.2)."""
TRANSPOSE_BYTES = 40 * 1024


def transpose_tiles(kern: Kernel, t: int) -> int:
    """Tiles a block of a transpose along dim `t` takes at once (TRANSPOSE_TILES)."""
    per = sum(32 * 33 * n.dtype.itemsize for n in tile_loads(kern, t))
    m = max(1, TRANSPOSE_TILES)
    while m > 1 and m * per > TRANSPOSE_BYTES:
        m -= 1
    return m


class _TilePrinter(_Printer):
    """A pointwise kernel that transposes: inputs read along iteration dim t
    (contiguous there) while the outputs run along the innermost dim. A block
    takes a 32 x 32 tile of (t, innermost) (or transpose_tiles of them side by
    side along the innermost dim): it reads the transposed inputs with
    consecutive threads along t into shared memory, then computes and stores
    with consecutive threads along the innermost dim; both sides coalesced."""

    def __init__(self, kern: Kernel, name: str, idx: str, pdl: bool, t: int):
        super().__init__(kern, name, 1, idx, 256, False, pdl)
        self.inner = -1  # every index is named i<d>
        self.t = t

    def source(self) -> str:
        k, idx, L, t = self.k, self.idx, self.lines, self.t
        last = len(k.extent_vals) - 1
        others = [d for d in range(last + 1) if d not in (t, last)]
        tiles = tile_loads(k, t)
        M = transpose_tiles(k, t)
        self.pdl_wait()
        L.append("  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;")
        for j, n in enumerate(tiles):
            L.append(f"  __shared__ {CTYPE[n.dtype]} tile{j}[{M}][32][33];")
        L.append(f"  const {idx} nt = (e{t} + 31) / 32, nl = (e{last} + {32 * M - 1}) / {32 * M};")
        L.append(f"  for ({idx} b = blockIdx.x; b < nslots; b += gridDim.x) {{")
        L.append(f"    {idx} b_rest = b;")
        L.append(f"    const {idx} bl = b_rest % nl; b_rest /= nl;")
        L.append(f"    const {idx} bt = b_rest % nt; b_rest /= nt;")
        for pos in reversed(range(len(others))):
            d = others[pos]
            if pos == 0:
                L.append(f"    const {idx} i{d} = b_rest;")
            else:
                L.append(f"    const {idx} i{d} = b_rest % e{d}; b_rest /= e{d};")
        # phase 1: the transposed inputs' tile, consecutive threads along t
        L.append("    #pragma unroll")
        L.append(f"    for (int mk = 0; mk < {32 * M}; mk += 8) {{  // (tile mk / 32, its rows k8 onwards)")
        L.append("      const int m = mk / 32, k8 = mk % 32;")
        L.append(f"      const {idx} i{t} = bt * 32 + tx, i{last} = (bl * {M} + m) * 32 + ty + k8;")
        L.append(f"      if (i{t} < e{t} && i{last} < e{last}) {{")
        first: dict[int, str] = {}
        self.emit_all(topological(tiles), first, "", "        ")
        for j, n in enumerate(tiles):
            L.append(f"        tile{j}[m][ty + k8][tx] = {first[id(n)]};")
        L.append("      }")
        L.append("    }")
        L.append("    __syncthreads();")
        # phase 2: everything else, consecutive threads along the innermost dim
        L.append("    #pragma unroll")
        L.append(f"    for (int mk = 0; mk < {32 * M}; mk += 8) {{")
        L.append("      const int m = mk / 32, k8 = mk % 32;")
        L.append(f"      const {idx} i{t} = bt * 32 + ty + k8, i{last} = (bl * {M} + m) * 32 + tx;")
        L.append(f"      if (i{t} < e{t} && i{last} < e{last}) {{")
        names = {id(n): f"tile{j}[m][tx][ty + k8]" for j, n in enumerate(tiles)}
        roots = [x for _, v, ix in k.stores for x in (v, *ix)]
        self.emit_all(topological(roots, stop=set(names)), names, "", "        ")
        for s_, node, ix in k.stores:
            off = _offset([names[id(i)] for i in ix], f"out{s_}")
            L.append(f"        out{s_}[{off}] = {names[id(node)]};")
        L.append("      }")
        L.append("    }")
        L.append("    __syncthreads();  // the tile is reused by the next block's work")
        L.append("  }")
        return self.wrap()


def staged_gather(kern: Kernel):
    """(G, E) for a pointwise kernel with one load G whose innermost index is
    read from data (a gather along the input's last dim) and whose other indices
    are the same along the kernel's innermost dim, E the gathered dim's extent
    (the node its index check compares against); else (None, None)."""
    n = len(kern.extent_vals)
    if kern.reduced or n == 0:
        return None, None
    data: set[int] = set()
    for node in kern.order:
        if node.op == K.LOAD or any(id(x) in data for x in node.src):
            data.add(id(node))
    inner = _inner_deps(kern, n - 1)
    gathers = [node for node in kern.order if node.op == K.LOAD and len(node.src) > 1
               and id(node.src[-1]) in data]
    checks = [node for node in kern.order if node.op == K.CHECK]
    if len(gathers) != 1 or len(checks) != 1:
        return None, None
    g = gathers[0]
    if any(id(i) in inner or id(i) in data for i in g.src[1:-1]):
        return None, None
    return g, checks[0].src[3]


def index_loads(kern: Kernel, g: KNode, row: set[int]) -> list[KNode]:
    """Loads that gather G's index reads (of an index tensor, at the output
    point) and that move with the output row (a broadcast index row stays in
    L1: not prefetched); `row` the nodes known per row."""
    last = len(kern.extent_vals) - 1
    out = []
    for n in topological(list(g.src), stop=row):
        if n.op != K.LOAD:
            continue
        closure = topological(list(n.src))
        if any(x.op == K.LOAD for x in closure):
            continue
        if any(x.op == K.INDEX and x.arg < last for x in closure):
            out.append(n)
    return out


def _row_nodes(g: KNode, extent: KNode) -> list[KNode]:
    """What a staged gather computes once per output row."""
    return topological(list(g.src[1:-1]) + [extent])


def stage_block(kern: Kernel) -> int:
    """Threads of a staged gather's block: STAGE_PREFETCH_BLOCK where it
    prefetches its index (measured on an H100, gather fp32 8192 x 8192: 96 %
    of copy, 93 % with 512 threads x 16 points), else STAGE_BLOCK (a
    broadcast index row: take_along_axis 86 %, 69 % with 1024 threads)."""
    g, extent = staged_gather(kern)
    if g is None or not STAGE_PREFETCH:
        return STAGE_BLOCK
    row = {id(n) for n in _row_nodes(g, extent)}
    return STAGE_PREFETCH_BLOCK if index_loads(kern, g, row) else STAGE_BLOCK


class _StagePrinter(_Printer):
    """A gather along an input's last dim (gather, take_along_axis): a block
    takes an output row at a time, first copies the input row it reads from
    into shared memory (consecutive threads, coalesced), then computes the row
    with the gathered reads served from there; a random read of global memory
    would fetch a 32-byte sector for each 4-byte element. The index values of a
    thread's first STAGE_PREFETCH points are loaded before the copy (index_loads),
    so their reads are in flight with the row's; the copy moves 16-byte vectors
    where the row is contiguous and aligned."""

    def __init__(self, kern: Kernel, name: str, idx: str, pdl: bool, g: KNode, extent: KNode):
        super().__init__(kern, name, 1, idx, stage_block(kern), False, pdl)
        self.inner = -1  # every index is named i<d>
        self.g, self.extent = g, extent

    def source(self) -> str:
        k, idx, L, g = self.k, self.idx, self.lines, self.g
        last = len(k.extent_vals) - 1
        t = k.inputs[g.arg].dtype
        ct = CTYPE[t]
        self.pdl_wait()
        L.append(f"  __shared__ alignas(16) {ct} stage[{STAGE_BYTES // t.itemsize}];")
        L.append(f"  const {idx} nrows = {' * '.join(f'e{d}' for d in range(last)) or '1'};")
        L.append(f"  for ({idx} row = blockIdx.x; row < nrows; row += gridDim.x) {{")
        L.append(f"    {idx} row_rest = row;")
        for d in reversed(range(last)):
            if d == 0:
                L.append(f"    const {idx} i0 = row_rest;")
            else:
                L.append(f"    const {idx} i{d} = row_rest % e{d}; row_rest /= e{d};")
        names: dict[int, str] = {}
        self.emit_all(_row_nodes(g, self.extent), names, "", "    ")
        length = names[id(self.extent)]
        off = _offset([names[id(i)] for i in g.src[1:-1]] + ["s"], f"in{g.arg}")
        pre = index_loads(k, g, set(names))
        P = STAGE_PREFETCH if pre else 0
        held: dict[int, str] = {}
        if P:
            for n in pre:
                held[id(n)] = f"pf{len(held)}"
                L.append(f"    {CTYPE[n.dtype]} pf{len(held) - 1}[{P}];")
            L.append("    #pragma unroll")
            L.append(f"    for (int k = 0; k < {P}; ++k) {{")
            L.append(f"      const {idx} i{last} = threadIdx.x + k * blockDim.x;")
            L.append(f"      if (i{last} < e{last}) {{")
            early = dict(names)
            self.emit_all(topological(pre, stop=set(names)), early, "", "        ")
            for n in pre:
                L.append(f"        {held[id(n)]}[k] = {early[id(n)]};")
            L.append("      }")
            L.append("    }")
        L.append("    __syncthreads();  // the last row's readers are done with the stage")
        if STAGE_VECTOR:
            per = 16 // t.itemsize
            start = _offset([names[id(i)] for i in g.src[1:-1]] + ["0"], f"in{g.arg}")
            inner = f"in{g.arg}_s{len(g.src) - 2}"
            L.append(f"    if ({inner} == 1 && {length} % {per} == 0 && "
                     f"reinterpret_cast<size_t>(in{g.arg} + {start}) % 16 == 0) {{")
            L.append(f"      const uint4* from = reinterpret_cast<const uint4*>(in{g.arg} + {start});")
            L.append("      #pragma unroll 4")
            L.append(f"      for ({idx} s = threadIdx.x; s < {length} / {per}; s += blockDim.x) "
                     f"reinterpret_cast<uint4*>(stage)[s] = from[s];")
            L.append("    } else {")
        L.append("    #pragma unroll 8")
        L.append(f"    for ({idx} s = threadIdx.x; s < {length}; s += blockDim.x) stage[s] = in{g.arg}[{off}];")
        if STAGE_VECTOR:
            L.append("    }")
        L.append("    __syncthreads();")
        if P:
            L.append("    #pragma unroll")
            L.append(f"    for (int k = 0; k < {P}; ++k) {{")
            L.append(f"      const {idx} i{last} = threadIdx.x + k * blockDim.x;")
            L.append(f"      if (i{last} < e{last}) {{")
            self._point({**names, **{n: f"{a}[k]" for n, a in held.items()}}, "        ")
            L.append("      }")
            L.append("    }")
        L.append("    #pragma unroll 4")
        L.append(f"    for ({idx} i{last} = threadIdx.x{f' + {P} * blockDim.x' if P else ''}; "
                 f"i{last} < e{last}; i{last} += blockDim.x) {{")
        self._point(dict(names), "      ")
        L.append("    }")
        L.append("  }")
        return self.wrap()

    def _point(self, names: dict, indent: str) -> None:
        """One output point: the gathered value from the stage, then the stores."""
        k, g, L = self.k, self.g, self.lines
        ct = CTYPE[k.inputs[g.arg].dtype]
        self.emit_all(topological(list(g.src), stop=set(names)), names, "", indent)
        pred, j = names[id(g.src[0])], names[id(g.src[-1])]
        names[id(g)] = var = self.fresh()
        L.append(f"{indent}const {ct} {var} = ({pred}) ? stage[{j}] : ({ct})0;")
        roots = [x for _, v, ix in k.stores for x in (v, *ix)]
        self.emit_all(topological(roots, stop=set(names)), names, "", indent)
        for s_, node, ix in k.stores:
            L.append(f"{indent}out{s_}[{_offset([names[id(i)] for i in ix], f'out{s_}')}] = {names[id(node)]};")
