"""The period schedule of an outer reduction (spec.Variant.period): a column
sum over C kept points, too many for one block (cuda_flat's flat schedule
takes up to FLAT_MAX_KEPT) and no multiple of a vector (tiles of lanes would
read narrow vectors, or shifted ones: cuda_outer_shift), reads its
contiguous [reduced, kept] span as rows of P = F x C points (F a vector's
points): each such virtual row starts on a vector boundary, so a tile of 32
lanes of F points reads whole aligned 16-byte vectors, as the aligned tile
kernel does over [R / F, P] (cuda_outer), its share of the virtual rows
split over blocks (outer_split over those extents). Virtual point v holds
kept point v % C (of phase v / C): so thread (tx) of a tile keeps F
accumulators for F consecutive kept points, as an aligned tile's lane does.
The rows past the last whole virtual row are its first (R % F) x C points,
read a point at a time.

The block combines its rows of lanes (shared memory), then writes its
partials to the workspace ([split][P] of each reduction). Kept point c's
F x split partials lie in several tiles (a phase each): the kept points are
counted in tiles of a block's threads (`out tiles`), each with an arrival
counter; a block counts itself at each out tile its virtual tile touches,
and the last to arrive at one combines its F x split partials a kept point
a thread (phases, then shares, in order: deterministic) and runs the
epilogue there. Costs: the workspace's write and read (8 F x split bytes a
kept point, fp32 sums: 2 % of a bf16 1000 x 50257 sum's bytes at split 1)
and one more round trip at the end. Taken where the points are 4 bytes
(PERIOD_SIZES: 2-byte points lost to shifted lanes)."""
from __future__ import annotations

import math

from .cuda import CTYPE, VEC_TYPE, index_deps
from .cuda_combine import _COMBINE, acc_bytes, acc_init, acc_type, acc_value
from .cuda_flat import FLAT_BATCH, FLAT_MAX_KEPT, _body, flat_width
from .cuda_outer import SHARED_BYTES, _OuterPrinter, outer_blocks, outer_split
from .kir import K, Kernel, levels, reductions, row_nodes, split_stores, ws_slot

OUTER_PERIOD = True    # odd kept counts past FLAT_MAX_KEPT read as virtual rows of F x C points ...
PERIOD_SIZES = (4,)
"""... where the widest input's points take this many bytes. H200 % of copy,
two runs, tiles (fp32: a point a lane; 2-byte: shifted lanes,
cuda_outer_shift) / period: column sum fp32 2009x33403 80.9 / 90.8, 84.9 /
93.8; 33000x2033 85.2 / 88.4, 86.2 / 90.3; 5000x13001 92.0 / 92.9, 94.8 /
95.3; 8192x4095 84.2 / 83.8. But 2-byte points lost: bf16 1619x41427 81.9 /
65.8, 82.1 / 66.1; 6000x11111 81.5 / 64.2; 8192x4095 69.7 / 60.5; 1000x50257
68.0 / 59.3; 50000x1301 72.8 / 62.3; fp16 16384x4097 79.2 / 71.8 (not
understood: the same reads as the aligned tiles over [R / 8, 8 C], bf16
1619x41432 91.8 there; each block's end, its fence and counters, is one
suspect; not its blocks an SM: next run, 4 (64 registers) / 8 (32, 8 bytes
spilled) / 8 with batches of 2: bf16 1619x41427 64.3 / 62.1 / 59.9,
8192x4095 59.3 / 42.7 / 36.8, fp16 16384x4097 68.9 / 49.2 / 56.7, shifted
lanes 79.8, 69.4, 75.3). int32 points (int64 sums) take it too: not
measured."""
PERIOD_LANES = 32      # a tile's lanes (F points each)
PERIOD_BLOCK = 256     # threads a block: 8 rows of lanes; an out tile's kept points


