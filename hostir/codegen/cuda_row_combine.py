"""How a reduction kernel's threads combine their values (a mixin of
cuda_schedules._ReductionPrinter): each point into a thread's accumulator
(_combine), a row's threads' accumulators over the group (_group_reduce:
shuffles in each warp, then the warps' results through shared memory, or,
for a row split over a cluster, every warp's result of the cluster through
distributed shared memory at once: _cluster_warps; a row split over blocks,
their parts through the workspace: _part_end).
The combines' forms are cuda_combine's; the helpers kernels/hostir.cuh's."""
from __future__ import annotations

from .cuda_combine import _COMBINE, acc_init, acc_point, acc_type
from .kir import ws_slot


class _RowCombines:
    """The combines of a _ReductionPrinter (its lines, threads and cluster)."""

    def _combine(self, reduces, acc, names, indent: str) -> None:
        """Each accumulator takes in its REDUCE's value at this point."""
        for n in reduces:
            a = acc[id(n)]
            self.lines.append(f"{indent}{{ const {acc_type(n)} x = {a}, y = {acc_point(n, names)}; "
                              f"{a} = {_COMBINE[n.arg]}; }}")

    def _combine_slots(self, reduces) -> None:
        """The shared memory each REDUCE's group combine exchanges through: the
        warps' results (smem<j>), or, in a row split over a cluster, two slots
        of them alternating by row (wslot<j>)."""
        L, T = self.lines, self.threads
        for j, n in enumerate(reduces):
            ct = acc_type(n)
            if self.cluster > 1:
                L.append(f"  __shared__ {ct} wslot{j}[2][{self.block // 32}];")
            elif T > 32:
                L.append(f"  __shared__ {ct} smem{j}[{self.block // 32}];")

    def _group_reduce(self, mine, slots, acc) -> None:
        """Combine each accumulator over the row's threads: shuffles in each warp,
        then (rows wider than a warp) one exchange through shared memory for
        all of a pass's accumulators together (over a cluster: _cluster_warps)."""
        L, T = self.lines, self.threads
        for n in mine:
            a = acc[id(n)]
            L.append(f"    {a} = hir_warp_reduce<{T}>({a}, {_combiner(n)});")
        assert self.cluster <= 1 or T > 32, "a row split over a cluster takes its CTAs' warps"
        if T <= 32 or not mine:
            return
        if self.cluster > 1:
            self._cluster_warps(mine, slots, acc)
            return
        L.append("    __syncthreads();  // the slots' previous readers are done")
        L.append("    if ((threadIdx.x & 31) == 0) {")
        for n, j in zip(mine, slots):
            L.append(f"      smem{j}[threadIdx.x / 32] = {acc[id(n)]};")
        L.append("    }")
        # (a drawn row published: every thread has read the last, the barrier above)
        self._first_barrier("if (threadIdx.x == 0) next_[0] = drawn_;", "__syncthreads();", "next_[0]")
        L.append("    {")
        L.append(f"      const int first = (threadIdx.x / {T}) * {T // 32};")
        for n, j in zip(mine, slots):  # (the warps' results: a tree of shuffles, WARPS_TREE)
            L.append(f"      {acc[id(n)]} = hir_warps_combine<{T}>(smem{j} + first, {_combiner(n)});")
        L.append("    }")

    def _cluster_warps(self, mine, slots, acc) -> None:
        """A row split over a cluster: each warp's first lane writes the warp's
        result into this row's slot (two alternate by row, so a slot is written
        again two rows later, after a cluster barrier every reader of it passed
        first), one cluster barrier, and every thread combines all of the
        cluster's warps' results in one fixed order (kernels/hostir.cuh,
        hir_cluster_warps): the same values the same way in every CTA, no block
        barriers. (It replaced a block combine then a CTAs' combine: two block
        barriers and a cluster barrier a reduction; ncu, log-softmax bf16
        441x151935: barrier stalls 3.2 cycles an instruction of about 20. H100
        % of copy, same run, before / after: rmsnorm bf16 512x131072 84.7 /
        89.9, layernorm bf16 512x131072 81.9 / 87.6, fp32 1024x65536 82.4 /
        91.4, softmax bf16 256x262144 83.2 / 85.7, fp16 447x150000 78.7 /
        80.5, log-softmax bf16 441x151935 78.6 / 77.0.)"""
        L = self.lines
        L.append("    if ((threadIdx.x & 31) == 0) {")
        for n, j in zip(mine, slots):
            L.append(f"      wslot{j}[parity][threadIdx.x / 32] = {acc[id(n)]};")
        L.append("    }")
        # (a drawn row read before this CTA reaches the next barrier; written again two rows on)
        self._first_barrier("if (threadIdx.x == 0 && hir_cluster_rank() == 0) next_[parity] = drawn_;",
                            "hir_cluster_sync();", "hir_cluster_read(next_[parity], 0)")
        for n, j in zip(mine, slots):
            self.lines.append(f"    {acc[id(n)]} = hir_cluster_warps<{self.threads // 32}, {self.cluster}>("
                              f"wslot{j}[parity], {_combiner(n)});")

    def _last_arrival(self, counter: str, arrivals: str, flag: str) -> None:
        """After a block wrote its partials to the workspace: it counts itself
        in `counter` and takes no further step of this row (tile) unless it is
        the last of `arrivals` (shared `flag`), whose reads then see every
        partial (the split's end: _part_end, cuda_outer's _publish)."""
        L = self.lines
        L.append("      __threadfence();")
        L.append("      __syncthreads();")
        L.append(f"      if (threadIdx.x == 0) {flag} = atomicAdd(&{counter}, 1u) == (unsigned int)({arrivals}) - 1u;")
        L.append("      __syncthreads();")
        L.append(f"      if (!{flag}) continue;")
        L.append("      __threadfence();")

    def _part_end(self, mine, idxs, acc) -> None:
        """A row split over `split` blocks (parts): thread 0 writes the block's
        part of each reduction to its workspace slot (row, part); the row's
        last block to count itself combines the parts in a fixed order (each
        thread its parts in order, then the block's combine: deterministic)
        and goes on to the epilogue; the others take no further step."""
        k, L, idx, T = self.k, self.lines, self.idx, self.threads
        L.append("    if (split > 1) {")
        for j, n in zip(idxs, mine):
            L.append(f"      {acc_type(n)}* const ws{j}_ = reinterpret_cast<{acc_type(n)}*>("
                     f"ws + (size_t){j} * nslots * split * {ws_slot(k)});")
        L.append("      if (threadIdx.x == 0) {")
        for j, n in zip(idxs, mine):
            L.append(f"        ws{j}_[row * split + part_] = {acc[id(n)]};")
        L.append("      }")
        self._last_arrival("sem[row]", "split", "last_")
        for n in mine:
            L.append(f"      {acc[id(n)]} = {acc_init(n)};")
        L.append(f"      for ({idx} w = threadIdx.x; w < split; w += {T}) {{")
        for j, n in zip(idxs, mine):
            L.append(f"        {{ const {acc_type(n)} x = {acc[id(n)]}, y = hir_ld_l2(ws{j}_ + row * split + w); "
                     f"{acc[id(n)]} = {_COMBINE[n.arg]}; }}")
        L.append("      }")
        self._group_reduce(mine, idxs, acc)
        L.append("      if (threadIdx.x == 0) sem[row] = 0u;  // ready for the next launch")
        L.append("    }")


def _combiner(n) -> str:
    """REDUCE `n`'s combine as a C++ lambda of two accumulators."""
    ct = acc_type(n)
    return f"[]({ct} x, {ct} y) {{ return {_COMBINE[n.arg]}; }}"


# WARPS_TREE (a note; no longer a switch): a row of several warps combines its
# warps' results in a tree of shuffles (hir_warps_combine), not in a row of
# T / 32 - 1 combines every thread makes: an online softmax's pair combine a row
# of 1024 threads cost 31 serial hir_online calls (about 370 instructions a
# thread a row, a quarter of a long row's kernel, which ncu found issue-bound:
# 73 % of issue slots, stalls mostly 'not selected'). H100 % of copy, same run,
# serial / tree: softmax fp16 447x150000 70.4 / 80.2, bf16 256x262144 80.4 /
# 85.3, 512x131072 82.1 / 85.7, fp32 671x100000 81.8 / 87.4, log-softmax bf16
# 512x131072 83.5 / 88.3, layernorm bf16 512x131072 79.7 / 83.8; short rows
# within 1.1 either way.
