"""Which rows a reduction kernel's blocks take, and in what order (a mixin of
cuda_schedules._ReductionPrinter): groups of a block striding the grid, a
cluster's CTAs a row striding the clusters, a row's parts a block each
(one_pass.row_parts), or, where the rows are drawn
(rows.CLUSTER_DRAWN, BLOCK_DRAWN), the resident clusters or blocks each
drawing its next row from a ticket counter as its row starts (kernels/hostir.cuh,
hir_next_row), published at the row's first barrier. Also each row's debug
timestamps (rows.STAMPS, read by benchmarks/timeline.py)."""
from __future__ import annotations


class _RowOrder:
    """The row loop of a _ReductionPrinter (its idx, threads, block, cluster,
    drawn, stamps and lines)."""

    def _row_loop(self) -> None:
        """The loop over the block's rows (its `base`), opened."""
        L, idx, Q, groups = self.lines, self.idx, self.cluster, self.block // self.threads
        if self.tiles:  # (the warps' first tiles: cuda_row_tiles)
            self._tile_open()
        if self.drawn:  # cluster (block) b takes row b, then the rows its rank 0 draws
            L.append(f"  __shared__ {idx} next_[2];  // rank 0's draw, by the row's parity" if Q > 1 else
                     f"  __shared__ {idx} next_[1];  // thread 0's draw")
            L.append(f"  {idx} nbase_ = 0;")
            first = f"({idx})blockIdx.x / {Q}" if Q > 1 else f"({idx})blockIdx.x"
            L.append(f"  for ({idx} base = {first}; base < nslots; base = nbase_) {{")
        elif self.parts:  # blocks b * split ... b * split + split - 1 take row b's parts
            L.append("  __shared__ bool last_;  // the row's last part to arrive (_part_end)")
            L.append(f"  const {idx} part_ = ({idx})blockIdx.x % split;")
            L.append(f"  for ({idx} base = ({idx})blockIdx.x / split; base < nslots; "
                     f"base += ({idx})gridDim.x / split) {{")
        elif Q > 1:  # a cluster's blocks are consecutive: cluster b takes rows b, b + clusters, ...
            L.append(f"  for ({idx} base = ({idx})blockIdx.x / {Q}; base < nslots; "
                     f"base += ({idx})gridDim.x / {Q}) {{")
        else:  # (stacked rows: a group's `stack` rows at once, cuda_row_stack)
            groups *= self.stack
            L.append(f"  for ({idx} base = ({idx})blockIdx.x * {groups}; base < nslots; "
                     f"base += ({idx})gridDim.x * {groups}) {{")

    def _row_starts(self) -> None:
        """As a row starts: its stamp's start, and its next row's draw (the
        atomic's wait at its first use, the row's first barrier; drawn at that
        barrier, every row took longer: rows.CLUSTER_DRAWN); a block's part of
        a row split over blocks: its whole vectors from plo_ up to R."""
        L, idx, Q = self.lines, self.idx, self.cluster
        self._row_barrier = False
        if self.tiles:
            self._tile_row()
        if self.parts:
            v = self.vec
            L.append(f"    const {idx} plen_ = ((Rrow_ + {v - 1}) / {v} + split - 1) / split * {v};")
            L.append(f"    const {idx} plo_ = part_ * plen_, R = plo_ + plen_ < Rrow_ ? plo_ + plen_ : Rrow_;")
        if self.stamps:
            L.append("    const unsigned long long stamp_ = hir_now();")
        if self.drawn:
            first, grid = ("threadIdx.x == 0 && hir_cluster_rank() == 0", f"gridDim.x / {Q}") if Q > 1 else \
                ("threadIdx.x == 0", "gridDim.x")
            L.append(f"    const {idx} drawn_ = {first} ? ({idx})hir_next_row(sem, nslots, {grid}) : 0;")

    def _first_barrier(self, publish: str, barrier: str, read: str) -> None:
        """A row's barrier (`barrier`); at its first, the drawn row published
        before it (`publish`: the statement) and read after it (`read`: where
        rank 0 put it), and the row's barrier stamp."""
        first = not self._row_barrier
        self._row_barrier = True
        if first and self.drawn:
            self.lines.append(f"    {publish}")
        self.lines.append(f"    {barrier}")
        if first and self.drawn:
            self.lines.append(f"    nbase_ = {read};")
        if first and self.stamps:
            self.lines.append(f"    if (threadIdx.x == 0) hir_stamp_barrier({self._stamp_slot()});")

    def _row_ends(self) -> None:
        """As a row ends: its stamp (its start, end and SM)."""
        assert self._row_barrier or not self.drawn, "a drawn row's draw rides its first barrier"
        if self.tiles:
            self._tile_close()
        if self.stamps:
            self.lines.append(f"    if (threadIdx.x == 0) hir_stamp_row({self._stamp_slot()}, stamp_);")

    def _stamp_slot(self) -> str:
        """The row's CTA's slot of rows.STAMPS (a cluster's CTAs side by side)."""
        if self.cluster > 1:
            return f"(unsigned long long)row * {self.cluster} + hir_cluster_rank()"
        return "(unsigned long long)row"
