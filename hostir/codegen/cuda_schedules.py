"""The CUDA printer of rows of a reduction or normalization, each combined by a
group of threads (cuda.py holds the shared printing and the pointwise one;
outer reductions are in cuda_outer.py; transposes and staged gathers,
pointwise kernels through shared memory, in cuda_tiles.py; how a kept row is
copied into shared memory, in cuda_row_copies.py; how a thread loads its
vectors in batches, in cuda_row_batches.py). Each prints the
same kernel IR as the interpreter runs; the launch rule in spec.py picks
which one a launch uses."""
from __future__ import annotations

from .cuda import CTYPE, _closure, _offset, _Printer, vector_loads
from . import cuda_combine
from .cuda_combine import acc_init, acc_type, acc_value, online_point, online_vector, shifted_exps
from .kir import ONLINE, K, Kernel, KNode, levels, row_nodes, split_stores
from . import one_pass, rows
from .launch_checks import funnel_load
from .cuda_row_copies import _RowCopies
from .cuda_row_combine import _RowCombines
from .cuda_row_order import _RowOrder
from .cuda_row_batches import LOOP_BATCH_THREADS, _RowBatches
from .cuda_row_stack import stacked
from .cuda_row_shift import _RowShifts
from .cuda_row_tiles import _RowTiles
from .row_loads import (cached_loads, held_words, invariant_bytes, kept_weights, rest_words, row_cache_bytes,
                        row_invariant_loads, row_work)


