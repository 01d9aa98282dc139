"""The CUDA printer of outer reductions (a one-pass reduction that keeps the
innermost dim: tiles of kept points, their reduced points split over blocks),
and the rules of when and how wide it runs (spec.py)."""
from __future__ import annotations

import math

from .cuda import CTYPE, _closure, vector_loads
from .cuda_combine import _COMBINE, acc_bytes, acc_init, acc_type
from .cuda_outer_split import _OuterSplit
from .cuda_schedules import _ReductionPrinter
from .row_loads import closure_of
from .kir import K, Kernel, levels, passes, row_nodes, split_stores


class _OuterPrinter(_OuterSplit, _ReductionPrinter):
    """A one-pass reduction that keeps the innermost dim (an outer reduction:
    sum over the rows of a matrix). A block takes a tile of `lanes` x `vec`
    consecutive kept points (lane tx holds `vec` of them: one vector load per
    reduced point, coalesced along the innermost dim) and a share of the
    reduced points (threadIdx.x / lanes strides over it; with `split` > 1
    blocks sharing a tile, a block's share is every split-th group of
    block / lanes reduced points: OUTER_INTERLEAVED); the block combines its
    lanes in shared memory. With `split` > 1, `split` blocks share a tile, each
    writing its partial results to `ws`; the last to arrive (counted in `sem`,
    which it resets) combines the partials in block order (deterministic) and
    runs the epilogue."""

    shifted = False  # kept points off vector boundaries, lanes' vectors shifted (cuda_outer_shift)

    def __init__(self, kern: Kernel, name: str, idx: str, block: int, pdl: bool, vec: int = 1,
                 lanes: int = 32, few: bool = False, batch: int = 0):
        super().__init__(kern, name, idx, block, lanes, pdl, vec, batch=batch)  # (a lane's batch: outer_batch)
        self.lanes = lanes  # a tile's width in lanes (fewer than a warp: narrow kept dims)
        self.few = few  # ... in OUTER_FEW_BLOCKS blocks an SM (outer_few)
        self.wrapped = wrapped(lanes)  # ... or as wide as the kept dims (OUTER_WRAPPED)
        # ... whose block has threads past its rows of lanes (they take no rows)
        self.idle = self.wrapped and block % lanes != 0
        self.inner = self.n - 1  # the innermost kept index is `ii` in per-point code

    def source(self) -> str:
        reduces, rows, names = self._head()
        self._stream(reduces, rows, names)
        self._finish(reduces, rows, names)
        return self.wrap()

    def _head(self):
        """The block's loop over (tile, share) pairs, up to the kept dims'
        values of this lane's points: (the REDUCEs, the kept dims' nodes, their
        names so far)."""
        k, idx, L, V, X = self.k, self.idx, self.lines, self.vec, self.lanes
        ty_n = self.block // X
        rows = row_nodes(k)
        reduces = [n for n in k.order if n.op == K.REDUCE]
        self.pdl_wait()
        L.append(f"  const int tx = threadIdx.x % {X}, ty = threadIdx.x / {X};")
        for j, n in enumerate(reduces):
            L.append(f"  __shared__ {acc_type(n)} red{j}[{ty_n if self.wrapped else self.block // 32}][{X * V + 1}];")
        self._shared(reduces)
        L.append("  __shared__ bool last;")
        L.append(f"  const {idx} R = {' * '.join(f'e{d}' for d in k.reduced)};")
        W = (X - self.shifted) * V  # (a shifted tile's last lane reads for its neighbour: cuda_outer_shift)
        L.append(f"  const {idx} tiles = (nslots + {W - 1}) / {W};")
        L.append(f"  for ({idx} b = blockIdx.x; b < tiles * split; b += gridDim.x) {{")
        L.append(f"    const {idx} tile = b / split, g = b % split;")
        idle = f"ty < {ty_n} && " if self.idle else f"tx < {X - 1} && " if self.shifted else ""
        L.append(f"    const bool active = {idle}tile * {W} + tx * {V} < nslots;")
        L.append(f"    const {idx} row = {'' if self.shifted else 'active ? '}tile * {W} + tx * {V}"
                 f"{'' if self.shifted else ' : 0'};")
        self._split("row", k.kept, "    ")
        level = levels(k)
        names: dict[int, str] = {}  # values of the kept dims that do not move along them
        self.emit_all([n for n in k.order if id(n) in rows and level[id(n)] == 0
                       and id(n) not in self.dep], names, f"i{self.n - 1}", "    ")
        return reduces, rows, names

    def _shared(self, reduces) -> None:
        """Shared arrays beyond the block combine's (none here)."""

    def _stream(self, reduces, rows, names) -> None:
        """Each lane's accumulators over its share of the tile's reduced points
        (and the stores at every point), then the block's combined in lane
        ty == 0 of each column."""
        L, V = self.lines, self.vec
        for j, n in enumerate(reduces):
            L.append(f"    {acc_type(n)} a{j}[{V}];")
            L.append(f"    #pragma unroll\n    for (int u = 0; u < {V}; ++u) a{j}[u] = {acc_init(n)};")
        self._loop(reduces, rows, names, {id(n): f"a{j}[u]" for j, n in enumerate(reduces)})
        self._block_combine(reduces, "    ")

    def _start(self) -> str:
        """A lane's first reduced point (of its block's share)."""
        ty_n = self.block // self.lanes
        return f"ty < {ty_n} ? g * {ty_n} + ty : R" if self.idle else f"g * {ty_n} + ty"

    def _loop(self, reduces, rows, names, acc) -> None:
        """A lane's loop over its share of the tile's reduced points, its
        accumulators `acc` taking in its points."""
        idx, L, V = self.idx, self.lines, self.vec
        start, step = self._start(), f"split * {self.block // self.lanes}"
        if V == 1 and OUTER_TAIL_V1:  # whole groups of OUTER_UNROLL_V1 rows, then the rest 4 at a time
            U = OUTER_UNROLL_V1
            L.append(f"    {idx} r0 = {start};")
            L.append("    #pragma unroll 1")
            L.append(f"    for (; (long long)r0 + {U - 1}LL * {step} < R; r0 += {U} * {step}) {{")
            L.append("      #pragma unroll")
            L.append(f"      for (int k_ = 0; k_ < {U}; ++k_) {{")
            L.append(f"      const {idx} r = r0 + k_ * {step};")
            self._point(reduces, rows, names, acc)
            L.append("      }")
            L.append("    }")
            L.append("    #pragma unroll 4")
            L.append(f"    for ({idx} r = r0; r < R; r += {step}) {{")
        elif V > 1 and OUTER_BATCH and self._batchable(reduces, rows):  # (OUTER_BATCH)
            def points(batch: int) -> None:
                if batch == 1:
                    L.append(f"      const {idx} r = r0;")
                    self._point(reduces, rows, names, acc)
                    return
                loaded = self._batch_loads(reduces, rows, names, batch, step)
                for b in range(batch):
                    L.append(f"      {{ const {idx} r = r0 + {b} * {step};")
                    self._point(reduces, rows, names, acc, {i: f"{arr}[{b}]" for i, arr in loaded.items()})
                    L.append("      }")
            L.append(f"    {idx} r0 = {start};")
            self._batch_loop("r0", "R", step, self._long_batch or OUTER_BATCH, points)  # (the launch's: outer_batch)
            return
        else:
            L.append(f"    #pragma unroll {OUTER_UNROLL_V1 if V == 1 else OUTER_UNROLL if V < 8 else OUTER_UNROLL_V8}")
            L.append(f"    for ({idx} r = {start}; r < R; r += {step}) {{  // (OUTER_INTERLEAVED)")
        self._point(reduces, rows, names, acc)
        L.append("    }")

    def _batch_loop(self, var: str, bound: str, step: str, batch: int, points, indent: str = "    ") -> None:
        """A lane's loop over `var` (declared and set before), `step` apart
        below `bound`: whole batches of `batch` points (`points(batch)`, which
        issues a batch's loads before combining any: OUTER_BATCH, cuda_flat.
        FLAT_BATCH), then the rest a point at a time (`points(1)`), in the
        order a point at a time would take them."""
        L = self.lines
        if batch > 1:
            L.append(f"{indent}for (; (long long){var} + {batch - 1}LL * {step} < {bound}; "
                     f"{var} += {batch} * {step}) {{")
            points(batch)
            L.append(f"{indent}}}")
        L.append(f"{indent}for (; {var} < {bound}; {var} += {step}) {{")
        points(1)
        L.append(f"{indent}}}")

    def _body(self, reduces, rows) -> list:
        """The nodes a lane takes at each reduced point (its combines' and
        full stores' closure)."""
        full_stores, _ = split_stores(self.k, rows)
        roots = [s for n in reduces for s in n.src] + [x for st in full_stores for x in (st[1], *st[2])]
        return closure_of(roots, {id(n) for n in rows if id(n) not in self.dep})

    def _batchable(self, reduces, rows) -> bool:
        """Do the lane's vector loads' places take no loaded value (so a
        batch's loads go first, _batch_loads)?"""
        loads = [n for n in self._body(reduces, rows) if id(n) in self.vloads]
        return not any(n.op == K.LOAD for n in _closure(loads, self.dep))

    def _batch_loads(self, reduces, rows, names, batch: int, step: str) -> dict[int, str]:
        """The vector loads of `batch` reduced points r0, r0 + step, ... issued
        together (OUTER_BATCH), each into its row of an array of the batch;
        returns load -> array."""
        k, idx, L, V, last_dim = self.k, self.idx, self.lines, self.vec, self.n - 1
        loads = [n for n in self._body(reduces, rows) if id(n) in self.vloads]
        arrays = {}
        for n in loads:
            arrays[id(n)] = arr = self.fresh()
            L.append(f"      alignas(16) {CTYPE[k.inputs[n.arg].dtype]} {arr}[{batch}][{V}];")
        for b in range(batch):
            L.append(f"      {{ const {idx} r = r0 + {b} * {step};")
            self._split("r", k.reduced, "      ")
            base = dict(names)
            self.emit_all([n for n in _closure(loads, self.dep) if n.op != K.LOAD], base,
                          f"i{last_dim}", "      ")
            for n in loads:
                self.vector_load(n, base, into=f"{arrays[id(n)]}[{b}]")
            L.append("      }")
        return arrays

    def _point(self, reduces, rows, names, acc, loaded: dict[int, str] | None = None) -> None:
        """A lane's points at reduced point `r`: its accumulators take them in
        (and the stores at every point). `loaded`: its vector loads already
        issued, load -> the array holding them (OUTER_BATCH)."""
        k, idx, L, V, last_dim = self.k, self.idx, self.lines, self.vec, self.n - 1
        full_stores, _ = split_stores(k, rows)
        self._split("r", k.reduced, "      ")
        body = self._body(reduces, rows)
        local = dict(names)  # once per reduced point: what does not move along the kept innermost dim
        self.emit_all([n for n in body if id(n) not in self.dep], local, f"i{last_dim}", "      ")
        inner = dict(local)
        if V > 1 and loaded is not None:
            for n in body:
                if id(n) in self.vloads:
                    inner[id(n)] = f"({loaded[id(n)]})[u]"
        elif V > 1:
            base = dict(local)
            loads = [n for n in body if id(n) in self.vloads]
            self.emit_all([n for n in _closure(loads, self.dep) if n.op != K.LOAD], base,
                          f"i{last_dim}", "      ")
            for n in loads:
                inner[id(n)] = self.vector_load(n, base)
        L.append("      #pragma unroll")
        L.append(f"      for (int u = 0; u < {V}; ++u) {{")
        L.append(f"        const {idx} ii = i{last_dim} + u;")
        self.emit_all([n for n in body if id(n) in self.dep], inner, "ii", "        ")
        self._combine(reduces, acc, inner, "        ")
        self._stores(full_stores, inner, "        ")
        L.append("      }")

    def bounds(self) -> str:
        """The blocks an SM the split's block count assumes (outer_blocks): full
        occupancy (OUTER_FULL_OCCUPANCY: 32 registers a thread) but for
        2-byte floats: without bounds a bf16 column sum's kernel took 43
        registers, 5 blocks of 256 an SM, and its grid ran in 1.6 waves."""
        if OUTER_FULL_OCCUPANCY and self.block <= 1024:
            return f"{self.block}, {OUTER_FEW_BLOCKS if self.few else outer_blocks(self.vec, self.block)}"
        return str(self.block)

    def _block_combine(self, reduces, indent: str) -> None:
        """Lane ty == 0 of each column takes in the other lanes' values: a
        tile narrower than a warp first combines the warp's lanes of each
        column (shuffles), then lane ty == 0 each warp's value, in order; a
        wrapped tile's rows of lanes each place their values, and row 0 takes
        in the others in order."""
        L, V, X = self.lines, self.vec, self.lanes
        ty_n = self.block // X
        slots = ty_n if self.wrapped else self.block // 32
        L.append(f"{indent}#pragma unroll")
        L.append(f"{indent}for (int u = 0; u < {V}; ++u) {{")
        for j, n in enumerate(reduces):
            if X < 32 and not self.wrapped:
                L.append(f"{indent}  for (int o = 16; o >= {X}; o /= 2) {{ const {acc_type(n)} x = a{j}[u], "
                         f"y = hir_shfl_xor(a{j}[u], o, 32); a{j}[u] = {_COMBINE[n.arg]}; }}")
            if self.wrapped:
                guard, slot = (f"if (ty < {ty_n}) " if self.idle else ""), "ty"
            else:
                guard, slot = (f"if ((threadIdx.x & 31) < {X}) " if X < 32 else ""), "threadIdx.x / 32"
            L.append(f"{indent}  {guard}red{j}[{slot}][tx * {V} + u] = a{j}[u];")
        L.append(f"{indent}}}")
        L.append(f"{indent}__syncthreads();")
        L.append(f"{indent}if (ty == 0) {{")
        L.append(f"{indent}  #pragma unroll")
        L.append(f"{indent}  for (int u = 0; u < {V}; ++u) {{")
        for j, n in enumerate(reduces):
            L.append(f"{indent}    for (int w = 1; w < {slots}; ++w) {{ const {acc_type(n)} x = a{j}[u], "
                     f"y = red{j}[w][tx * {V} + u]; a{j}[u] = {_COMBINE[n.arg]}; }}")
        L.append(f"{indent}  }}")
        L.append(f"{indent}}}")
        L.append(f"{indent}__syncthreads();  // red is reused by the next tile")


