"""The CUDA printer of a chained scan (scan.py): few long rows, each split
into tiles that blocks take in the order they start, a tile's prefix found by
a deterministic decoupled look-back over the tiles before it. It builds on the
row scan printer of cuda_scan.py."""
from __future__ import annotations

from .cuda import CTYPE, _closure, _offset
from .cuda_combine import _COMBINE, _reduce_init
from .cuda_scan import _RowScanPrinter
from .kir import K
from .row_loads import closure_of
from .scan import CHAIN_PREFETCH, chain_words


class _ChainedScanPrinter(_RowScanPrinter):
    """Few long rows (a 1-D tensor): a block of `threads` takes one tile of a
    row (threads x chunks vectors, loaded chunk by chunk across the block), in
    the order blocks start (a tile number drawn from a counter, so a tile's
    predecessors always run). Each thread sums its vectors (no per-point guard:
    a vector is in or out of bounds as a whole); the tile's vector totals go
    to shared memory in tile order and the block scans them there, each thread
    `chunks` consecutive ones, then across threads (warp shuffles, the warps'
    totals in order), so the per-vector work is a store, a load and a combine
    (before: a warp scan and a fold over the warps per vector; H100 1-D cumsum
    2^26, % of copy: fp32 83.9 -> 85.3, bf16 79.8 -> 81.0, fp16 77.5 -> 81.5, int32
    69.0 -> 76.6, then 82.1 with `bounds`). Then the tile publishes its total and looks
    back (decoupled look-back) for the nearest earlier tile whose inclusive
    prefix is known, folding the totals after it forward, in tile order; each
    vector's points are scanned again from their prefix. Every result is the
    same combines in the same order on every launch: deterministic, one read
    and one write of the data. Counters, zeroed once when allocated: a 64-bit
    ticket counter that numbers the launch and its tiles (hir_chain_epoch:
    every launch draws exactly its tiles' tickets), then per scan the
    tiles' totals and inclusive prefixes, each in 64-bit words that carry
    their own flag, the launch's epoch (hir_chain_put: no fence between a
    value and its flag; on an H100 the 1-D cumsum went from 70 to 80 % of
    copy with them). Before its ticket, a block prefetches a later block's tile
    into L2 (_prefetch_later)."""

    def source(self) -> str:
        k, idx, L, T, v, C = self.k, self.idx, self.lines, self.threads, self.vec, self.chunks
        d, W = k.scanned, self.threads // 32
        self.pdl_wait()
        L.append("  const int lane = threadIdx.x, wid = threadIdx.x / 32, wl = threadIdx.x % 32;")
        L.append(f"  __shared__ {idx} tile_id;")
        # the vectors' totals (then their prefixes) in tile order, a pad word every 32
        # (a thread reads `chunks` consecutive ones: no bank conflicts)
        tots, wsums, shared_pre = [], [], []
        for n in self.scans:
            tots.append(self.fresh())
            wsums.append(self.fresh())
            shared_pre.append(self.fresh())
            L.append(f"  __shared__ {CTYPE[n.dtype]} {tots[-1]}[{C * T + C * T // 32}], "
                     f"{wsums[-1]}[{W}], {shared_pre[-1]};")
        L.append(f"  const {idx} ntiles = nslots * split;")
        self._prefetch_later()
        L.append("  __shared__ unsigned epoch;")
        L.append("  if (threadIdx.x == 0) {  // the tile counter, and this launch's flags")
        L.append("    unsigned long long t;")
        L.append("    epoch = hir_chain_epoch(sem, (unsigned long long)ntiles, t);")
        L.append("    tile_id = t;")
        L.append("  }")
        L.append("  __syncthreads();")
        L.append(f"  const {idx} row = tile_id / split, tile = tile_id % split, slot = tile_id;")
        self._split("row", [x for x in range(self.n) if x != d], "  ")
        names: dict[int, str] = {}
        self.emit_all([n for n in k.order if id(n) not in self.moving], names, "", "  ")
        self.row_names = dict(names)
        L.append(f"  const {idx} t0 = tile * {T * v * C};")
        # the row's whole vectors end at ev; the points after them (one row: a length
        # that is no multiple of the vector) are scanned after the last vector (_tail)
        self.vend = "ev"
        L.append(f"  const {idx} ev = e{d} - e{d} % {v};")
        cache = self._load_tile(names)
        again = self._recomputes(cache)
        carry, locs = [], []
        for n in self.scans:
            carry.append(self.fresh())
            locs.append(self.fresh())
            L.append(f"  {CTYPE[n.dtype]} {carry[-1]} = {_reduce_init(n.arg, n.dtype)};")
            if not again:  # each point's scan in its vector
                L.append(f"  {CTYPE[n.dtype]} {locs[-1]}[{C * v}];")
        local = dict(names)
        for n, arr in cache.items():
            local[n] = f"({arr} + c * {v})[u]"
        pad = "(({f}) + (({f}) >> 5))"
        L.append("  #pragma unroll")
        L.append(f"  for (int c = 0; c < {C}; ++c) {{")
        L.append(f"        const {idx} r = t0 + (c * {T} + lane) * {v};")
        L.append("        const bool inb = r < ev;")
        arrs = self._chunk_scan(local, guard=False)
        for n, arr, t, loc in zip(self.scans, arrs, tots, locs):
            L.append(f"        {t}[{pad.format(f=f'c * {T} + lane')}] = "
                     f"inb ? {arr}[{v - 1}] : {_reduce_init(n.arg, n.dtype)};")
            if not again:
                L.append("        #pragma unroll")
                L.append(f"        for (int u = 0; u < {v}; ++u) {loc}[c * {v} + u] = {arr}[u];")
        L.append("  }")
        L.append("  __syncthreads();")
        runs, befores = [], []
        for n, t, w in zip(self.scans, tots, wsums):
            ct, run, incl, bef = CTYPE[n.dtype], self.fresh(), self.fresh(), self.fresh()
            runs.append(run)
            befores.append(bef)
            L.append(f"  {ct} {run}[{C}];  // this thread's run of the tile's vector totals")
            L.append("  #pragma unroll")
            L.append(f"  for (int j = 0; j < {C}; ++j) {{")
            L.append(f"    const {ct} x = {t}[{pad.format(f=f'lane * {C} + j')}];")
            L.append(f"    {run}[j] = j == 0 ? x : {self.combine(n, f'{run}[j - 1]', 'x')};")
            L.append("  }")
            L.append(f"  const {ct} {incl} = hir_warp_scan<32>({run}[{C - 1}], []({ct} x, {ct} y) "
                     f"{{ return {_COMBINE[n.arg]}; }});")
            L.append(f"  const {ct} {bef} = __shfl_up_sync(0xffffffffu, {incl}, 1, 32);")
            L.append(f"  if (wl == 31) {w}[wid] = {incl};")
        L.append("  __syncthreads();")
        for n, t, w, c, run, bef in zip(self.scans, tots, wsums, carry, runs, befores):
            ct, mine = CTYPE[n.dtype], self.fresh()
            L.append(f"  {ct} {mine} = {c};")
            L.append(f"  for (int w = 0; w < {W}; ++w) {{")
            L.append(f"    if (w == wid) {mine} = {c};  // the earlier warps' totals, in order")
            L.append(f"    {c} = {self.combine(n, c, f'{w}[w]')};")
            L.append("  }")
            L.append(f"  if (wl > 0) {mine} = {self.combine(n, mine, bef)};")
            L.append("  #pragma unroll")  # each vector's prefix in the tile, where its total was
            L.append(f"  for (int j = 0; j < {C}; ++j) {t}[{pad.format(f=f'lane * {C} + j')}] = "
                     f"j == 0 ? {mine} : {self.combine(n, mine, f'{run}[j - 1]')};")
        self._look_back(carry, shared_pre)  # (its barrier also orders the prefixes' stores)
        ends = [self.fresh() for _ in self.scans]  # the row's last vector: its last point's scans
        if v > 1:
            L.append("  bool tail = false;")
            for n, e in zip(self.scans, ends):
                L.append(f"  {CTYPE[n.dtype]} {e} = {_reduce_init(n.arg, n.dtype)};")
        L.append("  #pragma unroll")
        L.append(f"  for (int c = 0; c < {C}; ++c) {{")
        L.append(f"        const {idx} r = t0 + (c * {T} + lane) * {v};")
        L.append("        const bool inb = r < ev;")
        L.append(f"        const {idx} i{d} = inb ? r : 0;")
        stores_at = [x for _, _, ix in k.stores for x in ix]
        base = dict(local)
        self.emit_all([n for n in _closure(stores_at, set()) + stores_at if n.op != K.LOAD],
                      base, "", "        ")
        outs = []
        for s_, _, _ in k.stores:
            outs.append(self.fresh())
            L.append(f"        alignas(16) {CTYPE[k.outputs[s_].dtype]} {outs[-1]}[{v}];")
        seeds = []
        for n, p, t in zip(self.scans, shared_pre, tots):
            seeds.append(self.fresh())
            at = pad.format(f=f"c * {T} + lane")
            L.append(f"        const {CTYPE[n.dtype]} {seeds[-1]} = {self.combine(n, p, f'{t}[{at}]')};")
        if again:  # the loaded values pass through hir_opaque, else the compiler keeps
            # the first pass's sums (a word at a time: no 16-bit moves)
            for arr in cache.values():
                L.append(f"        hir_opaque<{v}>({arr} + c * {v});")
            arrs = self._chunk_scan(local, False, seeds)

            def values(j: str) -> list[str]:
                return [f"{arr}[{j}]" for arr in arrs]
        else:
            def values(j: str) -> list[str]:
                return [self.combine(n, s, f"{loc}[c * {v} + {j}]")
                        for n, s, loc in zip(self.scans, seeds, locs)]
        self._points(v, d, "        ")
        self.store_points(values("u"), local, outs, base, "inb")
        if v > 1:
            last = " ".join(f"{e} = {x};" for e, x in zip(ends, values(str(v - 1))))
            L.append(f"        if (r + {v} == ev) {{ tail = true; {last} }}")
        L.append("  }")
        if v > 1:
            self._tail(ends)
        return self.wrap()

    def _prefetch_later(self) -> None:
        """Before drawing its ticket, thread 0 prefetches into L2 the tile that
        the block CHAIN_PREFETCH blocks later will about take (tickets follow
        block indices to within 10-20 tiles, traced): every tile but the first
        few is read from DRAM a little ahead of its block, while the blocks
        before it wait on the chain. A traced bf16 tile spent about 5 us
        loading and 5 us waiting for its prefix, 2 blocks an SM. H100 1-D
        cumsum 2^26, % of copy, same run, none -> 44 blocks ahead: bf16 81.2
        -> 86.0, bf16 2^26 + 5 78.6 -> 85.1, fp16 81.5 -> 85.9, fp32 85.9 ->
        90.5, int32 -> int64 82.5 -> 86.4, bf16 2^28 84.0 -> 90.5 (another
        run: 22 to 132 blocks within 1-2 points, 264, a wave ahead, 76-80: the
        tiles leave L2 before use). Only where the tile's vector loads are
        addressed without loaded or checked indices."""
        k, L, T, v, C, d = self.k, self.lines, self.threads, self.vec, self.chunks, self.k.scanned
        loads = [n for n in k.order if id(n) in self.vloads]
        under = _closure(loads, set())
        if not loads or CHAIN_PREFETCH <= 0 or any(
                x.op in (K.CHECK, K.RNG) or (x.op == K.LOAD and id(x) not in self.vloads) for x in under):
            return
        idx, tile = self.idx, T * v * C
        L.append(f"  if (threadIdx.x == 0 && ({idx})blockIdx.x + {CHAIN_PREFETCH} < ntiles) {{  "
                 "// a later block's tile, into L2")
        L.append(f"    const {idx} row = (({idx})blockIdx.x + {CHAIN_PREFETCH}) / split, "
                 f"t0 = (({idx})blockIdx.x + {CHAIN_PREFETCH}) % split * {tile};")
        self._split("row", [x for x in range(self.n) if x != d], "    ")
        L.append(f"    const {idx} i{d} = t0, ev = e{d} - e{d} % {v};")
        L.append("    if (t0 < ev) {")
        base: dict[int, str] = {}
        self.emit_all([x for x in under if x.op != K.LOAD], base, "", "      ")
        for n in loads:
            size = k.inputs[n.arg].dtype.itemsize
            off = _offset([base[id(s)] for s in n.src[1:]], f"in{n.arg}")
            L.append(f"      hir_prefetch_l2(in{n.arg} + {off}, (long long)(ev - t0 < {tile} ? ev - t0 : {tile}) "
                     f"* {size});")
        L.append("    }")
        L.append("  }")

    def _tail(self, ends) -> None:
        """The points after the row's last whole vector (fewer than a vector),
        scanned one by one from its last point by the thread that holds it."""
        k, L, d = self.k, self.lines, self.k.scanned
        L.append(f"  if (tail) for ({self.idx} i{d} = ev; i{d} < e{d}; ++i{d}) {{")
        names = dict(self.row_names)
        self.emit_all(closure_of([n.src[0] for n in self.scans], set(names)), names, "", "    ")
        for n, e in zip(self.scans, ends):
            L.append(f"    {e} = {self.combine(n, e, names[id(n.src[0])])};")
        done = self.epilogue(ends, names, "    ")
        for s_, node, ix in k.stores:
            L.append(f"    out{s_}[{_offset([done[id(x)] for x in ix], f'out{s_}')}] = {done[id(node)]};")
        L.append("  }")

    def _recomputes(self, cache: dict) -> bool:
        """Scan each chunk again after the look-back rather than keep every
        point's scan: where the scans' inputs are all in the loaded tile and
        take fewer bytes a point than the scans' values (a bf16 or int32 sum:
        the tile keeps its loaded values, half the registers; H100 1-D cumsum
        bf16 2^26 66.7 -> 79.8 % of copy, 2^28 84.4 %, fp16 77.5 %)."""
        pro = _closure(self.scans, set())  # (under the scans: their sources and what they read)
        loads = [n for n in pro if n.op == K.LOAD]
        if not cache or any(id(n) not in cache for n in loads):
            return False
        kept = sum(self.k.inputs[n.arg].dtype.itemsize for n in loads)
        return kept < sum(n.dtype.itemsize for n in self.scans)

    def __init__(self, *args):
        super().__init__(*args)
        self.streaming = True  # evict-first stores (vector_store): the output is not read again here

    def load_hint(self, node) -> str | None:
        """Tiles are read once (kept in registers): past L1. With the stores
        evict-first, H100 1-D cumsum fp32 2^26 went 80.5 -> 83.2 % of copy,
        2^28 83.2 -> 85.0 %, bf16 2^26 63.6 -> 66.7 % (either alone: +0.5)."""
        return ".nc.L1::no_allocate"

    def bounds(self) -> str:
        """No occupancy asked for where the tile's loads are 16-byte vectors: its
        points stay in registers across the look-back (3 blocks an SM spill:
        H100 1-D cumsum 2^26 fp32 84.2 -> 77.7 %, bf16 78.6 -> 75.4 %, fp16
        81.8 -> 74.7 % of copy). Narrower loads (an int32 sum's vectors are as
        wide as its int64 values: 8 bytes of input) ask for 3 blocks an SM, to
        keep as many bytes in flight: int32 -> int64 76.6 -> 82.1 %."""
        sizes = [self.k.inputs[n.arg].dtype.itemsize for n in self.k.order if id(n) in self.vloads]
        if sizes and self.vec * max(sizes) < 16:
            return f"{self.block}, 3"
        return str(self.block)

    def _look_back(self, carry, shared_pre) -> None:
        """The first warp publishes the tile's total, finds the nearest earlier
        tile of the row whose inclusive prefix is known (32 tiles at a time:
        one read of each tile's words, value and flag together; it waits only
        for the totals after that tile, not for the whole window: H100 1-D
        cumsum fp32 2^26 79.5 -> 80.8 %, 2^28 81.5 -> 83.1 % of copy), then folds
        the totals after it forward in tile order (shuffled from the lanes
        that read them; totals of windows passed over are read again: they do
        not change once written) and publishes the tile's inclusive prefix;
        the block reads its exclusive prefix from shared memory (`shared_pre`)."""
        L, ix = self.lines, self.idx
        words = chain_words(self.k)
        L.append("  if (threadIdx.x < 32) {")
        L.append("    volatile unsigned long long* words = "
                 "reinterpret_cast<volatile unsigned long long*>(sem + 2);")
        arrays, at = [], 0
        for j, (n, w) in enumerate(zip(self.scans, words)):
            agg, inc = f"agg{j}", f"inc{j}"
            arrays.append((agg, inc))
            L.append(f"    volatile unsigned long long* {agg} = words + (size_t){at} * ntiles;")
            L.append(f"    volatile unsigned long long* {inc} = words + (size_t){at + w} * ntiles;")
            at += 2 * w
        L.append("    if (wl == 0) {")
        for (agg, inc), w, c in zip(arrays, words, carry):
            L.append(f"      hir_chain_put<{w}>({agg} + (size_t)slot * {w}, {c}, epoch);")
            # a row's first tile: its total is its inclusive prefix
            L.append(f"      if (tile == 0) hir_chain_put<{w}>({inc} + (size_t)slot * {w}, {c}, epoch);")
        L.append("    }")
        for n, p in zip(self.scans, shared_pre):
            L.append(f"    if (wl == 0) {p} = {_reduce_init(n.arg, n.dtype)};")
        L.append("    if (tile > 0) {")
        L.append(f"      const {ix} first = slot - tile;")
        L.append(f"      {ix} hi = slot, lo = slot, j = first;")
        got_a, got_i = [], []
        for n in self.scans:
            ct, init = CTYPE[n.dtype], _reduce_init(n.arg, n.dtype)
            got_a.append(self.fresh())
            got_i.append(self.fresh())
            L.append(f"      {ct} {got_a[-1]} = {init}, {got_i[-1]} = {init};")

        def reads(which: int, into: list[str]) -> str:
            """Read every scan's word(s) of tile q (0: totals, 1: prefixes): all written?"""
            return " && ".join(f"hir_chain_get<{w}>({arr[which]} + (size_t)q * {w}, {v}, epoch)"
                               for arr, w, v in zip(arrays, words, into))

        L.append("      for (bool found = false; !found;) {  // back to the nearest known prefix")
        L.append("        lo = hi - 32 > first ? hi - 32 : first;")
        L.append(f"        const {ix} q = lo + wl;")
        L.append("        bool aok = false, iok = false;")
        L.append("        for (;;) {  // until the window's nearest prefix and the totals after it are seen")
        L.append("          if (q < hi) {")
        L.append(f"            if (!aok) aok = {reads(0, got_a)};")
        L.append(f"            if (!iok) iok = {reads(1, got_i)};")
        L.append("          }")
        L.append("          const unsigned two = __ballot_sync(0xffffffffu, q < hi && iok);")
        L.append("          if (two) {")
        L.append("            j = lo + 31 - __clz(two);")
        L.append("            if (!__any_sync(0xffffffffu, q > j && q < hi && !aok)) { found = true; break; }")
        # no prefix in the window: pass over it once every tile there has a total
        # (never the row's first window: its first tile's prefix is coming)
        L.append("          } else if (lo > first && !__any_sync(0xffffffffu, q < hi && !aok)) {")
        L.append("            hi = lo;")
        L.append("            break;")
        L.append("          }")
        L.append("        }")
        L.append("      }")
        for n, (agg, inc), w, p, c, ga, gi in zip(self.scans, arrays, words, shared_pre, carry, got_a, got_i):
            ct = CTYPE[n.dtype]
            L.append(f"      {{ {ct} acc = __shfl_sync(0xffffffffu, {gi}, (int)(j - lo));")
            L.append(f"        for ({ix} b = j + 1; b < hi; ++b) {{  // in tile order: deterministic")
            L.append(f"          const {ct} y_ = __shfl_sync(0xffffffffu, {ga}, (int)(b - lo));")
            L.append(f"          acc = {self.combine(n, 'acc', 'y_')};")
            L.append("        }")
            L.append(f"        for ({ix} b = hi; b < slot; b += 32) {{  // the windows passed over")
            L.append(f"          {ct} mine = acc;")
            L.append(f"          if (b + wl < slot) hir_chain_get<{w}>({agg} + (size_t)(b + wl) * {w}, mine, epoch);")
            L.append("          const int cnt = slot - b < 32 ? (int)(slot - b) : 32;")
            L.append("          #pragma unroll 8")
            L.append(f"          for (int t = 0; t < cnt; ++t) {{ const {ct} y_ = __shfl_sync(0xffffffffu, mine, t); "
                     f"acc = {self.combine(n, 'acc', 'y_')}; }}")
            L.append("        }")
            L.append(f"        if (wl == 0) {{ {p} = acc; hir_chain_put<{w}>({inc} + (size_t)slot * {w}, "
                     f"{self.combine(n, 'acc', c)}, epoch); }} }}")
        L.append("    }")
        L.append("  }")
        L.append("  __syncthreads();")