class _ReductionPrinter(_RowBatches, _RowCopies, _RowCombines, _RowOrder, _RowShifts, _RowTiles, _Printer):
    """A reduction or normalization kernel: each group of `threads` consecutive
    threads of a block takes one point of the kept dims (a row) at a time. A
    pass over the row's reduced points has each thread combine every
    `threads`-th point, then the group combines its threads' values
    (cuda_row_combine); values computed from those results start the next
    pass (a softmax: max, then the sum of exp(x - max), then the output), whose
    reads of the row hit the cache. The group's first thread stores values of
    the kept dims.

    With `cluster` > 1 a row is split over the CTAs of a thread-block cluster
    (spec.KernelSpec._cluster): its cluster x threads threads are the row's
    group (the CTA of rank q holds threads q x threads onwards), and each
    reduction combines all of the cluster's warps' results through distributed
    shared memory in one fixed order (_cluster_warps): every CTA combines the
    same values the same way.

    With `shift` (launch_checks.shift_ok), a row that starts m_ points past a vector
    boundary, or whose length is no multiple of `vec`, is read in vectors at
    the boundaries: vector j of the row holds points j x vec + h_ onwards (h_:
    the points before the first boundary in the row), the vectors wholly of
    the row; the h_ points before them and those after the last, a point a
    thread (cuda_row_shift._edge_points)."""

    points_held = True  # vec 1 with chunks: a row held a point a load (row_widths.POINT_ROWS), not a scan

    def __init__(self, kern: Kernel, name: str, idx: str, block: int, threads: int, pdl: bool,
                 vec: int = 1, chunks: int = 0, smem_row: int = 0, cluster: int = 0,
                 shift: bool = False, double: bool = False, keep_weights: bool = False,
                 funnel: bool = False, batch: int = 0, drawn: bool = False, parts: bool = False,
                 hold: bool = False, stack: int = 0, tiles: bool = False):
        super().__init__(kern, name, vec, idx, block, False, pdl)
        held = vec == 1 and chunks > 0 and self.points_held
        if held:  # (a row held a point a load: row_widths.POINT_ROWS)
            self.vloads = vector_loads(kern, 1, points=True)
        self.parts = parts  # a one-pass row split over `split` blocks, a part each (_part_end)
        self.shift = shift and vec > 1
        self.masked = False  # ... read in the aligned vectors that cover it, masked (cuda_row_shift.MASKED_ROWS)
        # what every row reads (a weight: rows.SHIFTED_WEIGHTS), read off its vector
        # boundaries: funnel-shifted from its two aligned vectors around each shifted one
        # (rows.FUNNEL_WEIGHTS, 16-byte vectors), else a point at a time
        self.funnel: set[int] = set()
        self.shift_weights = 0  # ... how many (bounds)
        self.stacked = stack > 0  # (word rows, stacked or not: their own bounds)
        invariant = self.vloads & row_invariant_loads(kern) if self.shift or (hold and stack) else set()
        if self.shift:
            self.shift_weights = len(invariant)
            if funnel and not keep_weights:
                self.funnel = {id(n) for n in kern.order if id(n) in invariant and funnel_load(kern, n, vec)}
        self.vloads = self.vloads - invariant  # (stacked rows' held: read once, before the row loop)
        # ... or held in registers, each thread's points of them, across its rows
        # (cuda_row_shift.HOLD_WEIGHTS; stacked rows: row_widths.WORD_ROWS_HOLD): node -> array
        self.held_w = {id(n): f"hw{j}" for j, n in enumerate(x for x in kern.order if id(x) in invariant)} \
            if hold and not keep_weights and chunks and not smem_row else {}
        # ... or kept in shared memory, shifted as the block's rows (rows.KEEP_WEIGHTS): node -> array
        self.kept_w = {id(n): f"kw{j}" for j, n in enumerate(kept_weights(kern, vec))} \
            if self.shift and keep_weights else {}
        if vec == 1 and not held:
            self.inner = -1  # every index is named i<d>
        self.threads = threads
        self.cluster = cluster if cluster > 1 else 1
        assert self.cluster == 1 or threads == block, "a cluster splits rows of a block each"
        self.span = threads * self.cluster  # the threads that share a row
        self.chunks = chunks if vec > 1 or held else 0  # persistent: each thread's vectors (held: points) of a row
        # ... the first `smem_row` of them kept in dynamic shared memory, not registers
        # (rows too long for registers: a block's threads' slots [chunk][thread][vec],
        # consecutive threads side by side); the others read again in each pass (L2)
        self.smem_chunks = min(smem_row, self.chunks)
        self.smem_row = self.smem_chunks > 0
        # ... and the chunks past shared memory kept in registers (not re-read)
        self.rest_regs = self.smem_row and self.smem_chunks < self.chunks and \
            rest_words(kern, vec, self.chunks - self.smem_chunks) <= rows.SMEM_REST_WORDS
        self.cache: dict[int, str] = {}          # vector load -> its register array
        self.loaded: set[int] = set()            # cached loads a pass has filled
        self._invariant: set[int] | None = None  # row-invariant loads (load_hint)
        self._kept_load = False                  # emitting a load into shared memory (load_hint)
        self._passes = 0                         # passes over the row (source)
        self._batched = False                    # a one-pass row's vectors loaded in batches (_batch)
        self._long_batch = batch                 # ... of this many vectors (the launch's: one_pass.ONE_PASS_LONG)
        # the row kept whole in one of two buffers, the next row copied into the other
        # at the start of each row (rows.ROW_DOUBLE; spec.KernelSpec._double)
        self.double = double and self.smem_row and self.smem_chunks >= self.chunks and not self.shift
        assert self.double == double or not self.chunks, "a double buffer keeps whole, unshifted rows"
        # the clusters' (a block a row: the blocks') rows drawn from a ticket counter
        # (rows.CLUSTER_DRAWN, BLOCK_DRAWN: cuda_row_copies.draws_rows)
        self.drawn = drawn and (self.cluster > 1 or threads == block)
        self.stamps = rows.STAMPS and threads == block  # a row's timestamps (a block or cluster a row)
        if self.stamps:
            self.prelude.append(f"#define HIR_STAMPS {1 << 16}")
        self._row_barrier = False  # this row's first barrier emitted (its draw and stamp ride it)
        # each group takes `stack` rows at a time, their first loads before their uses (cuda_row_stack)
        self.stack = stack if stack > 1 and self.chunks and not (
            self.shift or self.smem_row or self.cluster > 1 or self.parts or self.drawn or self.stamps) else 1
        assert self.stack == max(stack, 1) or not stack, "stacked rows: rows held unshifted in registers"
        self._stack_splits: list[int] = []  # where a row's first loads and its combines end (cuda_row_stack)
        self.tiles = self._tile_init(tiles)  # a thread a row, staged a warp's tile at a time (row_tiles)

    def source(self) -> str:
        k, idx, L, T = self.k, self.idx, self.lines, self.threads
        groups = self.block // T
        rows, level = row_nodes(k), levels(k)
        reduces = [n for n in k.order if n.op == K.REDUCE]
        full_stores, row_stores = split_stores(k, rows)
        Q = self.cluster
        self.pdl_wait()
        if Q > 1:  # (the row's lane 0, which stores the row's values, is in the CTA of rank 0)
            L.append(f"  const int lane = threadIdx.x + (int)hir_cluster_rank() * {T};")
            L.append("  int parity = 0;  // which of two slots a row's CTA results take")
        else:
            L.append(f"  const int lane = threadIdx.x % {T};")
        if self.smem_row:
            L.append("  extern __shared__ __align__(16) unsigned char hir_dsmem[];")
        self._combine_slots(reduces)
        count = " * ".join(f"e{d}" for d in k.reduced)
        L.append(f"  const {idx} {'Rrow_' if self.parts else 'R'} = {count};")
        if self.kept_w:
            self._kept_slots()
        if self.held_w:
            self._held_slots()
        work = row_work(k, rows, full_stores)
        self._plan_ahead(work)
        if self.ahead or self.double:
            L.append("  bool ahead_ = false;  // this row's kept chunks were copied during the last row")
        if self.double:
            L.append("  int buf_ = 0;  // the buffer this row is kept in (the next row's: the other)")
        self._row_loop()
        start = len(L)
        # a group past the last row computes row 0 again (all reach the group reductions), storing nothing
        L.append(f"    const bool active = base + threadIdx.x / {T} < nslots;")
        L.append(f"    const {idx} row = active ? base + threadIdx.x / {T} : 0;")
        self._split("row", k.kept, "    ")
        self._row_starts()
        if self.ahead or self.double:  # the block's next row: its kept dims n<d>
            step = f"({idx})gridDim.x / {Q}" if Q > 1 else f"({idx})gridDim.x * {groups}"
            L.append(f"    const bool nactive_ = base + {step} + threadIdx.x / {T} < nslots;")
            L.append(f"    const {idx} nrow_ = nactive_ ? base + {step} + threadIdx.x / {T} : 0;")
            self._split("nrow_", k.kept, "    ", prefix="n")
        names: dict[int, str] = {}
        self.emit_all([n for n in k.order if id(n) in rows and level[id(n)] == 0], names, "", "    ")
        acc = {id(n): f"a{j}" for j, n in enumerate(reduces)}
        if self.shift:
            self._row_shift(names)
        if self.kept_w:
            self._keep_weights(names)
        if self.held_w and self.shift:
            self._hold_weights(names)
        if self.chunks:  # vectors read in several passes stay in registers from the first
            offset = []
            for n in cached_loads(k, self.vec):
                self.cache[id(n)] = name = self.fresh()
                ct = CTYPE[n.dtype]
                if self.smem_row:  # (each array's bytes a multiple of 16: vectors of 16 bytes)
                    at = " + ".join(offset) or "0"
                    if self.double:
                        size = row_cache_bytes(k, self.vec, self.smem_chunks * self.vec * self.block)
                        L.append(f"    {ct}* const {name}_o = reinterpret_cast<{ct}*>(hir_dsmem + (buf_ ^ 1) * {size} + {at});")
                        at = f"buf_ * {size} + {at}"
                    L.append(f"    {ct}* const {name} = reinterpret_cast<{ct}*>(hir_dsmem + {at});")
                    offset.append(f"{self.smem_chunks * self.vec * self.block} * sizeof({ct})")
                    if self.rest_regs:
                        L.append(f"    alignas(16) {ct} {name}_r[{(self.chunks - self.smem_chunks) * self.vec}];")
                else:
                    L.append(f"    alignas(16) {ct} {name}[{self.chunks * self.vec}];")
        # a row read again from L2 in a later pass (the loop over a long row): what
        # that pass reads and every store evict first, so the row's first read stays
        self._evict_last_pass = (LOOP_HINTS and not self.chunks and self.vec > 1 and len(work) > 1
                                 and any(n.op == K.LOAD for *_, body in work[1:] for n in body))
        if self._evict_last_pass:
            self.streaming = True
        self._passes = len(work)
        if SMEM_HINTS and self.smem_row:  # a row kept in shared memory: its output stores evict first
            self.streaming = True
        for p, mine, stores, body in work:
            self._last_pass = p == work[-1][0]
            for n in mine:
                L.append(f"    {acc_type(n)} {acc[id(n)]} = {acc_init(n)};")
            self.exp_forms = shifted_exps(mine, stores, body)
            if self.vec == 1 and not self.chunks:
                self._scalar_pass(mine, stores, body, names, acc)
            else:
                self.masked = self.shift and self._masked_row(stores, body)
                edges = self._edge_loads(body, names, p == work[0][0]) if self.shift and not self.masked else []
                self._vector_pass(mine, stores, body, names, acc)
                if not self.masked:
                    self._edge_points(mine, stores, body, acc, edges)
            self.exp_forms = {}
            self._group_reduce(mine, [reduces.index(n) for n in mine], acc)
            self._stack_splits.append(len(L))
            if self.parts:
                self._part_end(mine, [reduces.index(n) for n in mine], acc)
            for n in mine:
                names[id(n)] = acc_value(n, acc[id(n)])
            self.emit_all([n for n in k.order if id(n) in rows and level[id(n)] == p + 1
                           and n.op != K.REDUCE], names, "", "    ")
        if row_stores:
            self._epilogue(rows, row_stores, names, "    ", "lane == 0 && active")
        if self.ahead or self.double:
            L.append("    ahead_ = nactive_;")
        if self.double:
            L.append("    buf_ ^= 1;")
        self._row_ends()
        if Q > 1:
            L.append("    parity ^= 1;")
        if self.stack > 1:
            assert self._stack_splits[0] > start, "a stacked row's first loads come first"
            L[start:] = stacked(L[start:], [s - start for s in self._stack_splits], self.stack, groups)
        L.append("  }")
        if Q > 1:
            L.append("  hir_cluster_sync();  // no CTA leaves while a peer may read its slots")
        return self.wrap()

    def bounds(self) -> str:
        """A persistent kernel whose threads keep at most 16 points of the row
        asks for a full SM (2048 threads: 32 registers a thread); the latency of
        its row's loads is hidden by other blocks' rows, and at fewer resident
        threads normalizations ran at 60-75 % occupancy and short of copy speed.
        Where the vectors a thread holds at once (its kept chunks, and one of
        each other vector load) take more than rows.FULL_OCCUPANCY_WORDS registers,
        it asks for 1536 threads (40 registers): at 32 an fp32 layernorm
        (4 chunks of x, a vector of weight and of bias) spilled. So does a row
        of two passes of 1024 threads held past 16 points a thread
        (rows.REGISTER_LONG_WORDS, REGISTER_LONG_MOST). Rows of more points a
        thread, up to rows.BOUNDED_POINTS, ask for 1536 too; any row past
        rows.PART_OCCUPANCY_WORDS (up to BOUNDED_WORDS) for 1280. A row kept in shared memory and registers
        asks for the blocks its shared memory leaves room for (SMEM_REST_BOUNDS;
        H100 % of copy, without / with: softmax bf16 4096x65536 96.9 / 98.6,
        fp16 2048x65536 96.4 / 100.1, layernorm bf16 2048x65536 90.6 / 95.4)."""
        if self.double:  # (two buffers of the row's share: one block an SM)
            return f"{self.block}, 1"
        if self.stacked:  # (stacked rows: the registers their rows take, as measured by hand: cuda_row_stack)
            return str(self.block)
        if (self.rest_regs or (self.smem_row and self.cluster > 1)) and SMEM_REST_BOUNDS:
            per_sm = min(2048 // self.block, rows.SMEM_PER_SM // max(1, row_cache_bytes(
                self.k, self.vec, self.smem_chunks * self.vec * self.block)))
            return f"{self.block}, {max(1, per_sm)}"
        if one_pass.ONE_PASS_BOUNDS and self._batched and self.block <= 1024:
            return f"{self.block}, {2048 // self.block}"
        held = held_words(self.k, self.vec, self.chunks) if self.chunks and not self.smem_row else 0
        if self.shift and (own := self._shift_bounds(held)) is not None:  # (cuda_row_shift.SHIFT_BOUNDS_*)
            if own:
                return own
            held = 0
        points = self.chunks * self.vec
        full = points <= rows.PERSISTENT_POINTS or (self._passes == 2 and self.threads == 1024
                                                    and held <= rows.REGISTER_LONG_MOST)
        if FULL_OCCUPANCY and held and self.block <= 1024 and (full or (points <= rows.BOUNDED_POINTS
                                                                       and held <= rows.BOUNDED_WORDS)):
            threads = 2048 if full and held <= rows.FULL_OCCUPANCY_WORDS else \
                1536 if held <= rows.PART_OCCUPANCY_WORDS else 1280
            if threads // self.block:
                return f"{self.block}, {threads // self.block}"
        return str(self.block)

    def _smem_hint(self) -> bool:
        """Does a row kept in shared memory read past L1 here (SMEM_HINTS)? Its
        chunks in shared memory, read once, do; so do the chunks read again in
        each pass where the row is read three times (a softmax). H100, bf16,
        % of copy, no hints / these: softmax 4096x32768 79.3 / 84.0, 2048x49152
        68.0 / 69.8, 8192x20480 85.0 / 88.1, log-softmax 4096x32768 80.7 / 82.0;
        rmsnorm 2048x65536 86.5 / 90.6, layernorm 2048x65536 83.1 / 85.9 (with
        the chunks read again hinted too: 85.6 and 80.7)."""
        if not (SMEM_HINTS and self.smem_row):
            return False
        return self.smem_chunks >= self.chunks or self._passes > 2 or self._kept_load

    def load_hint(self, node: KNode) -> str | tuple | None:
        """A persistent kernel streams its rows past L1 (read once, kept in
        registers) and keeps what every row reads (a layernorm's weight and bias)
        in L1: rows would otherwise evict them, and each row re-reads them. A
        looped row's last pass reads the row evict-first; what every row reads
        too only where it takes more than INVARIANT_KEEP_BYTES a row (else a
        plain load). H100 bf16, % of copy, plain / evict-first: layernorm
        8192x16384 99.8 / 94.7 (torch.compile 97.1), 32768x6144 98.5 / 93.9
        (98.2), 16384x12288 98.0 / 96.8 (98.8); rmsnorm 4096x32768 94.8 / 92.5
        (94.8); but layernorm 4096x32768 (weight and bias: 128 KiB a row) 87.2
        / 94.4."""
        if self._invariant is None:
            self._invariant = row_invariant_loads(self.k)
        if getattr(self, "_evict_last_pass", False):
            if not self._last_pass:
                return None
            if id(node) not in self._invariant:
                return ".cs"
            return (f"(long long)R * {invariant_bytes(self.k)} <= {INVARIANT_KEEP_BYTES}", None, ".cs")
        if not (self.chunks and (LOAD_HINTS or self._smem_hint())):
            return None
        return ".nc.L1::evict_last" if id(node) in self._invariant else ".nc.L1::no_allocate"

    def _stores(self, stores, names, indent: str) -> None:
        """Stores of values at every point, by active rows."""
        for s, node, ix in stores:
            off = _offset([names[id(i)] for i in ix], f"out{s}")
            self.lines.append(f"{indent}if (active) out{s}[{off}] = {names[id(node)]};")

    def _epilogue(self, rows, row_stores, names, indent: str, guard: str, inner: str = "") -> None:
        """The kept dims' values the reductions lead to, stored where `guard` holds
        (`inner` names the innermost index when it is kept)."""
        self.emit_all([n for n in self.k.order if id(n) in rows and n.op != K.REDUCE], names,
                      inner, indent)
        self.lines.append(f"{indent}if ({guard}) {{")
        for s, node, ix in row_stores:
            off = _offset([names[id(i)] for i in ix], f"out{s}")
            self.lines.append(f"{indent}  out{s}[{off}] = {names[id(node)]};")
        self.lines.append(f"{indent}}}")

    def _start(self) -> str:
        """The first point of this thread's first vector of the row (of its
        block's part: parts)."""
        return f"{'plo_ + ' if self.parts else ''}lane * {self.vec}{self._first()}"

    def _first(self) -> str:
        """Where a row's vector 0 starts (added to its multiples of vec): a
        shifted row's first vector wholly of it, h_ points in (_edge_points);
        a masked row's (cuda_row_shift.MASKED_ROWS) the aligned one that holds
        its point 0, m_ points before it."""
        return (" - m_" if self.masked else " + h_") if self.shift else ""

    def _in_row(self, r: str) -> str:
        """Is the vector at `r` the row's (shifted: wholly, the head and tail _edge_points'; masked: any point)?"""
        if self.tiles:  # (R is 2 x chunks or one more: only the last chunk may lie past the row)
            return f"(c < {self.chunks - 1} || {r} + {self.vec} <= R)"
        return f"{r} + {self.vec} <= R" if self.shift and not self.masked else f"{r} < R"

    def _scalar_pass(self, mine, stores, body, names, acc) -> None:
        """One point of the row per thread and iteration."""
        L, idx = self.lines, self.idx
        L.append(f"    for ({idx} r = {'plo_ + ' if self.parts else ''}lane; r < R; r += {self.span}) {{")
        self._split("r", self.k.reduced, "      ")
        inner = dict(names)
        self.emit_all(body, inner, "", "      ")
        self._combine(mine, acc, inner, "      ")
        self._stores(stores, inner, "      ")
        L.append("    }")

    def _vector_pass(self, mine, stores, body, names, acc) -> None:
        """`vec` consecutive points of the innermost dim per thread and iteration:
        vector loads, an unrolled loop, vector stores (the launch checked that
        the innermost extent and the tensors' alignment allow it)."""
        L, idx, v, k = self.lines, self.idx, self.vec, self.k
        B = 1 if self.chunks else self._batch(body)
        self._batched = self._batched or self._bounded_batch(B)
        if self.chunks and FIRST_LOADS_AHEAD and (not self.smem_row or self._async_row()) and \
                any(id(n) in self.cache and id(n) not in self.loaded for n in body):
            # the first pass: every kept vector's load, then their uses (the compiler
            # had issued each chunk's load after the previous chunk's use, one load in
            # flight a thread). H100 % of copy, same run, before / after: bf16 softmax
            # 16384x13312 86.0 / 100.0, 16384x16384 94.3 / 99.9; bf16 layernorm
            # 131072x768 87.1 / 98.4, 65536x1024 90.9 / 97.3; fp16 layernorm 65536x1024
            # 93.0 / 98.0; fp32 layernorm 65536x1024 97.8 / 99.4
            # (a row kept in shared memory: its kept chunks copied there by cp.async)
            self._chunk_loop(self.chunks if self.rest_regs else (self.smem_chunks or self.chunks))
            self._split("r", k.reduced, "      ")
            self._vector_step(mine, stores, body, names, acc, phase="loads")
            L.append("    }")
            if self.waits:
                skip = " && !ahead_" if self.ahead or self.double else ""
                L.append(f"      if (c < {self.smem_chunks}{skip}) hir_cp_async_commit();")
            L.append("    }")
            if self.smem_row and not self.waits:
                L.append("    hir_cp_async_wait();")
            if not self._stack_splits:
                self._stack_splits.append(len(L))
            if self.double:
                self._copy_next_row(names)
            first = self.smem_row
        else:
            first = False
        if self.chunks:  # persistent: the row's vectors are this thread's C vectors
            self._chunk_loop(self.chunks, wait=first and self.waits)
        elif B > 1:  # every load of a batch of vectors, then their uses
            L.append(f"    for ({idx} r0 = {self._start()}; r0 < R; r0 += {self.span * v * B}) {{")
            self._batch_body(B, mine, stores, body, names, acc)
            L.append("    }")
            return
        else:  # unrolled: several vectors' loads in flight before their values are used
            L.append("    #pragma unroll 4")
            L.append(f"    for ({idx} r = {self._start()}; {self._in_row('r')}; r += {self.span * v}) {{")
        self._split("r", k.reduced, "      ")
        self._vector_step(mine, stores, body, names, acc)
        if self.chunks and self.ahead and self._last_pass and self.waits:
            L.append("    }")  # (the next row's chunk: one group)
            L.append(f"      if (c < {self.smem_chunks} && nactive_) hir_cp_async_commit();")
            L.append("    }")
            return
        L.append("    }" if not self.chunks else "    }}")

    def _chunk_loop(self, count: int, wait: bool = False) -> None:
        """The head of a loop over this thread's first `count` vectors of the
        row (c), each at r where it is in the row (closed by "}}"); `wait`:
        each chunk kept in shared memory waits for its own copy (ROW_WAITS).
        (Tried and removed, 2026-11-28: a shifted row's whole vectors in the
        first slots and its head and tail in the two after them, so no warp
        runs a whole and a guarded vector in one chunk. The kernels took more
        registers, and they lost. H100 % of copy, same run, in order / edges
        last (twice): rmsnorm bf16 87267x769 92.1 / 84.8, 87.9; softmax fp16
        87267x769 96.3 / 93.7, 93.8; layernorm fp16 16380x4097 93.2 / 89.2,
        89.3; layernorm bf16 87267x769 81.2 / 77.6, 81.1.)"""
        L = self.lines
        L.append("    #pragma unroll")
        L.append(f"    for (int c = 0; c < {count}; ++c) {{")
        if wait and self.double:  # (the next row's groups were committed after this row's)
            S = self.smem_chunks
            L.append(f"      if (c < {S}) {{ if (nactive_) hir_cp_async_wait_pending({2 * S - 1} - c); "
                     f"else hir_cp_async_wait_pending({S - 1} - c); }}")
        elif wait:
            L.append(f"      if (c < {self.smem_chunks}) hir_cp_async_wait_pending({self.smem_chunks - 1} - c);")
        L.append(f"      const {self.idx} r = (lane + c * {self.span}) * {self.vec}{self._first()};")
        L.append(f"      if ({self._in_row('r')}) {{")

    def _vector_step(self, mine, stores, body, names, acc, batch=None, phase="") -> None:
        """One vector of the row: its loads, the points' values, the stores (with
        `batch`, its vector loads' arrays of a batch at slot c: phase "loads"
        fills them, "uses" computes from them; a masked row's vector at r
        combines its points of the row alone: cuda_row_shift.MASKED_ROWS)."""
        L, v = self.lines, self.vec
        i = f"i{self.inner}"
        local = dict(names)  # what does not move along the innermost dim: once per vector
        self.emit_all([n for n in body if id(n) not in self.dep], local, i, "      ")
        base = dict(local)  # names at u = 0: vector addresses and store offsets only
        loads = [n for n in body if id(n) in self.vloads]
        funnel = [n for n in body if id(n) in self.funnel and id(n) not in self.held_w] if phase != "loads" else []
        store_ix = [x for _, _, ix in stores for x in ix if id(x) in self.dep]
        pre = _closure(loads + funnel, self.dep) + _closure(store_ix, self.dep) + store_ix
        self.emit_all([n for n in pre if n.op != K.LOAD], base, i, "      ")
        inner = dict(local)
        for n in funnel:
            inner[id(n)] = self._funnel_load(n, base)
        if phase != "loads":
            for n in body:
                if id(n) in self.kept_w and id(n) not in inner:
                    inner[id(n)] = self._kept_weight(n)
                elif id(n) in self.held_w:  # (this thread's points of it, held: cuda_row_shift._hold_weights)
                    inner[id(n)] = f"({self.held_w[id(n)]} + c * {v})[u]"
        partial = self.smem_row and self.smem_chunks < self.chunks and not self.rest_regs
        for n in loads:
            if batch is not None:
                slot = f"{batch[id(n)]} + c * {v}"
                if phase == "loads":
                    self.vector_load(n, base, slot)
                else:
                    inner[id(n)] = f"({slot})[u]"
                continue
            cache = self.cache.get(id(n))
            if cache is None:
                if phase != "loads":
                    inner[id(n)] = self.vector_load(n, base)
                continue
            if phase == "loads" and self.smem_row:  # (c < smem_chunks: its shared-memory slot)
                if self.ahead or self.double:
                    L.append("      if (!ahead_) {")
                if self.rest_regs:
                    L.append(f"      if (c < {self.smem_chunks}) {{")
                self.vector_load(n, base, f"{cache} + (c * {self.block} + threadIdx.x) * {v}", copy=True)
                if self.rest_regs:
                    L.append("      } else {")
                    self.vector_load(n, base, self._slot(cache))
                    L.append("      }")
                if self.ahead or self.double:
                    L.append("      }")
                continue
            if partial:  # chunks past shared memory: a register vector, loaded each pass
                L.append(f"      alignas(16) {CTYPE[n.dtype]} {cache}_t[{v}];")
            if id(n) in self.loaded:
                if partial:
                    L.append(f"      if (c >= {self.smem_chunks}) {{")
                    self.vector_load(n, base, f"{cache}_t")
                    L.append("      }")
                inner[id(n)] = self._reread(n, cache)
                if self.ahead and self._last_pass:
                    self._prefetch(n, cache, inner[id(n)][:-len("[u]")], base)
            elif partial and SMEM_HINTS and self._passes <= 2:  # the chunks kept in shared memory
                L.append(f"      if (c < {self.smem_chunks}) {{")
                self._kept_load = True
                self.vector_load(n, base, self._slot(cache))
                self._kept_load = False
                L.append("      } else {")
                inner[id(n)] = self.vector_load(n, base, self._slot(cache))
                L.append("      }")
            else:
                inner[id(n)] = self.vector_load(n, base, self._slot(cache))
        self.loaded.update(self.cache.keys() & {id(n) for n in loads})
        if phase == "loads":
            return
        mask = ""
        if self.masked:  # (bit u: point u of the vector at r is the row's)
            L.append(f"      const unsigned mk_ = (r < 0 ? {(1 << v) - 1}u << -r : {(1 << v) - 1}u) & "
                     f"(R - r < {v} ? (1u << (R - r)) - 1u : {(1 << v) - 1}u);")
            mask = "hir_any_bit(mk_, 1u << u)"
        self._points(mine, stores, body, acc, inner, base, mask)

    def _points(self, mine, stores, body, acc, inner: dict, base: dict, mask: str = "") -> None:
        """The vector's points: their values, the combines (where `mask` holds), the stores."""
        L, idx, v, k = self.lines, self.idx, self.vec, self.k
        i = f"i{self.inner}"
        arrs = []
        for s, node, ix in stores:
            arrs.append(self.fresh())
            L.append(f"      alignas(16) {CTYPE[k.outputs[s].dtype]} {arrs[-1]}[{v}];")
        vectors = {} if not cuda_combine.ONLINE_VECTORS else {  # online pairs a vector at a time
            id(n): (self.fresh(), self.fresh()) for n in mine if n.arg == ONLINE}
        for n in mine:
            if id(n) in vectors:
                L.append(f"      {CTYPE[n.dtype]} {vectors[id(n)][0]}[{v}], {vectors[id(n)][1]}[{v}];")
        L.append("      #pragma unroll")
        L.append(f"      for (int u = 0; u < {v}; ++u) {{")
        L.append(f"        const {idx} ii = {i} + u;")
        self.emit_all([n for n in body if id(n) in self.dep], inner, "ii", "        ")
        if mask:
            L.append(f"        if ({mask}) {{")
        self._combine([n for n in mine if id(n) not in vectors], acc, inner, "          " if mask else "        ")
        if mask:
            L.append("        }")
        for n in mine:
            if id(n) in vectors:
                L.extend(online_point(vectors[id(n)], [inner[id(x)] for x in n.src], "        "))
        for (s, node, ix), arr in zip(stores, arrs):
            L.append(f"        {arr}[u] = {inner[id(node)]};")
        L.append("      }")
        for n in mine:
            if id(n) in vectors:
                L.extend(online_vector(n, acc[id(n)], *vectors[id(n)], v, "      "))
        for (s, node, ix), arr in zip(stores, arrs):
            L.append("      if (active)")
            self.vector_store(s, arr, _offset([base[id(x)] for x in ix], f"out{s}", unit_last=True))

    def _reread(self, n: KNode, cache: str) -> str:
        """This thread's vector `c` of a cached load, read again in a later pass:
        from shared memory one 16-byte load into registers (element by element,
        the compiler read a bf16 row 16 bits at a time: sm_90 softmax bf16
        4096x32768 kernel 140 LDS.U16 and 40 PRMT a pass set); returns the
        element at `u`."""
        ct, v = CTYPE[n.dtype], self.vec
        if not self.smem_row or self.k.inputs[n.arg].dtype.itemsize * v != 16:
            return f"({self._slot(cache)})[u]"
        arr = self.fresh()
        self.lines.append(f"      alignas(16) {ct} {arr}[{v}];")
        self.lines.append(f"      *reinterpret_cast<uint4*>({arr}) = "
                          f"*reinterpret_cast<const uint4*>({self._slot(cache)});")
        return f"{arr}[u]"

    def _slot(self, cache: str) -> str:
        """This thread's vector `c` of a cached load."""
        if self.smem_row:
            at = f"{cache} + (c * {self.block} + threadIdx.x) * {self.vec}"
            if self.smem_chunks < self.chunks:  # (c is a constant in each unrolled copy)
                rest = f"{cache}_r + (c - {self.smem_chunks}) * {self.vec}" if self.rest_regs else f"{cache}_t"
                return f"(c < {self.smem_chunks} ? {at} : {rest})"
            return at
        return f"{cache} + c * {self.vec}"

    def _split(self, flat: str, dims, indent: str, prefix: str = "i") -> None:
        """Declare i<d> (<prefix><d>) for `dims` (row-major) from the flat index `flat`."""
        dims = list(dims)
        if not dims:
            return
        rest = f"{flat}_rest"
        self.lines.append(f"{indent}{self.idx} {rest} = {flat};")
        for pos in reversed(range(len(dims))):
            d = dims[pos]
            if pos == 0:
                self.lines.append(f"{indent}const {self.idx} {prefix}{d} = {rest};")
            else:
                self.lines.append(f"{indent}const {self.idx} {prefix}{d} = {rest} % e{d}; {rest} /= e{d};")


FULL_OCCUPANCY = True  # persistent kernels ask for 2048 threads an SM (tune_reduction toggles it)
FIRST_LOADS_AHEAD = True  # a persistent row's first pass loads every kept vector before using them
LOOP_HINTS = True  # a long row's loop: its last pass's loads and the stores evict first (.cs)
SMEM_HINTS = True  # cache hints on rows kept in shared memory (_smem_hint)
INVARIANT_KEEP_BYTES = 64 * 1024  # a looped row's last pass: what every row reads, evict-first past this
SMEM_REST_BOUNDS = True  # rows kept in shared memory and registers ask for the blocks their shared memory allows (bounds)
LOAD_HINTS = False  # cache-eviction hints on persistent kernels' loads: measured slower (tune_reduction)