SHARED_BYTES = 48 * 1024  # the static shared memory a block may declare
OUTER_UNROLL = 4           # reduced points a lane's loop unrolls (loads in flight)
OUTER_BATCH = 4
"""Reduced points a lane of vectors takes a batch, their vectors' loads issued
before any is combined (0: the loop unrolled OUTER_UNROLL, which ptxas kept at
one load in flight a thread: each point's load into the same registers after
the last point's adds, every unrolled point guarded by the launch's bound;
more where outer_batch says). H200 % of copy, same run, 0 / 4 / 2: column
sum fp32 4096x4096 64.2 / 67.5 / 66.2, 16384x4096 95.9 / 96.6 / 96.3, fp16
8192x8192 50.6 / 87.4 / 72.6, bf16 87381x768 79.2 / 80.4 / 68.8, 13421x5000
82.4 / 82.0 / 67.5, 4096x16384 89.3 / 88.1 / 73.3; sum over [0, 1] fp32
16x512x4096 86.8 / 88.1 / 87.1, seed-003 full fusion fp32 16x512x4096 94.8 /
95.1 / 93.8. Every lane at 8 gained 1-5 points on column
sums of 2-byte and fp32 points (benchmarks/RESULTS.md, twentieth session),
but the tests' outer kernels that spill (ptxas, sm_90) went from 41 of 115
to 61 of 121 (fp32 lanes and pairs at 32 registers, two inputs, 8-byte
accumulators, two reductions) and 2-byte lanes of few rows lost: so 8 only
where outer_batch says (OUTER_BATCH_NARROW, OUTER_BATCH_WIDE)."""
OUTER_BATCH_NARROW = 8
OUTER_NARROW_ROWS = 128
"""A lane of an outer kernel whose one input is 2-byte floats in vectors of
8, its accumulators 4-byte, takes OUTER_BATCH_NARROW points a batch where it
takes OUTER_NARROW_ROWS reduced points or more (the launch's variant:
outer_batch). H200 % of copy, same run, 8 / 4 (points a lane): column sum
bf16 1024x65536 (128) 99.2 / 95.9, fp16 8192x16384 (256) 99.9 / 96.7 (torch.
compile 99.2), bf16 16384x8192 (256) 99.6 / 96.2, fp16 4096x16384 (128) 92.7
/ 89.5; but bf16 4096x4096 (32) 66.1 / 74.3, fp16 2048x8192 (32) 67.5 /
74.1, bf16 32768x1024 (64) 65.4 / 67.8, fp16 100000x512 (95) 75.4 / 75.3.
The rule, next run, on / off: fp16 200000x1024 97.4 / 93.8 (torch.compile
95.2), bf16 8192x8192 87.0 / 84.9 (RESULTS.md: six more)."""
OUTER_BATCH_WIDE = 8
"""... and a lane of one input's 4-byte points in vectors of 4 into 4-byte
accumulators takes this many, any rows (outer_batch). H200 % of copy, same
run, 4 / 8 (4 again): sum over [0, 1] fp32 16x512x4096 86.5 / 89.6 (87.2),
column sum fp32 4096x4096 65.9 / 72.3 (66.8), 32768x1024 87.4 / 89.1 (87.6),
16384x4096 98.7 / 100 (99.0), 1024x65536 102 / 103 (102), 8192x16384 104 /
105 (103); seed-003 full fusion 16x512x4096 (two inputs: 4) 95.9 / 96.6
(95.9). The rule (floats only: an int32 max spilled), next run, on / off /
on: sum over [0, 1] 85.0 / 84.5 / 87.1, column sum fp32 8192x8192 96.7 /
94.2 / 96.2, 4096x4096 56.8 / 61.6 / 59.8 (each run's spread; RESULTS.md)."""


