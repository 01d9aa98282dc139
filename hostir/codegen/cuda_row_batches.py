"""How a thread of a row's group loads its vectors in batches: every load of a
batch, then their uses, where `#pragma unroll` had left few loads in flight
(looped rows of LOOP_BATCH_THREADS threads, one-pass rows: one_pass.ONE_PASS_BATCH,
ONE_PASS_LONG). A mixin of cuda_schedules._ReductionPrinter, whose _vector_pass
asks _batch for the batch and prints it with _batch_body."""
from __future__ import annotations

from . import one_pass, rows
from .cuda import CTYPE
from .row_loads import batch_words

LOOP_BATCH_THREADS = 1024  # looped rows of this many threads load batches of vectors (_batch)
LOOP_BATCH_VECTORS = 6     # ... about this many vectors a thread at once
MASKED_BATCH = 3
"""A masked row's batch at most (cuda_row_shift.MASKED_ROWS: its mask takes
registers; a var_mean's batch of 4 spilled 24 bytes at 32 registers, 3
none). H200 % of copy, same run, 4 / 3: row max bf16 1000000x33 78.8 /
84.2, var_mean fp16 664444x101 68.8 / 70.3, bf16 300007x77 47.8 / 50.2, row
sum fp16 3000000x21 91.8 / 93.0; but var_mean bf16 2000000x45 74.4 / 71.3."""


class _RowBatches:
    def _batch(self, body) -> int:
        """Vectors a thread loads before it uses them (1: the unrolled loop): a
        one-pass row's count the launch picked (one_pass.ONE_PASS_LONG); a one-pass
        row of fewer threads, its few vectors (one_pass.ONE_PASS_BATCH); a row of
        LOOP_BATCH_THREADS threads (a long row: one or two blocks an SM,
        rows.resident_rows), batches of 4, 2 or 1, LOOP_BATCH_VECTORS vectors a
        thread at most (a pass that loads more a point takes 1). The unrolled loop had one or
        two loads in flight: the compiler interleaves them with their uses. H100
        bf16, % of copy, unrolled / batches: log-softmax 1024x131072 72.4 / 76.5,
        softmax 71.3 / 72.9, rmsnorm 77.0 / 82.4, layernorm 71.8 / 78.0, rmsnorm
        512x262144 64.6 / 68.9. A batch of 4 in a pass of 2 or 3 loads spills
        (layernorm 1024x131072 43.2 %); rows of fewer threads lose (layernorm
        16384x8192 at 256 threads: 98.2 unrolled, 90.7 in batches of 2: the
        registers cost blocks an SM)."""
        loads = len({id(n) for n in body if id(n) in self.vloads})
        if self._long_batch and self._passes == 1:
            return self._long_batch
        if one_pass.ONE_PASS_BATCH and self._passes == 1 and self.threads < LOOP_BATCH_THREADS:
            # (one_pass.row_threads: up to ROW_WORK a thread, ROW_WORK_LONG in batches of this; short rows
            # SHORT_GROUP_WORK, SHORT_ROW_MOST)
            short = max(rows.SHORT_ROW_WORK, one_pass.SHORT_GROUP_WORK,
                        one_pass.SHORT_ROW_MOST if one_pass.SHORT_ROW_FILL else 0)
            work = min(one_pass.ONE_PASS_BATCH, short if self.threads < 32 else one_pass.ROW_WORK)
            if self.masked:  # (cuda_row_shift.MASKED_ROWS)
                work = min(work, MASKED_BATCH)
            return max((b for b in range(work, 0, -1) if b * loads <= max(one_pass.ONE_PASS_VECTORS, loads)), default=1)
        if self.block != LOOP_BATCH_THREADS or self.threads != self.block:
            return 1
        return max((b for b in (4, 2, 1) if b * loads <= max(LOOP_BATCH_VECTORS, loads)), default=1)

    def _bounded_batch(self, B: int) -> bool:
        """Does a one-pass row's batch of B vectors a thread ask for full
        occupancy (one_pass.ONE_PASS_BOUNDS, ONE_PASS_LONG_BOUNDS at 1024 threads):
        its vectors' words within rows.FULL_OCCUPANCY_WORDS (one load's 4 or 5
        vectors of 16 bytes, as measured; several loads' batches take the
        registers they need)?"""
        if self.parts and not one_pass.ONE_PASS_PARTS_BOUNDS:
            return False
        if B < 2 or self._passes != 1 or not (self.threads < LOOP_BATCH_THREADS or one_pass.ONE_PASS_LONG_BOUNDS):
            return False
        return batch_words(self.k, self.vec, B) <= rows.FULL_OCCUPANCY_WORDS

    def _batch_body(self, B: int, mine, stores, body, names, acc) -> None:
        """A batch of B vectors a thread at r0 onwards, each where it starts in
        the row: every load, then their uses."""
        L, idx, v = self.lines, self.idx, self.vec
        batch = {}
        for n in body:
            if id(n) in self.vloads and id(n) not in batch:
                batch[id(n)] = self.fresh()
                L.append(f"      alignas(16) {CTYPE[n.dtype]} {batch[id(n)]}[{B * v}];")
        for phase in ("loads", "uses"):
            L.append("      #pragma unroll")
            L.append(f"      for (int c = 0; c < {B}; ++c) {{")
            L.append(f"        const {idx} r = r0 + c * {self.span * v};")
            L.append(f"        if ({self._in_row('r')}) {{")
            self._split("r", self.k.reduced, "      ")
            self._vector_step(mine, stores, body, names, acc, batch, phase)
            L.append("      }}")
