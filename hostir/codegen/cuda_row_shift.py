"""How a reduction kernel reads rows that start off a vector boundary (a mixin
of cuda_schedules._ReductionPrinter, `shift`: launch_checks.shift_ok): the
row's shift m_ (_row_shift), and what every row reads alike (a weight, a
bias), whose points sit elsewhere past their own boundaries: kept in shared
memory placed as shifted as the block's rows (rows.KEEP_WEIGHTS:
_keep_weights, _kept_weight), or funnel-shifted from its two aligned vectors
(rows.FUNNEL_WEIGHTS: _funnel_load), else read a point at a time; and the
row's points outside its whole vectors, a point a thread (_edge_points); and
the launch bounds a shifted row asks (_shift_bounds: SHIFT_BOUNDS_*,
SHIFTED_ROW_BOUNDS, wide_shift)."""
from __future__ import annotations

from .cuda import CTYPE, VEC_TYPE, _closure, _offset
from .kir import K, KNode
from .row_loads import kept_block_points, kept_by_shift, kept_share, kept_weights


class _RowShifts:
    """The shifted reads of a _ReductionPrinter (its k, vec, threads, chunks,
    vloads, kept_w, lines)."""

    def _row_shift(self, names) -> None:
        """m_: how far past a vector boundary the row starts (its first vector
        load's point 0; every vector tensor starts as far past: launch_checks.shift_ok)."""
        L, k, i = self.lines, self.k, f"i{self.inner}"
        first = next(n for n in k.order if id(n) in self.vloads)
        L.append("    int m_;  // the row's start, points past a vector boundary")
        L.append(f"    {{ const {self.idx} {i} = 0;")
        at = dict(names)
        self.emit_all([x for x in _closure([first], set()) if x.op != K.LOAD], at, i, "      ")
        p = f"in{first.arg} + {_offset([at[id(x)] for x in first.src[1:]], f'in{first.arg}')}"
        L.append(f"      m_ = (int)(reinterpret_cast<unsigned long long>({p}) / sizeof(*in{first.arg}) % {self.vec}); }}")
        # (the row's points before its first whole vector, and after its last: _edge_points)
        L.append(f"    const int h_ = (int)hir_min(({self.idx})(({self.vec} - m_) % {self.vec}), R);")
        L.append(f"    const int t_ = (int)((R - h_) % {self.vec});")

    def _edge_loads(self, body, names, first: bool) -> list[tuple[str, dict]]:
        """A pass's points of a shifted row outside its whole vectors (its h_
        first and t_ last, h_ + t_ < 2 x vec), one a thread of the row's group:
        their indices, and, in the row's first pass (`first`), their loads
        issued before the loop over the whole vectors where the row keeps
        them for later passes (EDGE_KEEP) or its group has EDGE_EARLY_THREADS
        threads or more (else, and in later passes, after the loop), a
        thread without a point reading the row's point 0. Returns, for each
        point a thread, the name of its flag and the names its indices (and
        loads) took."""
        L, k, span, out = self.lines, self.k, self.span, []
        loads = [n for n in body if n.op == K.LOAD]
        if first:
            self.edge_kept = {}
        for q in range(self._edge_slots()):
            e = self.fresh()
            at = self._edge_index(q, e, names, "    ")
            for n in body:  # (kept weights from shared memory, where the vectors read them; held ones)
                if id(n) in self.kept_w:
                    at[id(n)] = f"({self._kept_at(n, f'{e}_i{self.inner}')})[0]"
                elif id(n) in self.held_w:
                    at[id(n)] = f"{self.held_w[id(n)]}_e{q}"
            kept = [n for n in loads if id(n) in self.cache]  # (the row's loads kept in registers)
            if not first and EDGE_KEEP:
                at.update({id(n): self.edge_kept[q, id(n)] for n in kept if (q, id(n)) in self.edge_kept})
            early = [n for n in loads if id(n) not in at]
            if early and first and ((EDGE_KEEP and kept) or span >= EDGE_EARLY_THREADS):
                self.emit_all(_closure(early, set()) + early, at, f"{e}_i{self.inner}", "    ")
                self.edge_kept.update({(q, id(n)): at[id(n)] for n in kept})
            out.append((e, at))
        return out

    def _edge_index(self, q: int, e: str, names: dict, indent: str) -> dict:
        """Head and tail slot q of a shifted row's thread (`e` names it): its
        flag e_has, its point e_at and that point's indices e_i<d>; returns
        `names` with the reduced indices at that point."""
        L, k, span = self.lines, self.k, self.span
        L.append(f"{indent}const bool {e}_has = lane + {q * span} < h_ + t_;  // a point of the row's head or tail")
        L.append(f"{indent}const {self.idx} {e}_at = !{e}_has ? 0 : lane + {q * span} < h_ ? lane + {q * span} "
                 f": R - h_ - t_ + lane + {q * span};")
        self._split(f"{e}_at", k.reduced, indent, prefix=f"{e}_i")
        at = dict(names)
        for n in k.order:
            if n.op == K.INDEX and n.arg in k.reduced:
                at[id(n)] = f"{e}_i{n.arg}"
        return at

    def _held_slots(self) -> None:
        """The registers each thread holds its points of the weights in
        (HOLD_WEIGHTS): a vector's points a chunk, a point a head and tail
        slot, and the shift they were read for. Unshifted rows (stacked:
        row_widths.WORD_ROWS_HOLD) have no shift: their vectors are read
        here, once, before the row loop."""
        L, k = self.lines, self.k
        held = [n for n in k.order if id(n) in self.held_w]
        for n in held:
            ct, a = CTYPE[k.inputs[n.arg].dtype], self.held_w[id(n)]
            L.append(f"  alignas(16) {ct} {a}[{self.chunks * self.vec}];")
            if self.shift:
                L.append(f"  {ct} {', '.join(f'{a}_e{q}' for q in range(self._edge_slots()))};")
        if self.shift:
            L.append("  int held_m_ = -1;  // the shift the held weights were read for")
            return
        L.append("  {  // (this thread's points of what every row reads, for all its rows)")
        self._chunk_loop(self.chunks)
        self._split("r", k.reduced, "      ")
        at: dict = {}
        self.emit_all([x for x in _closure(held, set()) if x.op != K.LOAD], at, f"i{self.inner}", "      ")
        for n in held:
            self.vector_load(n, at, f"{self.held_w[id(n)]} + c * {self.vec}")
        L.append("    }}")
        L.append("  }")

    def _hold_weights(self, names) -> None:
        """Read this thread's points of what every row reads (a weight, a bias)
        into its registers where its row starts elsewhere past a vector
        boundary than its last (HOLD_WEIGHTS): its chunks' vectors
        (funnel-shifted, or a point at a time, as the passes would have read
        them) and its head and tail points. The grid's rows keep a thread's
        shift (spec.grid), so a thread reads them once."""
        L, k, v, i = self.lines, self.k, self.vec, f"i{self.inner}"
        held = [n for n in k.order if id(n) in self.held_w]
        L.append("    if (m_ != held_m_) {  // (this thread's weights, for rows m_ points past a boundary)")
        L.append("      held_m_ = m_;")
        self._chunk_loop(self.chunks)
        self._split("r", k.reduced, "      ")
        at = dict(names)
        self.emit_all([x for x in _closure(held, set()) if x.op != K.LOAD], at, i, "      ")
        for n in held:
            a = self.held_w[id(n)]
            if id(n) in self.funnel:
                self._funnel_load(n, at, dest=f"{a} + c * {v}")
                continue
            L.append("      #pragma unroll")
            L.append(f"      for (int u = 0; u < {v}; ++u) {{")
            L.append(f"        const {self.idx} ii = {i} + u;")
            point = dict(names)
            self.emit_all(_closure([n], set()) + [n], point, "ii", "        ")
            L.append(f"        ({a} + c * {v})[u] = {point[id(n)]};")
            L.append("      }")
        L.append("    }}")
        for q in range(self._edge_slots()):
            e = self.fresh()
            L.append("      {")
            at = self._edge_index(q, e, names, "      ")
            for n in held:
                point = dict(at)
                self.emit_all(_closure([n], set()) + [n], point, f"{e}_i{self.inner}", "      ")
                L.append(f"      {self.held_w[id(n)]}_e{q} = {point[id(n)]};")
            L.append("      }")
        L.append("    }")

    def _masked_row(self, stores, body) -> bool:
        """Does this pass read a shifted row in the aligned vectors that cover
        it, the points outside the row computed and not combined (MASKED_ROWS):
        a row of one pass and no stores (a row sum, a max, a var_mean), not
        kept in registers nor split over a cluster, whose group's threads would
        take MASKED_ROWS of its head and tail points each or more (_edge_slots),
        and whose every value that moves along the row is a vector load of it
        or computed from such (nothing read elsewhere at a point outside the
        row, nothing checked or drawn there)?"""
        if not (MASKED_ROWS and self._edge_slots() >= MASKED_ROWS and self._passes == 1 and not stores
                and not self.chunks and self.cluster == 1):
            return False
        moving = [n for n in body if id(n) in self.dep]
        return all(id(n) in self.vloads for n in moving if n.op == K.LOAD) and \
            not any(n.op in (K.CHECK, K.RNG) for n in moving)

    def _edge_slots(self) -> int:
        """Head and tail points a thread of a shifted row's group takes at
        most (h_ + t_ < 2 x vec, over the group's threads)."""
        return -(-(2 * self.vec - 2) // self.span)

    def _edge_points(self, mine, stores, body, acc, edges) -> None:
        """After the loop over a shifted row's whole vectors (one path, no
        guards), its head and tail points (_edge_loads) combined and stored a
        point a thread. (Before, 2026-11-29: the row's vectors from its first
        aligned one, the first and last guarded a point at a time in the loop,
        so the warps that held them ran both paths; ncu on rmsnorm bf16
        92820x723: issue-bound, 23 of 32 threads active. H200 % of copy, same
        run, guarded ends / these: rmsnorm bf16 92820x723 77.0 / 84.2,
        5230x12831 73.4 / 84.0; layernorm bf16 87267x769 64.9 / 74.3, fp16
        62660x1071 65.6 / 70.6; softmax fp16 87267x769 75.9 / 93.9, bf16
        536870x125 55.2 / 75.6; var_mean fp32 203978x329 76.6 / 80.5; others
        within 1.1 (softmax bf16 2097x32001 86.4 / 86.1, var_mean fp16
        664444x101 51.5 / 50.4). Tried before that, on the guarded ends, and
        removed: a warp vote a chunk, one path for a pass of stores alone,
        ends in the last chunks. Where their loads go: EDGE_EARLY_THREADS.)"""
        L = self.lines
        for e, at in edges:
            L.append(f"    if ({e}_has) {{")
            inner = dict(at)
            self.emit_all(body, inner, f"{e}_i{self.inner}", "      ")
            self._combine(mine, acc, inner, "      ")
            self._stores(stores, inner, "      ")
            L.append("    }")

    def _shift_bounds(self, held: int) -> str | None:
        """A shifted row's launch bounds (SHIFT_BOUNDS_*): None where it asks
        what its aligned twin does (cuda_schedules' bounds); a block a row of
        2-byte points with two weights or more (wide_shift), held in registers
        (`held` words), SHIFTED_ROW_BOUNDS threads an SM; "" elsewhere (the
        compiler's registers)."""
        if self.shift_weights < SHIFT_BOUNDS_WEIGHTS and self.vec >= SHIFT_BOUNDS_VEC and self._edge_slots() == 1:
            return None
        if (SHIFTED_ROW_BOUNDS and held and self.threads == self.block <= 256 and self.cluster == 1
                and wide_shift(self.vec, self.shift_weights)):
            return f"{self.block}, {SHIFTED_ROW_BOUNDS // self.block}"  # (rows.SHIFTED_ROW_THREADS)
        return ""

    def _kept_slots(self) -> None:
        """The shared memory of each kept weight (rows.KEEP_WEIGHTS): a group's
        share holds the row's points, shifted, in its vectors (row_loads.kept_share)."""
        k, size = self.k, kept_block_points(self.chunks, self.threads, self.vec, self.block, self.tiles)
        for n in kept_weights(k, self.vec):
            ct = CTYPE[k.inputs[n.arg].dtype]
            self.lines.append(f"  __shared__ __align__(16) {ct} {self.kept_w[id(n)]}[{size}];")
        if self.tiles:  # (placed once, at every shift: cuda_row_tiles)
            self._place_kept()
            return
        self.lines.append("  int kept_m_ = -1;  // the shift the kept weights are placed at")

    def _keep_weights(self, names) -> None:
        """Place what every row reads (rows.KEEP_WEIGHTS) in the group's share of
        shared memory, point j at j + m_, where the block's rows start elsewhere
        than the last placing (the grid keeps them alike: spec.grid); every
        thread agrees (a block-wide vote), so every thread meets the barriers.
        The weights are read in aligned vectors (the launch checked them:
        launch_checks.keep_weights_ok), a few round trips a placing. (Groups of
        a warp voting and waiting over their warp alone, no block barrier a
        row, measured within the run's order: H100 % of copy, same run, block /
        warp: layernorm bf16 87267x769 80.3 / 82.0, rows it left alone
        13104x5121 83.4 / 84.7, fp16 16380x4097 82.8 / 83.8; not kept.)"""
        L, k, T, v = self.lines, self.k, self.threads, self.vec
        if self.tiles:  # (placed at every shift before the rows: cuda_row_tiles._place_kept)
            return
        L.append("    if (__syncthreads_or(m_ != kept_m_)) {  // (the last row's readers are done)")
        L.append("      #pragma unroll 1")
        L.append(f"      for ({self.idx} j_ = lane * {v}; j_ < R; j_ += {T * v}) {{")
        at = dict(names)
        loads = kept_weights(k, v)
        self.emit_all(_closure(loads, set()), at, "j_", "        ")
        for n in loads:
            got = self.vector_load(n, at)
            L.append(f"        for (int u = 0; u < {v}; ++u) if (j_ + u < R) "
                     f"({self._kept_at(n, 'j_ + u')})[0] = {got};")
        L.append("      }")
        L.append("      kept_m_ = m_;")
        L.append("      __syncthreads();")
        L.append("    }")

    def _kept_at(self, n: KNode, point: str) -> str:
        """Where kept weight `n`'s `point` of the row sits in the group's share
        of shared memory (its shift's: row_loads.kept_by_shift; the groups that
        share it place alike values), point j at j + m_ (row_loads.kept_share)."""
        share = kept_share(self.chunks, self.threads, self.vec)
        mine = "m_" if kept_by_shift(self.threads, self.vec, self.block, self.tiles) else \
            f"(threadIdx.x / {self.threads})"
        return f"{self.kept_w[id(n)]} + {mine} * {share} + {point} + m_"

    def _kept_weight(self, n: KNode) -> str:
        """A kept weight's points of this vector (j x vec + h_ onwards: its place
        in shared memory is at a vector boundary), read as one aligned vector."""
        L, v, k = self.lines, self.vec, self.k
        ct = CTYPE[k.inputs[n.arg].dtype]
        size = k.inputs[n.arg].dtype.itemsize * v
        word = next(w for w in (16, 8, 4, 2, 1) if size % w == 0)
        arr = self.fresh()
        at = self._kept_at(n, f"i{self.inner}")
        L.append(f"      alignas(16) {ct} {arr}[{v}];")
        if word == 1:
            L.append(f"      for (int u = 0; u < {v}; ++u) {arr}[u] = ({at})[u];")
        else:
            vt = VEC_TYPE[word]
            L.append("      #pragma unroll")
            L.append(f"      for (int w = 0; w < {size // word}; ++w) reinterpret_cast<{vt}*>({arr})[w] = "
                     f"reinterpret_cast<const {vt}*>({at})[w];")
        return f"({arr})[u]"

    def _funnel_load(self, n: KNode, base: dict, dest: str | None = None) -> str:
        """The shifted vector of a load every row reads alike (a weight), at
        the row's points i .. i + vec - 1 (i = the vector's start, m_ points
        before a boundary of the weight's vectors): the aligned vectors before
        and at i + m_ (each only where a point of the row needs it: never
        before the weight's start or past its end), funnel-shifted by m_ points
        (hir_funnel16). The launch checked the weight's alignment (launch_checks.shift_ok)."""
        L, v, i = self.lines, self.vec, f"i{self.inner}"
        t = self.k.inputs[n.arg]
        a = [base[id(s)] for s in n.src]
        off = _offset(a[1:], f"in{n.arg}")
        arr = dest or self.fresh()
        if dest is None:
            L.append(f"      alignas(16) {CTYPE[t.dtype]} {arr}[{v}];")
        L.append(f"      {{ const {CTYPE[t.dtype]}* const wp_ = in{n.arg} + {off} + m_;")
        wide = v * t.dtype.itemsize  # (16 bytes, or 8: hir_funnel8)
        vt, zero = ("uint4", "make_uint4(0u, 0u, 0u, 0u)") if wide == 16 else ("uint2", "make_uint2(0u, 0u)")
        L.append(f"        {vt} lo_ = {zero}, hi_ = lo_;")
        L.append(f"        if ({a[0]} && {i} + m_ >= {v}) lo_ = *reinterpret_cast<const {vt}*>(wp_ - {v});")
        L.append(f"        if ({a[0]} && {i} + m_ < R) hi_ = *reinterpret_cast<const {vt}*>(wp_);")
        L.append(f"        *reinterpret_cast<{vt}*>({arr}) = hir_funnel{wide}(lo_, hi_, ({v} - m_) * "
                 f"{t.dtype.itemsize}); }}")
        return f"({arr})[u]"


MASKED_ROWS = 5
"""A shifted row of one pass and no stores whose group's threads would take
this many of its head and tail points each or more (_edge_slots: 7 in a
group of 2 threads of 2-byte points, 6 in one thread of 4-byte ones; 0:
none) reads the aligned vectors that cover it, from the one that holds its
point 0, each vector's points outside the row masked off its combines (a
bit mask a vector, tested in one instruction: hir_any_bit; _masked_row,
cuda_schedules' `masked`), not its head and tail a point at a time. H200 %
of copy, same run, points / masked: row sum fp16 3000000x21 77.3 / 93.5,
row max bf16 1000000x33 70.6 / 78.6, var_mean bf16 2000000x45 64.4 / 68.4,
fp16 2000000x50 71.5 / 76.0 (the threads of one_pass.SHIFTED_GROUP_WORK 4). In
groups of 4 or 8 threads of 2-byte points (4 or 2 points a thread) masked
rows lost: row sum bf16 300000x203 (8) 92.4 / 89.2, fp16 466033x145 (8)
93.2 / 89.6, var_mean fp16 664444x101 (4) 79.5 / 76.6. (Tried before, and
removed: the head and tail in their two aligned vectors, read by the
group's lanes 0 and 1 after the loop; their warps ran both lanes' paths.
Points / those: var_mean fp16 664444x101 77.4 / 70.5, row sum bf16
300000x203 96.0 / 88.9, fp16 466033x145 97.3 / 85.8.)"""

HOLD_WEIGHTS = 0
HOLD_WEIGHTS_ROWS = 4096
"""A shifted row kept in registers that keeps no weights in shared memory
(rows.KEEP_WEIGHTS), of a launch of HOLD_WEIGHTS_ROWS rows or more, whose
thread's points of what every row reads (a weight, a bias: each chunk's
vector, as its passes read it) take HOLD_WEIGHTS words or fewer: each thread
holds them in registers across its rows (_hold_weights), read again only
where its row starts elsewhere past a vector boundary; the grid is what the
device runs at once, a multiple of the vector (spec.grid), so a thread's rows
keep its shift. Not each pass of each row funnel-shifting them from two
aligned vectors (two loads and a funnel a vector), or reading them a point
at a time (0: off). Off: no class of rows gained alike. H200 % of copy, same
run, off / 32: rmsnorm fp16 1000000x45 54.4 / 63.9 (twice: 56.0 / 65.3),
layernorm bf16 894784x75 56.6 / 61.0, 1000000x61 59.4 / 60.9, rmsnorm bf16
400000x150 79.1 / 80.2; but rmsnorm bf16 1000000x62 74.9 / 74.8 (ncu at
off: 74 % of issue slots busy, 63 % DRAM), 1032444x65 76.4 / 70.0, 700000x93
75.9 / 68.9, 92820x723 94.0 / 69.4, layernorm fp16 800000x77 58.9 / 56.3,
fp32 600000x102 86.0 / 82.5, 721600x93 92.0 / 88.2 (60 and 72 registers
against 40)."""

EDGE_KEEP = True
"""A persistent row's head and tail points of the loads it keeps in registers
(its x: cuda_schedules' `cache`) read once, before its first pass's loop,
and kept in registers for the later passes, as its vectors are: not read
again from L1 or L2 in each pass (a layernorm's three, a softmax's)."""
EDGE_EARLY_THREADS = 512
"""Where a pass's head and tail points are read (_edge_loads). After the loop
over the whole vectors, a row a block of 1024 threads waits for them once
more; before it, in every pass, the loads held across the loop took
registers: H200 % of copy, same run, after the loop / before it in every
pass / in the first pass only: row sum fp32 5239x12809 81.3 / 103 / 102
(torch.compile 92.4), rmsnorm bf16 5230x12831 82.2 / 73.3 / 83.4 (40
registers, 47, 40: 3 blocks of 512 an SM, 2, 3), softmax bf16 536870x125
82.5 / 86.8 / 86.2, layernorm fp16 62660x1071 68.0 / 73.7 / 69.7, var_mean
fp32 203978x329 86.2 / 80.9 / 80.8, rmsnorm fp16 253240x265 83.4 / 80.6 /
81.1; 4 others within 1.5. The layernorms' later passes read their x's
points again there; kept (EDGE_KEEP), in the first pass before the loop,
nothing else before the loop (the next run, not kept / kept, every pass /
kept, first pass, i.e. this rule but for the one-pass var_mean / kept,
after the loop where nothing is kept, i.e. this rule but for row sums):
rmsnorm bf16 5230x12831 74.3 / 73.5 / 84.4 / 84.7, layernorm fp16
62660x1071 72.6 / 73.6 / 73.5 / 73.5, var_mean fp32 203978x329 81.1 / 81.1
/ 81.1 / 84.8, softmax bf16 536870x125 83.6 / 87.1 / 85.5 / 87.2; 7 others
within 1.6. One-pass rows keep nothing: their loads go before the loop in
groups of this many threads or more (a row sum's block of 1024), else
after it (a var_mean's warp, other rows' warps covering the wait)."""


def wide_shift(vec: int, weights: int) -> bool:
    """Do shifted rows of `vec` points a vector and `weights` weights take
    rows.SHIFTED_ROW_THREADS (and SHIFTED_ROW_BOUNDS): 2-byte, two weights or
    more?"""
    return vec >= SHIFT_BOUNDS_VEC and weights >= SHIFT_BOUNDS_WEIGHTS


SHIFTED_ROW_BOUNDS = 1024  # ... threads an SM a block a row asks (rows.SHIFTED_ROW_THREADS)
SHIFT_BOUNDS_WEIGHTS = 2
SHIFT_BOUNDS_VEC = 8
"""Shifted rows ask for the occupancy their aligned twins do (bounds) where
they read fewer weights than SHIFT_BOUNDS_WEIGHTS (an rmsnorm's one, a
softmax's none), in vectors of SHIFT_BOUNDS_VEC points or more (2-byte
rows), in groups that take their head and tail a point a thread (14 threads
or more); elsewhere the compiler's registers: with a layernorm's weight and
bias (each funnel-shifted or kept in shared memory), in measurements below;
fp32 rows, and groups whose threads keep 2 to 4 head and tail points each,
spilled at their twins' bounds (ptxas, sm_90, bytes of spill stores: softmax
fp32 92820x723 8, 677867x99 56, 8193x8191 32, log-softmax fp32 201528x333
36, rmsnorm fp32 65344x1027 48, bf16 1032444x65 36, 536870x125 12; 2-byte
rows of 16 threads or more: none but rmsnorm fp16 65344x1027's 4; not
timed). H200 % of copy, same run (funnels a uniform branch:
hir_funnel16), none / asked / asked one step lower (2048 -> 1536, 1536
-> 1280): rmsnorm bf16 5230x12831 78.4 / 90.0 / 78.5 (50 registers
unbounded: 2 blocks of 512 an SM, 3 asked), 92820x723 90.6 / 92.7 / 90.6,
rmsnorm fp16 253240x265 82.5 / 85.5 / 82.6; layernorm bf16 4096x4097 64.3 /
61.2 / 67.2 (24 bytes of spill asked), fp16 16380x4097 84.7 / 78.0 / 87.4,
fp32 65344x1027 94.8 / 90.7 / 94.6, fp16 62660x1071 73.3 / 68.5 / 67.4,
bf16 229040x293 66.6 / 63.9 / 64.6; softmax bf16 536870x125 88.6 / 88.4 /
84.7; 3 others within 1.6. (Before, when the shifted ends took a guarded
path in the loop, H100, none / asked: layernorm fp32 65344x1027 98.2 / 75.8,
132 bytes of spill loads; then with the head and tail a point a thread,
H200: layernorm fp32 65344x1027 91.3 / 81.2, fp16 16380x4097 74.4 / 66.9,
softmax bf16 536870x125 77.8 / 82.1.)"""