def outer_batch(kern: Kernel, vec: int, lanes: int, block: int, extents: list[int], sm_count: int,
                shifted: bool = False) -> int:
    """Points a lane of an outer tile kernel (lanes of `vec` points, 0 for a
    warp's 32) takes a batch where that is not OUTER_BATCH, for lanes of one
    load into one 4-byte accumulator (kernels of more loads or reductions
    spilled at 8: ptxas, the tests' kernels): OUTER_BATCH_WIDE for 4-byte
    points in vectors of 4, OUTER_BATCH_NARROW for 2-byte ones in vectors of
    8 where a lane takes OUTER_NARROW_ROWS points or more; 0 elsewhere."""
    reduces = [n for n in kern.order if n.op == K.REDUCE]
    if len(kern.inputs) != 1 or sum(n.op == K.LOAD for n in kern.order) != 1 or len(reduces) != 1 or \
            acc_bytes(reduces[0]) > 4:
        return 0
    size = kern.inputs[0].dtype.itemsize
    if size == 4 and vec == 4 and kern.inputs[0].dtype.is_float:  # (an int32 max spilled 16 bytes)
        return OUTER_BATCH_WIDE
    if not OUTER_BATCH_NARROW or size != 2 or vec < 8:
        return 0
    lanes = lanes or 32
    split = outer_split(kern, lanes - shifted, vec, block, extents, sm_count, shifted=shifted)
    per_lane = math.prod(extents[d] for d in kern.reduced) // (split * (block // lanes))
    return OUTER_BATCH_NARROW if per_lane >= OUTER_NARROW_ROWS else 0