def period_fits(kern: Kernel, extents: list[int], ins: list) -> bool:
    """Does this launch run the period schedule: OUTER_PERIOD, PERIOD_SIZES; the kernel
    flat (cuda_flat.flat_ok, which the caller checks), more kept points than
    the flat schedule takes, some reduced; the block's combine arrays within
    SHARED_BYTES; each input the kernel reads contiguous in the iteration's
    shape from a 16-byte boundary?"""
    kept = math.prod(extents[d] for d in kern.kept)
    F = flat_width(kern)
    per = sum(acc_bytes(x) for x in kern.order if x.op == K.REDUCE)
    if not OUTER_PERIOD or kept <= FLAT_MAX_KEPT or F < 2 or not all(extents[d] for d in kern.reduced) or \
            max(t.dtype.itemsize for t in kern.inputs) not in PERIOD_SIZES or \
            (PERIOD_BLOCK // PERIOD_LANES) * (PERIOD_LANES * F + 1) * per > SHARED_BYTES - 64:
        return False
    shape = tuple(extents)
    return all(tuple(t.shape) == shape and t.is_contiguous() and t.data_ptr() % 16 == 0
               for t in (ins[a] for a in {x.arg for x in kern.order if x.op == K.LOAD}))


def _virtual(kern: Kernel, extents: list[int]) -> list[int]:
    """The extents of the virtual [R / F, F x C] rows (the reduced dims' first
    and the kept dims' first take them; the rest are 1)."""
    F = flat_width(kern)
    R = math.prod(extents[d] for d in kern.reduced)
    C = math.prod(extents[d] for d in kern.kept)
    out = [1] * len(extents)
    out[kern.reduced[0]], out[kern.kept[0]] = -(-R // F), F * C
    return out


def period_split(kern: Kernel, extents: list[int], sm_count: int) -> int:
    """Blocks that share a virtual tile: the aligned tile kernel's split over
    the virtual rows (cuda_outer.outer_split).
    Tried and removed (2026-12-02): a split that fills the device's blocks in
    whole waves (the fewest shares whose last wave is fullest, 8 virtual rows
    a lane at least): more blocks, each with its end's fence and counters,
    lost. H200 % of copy, same run, outer_split / waves: column sum bf16
    1619x41427 (2 shares against 1) 66.1 / 58.1, 50000x1301 62.8 / 48.1,
    fp32 5000x13001 95.3 / 70.5, 33000x2033 90.3 / 74.4; bf16 6000x11111
    65.0 / 68.0, 8192x4095 60.7 / 64.7."""
    return outer_split(kern, PERIOD_LANES, flat_width(kern), PERIOD_BLOCK, _virtual(kern, extents), sm_count)


def period_scratch(kern: Kernel, kept: int, split: int) -> tuple[int, int]:
    """(workspace bytes, zeroed counters): each share's partial at each
    virtual point, an arrival counter each out tile."""
    return ws_slot(kern) * split * flat_width(kern) * kept * reductions(kern), -(-kept // PERIOD_BLOCK)


def period_blocks(kept: int, split: int) -> int:
    """The launch's blocks: a virtual tile (32 lanes of F of P = F x C points:
    C / 32 of them) and share each."""
    return -(-kept // PERIOD_LANES) * split


class _PeriodPrinter(_OuterPrinter):
    """An outer reduction read in virtual rows of F x C points (the module's
    docstring): the aligned tile's printer (cuda_outer) for its block combine
    and epilogue, its own loop and end."""

    def __init__(self, kern: Kernel, name: str, idx: str, pdl: bool, flat: int):
        super().__init__(kern, name, idx, PERIOD_BLOCK, pdl, flat, PERIOD_LANES)

    def source(self) -> str:
        k, idx, L, F, X = self.k, self.idx, self.lines, self.vec, self.lanes
        ty_n, B, W = self.block // X, self.block, X * self.vec
        rows = row_nodes(k)
        reduces = [n for n in k.order if n.op == K.REDUCE]
        self.pdl_wait()
        L.append(f"  const int tx = threadIdx.x % {X}, ty = threadIdx.x / {X};")
        for j, n in enumerate(reduces):
            L.append(f"  __shared__ {acc_type(n)} red{j}[{ty_n}][{X * F + 1}];")
        L.append("  __shared__ bool last;")
        L.append(f"  const {idx} R = {' * '.join(f'e{d}' for d in k.reduced)};")
        L.append("  const long long total = (long long)R * nslots, P = (long long)nslots * " + f"{F};  // a virtual row's points")
        L.append(f"  const {idx} full = ({idx})(total / P);  // whole virtual rows")
        L.append(f"  const {idx} tiles = ({idx})((P + {W - 1}) / {W});")
        for j, n in enumerate(reduces):
            L.append(f"  {acc_type(n)}* ws{j} = reinterpret_cast<{acc_type(n)}*>("
                     f"ws + (size_t){j} * split * P * {ws_slot(k)});")
        names: dict[int, str] = {}  # what the points take that no index moves
        moving = index_deps(k, range(self.n))
        self.emit_all([n for n in k.order if id(n) in rows and levels(k)[id(n)] == 0 and id(n) not in moving],
                      names, "", "  ")
        body = [n for n in _body(k, reduces) if n.op != K.INDEX]
        loads = [n for n in body if n.op == K.LOAD]
        acc = {id(n): f"a{j}[u]" for j, n in enumerate(reduces)}
        L.append(f"  for ({idx} b = blockIdx.x; b < tiles * split; b += gridDim.x) {{")
        L.append(f"    const {idx} tile = b / split, g = b % split;")
        L.append(f"    const long long v = (long long)tile * {W} + tx * {F};  // the lane's first virtual point")
        L.append("    const bool active = v < P;")
        for j, n in enumerate(reduces):
            L.append(f"    {acc_type(n)} a{j}[{F}];")
            L.append(f"    #pragma unroll\n    for (int u = 0; u < {F}; ++u) a{j}[u] = {acc_init(n)};")
        L.append("    if (active) {")
        L.append(f"      {idx} s = g * {ty_n} + ty;")
        step = f"split * {ty_n}"
        self._batch_loop("s", "full", step, FLAT_BATCH,
                         lambda batch: self._rows(body, loads, reduces, acc, names, batch, step), "      ")
        # the points past the whole virtual rows (a prefix of one more), a point at a time
        L.append(f"      if (total % P != 0 && full % ({step}) == g * {ty_n} + ty) {{")
        L.append("        const long long f = (long long)full * P + v;")
        L.append("        #pragma unroll")
        L.append(f"        for (int u = 0; u < {F}; ++u) {{")
        L.append("          if (f + u < total) {")
        point = dict(names)
        for n in loads:
            point[id(n)] = f"in{n.arg}[f + u]"
        self.emit_all([n for n in body if n.op != K.LOAD], point, "", "            ")
        self._combine(reduces, acc, point, "            ")
        L.append("          }")
        L.append("        }")
        L.append("      }")
        L.append("    }")
        self._block_combine(reduces, "    ")
        L.append("    if (ty == 0 && active) {")
        for j in range(len(reduces)):
            L.append(f"      #pragma unroll\n      for (int u = 0; u < {F}; ++u) ws{j}[(long long)g * P + v + u] = a{j}[u];")
        L.append("    }")
        self._out_tiles(reduces, rows, W, B)
        L.append("  }")
        return self.wrap()

    def _rows(self, body, loads, reduces, acc, names, batch: int, step: str) -> None:
        """`batch` whole virtual rows s, s + step, ...: each row's vectors
        loaded first (a batch's loads in flight), then combined in order."""
        k, L, F = self.k, self.lines, self.vec
        arrs = {}
        for n in loads:
            arrs[id(n)] = arr = self.fresh()
            L.append(f"        alignas(16) {CTYPE[k.inputs[n.arg].dtype]} {arr}[{batch}][{F}];")
        L.append("        #pragma unroll")
        L.append(f"        for (int b_ = 0; b_ < {batch}; ++b_) {{")
        L.append(f"          const long long f = (long long)(s + b_ * {step}) * P + v;")
        for n in loads:
            size, arr = k.inputs[n.arg].dtype.itemsize * F, arrs[id(n)]
            load = "__ldcs(reinterpret_cast<const uint4*>" if size == 16 else \
                f"(*reinterpret_cast<const {VEC_TYPE[size]}*>"
            L.append(f"          *reinterpret_cast<{VEC_TYPE[size]}*>({arr}[b_]) = {load}(in{n.arg} + f));")
        L.append("        }")
        inner = dict(names)
        for n in loads:
            inner[id(n)] = f"{arrs[id(n)]}[b_][u]"
        L.append("        #pragma unroll")
        L.append(f"        for (int b_ = 0; b_ < {batch}; ++b_) {{")
        L.append("          #pragma unroll")
        L.append(f"          for (int u = 0; u < {F}; ++u) {{")
        self.emit_all([n for n in body if n.op != K.LOAD], inner, "", "            ")
        self._combine(reduces, acc, inner, "            ")
        L.append("          }")
        L.append("        }")

    def _out_tiles(self, reduces, rows, W: int, B: int) -> None:
        """The block counts itself at each out tile (B kept points) its virtual
        tile's points [lo, hi] fall in: kept points [lo % C, hi % C], or, where
        it runs past a phase's end, [lo % C, C) and [0, hi % C] (out tiles the
        first took not again). The last to arrive at one combines its kept
        points' partials, a point a thread, and runs the epilogue there."""
        k, idx, L, F = self.k, self.idx, self.lines, self.vec
        _, row_stores = split_stores(k, rows)
        L.append(f"    const long long lo = (long long)tile * {W}, hi = (lo + {W} < P ? lo + {W} : P) - 1;")
        L.append("    const bool wraps = lo / nslots != hi / nslots;")
        L.append(f"    const {idx} t0 = ({idx})(lo % nslots) / {B}, "
                 f"t1 = wraps ? (nslots - 1) / {B} : ({idx})(hi % nslots) / {B};")
        L.append(f"    const {idx} t2 = wraps ? ({idx})(hi % nslots) / {B} : -1;")
        L.append(f"    const {idx} first = t1 - t0 + 1, n = first + (t2 < t0 - 1 ? t2 : t0 - 1) + 1;")
        L.append(f"    for ({idx} q = 0; q < n; ++q) {{")
        L.append(f"      const {idx} T = q < first ? t0 + q : q - first;")
        L.append("      unsigned int arrivals = 0u;  // the virtual tiles at out tile T, each phase's")
        L.append("      #pragma unroll")
        L.append(f"      for (int p = 0; p < {F}; ++p) {{")
        L.append(f"        const long long a = (long long)p * nslots + (long long)T * {B};")
        L.append(f"        const long long e = (long long)p * nslots + ((long long)T * {B} + {B} < nslots ? "
                 f"(long long)T * {B} + {B} : (long long)nslots) - 1;")
        L.append(f"        arrivals += (unsigned int)(e / {W} - a / {W} + 1);")
        L.append("      }")
        self._last_arrival("sem[T]", "arrivals * split", "last")
        L.append("      if (threadIdx.x == 0) sem[T] = 0u;  // ready for the next launch")
        L.append(f"      const {idx} c = T * {B} + threadIdx.x;")
        for j, n in enumerate(reduces):
            L.append(f"      a{j}[0] = {acc_init(n)};")
        L.append("      if (c < nslots) {")
        L.append("        #pragma unroll")
        L.append(f"        for (int p = 0; p < {F}; ++p) {{")
        L.append(f"          for ({idx} w = 0; w < split; ++w) {{")
        for j, n in enumerate(reduces):
            L.append(f"            {{ const {acc_type(n)} x = a{j}[0], "
                     f"y = hir_ld_l2(ws{j} + (long long)w * P + (long long)p * nslots + c); a{j}[0] = {_COMBINE[n.arg]}; }}")
        L.append("          }")
        L.append("        }")
        L.append("      }")
        if row_stores:
            L.append(f"      const {idx} row = c < nslots ? c : 0;")
            self._split("row", k.kept, "      ")
            L.append(f"      const {idx} ii = i{self.n - 1};")
            point = {id(n): acc_value(n, f"a{j}[0]") for j, n in enumerate(reduces)}
            self._epilogue(rows, row_stores, point, "      ", "c < nslots", "ii")
        L.append("    }")

    def bounds(self) -> str:
        return f"{self.block}, {outer_blocks(self.vec, self.block)}"
