"""The row rules of a reduction kernel's spec (a mixin of spec.KernelSpec):
how many threads take a row and how much of it each keeps in registers or
shared memory (_row_schedule), whether the persistent kernel holds a launch's
rows (holds), and which rows split over a thread-block cluster (_cluster),
keep two buffers (_double) or, few one-pass rows, split over blocks (_parts);
a long one-pass row's batch (_long_batch), a shifted row's kept weights
(_keeps_weights); rows off vector boundaries held a point a load (_point_row)
or read in narrower vectors (_narrow: row_widths.py).
The constants are rows.py's (a one-pass row's threads: one_pass.py's)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from . import one_pass, row_tiles, row_widths, rows
from .kir import K, Kernel, levels, passes, reductions
from .launch_checks import launch_sms, shift_possible
from . import cuda_row_shift
from .cuda_row_shift import wide_shift
from .row_loads import (batch_words, held_words, kept_block_points, kept_weight_bytes, kept_weights, rest_words,
                        row_cache_bytes)

if TYPE_CHECKING:
    from .spec import Variant


class _RowRules:
    """Row rules of a KernelSpec (its plain and online kernels, _vec, _positions
    and options)."""

    def holds(self, full: list[int]) -> bool:
        """Does the plain kernel's persistent schedule keep rows of these extents
        in registers at PERSISTENT_POINTS points a thread (1024 threads a row
        at most: 16384 points), the regime measured at 89 % of copy? Not for
        rows longer than that (it would keep more a thread, up to
        PERSISTENT_MAX_CHUNKS vectors, measured at 57 %), nor where the
        innermost dim is kept, or its extent is no multiple of the vector width
        and shifted vectors cannot read the rows (launch_checks.shift_possible;
        H200 % of copy, online / plain shifted: softmax bf16 2097x32001 43.0 /
        68.0, 1335x50257 56.8 / 77.9, 13104x5121 62.0 / 78.0). A
        launch whose tensors are not aligned for vectors (known on GPUs
        only) also loops; it keeps the plain kernel's passes."""
        k = self.plain
        vec = self._vec[id(k)]
        vectors = self._row_vectors(full)
        if not vectors:
            return False
        chunks = max(1, rows.PERSISTENT_POINTS // vec)
        return (vectors <= chunks * rows.ROW_THREADS[-1] or self._row_schedule(k, vectors)[2] > 0
                or self._cluster(k, vectors) > 0)

    def online_keeps(self, full: list[int]) -> bool:
        """Does the online kernel take rows of extents `full` that the plain one
        keeps in shared memory one block an SM, or splits over a cluster of
        up to ONLINE_KEPT_CLUSTER CTAs (rows.ONLINE_KEPT)? It takes the plain kernel's schedule there (rows
        off vector boundaries too: shifted vectors, a pair a vector)."""
        vectors = self._row_vectors(full) if rows.ONLINE_KEPT and self.online is not None else 0
        if not vectors:
            return False
        k = self.plain
        return 0 < self._cluster(k, vectors) <= rows.ONLINE_KEPT_CLUSTER or (
            self._row_schedule(k, vectors)[2] > 0 and self._blocks_per_sm(k, vectors) == 1)

    def _row_vectors(self, full: list[int]) -> int:
        """The vectors a row of the plain kernel over extents `full` takes (a
        shifted row: rows.shifted_vectors); 0 where rows are not read in vectors."""
        k = self.plain
        vec = self._vec[id(k)]
        if vec == 1 or not full:
            return 0
        per_row = math.prod(full[d] for d in k.reduced)
        if full[-1] % vec:  # rows off vector boundaries: shifted vectors where tensors allow
            if not shift_possible(k, vec, full, self.options.shifted_rows):
                return 0
            return rows.shifted_vectors(per_row, vec)
        return per_row // vec

    def _passes(self, kernel: Kernel) -> tuple[bool, bool]:
        """(several: the kernel passes over a row more than once, two_reads: twice,
        reducing in the first pass only)."""
        key = (id(kernel), "passes")
        got = self._positions.get(key)
        if got is None:
            level = levels(kernel)
            per_pass = [sum(1 for n in kernel.order if n.op == K.REDUCE and level[id(n)] - 1 == p)
                        for p in passes(kernel)]
            got = self._positions[key] = (len(per_pass) > 1,
                                          len(per_pass) == 2 and per_pass[0] > 0 and per_pass[1] == 0)
        return got

    def _point_row(self, kernel: Kernel, points: int) -> bool:
        """Does a row of `points` 4-byte points off vector boundaries keep
        its points in registers a point a load (row_widths.POINT_ROWS): a kernel
        that reduces once, in its first pass only (an rmsnorm)?"""
        return row_widths.POINT_ROWS_LEAST < points <= row_widths.POINT_ROWS and \
            self._vec[id(kernel)] <= 4 and self._passes(kernel)[1] and \
            sum(1 for n in kernel.order if n.op == K.REDUCE) == 1

    def _narrow(self, kernel: Kernel, idx: str, points: int, vec: int, aligned) -> Variant | None:
        """Rows of `points` points off `vec`-point boundaries read in vectors of
        half or a quarter of the width, of NARROW_ROW_BYTES or more, where the
        launch's tensors are aligned for those (`aligned(w)`), kept in
        registers by threads enough for each load of a row's threads to read
        NARROW_SPAN_BYTES (row_widths.NARROW_ROWS); None elsewhere."""
        for w in (vec // 2, vec // 4):
            size = w * 16 // vec
            if size >= row_widths.NARROW_ROW_BYTES and aligned(w):
                vectors = points // w
                t, c, kept = self._row_schedule(kernel, vectors, vec=w)
                if c and not kept and t * size < row_widths.NARROW_SPAN_BYTES:
                    t = row_widths.NARROW_SPAN_BYTES // size
                    c = -(-vectors // t)
                return self.variant(kernel, w, idx, t, c, kept)
        return None

    def _row_schedule(self, kernel: Kernel, vectors: int, shift: bool = False, vec: int = 0) -> tuple[int, int, int]:
        """(threads, chunks, smem_row) for rows of `vectors` vectors: a kernel
        that makes several passes keeps the row, PERSISTENT_POINTS points a
        thread in registers; a longer row in shared memory, SMEM_ROW_CHUNKS
        vectors a thread (smem_row of them in shared memory: as many as leave
        room for the blocks an SM holds by threads, SMEM_ROW_BYTES at most
        (`shift`: SMEM_SHIFTED_ROW_BYTES), the
        rest in registers where SMEM_REST_WORDS allow, else read again in each
        pass); a softmax's rows of up to SMEM_ROW_LONG_CHUNKS vectors a thread
        of 1024 one block an SM (shared memory and registers); longer still,
        more a thread in registers (up to PERSISTENT_MAX_CHUNKS vectors); else a
        loop over the row. A kernel that reduces in its first pass only (a
        layernorm, an rmsnorm, the online softmax: the row read twice) keeps rows
        past LOOP_MIN_POINTS in registers where REGISTER_LONG_WORDS allow, else
        loops over them up to LOOP_ROW_BYTES, with loop_threads threads (the
        online kernel ONLINE_LOOP_THREADS): its later reads hit L1 or L2
        (`shift`: rows off vector boundaries, up to REGISTER_LONG_MOST). The
        constants are codegen/rows.py's (the threads of a row no pass keeps:
        one_pass.row_threads). The online kernel takes the plain
        one's schedule where that keeps the row in shared memory (rows.ONLINE_KEPT)."""
        if kernel is self.online and rows.ONLINE_KEPT and \
                (plain := self._row_schedule(self.plain, vectors, vec=vec))[2]:
            return plain
        several, two_reads = self._passes(kernel)
        vec = vec or self._vec[id(kernel)]
        chunks = max(1, rows.PERSISTENT_POINTS // vec)
        points = vectors * vec
        row_bytes = row_cache_bytes(kernel, vec, points) if vec > 1 and several else 0
        if vec > 1 and two_reads and points >= rows.LOOP_MIN_POINTS and row_bytes <= rows.LOOP_ROW_BYTES:
            c = -(-vectors // rows.ROW_THREADS[-1])
            held = held_words(kernel, vec, c)
            if kernel is not self.online and (held <= rows.REGISTER_LONG_WORDS or (
                    shift and held <= rows.REGISTER_LONG_MOST)):  # (rows.REGISTER_LONG_MOST)
                return rows.ROW_THREADS[-1], c, 0
            return rows.ONLINE_LOOP_THREADS if kernel is self.online else rows.loop_threads(vectors), 0, 0
        long = vec > 1 and several and vectors > chunks * rows.ROW_THREADS[-1]
        if long:  # a long row
            t = next((t for t in rows.ROW_THREADS if t >= 256 and vectors <= rows.SMEM_ROW_CHUNKS * t), 0)
            one = not t and not two_reads and vectors <= rows.SMEM_ROW_LONG_CHUNKS * rows.ROW_THREADS[-1]
            t = rows.ROW_THREADS[-1] if one else t
            c = -(-vectors // t) if t else 0
            chunk_bytes = row_cache_bytes(kernel, vec, vec * t) if t else 0
            if self.options.smem_rows and chunk_bytes:
                most = rows.SMEM_SHIFTED_ROW_BYTES if shift else rows.SMEM_ROW_BYTES
                budget = (rows.SMEM_PER_SM if one else min(most, rows.SMEM_PER_SM // (2048 // t))
                          if rows.SMEM_ROW_PARTIAL else most)
                kept = min(c, budget // chunk_bytes)
                if kept == c or (rows.SMEM_ROW_PARTIAL and kept * 2 >= c) or \
                        (kept and rest_words(kernel, vec, c - kept) <= rows.SMEM_REST_WORDS):
                    return t, c, kept
            chunks = min(rows.PERSISTENT_MAX_CHUNKS, -(-vectors // rows.ROW_THREADS[-1]))
        if vec > 1 and several and vectors <= chunks * rows.ROW_THREADS[-1]:
            if long:
                aim = chunks
            elif shift and rows.short_shifted(vec, vectors):  # (rows.SHORT_SHIFTED_VECTORS)
                aim = max(1, row_widths.short_points(vectors, len(kept_weights(kernel, vec))) // vec)
            else:  # (rows.REGISTER_ROW_POINTS, REGISTER_SHIFTED_POINTS)
                aim = max(chunks, (rows.REGISTER_SHIFTED_POINTS if shift and vec <= 4 else
                                   rows.REGISTER_ROW_POINTS) // vec)
            return rows.register_row(vectors, aim, vec, wide=shift and wide_shift(vec, len(kept_weights(kernel, vec))))
        return one_pass.row_threads(vectors, batched=vec > 1 and not several,
                                reductions=self._once(kernel, reductions), shifted=shift, vec=vec), 0, 0

    def _cluster(self, kernel: Kernel, vectors: int) -> int:
        """CTAs of a thread-block cluster that share each row of `vectors`
        vectors of a kernel that passes over its rows more than once, where the
        row is past what one block keeps in shared memory (SMEM_ROW_CHUNKS
        vectors a thread of 1024): the fewest (rows.CLUSTER_SIZES; a softmax's
        ONLINE_CLUSTER_SIZES) whose share of a row one block of 1024 threads
        keeps in shared memory (and registers), and
        whose threads' vectors of the row fill CLUSTER_MIN_FILL of the chunks
        they take (the first CTA takes a part chunk's vectors); 0
        elsewhere, or with HOSTIR_DISABLE=clusters or smem_rows. The launch
        takes clusters on GPUs of compute capability 9.0 and later
        (launches_clusters); elsewhere its plain schedule. H100 % of copy: see
        rows.CLUSTER_ROWS. The online kernel: the plain one's clusters where
        it has them (rows.ONLINE_KEPT)."""
        if kernel is self.online and rows.ONLINE_KEPT and (q := self._cluster(self.plain, vectors)):
            return q
        if not (rows.CLUSTER_ROWS and self.options.clusters and self.options.smem_rows) \
                or vectors <= rows.SMEM_ROW_CHUNKS * rows.ROW_THREADS[-1] \
                or self._vec[id(kernel)] == 1 or not self._passes(kernel)[0] \
                or self._row_schedule(kernel, vectors)[2]:  # (one block an SM keeps it)
            return 0
        T = rows.ROW_THREADS[-1]
        sizes = rows.ONLINE_CLUSTER_SIZES if self.online is not None and rows.ONLINE_KEPT else rows.CLUSTER_SIZES
        limits = [(0, rows.SMEM_ROW_CHUNKS)]
        if rows.CLUSTER_ONE_BLOCK:
            limits.append((rows.CLUSTER_ONE_BLOCK - 1, rows.SMEM_ROW_LONG_CHUNKS))
        for least, limit in limits:  # shares of two blocks an SM, else (a softmax) of one
            for q in sizes:
                part, span = -(-vectors // q), q * T
                if least * T < part <= limit * T and \
                        vectors >= rows.CLUSTER_MIN_FILL * span * -(-vectors // span):
                    t, _, kept = self._row_schedule(kernel, part)
                    if kept and t == rows.ROW_THREADS[-1]:
                        return q
                    break
        return 0

    def _double(self, kernel: Kernel, vectors: int) -> int:
        """CTAs of a cluster that share each row of `vectors` vectors, each
        keeping its share whole in one of two buffers of shared memory (one
        block of 1024 threads an SM) while the next row is copied into the
        other (rows.ROW_DOUBLE): the fewest (rows.CLUSTER_SIZES) whose share's two
        buffers fit SMEM_PER_SM and whose threads' vectors fill
        CLUSTER_MIN_FILL of their chunks; only for rows the plain rules keep
        one block an SM or split over a cluster (past two blocks an SM); 0
        elsewhere."""
        if not (rows.ROW_DOUBLE and self.options.clusters and self.options.smem_rows) \
                or self._vec[id(kernel)] == 1 or not self._passes(kernel)[0]:
            return 0
        t, _, kept = self._row_schedule(kernel, vectors)
        if not ((kept and t == rows.ROW_THREADS[-1] and self._blocks_per_sm(kernel, vectors) == 1)
                or self._cluster(kernel, vectors)):
            return 0
        T, vec = rows.ROW_THREADS[-1], self._vec[id(kernel)]
        for q in rows.CLUSTER_SIZES:
            c = -(-(-(-vectors // q)) // T)
            span = q * T
            if 2 * row_cache_bytes(kernel, vec, c * vec * T) <= rows.SMEM_PER_SM and \
                    vectors >= rows.CLUSTER_MIN_FILL * span * -(-vectors // span):
                return q
        return 0

    def _blocks_per_sm(self, kernel: Kernel, vectors: int) -> int:
        """Blocks of 1024 threads an SM holds by shared memory at the plain
        schedule of rows of `vectors` vectors kept in shared memory."""
        t, c, kept = self._row_schedule(kernel, vectors)
        vec = self._vec[id(kernel)]
        used = row_cache_bytes(kernel, vec, min(kept, c) * vec * t) if kept else 0
        return min(2048 // t, rows.SMEM_PER_SM // used) if used else 2048 // max(1, t)

    def _parts(self, kernel: Kernel, var: Variant, extents: list[int], ins: list) -> Variant | None:
        """`var` split over blocks a row (its `parts` twin) where its rows can be
        (_parted) and are few enough (the launch's split: one_pass.row_parts);
        None elsewhere."""
        if not self._parted(kernel, var):
            return None
        twin = self.variant(kernel, var.vec, var.idx, var.threads, batch=var.batch, parts=True)
        return twin if self.split(twin, extents, launch_sms(ins)) > 1 else None

    def _parted(self, kernel: Kernel, var: Variant) -> bool:
        """Can `var`'s rows be split over blocks (one_pass.row_parts): one pass,
        nothing stored at every point, a block a row of aligned vectors or
        points, no cluster, no kept vectors?"""
        return not (var.shift or var.cluster or var.chunks or self._passes(kernel)[0] or
                    self._full_outs(kernel)) and var.block == var.threads

    def _long_batch(self, kernel: Kernel, var: Variant, vectors: int) -> int:
        """Vectors a thread of a one-pass row of 1024 threads loads at once where
        it takes more than 4 and up to one_pass.ONE_PASS_LONG of them, their words
        and 8 for each reduction within one_pass.ONE_PASS_LONG_WORDS; 0 elsewhere
        (the printer's batches of 4)."""
        if not one_pass.ONE_PASS_LONG or var.threads != rows.ROW_THREADS[-1] or var.chunks or var.cluster or \
                self._passes(kernel)[0]:
            return 0
        n = -(-vectors // var.threads)
        words = batch_words(kernel, var.vec, n) + 8 * reductions(kernel)
        return n if 4 < n <= one_pass.ONE_PASS_LONG and words <= one_pass.ONE_PASS_LONG_WORDS else 0

    def _half_aligned(self, kernel: Kernel, per_row: int) -> int:
        """The threads a row of a 2-byte kernel's `per_row` points takes in
        unshifted vectors of 4, two a thread, where it lies on 4-point
        boundaries (row_widths.HALF_ALIGNED_POINTS): an rmsnorm's (reducing in
        its first pass only, HALF_ALIGNED_WEIGHTS weights at most), of more
        than HALF_SHIFT_LEAST and up to HALF_ALIGNED_POINTS points; else 0."""
        if not (row_widths.HALF_SHIFT_LEAST < per_row <= row_widths.HALF_ALIGNED_POINTS and
                kernel is not self.online and self._passes(kernel)[1] and
                len(kept_weights(kernel, 4)) <= row_widths.HALF_ALIGNED_WEIGHTS):
            return 0
        return next(t for t in rows.SHORT_ROW_THREADS + rows.ROW_THREADS
                    if 8 * t >= per_row or t == rows.ROW_THREADS[-1])

    def _word_rows(self, kernel: Kernel, per_row: int, quad: bool) -> int:
        """The rows a group of 32 threads takes at once where a 2-byte
        kernel's rows of `per_row` points are read in 4-byte words
        (row_widths.WORD_ROWS: K words a thread, K = per_row / 64 rounded up,
        in WORD_ROWS's range for the kernel's weights, the words filling
        WORD_ROWS_FILL of the K x 32 at least; `quad`: the rows lie on
        4-point boundaries too, WORD_ROWS_QUAD), from WORD_ROW_STACK by K; else 0."""
        words = -(-per_row // 64)
        least, most = row_widths.WORD_ROWS[min(len(kept_weights(kernel, 2)), len(row_widths.WORD_ROWS) - 1)]
        if not (least <= words <= most and per_row >= 64 * words * row_widths.WORD_ROWS_FILL and
                (row_widths.WORD_ROWS_QUAD or not quad) and kernel is not self.online and
                (row_widths.WORD_ROWS_PASSES or self._passes(kernel)[1])):
            return 0
        return next((s for k, s in row_widths.WORD_ROW_STACK if words <= k), 0)

    def _word_hold(self, kernel: Kernel, per_row: int) -> bool:
        """Do a kernel's word rows (row_widths.WORD_ROWS) of `per_row` points
        hold each thread's words of its weights in registers across its
        stacked rows, read once before them, not each row from L1 (where they
        take WORD_ROWS_HOLD words or fewer)?"""
        return 0 < -(-per_row // 64) * len(kept_weights(kernel, 2)) <= row_widths.WORD_ROWS_HOLD

    def _holds_weights(self, var: Variant, rows_count: int) -> bool:
        """Does a shifted variant that keeps no weights in shared memory hold
        each thread's points of them in registers across its rows
        (cuda_row_shift.HOLD_WEIGHTS): rows kept in registers, not split over
        a cluster, at least HOLD_WEIGHTS_ROWS of them, the held points within
        HOLD_WEIGHTS words a thread?"""
        if not (cuda_row_shift.HOLD_WEIGHTS and var.chunks and not var.smem_row and not var.cluster
                and not var.batch and not var.parts and rows_count >= cuda_row_shift.HOLD_WEIGHTS_ROWS):
            return False
        loads = kept_weights(var.kernel, var.vec)
        words = sum(var.chunks * var.vec * var.kernel.inputs[n.arg].dtype.itemsize for n in loads) // 4
        return bool(loads) and words <= cuda_row_shift.HOLD_WEIGHTS

    def _keeps_weights(self, var: Variant, rows_count: int) -> bool:
        """Does a shifted variant keep the weights in shared memory (rows.KEEP_WEIGHTS):
        rows kept in registers, not split over a cluster, at least KEEP_WEIGHTS_ROWS
        of them, KEEP_WEIGHTS_LOADS weights or more, in blocks of KEEP_WEIGHTS_BLOCK
        threads or more, rows in vectors of KEEP_WEIGHTS_VEC points or more,
        within KEEP_WEIGHTS_BYTES a block (2-byte weights:
        KEEP_NARROW_WEIGHTS_BYTES)? (The launch checks
        the weights too: launch_checks.keep_weights_ok.)"""
        if not (rows.KEEP_WEIGHTS and var.chunks and not var.smem_row and not var.cluster
                and rows_count >= rows.KEEP_WEIGHTS_ROWS and var.block >= rows.KEEP_WEIGHTS_BLOCK
                and var.vec >= rows.KEEP_WEIGHTS_VEC):
            return False
        size = kept_weight_bytes(var.kernel, var.vec,
                                 kept_block_points(var.chunks, var.threads, var.vec, var.block))
        loads = kept_weights(var.kernel, var.vec)
        most = rows.KEEP_NARROW_WEIGHTS_BYTES if all(var.kernel.inputs[n.arg].dtype.itemsize == 2 for n in loads) \
            else rows.KEEP_WEIGHTS_BYTES
        return len(loads) >= rows.KEEP_WEIGHTS_LOADS and 0 < size <= most

    def _tiles(self, kernel: Kernel, idx: str, per_row: int, extents: list[int], ins: list, outs) -> Variant | None:
        """The tiled variant of short shifted rows of 2-byte points (row_tiles:
        a thread a row, rows of TILE_ROW_LEAST to TILE_ROW_POINTS points (TILE_PASSES_POINTS),
        staged a warp's tile at a time; the launch's tensors dense rows), or None."""
        if not (row_tiles.TILE_ROWS and self.options.shifted_rows and
                row_tiles.TILE_ROW_LEAST <= per_row <= row_tiles.TILE_ROW_POINTS and
                row_tiles.tiles_ok(kernel, ins, outs, extents)):
            return None
        if len(passes(kernel)) >= 3 and per_row > row_tiles.TILE_PASSES_POINTS:
            return None
        return self.variant(kernel, row_tiles.TILE_VEC, idx, 1, per_row // row_tiles.TILE_VEC, shift=True,
                            keep_weights=bool(kept_weights(kernel, row_tiles.TILE_VEC)), tiles=True)