OUTER_UNROLL_V8 = 8
"""... of 8 points a lane (2-byte floats). H200 % of copy, same run, 4 / 8
(64 points a lane at least): column sum bf16 699050x96 64.0 / 63.7, 87381x768
72.7 / 75.8, 13421x5000 73.8 / 76.0; fp32 (4 a lane) gained nothing clear."""
OUTER_UNROLL_V1 = 32
"""... of a point a lane (kept points no multiple of a vector: 4 bytes of
fp32, 2 of bf16 a load). H100 % of copy, same run, 4 / 8 / 16: column sum
fp32 1917396x35 82.4 / 75.1 / 87.4, 475949x141 84.7 / 78.3 / 89.8, 1000000x67
85.3 / 78.8 / 88.7, bf16 2000000x33 51.3 / 45.3 / 71.5; another run, 4 / 16 /
32: fp32 1917396x35 85.6 / 90.9 / 90.4, 475949x141 87.8 / 93.0 / 93.2,
1000000x67 88.3 / 92.1 / 90.5, 6710886x5 82.4 / 86.3 / 88.3, 33000x2033 (tiles
of 32 lanes) 86.0 / 86.6 / 93.8 (torch.compile 89.9), bf16 2000000x33 51.1 /
70.9 / 72.5, 1000000x67 51.9 / 73.2 / 74.5."""
OUTER_TAIL_V1 = True
"""... in whole groups of OUTER_UNROLL_V1 rows (their loads in flight
together), then the rest 4 at a time: `#pragma unroll 32` left a lane's last
rows (up to 31) one load at a time. H100 % of copy, same run, unroll 32 / 16
(before this): column sum fp32 2009x33403 (251 rows a lane) 87.9 / 91.1
(torch.compile 85.8-90.1), 33000x2033 90.0 / 83.1."""
OUTER_BLOCKS_PER_SM = 8    # blocks an SM the split aims at (spec.KernelSpec.split)
OUTER_MIN_POINTS = 64      # ... each lane combining this many reduced points at least
OUTER_WIDE_SHARE = 2
"""... and, where the kept points take more than one tile, this many times
fewer blocks an SM (the shares' loads in flight). H100 % of copy, same run
(shares interleaved, OUTER_INTERLEAVED), each lane 64 / 128 reduced points at
least (about 4 / 2 blocks an SM): column sum bf16 87381x768 83.5 / 87.7,
13421x5000 84.6 / 89.4, fp32 67108x1000 91.7 / 93.1, 16384x4096 97.0 / 98.2;
but one tile lost: bf16 699050x96 87.4 / 79.6, fp32 1048576x64 96.4 / 93.4; and
fewer than 4 blocks an SM of fp32 lost (sum over [0, 1] of 16x512x4096, 2
blocks an SM: 92.1 -> 79.9). The blocks are at most the aim times the SMs:
where a few SMs ran one block more than the rest (the aim's blocks rounded up
to a whole split a tile), those SMs' shares finished last: column sum fp32
16384x4096 at 544 blocks 84.0 against 98.2 at 512, bf16 13421x5000 at 280
68.6 against 89.4 at 260."""
OUTER_BLOCKS_V8 = 4
"""... but where a lane takes 8 points (2-byte floats), this many blocks of 256
an SM (64 registers a thread), which the split aims at too: at 32 registers
its 8 accumulators and unrolled loads spilled (87381x768: 28 bytes), and the
loads in flight fell."""
OUTER_MAX_SPLIT = 1024     # ... and at most this many blocks a tile
OUTER_MAX_POINTS = 8        # kept points a lane at most (outer_width: 16 bytes of the widest input)
# (4 for 2-byte floats, H100 % of copy, same run, 8 / 4: column sum bf16
# 699050x96 86.1 / 78.4, 87381x768 83.7 / 85.9, 13421x5000 84.2 / 84.6.)
# OUTER_INTERLEAVED (a note; no longer a switch): the blocks sharing a tile take
# every split-th group of reduced points each, sweeping the rows together (H100,
# runs / interleaved: column sum fp32 67108x1000 87.5 / 91.7, 16384x4096 93.4 / 97.0).
OUTER_FULL_OCCUPANCY = True  # __launch_bounds__ for 2048 threads an SM (bounds)
OUTER_NARROW = True
"""Kept dims narrower than a warp's tile (32 lanes x vec points) take tiles of
fewer lanes (outer_lanes: the fewest that cover them), the block's other
lanes more reduced points: a warp's tile of 32 lanes left half a warp idle on
fp32 1048576x64 (H100 76.7 % of copy, torch.compile 95)."""


