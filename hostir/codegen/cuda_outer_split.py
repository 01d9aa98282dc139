"""The end of an outer tile's stream split over blocks (a mixin of
cuda_outer._OuterPrinter: its k, vec, lanes, block, idx, lines): the split's
partials written to the workspace, the tile's last block to arrive combining
them (two levels: OUTER_GROUP), then the epilogue at each kept point."""
from __future__ import annotations

from .cuda_combine import _COMBINE, acc_init, acc_type, acc_value
from .kir import Kernel, reductions, split_stores, ws_slot

OUTER_COMBINE_UNROLL = 4   # partials the last block's lanes read at once
OUTER_GROUP = 32           # shares whose partials a group's last block combines (two levels)
"""A split reduction's end is a chain of dependent round trips (the partial's
store, a fence, the group's counter, the group's partials read, and again for
the tile), run after every block has streamed its share: where the split is
32 or fewer, one level. H100 % of copy, same run, 16 / 32: column sum bf16
13421x5000 (split 26) 81.3 / 84.0, 699050x96 83.5 / 84.9, 87381x768 83.2 /
83.6, fp32 16384x4096 95.3 / 96.6; others within 0.3 (1024, one level
always: fp32 1048576x64 86.0, bf16 699050x96 79.1: a tile's last block reads
every share's partial).
A timeline (H200, globaltimer a block, column sum fp32 8192x4096, split 16,
36.4 us a call): the blocks' loops end at 30.2 to 33.8 us (no link to an
SM's block count: the memory system's unfairness), the fence after a
partial's store takes 1.5 us, the tile's last block 1.1 more to its store.
Tried and removed (2026-11-29): a tile's shares as one thread-block cluster
combining through distributed shared memory (clusters of 16, non-portable):
35.5 -> 54.2 us, 16384x4096 65.8 -> 100.0, 4096x4096 (8) 23.0 -> 24.2 (the
clusters' CTAs placed unevenly); partials tagged in their 8-byte store, no
fences, the last block waiting on each tag: % of copy 87.4 -> 82.7, bf16
87381x768 82.2 -> 67.6, fp32 67108x1000 91.1 -> 82.7 (without the fence the
counter's atomic took the 1.3 us; the tags' spin and 64-bit partials cost
the rest)."""

def outer_scratch(kern: Kernel, lanes: int, vec: int, count: int, split: int) -> tuple[int, int]:
    """(workspace bytes, zeroed counters) of an outer reduction split `split`
    ways over `count` kept points: the partial results (kir.ws_slot bytes
    each: the shares', then the groups' of OUTER_GROUP shares) and each tile's
    arrival counters (its groups', then the tile's)."""
    reduces = reductions(kern)
    groups = -(-split // OUTER_GROUP)
    tiles = -(-count // (lanes * vec))
    return ws_slot(kern) * (split + groups) * count * reduces, tiles * (groups + 1)


class _OuterSplit:
    """The split's end of a _OuterPrinter."""

    def _finish(self, reduces, rows, names) -> None:
        """The split's partials combined (by the tile's last block to arrive),
        then the epilogue at each of the tile's kept points."""
        k, idx, L, V = self.k, self.idx, self.lines, self.vec
        _, row_stores = split_stores(k, rows)
        L.append("    if (split > 1) {")
        # two levels: the last block of each group of OUTER_GROUP shares combines the
        # group's partials into a group partial; the last group's, those (one level
        # where split <= OUTER_GROUP). Fixed groups and orders: deterministic.
        L.append(f"      const {idx} groups = (split + {OUTER_GROUP - 1}) / {OUTER_GROUP}, "
                 f"grp = g / {OUTER_GROUP};")
        L.append("      unsigned int* const tsem = sem + tile * (groups + 1);")
        for j, n in enumerate(reduces):
            L.append(f"      {acc_type(n)}* ws{j} = reinterpret_cast<{acc_type(n)}*>("
                     f"ws + (size_t){j} * (split + groups) * nslots * {ws_slot(k)});")
        self._publish(reduces, "g", "tsem[grp]",
                      f"(grp + 1) * {OUTER_GROUP} < split ? {OUTER_GROUP} : split - grp * {OUTER_GROUP}")
        self._gather(reduces, f"grp * {OUTER_GROUP}",
                     f"(grp + 1) * {OUTER_GROUP} < split ? (grp + 1) * {OUTER_GROUP} : split")
        L.append("      if (threadIdx.x == 0) tsem[grp] = 0u;  // ready for the next launch")
        L.append("      if (groups > 1) {")
        self._publish(reduces, "split + grp", "tsem[groups]", "groups")
        self._gather(reduces, "split", "split + groups")
        L.append("        if (threadIdx.x == 0) tsem[groups] = 0u;")
        L.append("      }")
        L.append("    }")
        if row_stores:
            L.append("    #pragma unroll")
            L.append(f"    for (int u = 0; u < {V}; ++u) {{")
            L.append(f"      const {idx} ii = i{self.n - 1} + u;")
            point = dict(names)
            acc = {id(n): f"a{j}[u]" for j, n in enumerate(reduces)}
            for n in reduces:
                point[id(n)] = acc_value(n, acc[id(n)])
            self._epilogue(rows, row_stores, point, "      ", f"ty == 0 && active{' && ii < nslots' * self.shifted}",
                           "ii")
            L.append("    }")
        L.append("  }")

    def _kept(self, at: str) -> str:  # a guard: is `at` a kept point (a shifted tile's lane runs past them)?
        return f"if ({at} < nslots) " if self.shifted else ""

    def _publish(self, reduces, at: str, counter: str, arrivals: str) -> None:
        """Lane ty == 0 writes the block's values to partial slot `at`; the block
        counts itself in `counter` and goes on only if it is the last of `arrivals`."""
        L, V = self.lines, self.vec
        L.append("      if (ty == 0 && active) {")
        for j in range(len(reduces)):
            L.append(f"        #pragma unroll\n        for (int u = 0; u < {V}; ++u) "
                     f"{self._kept('row + u')}ws{j}[({at}) * nslots + row + u] = a{j}[u];")
        L.append("      }")
        self._last_arrival(counter, arrivals, "last")

    def _gather(self, reduces, lo: str, hi: str) -> None:
        """The block combines partial slots [lo, hi): lane ty takes lo + ty,
        lo + ty + ty_n, ... (loads in flight together), then the block combines
        its lanes in order."""
        L, V, idx, ty_n = self.lines, self.vec, self.idx, self.block // self.lanes
        L.append("      #pragma unroll")
        L.append(f"      for (int u = 0; u < {V}; ++u) {{")
        for j, n in enumerate(reduces):
            L.append(f"        a{j}[u] = {acc_init(n)};")
        L.append("      }")
        L.append("      if (active) {")
        L.append(f"        #pragma unroll {OUTER_COMBINE_UNROLL}")
        L.append(f"        for ({idx} w = ({lo}) + ty; w < ({hi}); w += {ty_n}) {{")
        L.append("          #pragma unroll")
        L.append(f"          for (int u = 0; u < {V}; ++u) {{")
        for j, n in enumerate(reduces):
            L.append(f"            {self._kept('row + u')}{{ const {acc_type(n)} x = a{j}[u], "
                     f"y = hir_ld_l2(ws{j} + w * nslots + row + u); a{j}[u] = {_COMBINE[n.arg]}; }}")
        L.append("          }")
        L.append("        }")
        L.append("      }")
        self._block_combine(reduces, "      ")

