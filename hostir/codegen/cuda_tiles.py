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


class _TilePrinter(_Printer):
    """A pointwise kernel that transposes: inputs read along iteration dim t
    (contiguous there) while the outputs run along the innermost dim. A block
    takes a 32 x 32 tile of (t, innermost): it reads the transposed inputs with
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
        self.pdl_wait()
        L.append("  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;")
        for j, n in enumerate(tiles):
            L.append(f"  __shared__ {CTYPE[n.dtype]} tile{j}[32][33];")
        L.append(f"  const {idx} nt = (e{t} + 31) / 32, nl = (e{last} + 31) / 32;")
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
        L.append("    for (int k8 = 0; k8 < 32; k8 += 8) {")
        L.append(f"      const {idx} i{t} = bt * 32 + tx, i{last} = bl * 32 + ty + k8;")
        L.append(f"      if (i{t} < e{t} && i{last} < e{last}) {{")
        first: dict[int, str] = {}
        self.emit_all(topological(tiles), first, "", "        ")
        for j, n in enumerate(tiles):
            L.append(f"        tile{j}[ty + k8][tx] = {first[id(n)]};")
        L.append("      }")
        L.append("    }")
        L.append("    __syncthreads();")
        # phase 2: everything else, consecutive threads along the innermost dim
        L.append("    for (int k8 = 0; k8 < 32; k8 += 8) {")
        L.append(f"      const {idx} i{t} = bt * 32 + ty + k8, i{last} = bl * 32 + tx;")
        L.append(f"      if (i{t} < e{t} && i{last} < e{last}) {{")
        names = {id(n): f"tile{j}[tx][ty + k8]" for j, n in enumerate(tiles)}
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


class _StagePrinter(_Printer):
    """A gather along an input's last dim (gather, take_along_axis): a block
    takes an output row at a time, first copies the input row it reads from
    into shared memory (consecutive threads, coalesced), then computes the row
    with the gathered reads served from there; a random read of global memory
    would fetch a 32-byte sector for each 4-byte element."""

    def __init__(self, kern: Kernel, name: str, idx: str, pdl: bool, g: KNode, extent: KNode):
        super().__init__(kern, name, 1, idx, STAGE_BLOCK, False, pdl)
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
        self.emit_all(topological(list(g.src[1:-1]) + [self.extent]), names, "", "    ")
        length = names[id(self.extent)]
        off = _offset([names[id(i)] for i in g.src[1:-1]] + ["s"], f"in{g.arg}")
        L.append("    __syncthreads();  // the last row's readers are done with the stage")
        L.append("    #pragma unroll 8")
        L.append(f"    for ({idx} s = threadIdx.x; s < {length}; s += blockDim.x) stage[s] = in{g.arg}[{off}];")
        L.append("    __syncthreads();")
        L.append("    #pragma unroll 4")
        L.append(f"    for ({idx} i{last} = threadIdx.x; i{last} < e{last}; i{last} += blockDim.x) {{")
        self.emit_all(topological(list(g.src), stop=set(names)), names, "", "      ")
        pred, j = names[id(g.src[0])], names[id(g.src[-1])]
        names[id(g)] = var = self.fresh()
        L.append(f"      const {ct} {var} = ({pred}) ? stage[{j}] : ({ct})0;")
        roots = [x for _, v, ix in k.stores for x in (v, *ix)]
        self.emit_all(topological(roots, stop=set(names)), names, "", "      ")
        for s_, node, ix in k.stores:
            L.append(f"      out{s_}[{_offset([names[id(i)] for i in ix], f'out{s_}')}] = {names[id(node)]};")
        L.append("    }")
        L.append("  }")
        return self.wrap()