def outer_blocks(vec: int, block: int) -> int:
    """Blocks of `block` threads an SM an outer reduction's kernel asks for
    (its __launch_bounds__): 2048 threads, or OUTER_BLOCKS_V8 blocks where a
    lane takes 8 points."""
    full = max(1, 2048 // block)
    return min(full, OUTER_BLOCKS_V8) if vec >= 8 and OUTER_BLOCKS_V8 else full


OUTER_FEW_BLOCKS = 4
"""Tiles of a warp's lanes of a point each (kept points no multiple of a
vector) of 2-byte floats, no more tiles than SMs (outer_few), ask for this
many blocks of 256 an SM (64 registers a thread: the unrolled rows' loads in
flight), and their split aims at it (0: off). H200 % of copy, same run
(twice), 8 / 4: column sum bf16 8192x4095 57.2, 56.4 / 71.3, 68.0; 50000x1301
58.6, 58.6 / 73.3, 72.3; 20000x3001 58.0 / 64.9; fp16 16384x4097 70.0, 71.6 /
78.5, 78.5. More tiles than SMs lost (the grid then in more waves): bf16
2009x33403 76.5, 75.0 / 69.3, 68.7, 1000x50257 66.9, 66.1 / 62.7, 62.7; and
fp32 (4-byte loads) lost: 5000x13001 89.1, 86.7 / 73.0, 71.3, 33000x2033 87.0
/ 82.5."""


def outer_few(kern: Kernel, vec: int, lanes: int, kept: int, sm_count: int) -> bool:
    """Does an outer reduction's tiling take OUTER_FEW_BLOCKS blocks an SM:
    tiles of a warp's lanes (`lanes` 0) of a point each over 2-byte inputs,
    no more tiles than `sm_count`?"""
    return bool(OUTER_FEW_BLOCKS) and vec == 1 and lanes == 0 and bool(kern.inputs) and \
        max(t.dtype.itemsize for t in kern.inputs) == 2 and -(-kept // 32) <= sm_count


OUTER_WRAPPED = True
"""Kept points that tiles of 32 lanes (or narrow ones) cover with many lanes
idle (35 fp32 columns: two tiles of 32 lanes, 29 of them idle) take one tile
as wide as they are (outer_lanes: a lane a vector of them, any count), the
block's rows of lanes side by side (tx, ty = threadIdx.x % lanes, / lanes):
a block's loads of a round run on across the rows' boundaries, one span. Its
block has 256, 512 or 1024 threads, few of them idle (outer_block),
where that leaves OUTER_WRAP_GAIN of the lanes fewer idle at least. Only
lanes of a point (vec 1: kept points no multiple of a vector). H100 % of copy,
same run, tiles / wrapped: column sum fp32 1917396x35 66.8 / 82.3, 475949x141
81.6 / 84.7, 1000000x67 71.8 / 85.2; but lanes of vectors lost: fp32 3355443x20
(4 a lane) 92.9 / 91.4, 200000x300 90.1 / 88.1, bf16 (8 a lane) 699050x96 85.6
/ 83.7, 1677721x40 87.2 / 86.0, 118149x568 81.5 / 71.8 (blocks of 512 at four
an SM: 32 registers)."""
OUTER_WRAP_GAIN = 0.05


def wrapped(lanes: int) -> bool:
    """Is a tile of `lanes` lanes as wide as its kept points (OUTER_WRAPPED),
    not a warp's or a divisor of it?"""
    return lanes > 0 and 32 % lanes != 0


def outer_block(lanes: int) -> int:
    """The block of a wrapped tile of `lanes` lanes: the smallest of 256, 512
    and 1024 threads that leaves under 5 % of them idle, else the one that
    leaves the fewest (the blocks an SM the split aims at: outer_blocks)."""
    use = {b: (b // lanes) * lanes / b for b in (256, 512, 1024)}
    return next((b for b in use if use[b] >= 0.95), max(use, key=lambda b: (use[b], -b)))


def _narrow_lanes(kept: int, vec: int) -> int:
    lanes = 1
    while OUTER_NARROW and lanes < 32 and lanes * vec < kept:
        lanes *= 2
    return lanes if OUTER_NARROW and lanes < 32 else 0


def outer_lanes(kept: int, vec: int, kern: Kernel | None = None) -> int:
    """Lanes across a tile of an outer reduction over `kept` kept points: the
    fewest (a power of two) that cover them, or 0 for a warp's 32 (the
    variant's `threads`; the block's combine arrays hold a row of a warp's
    width, so a narrower one fits wherever outer_width's does); or, given the
    kernel, a wrapped tile's lanes (OUTER_WRAPPED) where it leaves fewer idle
    and its combine arrays fit."""
    lanes = _narrow_lanes(kept, vec)
    x = -(-kept // vec)
    if not (OUTER_WRAPPED and vec == 1 and kern is not None and kept and wrapped(x) and x <= 1024):
        return lanes
    width = (lanes or 32) * vec
    tiled = kept / (-(-kept // width) * width)
    block = outer_block(x)
    rows_of_lanes = block // x
    per_lane = sum(acc_bytes(n) for n in kern.order if n.op == K.REDUCE)
    if rows_of_lanes * x / block < tiled + OUTER_WRAP_GAIN or \
            rows_of_lanes * (x * vec + 1) * per_lane > SHARED_BYTES - 64:
        return lanes
    return x


def outer_split(kern: Kernel, lanes: int, vec: int, block: int, extents: list[int], sm_count: int,
                few: bool = False, shifted: bool = False) -> int:
    """Blocks that share a tile of an outer reduction: about
    OUTER_BLOCKS_PER_SM blocks an SM (`few`: OUTER_FEW_BLOCKS), each lane
    combining OUTER_MIN_POINTS reduced points at least, OUTER_MAX_SPLIT at
    most; OUTER_WIDE_SHARE times fewer blocks an SM over several tiles, but
    for `shifted` lanes (cuda_outer_shift.OUTER_SHIFT_AIM)."""
    nrows = math.prod(extents[d] for d in kern.kept)
    per_row = math.prod(extents[d] for d in kern.reduced)
    tiles = max(1, -(-nrows // (lanes * vec)))
    full = min(OUTER_BLOCKS_PER_SM, OUTER_FEW_BLOCKS if few else outer_blocks(vec, block))
    aim = max(1, full // OUTER_WIDE_SHARE) if tiles > 1 and not shifted else full
    want = max(1, aim * sm_count // tiles)  # (no SM runs a block more than the rest: OUTER_WIDE_SHARE)
    return max(1, min(want, per_row // (OUTER_MIN_POINTS * (block // lanes)), OUTER_MAX_SPLIT))


def outer_width(kern: Kernel, block: int = 256) -> int:
    """Kept points per lane of an outer reduction: 16 bytes of its widest input,
    when some load can read them as one vector (stores stay per point), and
    when the block's shared combine arrays (a row of 32 * width + 1 accumulators
    per warp and reduction) fit: float8 inputs ask for 8 a lane, argmax's
    accumulators take 16 bytes."""
    if not kern.inputs:
        return 1
    v = min(OUTER_MAX_POINTS, max(1, 16 // max(t.dtype.itemsize for t in kern.inputs)))
    per_lane = sum(acc_bytes(n) for n in kern.order if n.op == K.REDUCE)
    while v > 1 and (block // 32) * (32 * v + 1) * per_lane > SHARED_BYTES - 64:
        v //= 2
    return v if v > 1 and vector_loads(kern, v) else 1


def outer_ok(kern: Kernel) -> bool:
    """Can the outer schedule run this reduction kernel: one pass, and the
    innermost dim kept (coalesced across a tile of kept points)."""
    n = len(kern.extent_vals)
    return bool(kern.reduced) and n - 1 not in kern.reduced and passes(kern) == [0]
