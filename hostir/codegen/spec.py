"""The kernel contract: what codegen hands the runtime for one segment.

A `KernelSpec` holds the segment's kernel IR (the plain kernel, a
paired-lane kernel where that reads less, an online-softmax kernel where a
normalization's max and sum fold into one pass), the options it was made with,
its variants' sources (printed on demand) and its launch rule: which kernel,
which variant (points per thread, index width) and which grid a launch over
given tensors uses. The parameter layout is the kernel's (`kir.layout`). The
runtime only loads, packs and launches. A reduction's row rules (threads,
registers, shared memory, clusters) are in spec_rows.py; the options a
kernel is made with, and the macros they set in its source, in options.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

from .. import config
from .cuda import kernel_source, vector_width
from .cuda_row_copies import copies_ahead, draws_rows
from .cuda_flat import flat_block, flat_bytes, flat_fits, flat_ok, flat_over, flat_width
from .cuda_period import PERIOD_BLOCK, PERIOD_LANES, period_blocks, period_fits, period_scratch, period_split
from .cuda_outer_shift import full_aim, shifted_batch, shifted_fills, shifted_fits, shifted_ok
from .cuda_outer_split import outer_scratch
from .cuda_outer import (SHARED_BYTES, outer_batch, outer_block, outer_few, outer_lanes, outer_ok,
                         outer_split, outer_width, wrapped)
from .row_loads import invariant_bytes, row_cache_bytes
from .launch_checks import (funnel_slots, keep_weights_ok, launch_sms, launches_clusters, shift_ok, vector_ok,
                            vector_slots)
from .cuda_tiles import STAGE_BYTES, STAGED, stage_block, staged_gather, tile_loads, transpose_tiles
from . import one_pass, row_tiles, row_widths, rows
from .spec_rows import _RowRules
from .kir import K, Kernel, Slot, kernel_text, layout, reductions, split_stores, verify_kernel, ws_slot
from .lower import ReductionLowering, lower_pointwise
from .online import online_softmax
from .options import KernelOptions, defines

I32_MAX = 2 ** 31 - 1


@dataclass(eq=False)
class Variant:
    """One compiled form of a kernel: `vec` points per thread, `idx` the C index type."""

    kernel: Kernel
    vec: int
    idx: str
    options: KernelOptions
    name: str
    vector_slots: frozenset = field(default_factory=frozenset)  # inputs read with vector loads
    threads: int = 0     # a reduction kernel: threads per row
    chunks: int = 0      # ... and vectors of the row each thread keeps in registers (0: a loop)
    outer: bool = False  # ... or tiles of 32 kept points, blocks split over the reduced points
    tile: int = -1       # a pointwise kernel that transposes: 32 x 32 tiles of (tile, innermost)
    smem_row: int = 0    # ... that many of them in shared memory, not registers (the rest re-read)
    cluster: int = 0     # ... each row split over this many CTAs of a thread-block cluster
    shift: bool = False  # ... rows that start off a vector boundary: vectors at the boundaries (launch_checks.shift_ok)
    double: bool = False  # ... the row kept in one of two buffers, the next row copied into the other (rows.ROW_DOUBLE)
    keep_weights: bool = False  # ... shifted rows: each block keeps the weights in shared memory (rows.KEEP_WEIGHTS)
    funnel: bool = False  # ... else reads them funnel-shifted from their aligned vectors (rows.FUNNEL_WEIGHTS)
    flat: bool = False   # an outer reduction read flat, `vec` points a thread a step (cuda_flat)
    few: bool = False    # ... or in tiles whose blocks ask for OUTER_FEW_BLOCKS an SM (cuda_outer.outer_few)
    batch: int = 0       # a one-pass row of 1024 threads: vectors a thread loads at once (one_pass.ONE_PASS_LONG);
    #                      an outer tile's lane: reduced points a batch (cuda_outer.outer_batch)
    drawn: bool = False  # ... its clusters (blocks) drawing their rows from a ticket counter (rows.CLUSTER_DRAWN)
    parts: bool = False  # a one-pass row split over several blocks, their partials combined (one_pass.row_parts)
    hold: bool = False   # each thread holds its weights in registers across rows (cuda_row_shift.HOLD_WEIGHTS;
    #                      word rows: row_widths.WORD_ROWS_HOLD)
    stack: int = 0       # word rows: each group takes this many rows at once (row_widths.WORD_ROWS, cuda_row_stack)
    tiles: bool = False  # short shifted rows a thread each, staged a warp's tile at a time (row_tiles)
    period: bool = False  # an outer reduction read in virtual rows of `vec` x its kept points (cuda_period)

    @property
    def block(self) -> int:
        """A transpose's tiles take 256 threads. A reduction's rows of 128 or more threads take a block each (measured
        on an H100: more rows in flight per SM than two rows per block give)."""
        if self.tile == STAGED:
            return self._stage_block
        if self.tile >= 0:
            return 256
        if self.flat:
            return flat_block(self.threads)
        if self.period:
            return PERIOD_BLOCK
        if self.outer and wrapped(self.threads):  # (a tile as wide as the kept points)
            return outer_block(self.threads)
        if self.stack:
            return row_widths.WORD_ROW_BLOCK
        if self.tiles:
            return row_tiles.TILE_BLOCK
        if self.threads >= 128:
            return self.threads
        return self.options.block

    @property
    def tile_lanes(self) -> int:
        """An outer tile's lanes that take kept points: a shifted tile's last
        reads only for its neighbour (cuda_outer_shift)."""
        return (self.threads or 32) - (self.outer and self.shift)

    @cached_property
    def _stage_block(self) -> int:
        return stage_block(self.kernel)

    @property
    def held_rows(self) -> bool:
        """Does a block take its rows in turn, each the same shift past a boundary, its weights kept or held
        (rows.KEEP_WEIGHTS, cuda_row_shift.HOLD_WEIGHTS: the grid the blocks the device runs at once; not
        stacked rows, row_widths.WORD_ROWS_HOLD, whose grid takes every row once)?"""
        return (self.keep_weights or self.hold or self.tiles) and not self.stack

    @cached_property
    def generates(self) -> bool:
        """Does the kernel draw random numbers (K.RNG: a Philox key set up per
        thread) and read no tensor (its time is arithmetic, not memory)?"""
        ops = {n.op for n in self.kernel.order}
        return K.RNG in ops and K.LOAD not in ops

    @cached_property
    def source(self) -> str:
        o = self.options
        src = kernel_source(self.kernel, self.vec, self.idx, self.block, o.streaming, o.pdl,
                            self.name, self.threads, self.chunks, self.outer, self.tile, self.smem_row,
                            self.cluster, self.shift, self.double, self.keep_weights, self.funnel, self.flat,
                            self.few, self.batch, self.drawn, self.parts, self.hold, self.stack, self.tiles,
                            self.period)
        return defines(o, self.kernel) + src

    @cached_property
    def smem(self) -> int:
        """Dynamic shared memory bytes a launch takes (the row cache of an
        smem_row variant; a tiled one's tiles: row_tiles.tiles_smem)."""
        if self.tiles:
            return row_tiles.tiles_smem(self.chunks)
        if not self.smem_row:
            return 0
        one = row_cache_bytes(self.kernel, self.vec, min(self.smem_row, self.chunks) * self.vec * self.block)
        return 2 * one if self.double else one

    def __str__(self) -> str:
        return self.source


def index_type(extents: list[int], ins: list, outs, params: list) -> str:
    """The C index type of a launch: "int" when every offset and index
    parameter fits in 32 bits, else "long long"."""
    fits = math.prod(extents) <= I32_MAX and all(
        span(t) <= I32_MAX for t in [*ins, *(outs or ())]) and all(
        -I32_MAX - 1 <= v <= I32_MAX for v in params  # index parameters (slice bounds...)
        if isinstance(v, int) and not isinstance(v, bool))
    return "int" if fits else "long long"


def span(t) -> int:
    """The largest element offset of tensor `t` from its first element."""
    return sum((sz - 1) * abs(st) for sz, st in zip(t.shape, t.stride()))


class KernelSpec(_RowRules):
    def __init__(self, name: str, plain: Kernel, paired: Kernel | None, options: KernelOptions,
                 online: Kernel | None = None):
        self.name = name
        self.plain = plain
        self.paired = paired
        self.online = online  # a reduction kernel's online-softmax form (codegen/online.py)
        self.options = options
        self._variants: dict[tuple, Variant] = {}
        self._vec = {id(k): outer_width(k, options.block) if outer_ok(k) else vector_width(k)
                     for k in self.kernels}
        self._layouts = {id(k): layout(k) for k in self.kernels}
        self._positions: dict[tuple, list[int]] = {}

    @property
    def kernels(self) -> tuple[Kernel, ...]:
        if self.online is not None:
            return (self.plain, self.online)
        return (self.plain,) if self.paired is None else (self.paired, self.plain)

    def layout(self, kernel: Kernel) -> tuple[Slot, ...]:
        return self._layouts[id(kernel)]

    def positions(self, kernel: Kernel, kind: str) -> list[int]:
        """Positions in the layout of the slots of `kind` ("in", "out", "param")."""
        key = (id(kernel), kind)
        got = self._positions.get(key)
        if got is None:
            got = self._positions[key] = [i for i, s in enumerate(self.layout(kernel)) if s.kind == kind]
        return got

    def verify(self) -> None:
        for k in self.kernels:
            verify_kernel(k)

    # ------------------------------------------------------------ launch rule
    @property
    def guards(self) -> tuple:
        """Bool scalar Vals the launch rule reads (the paired kernel's
        preconditions in a symbolic plan): the runtime evaluates them on the
        call's values and hands them to `kernel_for`."""
        return self.paired.guards if self.paired is not None else ()

    def kernel_for(self, full: list[int], held=()) -> tuple[Kernel, list[int]]:
        """(kernel, its iteration extents) for a launch over extents `full`, where
        `held` are the values of `guards`: the online-softmax kernel where the
        persistent schedule does not hold the rows (`holds`), or keeps them in
        shared memory one block an SM or over a cluster (`online_keeps`); the paired kernel
        (half of each paired dim) where its extents match (a specialized plan's)
        and its guards hold (a symbolic plan's); else the plain one. Extents
        alone decide, so CPU runs (the interpreter) take the kernel a GPU would."""
        if self.online is not None and (not self.holds(full) or self.online_keeps(full)):
            return self.online, full
        k = self.paired
        if k is None or not all(e is None or full[d] == e for d, e in k.pairs) or not (
                len(held) == len(k.guards) and all(held)):
            return self.plain, full
        extents = list(full)
        for d, _ in k.pairs:
            extents[d] //= 2
        return k, extents

    def choose(self, kernel: Kernel, extents: list[int], ins: list, outs, params: list) -> Variant:
        """The variant a launch uses: 32-bit indices when every offset and index
        parameter fits, vector loads and stores when every vector access is
        aligned. `outs` None stands for new contiguous outputs (as for a prefetch)."""
        idx = index_type(extents, ins, outs, params)
        if kernel.reduced and self._outer(kernel):
            vec = self._vec[id(kernel)]
            kept = math.prod(extents[d] for d in kernel.kept)
            var = full = self.variant(kernel, vec, idx, outer_lanes(kept, vec, kernel), outer=True)
            while var.vec > 1 and not vector_ok(var.vec, [ins[s] for s in var.vector_slots], extents):
                # (narrower vectors where the kept points or the tensors' alignment refuse these:
                # bf16 50000x1300 in 8-byte vectors, not 2-byte points)
                vec = var.vec // 2
                var = self.variant(kernel, vec, idx, outer_lanes(kept, vec, kernel), outer=True)
            if self._flat(kernel) and flat_over(var.vec, self._vec[id(kernel)], var.threads or 32, kept) and \
                    flat_fits(kernel, extents, ins):
                return self.variant(kernel, flat_width(kernel), idx, kept, outer=True, flat=True)
            if var.vec < full.vec and self._flat(kernel) and period_fits(kernel, extents, ins):
                return self.variant(kernel, flat_width(kernel), idx, PERIOD_LANES, outer=True, period=True)
            if var.vec < full.vec and not full.threads and shifted_fits(
                    kernel, full.vec, [ins[s] for s in full.vector_slots], var.vec > 1) and \
                    shifted_fills(kernel, full.vec, full.block, extents, launch_sms(ins)):  # (cuda_outer_shift)
                n = shifted_batch(kernel, full.vec, full.block, extents, launch_sms(ins))
                return self.variant(kernel, full.vec, idx, outer=True, shift=True, batch=n)
            if outer_few(kernel, var.vec, var.threads, kept, launch_sms(ins)):
                return self.variant(kernel, var.vec, idx, var.threads, outer=True, few=True)
            n = outer_batch(kernel, var.vec, var.threads, var.block, extents, launch_sms(ins))
            return self.variant(kernel, var.vec, idx, var.threads, outer=True, batch=n) if n else var
        if kernel.reduced:
            vec = width = self._vec[id(kernel)]
            per_row = math.prod(extents[d] for d in kernel.reduced)
            stored = [outs[s] for s in self._full_outs(kernel)] if outs is not None else []

            def aligned(w: int, points: bool = False) -> bool:  # (the row tensors' vectors of w points)
                return vector_ok(w, [ins[s] for s in vector_slots(kernel, w, points=points)] + stored, extents)
            shift = vec > 1 and not aligned(vec)
            if shift and vec == 8 and (t := self._half_aligned(kernel, per_row)) and aligned(4):
                return self.variant(kernel, 4, idx, t, -(-per_row // (4 * t)))  # (row_widths.HALF_ALIGNED_POINTS)
            tiled = shift and self._tiles(kernel, idx, per_row, extents, ins, outs)
            if tiled and row_tiles.before_word_rows(kernel, per_row):
                return tiled  # (row_tiles: short 2-byte rows a thread each, staged through shared memory)
            if shift and vec == 8 and (s := self._word_rows(kernel, per_row, aligned(4))) and aligned(2):
                return self.variant(kernel, 2, idx, 32, -(-per_row // 64), stack=s,  # (row_widths.WORD_ROWS)
                                    hold=self._word_hold(kernel, per_row))
            if tiled:
                return tiled
            if shift and vec == 8 and row_widths.HALF_SHIFT_LEAST < per_row <= row_widths.HALF_SHIFT_POINTS \
                    and self._passes(kernel)[0] and not aligned(4):
                vec = 4  # (row_widths.HALF_SHIFT_POINTS: shifted vectors of 4 2-byte points)
            if shift and one_pass.points_parted(math.prod(extents[d] for d in kernel.kept), per_row) and \
                    (parts := self._parts(kernel, self.variant(kernel, 1, idx, one_pass.row_threads(per_row)),
                                          extents, ins)):
                return parts  # (very few long rows off vector boundaries: a point a thread, over blocks)
            if shift and self._point_row(kernel, per_row) and aligned(1, points=True):
                t, c, _ = rows.register_row(per_row, row_widths.POINT_ROW_POINTS, 1)
                return self.variant(kernel, 1, idx, t, c)  # (row_widths.POINT_ROWS: a point a load, kept)
            if shift and row_widths.NARROW_ROWS[0] < per_row * 16 // width <= row_widths.NARROW_ROWS[1] and \
                    self._passes(kernel)[1] and (narrow := self._narrow(kernel, idx, per_row, width, aligned)):
                return narrow  # (row_widths.NARROW_ROWS: narrower vectors on the rows' boundaries)
            if shift and not shift_ok(kernel, vec, [ins[s] for s in vector_slots(kernel, vec, moving=True)] + stored,
                                      extents, self.options.shifted_rows):
                return self.variant(kernel, 1, idx, one_pass.row_threads(per_row))
            # (the weights of a shifted row funnel-shifted where their vectors start at boundaries)
            vectors = rows.shifted_vectors(per_row, vec) if shift else per_row // vec
            funnel = shift and rows.FUNNEL_WEIGHTS and bool(slots := funnel_slots(kernel, vec)) and \
                vector_ok(vec, [ins[s] for s in slots], [vec]) and \
                not (len(slots) >= 2 and rows.short_shifted(vec, vectors))  # (rows.SHORT_SHIFTED_VECTORS)
            d = self._double(kernel, vectors) if vec > 1 and not shift and launches_clusters(ins) else 0
            if d:
                c = -(-(-(-vectors // d)) // rows.ROW_THREADS[-1])
                return self.variant(kernel, vec, idx, rows.ROW_THREADS[-1], c, c, cluster=d, double=True)
            q = self._cluster(kernel, vectors) if vec > 1 and launches_clusters(ins) else 0
            var = self.variant(kernel, vec, idx, *self._row_schedule(kernel, -(-vectors // max(1, q)), shift, vec),
                               cluster=q, shift=shift, funnel=funnel)
            n = self._long_batch(kernel, var, vectors)
            if n:
                var = self.variant(kernel, vec, idx, var.threads, shift=shift, funnel=funnel, batch=n)
            if parts := self._parts(kernel, var, extents, ins):
                return parts
            if shift and self._keeps_weights(var, math.prod(extents[d] for d in kernel.kept)) and \
                    keep_weights_ok(kernel, vec, ins):
                var = self.variant(kernel, vec, idx, var.threads, var.chunks, var.smem_row, shift=True,
                                   keep_weights=True)
            elif shift and self._holds_weights(var, math.prod(extents[d] for d in kernel.kept)):
                var = self.variant(kernel, vec, idx, var.threads, var.chunks, var.smem_row, shift=True,
                                   funnel=var.funnel, hold=True)
            return var
        if self._stages(kernel, extents, ins):
            return self.variant(kernel, 1, idx, tile=STAGED)
        t = self._transposes(kernel, extents, ins)
        if t >= 0:
            return self.variant(kernel, 1, idx, tile=t)
        vec = self._vec[id(kernel)]
        var = self.variant(kernel, vec, idx)
        if vec > 1 and not vector_ok(vec, [ins[s] for s in var.vector_slots] + list(outs or ()),
                                      extents):
            var = self.variant(kernel, 1, idx)
        return var

    def _stages(self, kernel: Kernel, extents: list[int], ins: list) -> bool:
        """Does this launch gather along an input row that fits in shared memory,
        with output rows long enough to share it (the staged-gather schedule)?"""
        key = (id(kernel), "staged")
        got = self._positions.get(key)
        if got is None:
            got = self._positions[key] = staged_gather(kernel)
        g, _ = got
        if g is None or not extents or extents[-1] < 128 or config.disabled("staged_gather"):
            return False
        x = ins[g.arg]
        return x.ndim > 0 and 0 < x.shape[-1] * x.element_size() <= STAGE_BYTES

    def _transposes(self, kernel: Kernel, extents: list[int], ins: list) -> int:
        """The iteration dim a pointwise launch reads an input along, contiguously,
        while the outputs run along the innermost dim (a transpose: tiles through
        shared memory), or -1. Both dims must be long enough to fill tiles."""
        n = len(extents)
        if kernel.reduced or n < 2 or extents[-1] < 32 or config.disabled("tiled_transpose"):
            return -1
        for t in range(n - 1):
            if extents[t] < 32:
                continue
            for node in tile_loads(kernel, t):
                x = ins[node.arg]
                if x.ndim and x.stride(-1) == 1 and x.shape[-1] > 1:
                    return t
        return -1

    def _once(self, kernel: Kernel, rule):
        """`rule(kernel)` (what the kernel alone decides), computed once per kernel."""
        key = (id(kernel), rule.__name__)
        got = self._positions.get(key)
        if got is None:
            got = self._positions[key] = rule(kernel)
        return got

    def _flat(self, kernel: Kernel) -> bool:
        return self._once(kernel, flat_ok)

    def _outer(self, kernel: Kernel) -> bool:
        return self._once(kernel, outer_ok)

    @staticmethod
    def split(variant: Variant, extents: list[int], sm_count: int) -> int:
        """Blocks that share a tile of an outer reduction (cuda_outer.outer_split), or
        a one-pass row (one_pass.row_parts); 1 elsewhere."""
        if variant.parts:
            k = variant.kernel
            per_row = math.prod(extents[d] for d in k.reduced)
            vectors = per_row // variant.vec if variant.vec > 1 else per_row
            return one_pass.row_parts(math.prod(extents[d] for d in k.kept), vectors, variant.threads, sm_count)
        if not variant.outer:
            return 1
        if variant.period:
            return period_split(variant.kernel, extents, sm_count)
        # (a flat block's F accumulators fit in full occupancy's registers: cuda_flat's bounds)
        return outer_split(variant.kernel, variant.tile_lanes, 1 if variant.flat else variant.vec,
                           variant.block, extents, sm_count, variant.few, full_aim(variant))

    @staticmethod
    def scratch_size(variant: Variant, count: int, split: int) -> tuple[int, int] | None:
        """(workspace bytes, zeroed counters) of a launch split `split` ways
        (an outer reduction's: cuda_outer_split.outer_scratch), or of clusters that
        draw their rows (the 64-bit ticket counter: hir_next_row); None where a
        launch takes none."""
        if variant.period:
            return period_scratch(variant.kernel, count, split)
        if split > 1 and variant.parts:  # each row's parts' partials, and its arrival counter
            k = variant.kernel
            return ws_slot(k) * reductions(k) * count * split, count
        if split > 1:
            return outer_scratch(variant.kernel, variant.tile_lanes, variant.vec, count, split)
        return (0, 2) if variant.drawn else None

    def _full_outs(self, kernel: Kernel) -> list[int]:
        """Outputs a reduction kernel stores at every point of its space."""
        got = self._positions.get((id(kernel), "full_outs"))
        if got is None:
            got = self._positions[(id(kernel), "full_outs")] = sorted(
                {s for s, _, _ in split_stores(kernel)[0]})
        return got

    @staticmethod
    def count(kernel: Kernel, extents: list[int], vec: int, tile: int = -1) -> int:
        """The launch's slots: points / vec, a reduction kernel's rows (kept
        points: a row of an empty reduction is still written), or a transpose's
        blocks of 32 x 32 tiles (cuda_tiles.transpose_tiles of them)."""
        if kernel.reduced:
            return math.prod(extents[d] for d in kernel.kept)
        if tile == STAGED:  # a staged gather: the output's rows
            return math.prod(extents[:-1]) if math.prod(extents) else 0
        if tile >= 0:
            if not math.prod(extents):
                return 0
            rest = math.prod(e for d, e in enumerate(extents[:-1]) if d != tile)
            return rest * -(-extents[tile] // 32) * -(-extents[-1] // (32 * transpose_tiles(kernel, tile)))
        return math.prod(extents) // vec

    def grid(self, variant: Variant, count: int, sm_count: int, split: int = 1,
             extents: list[int] | None = None, resident: int = 0) -> int:
        """One thread per slot (a group of `threads` per row of a reduction; a
        block per tile of 32 rows and share of an outer reduction);
        options.grid_stride caps the grid at 32 blocks per SM, as does a
        kernel that only generates random numbers (Variant.generates). A
        kernel that loops over its rows more than once (every pass reading the
        row again) keeps the rows in flight within L2 (rows.resident_rows:
        the blocks loop over the rows), unless what every row reads too (a
        weight, a bias) takes more bytes a point than the row: then L2's own
        bandwidth, not DRAM's, bounds it (H100 layernorm bf16 1024x131072, its
        weight and bias reread each row: 77.7 % of copy resident against 81.1).
        `resident` counts the clusters the device runs at once (a cluster
        variant's), or, for a variant keeping the weights (rows.KEEP_WEIGHTS),
        the blocks: its grid is as many, a multiple of the vector, so a block's
        rows all start equally far past a vector boundary; so is the grid of
        a variant whose clusters (blocks) draw their rows (rows.CLUSTER_DRAWN,
        BLOCK_DRAWN). A cluster variant that neither copies its rows ahead nor
        draws them (the online kernel's) takes a cluster a row, the device
        launching the next as one ends: there the resident clusters each
        looping over rows b, b + clusters, ... lost (H200 % of copy, same run,
        a row / looping: log-softmax fp16 458x146480 75.9 / 70.3, softmax fp32
        926x72471 75.9 / 64.7, fp16 447x150000 74.3 / 65.4), and so did their
        drawing rows (rows.CLUSTER_DRAWN)."""
        if variant.period:
            blocks = period_blocks(count, split)
        elif variant.outer:
            blocks = -(-count // (variant.tile_lanes * variant.vec)) * split
        elif variant.tile >= 0:
            blocks = count
        elif variant.tile == STAGED:  # a block per row at a time
            blocks = min(count, sm_count * 8)
        elif variant.cluster:  # a cluster a row; where `resident` (the clusters the device runs at once) are
            blocks = count * variant.cluster  # known, as many, each copying its next row ahead or drawing rows
            if resident and (variant.double or variant.drawn or copies_ahead(
                    variant.kernel, variant.vec, variant.chunks, min(variant.smem_row, variant.chunks),
                    variant.block, variant.shift, variant.cluster)):
                blocks = min(count, resident) * variant.cluster
        elif variant.parts:  # a block a part of each row
            blocks = count * split
        else:
            per_block = variant.block // variant.threads * max(1, variant.stack) if variant.threads else variant.block
            blocks = -(-count // per_block)
            if variant.held_rows and resident:  # (rows of period vec in their shift; tiles keep every shift)
                blocks = min(blocks, resident if variant.tiles else resident // variant.vec * variant.vec or resident)
            elif variant.drawn and resident:  # (a block a row, rows.BLOCK_DRAWN)
                blocks = min(blocks, resident)
            if variant.generates:  # threads loop (grid stride), each setting up its draws once: H100 2^26 rand_like
                # fp32 129 -> 97.1 us, randn_like bf16 155 -> 147 (torch eager 109, 156); not where it reads a
                # tensor (dropout fp32 178 -> 187 us)
                blocks = min(blocks, sm_count * 32)
            if variant.threads and not variant.chunks and extents is not None and \
                    self._passes(variant.kernel)[0] and variant.vec > 1:
                k = variant.kernel
                points = math.prod(extents[d] for d in k.reduced)
                row_bytes = row_cache_bytes(k, variant.vec, points)
                if invariant_bytes(k) * points <= row_bytes:
                    blocks = min(blocks, rows.resident_rows(row_bytes, variant.block, sm_count) or blocks)
        return max(1, min(blocks, sm_count * 32 if self.options.grid_stride else 2 ** 31 - 1))

    def variant(self, kernel: Kernel, vec: int, idx: str, threads: int = 0, chunks: int = 0,
                smem_row: int = 0, outer: bool = False, tile: int = -1, cluster: int = 0,
                shift: bool = False, double: bool = False, keep_weights: bool = False,
                funnel: bool = False, flat: bool = False, few: bool = False, batch: int = 0,
                parts: bool = False, hold: bool = False, stack: int = 0, tiles: bool = False,
                period: bool = False) -> Variant:
        funnel = funnel and shift and not keep_weights
        # (a cluster variant's block is its threads: Variant.block)
        drawn = draws_rows(kernel, vec, chunks, min(smem_row, chunks), threads, shift, cluster, double)
        key = (id(kernel), vec, idx, threads, chunks, smem_row, outer, tile, cluster, shift, double, keep_weights,
               funnel, flat, few, batch, drawn, parts, hold, stack, tiles, period)
        got = self._variants.get(key)
        if got is None:
            o = self.options
            tune = (f"_b{o.block}{'cs' if o.streaming else ''}{'_pdl' if o.pdl else ''}"
                    f"{'_fm' if o.fast_math else ''}{'_chk' if o.check_indices else ''}")
            name = (f"{kernel.name}{'_pair' * len(kernel.pairs)}_v{vec}_"
                    f"{'i32' if idx == 'int' else 'i64'}{f'_t{threads}' if threads else ''}"
                    f"{f'_c{chunks}' if chunks else ''}{('_smem' if smem_row >= chunks else f'_smem{smem_row}') if smem_row else ''}{'_outer' if outer else ''}{'_flat' if flat else ''}{'_period' if period else ''}{'_few' if few else ''}{f'_n{batch}' if batch else ''}"
                    f"{f'_q{cluster}' if cluster else ''}{('d' if cluster else '_drawn') if drawn else ''}{'_db' if double else ''}{'_sh' if shift else ''}{'_kw' if keep_weights else ''}{'_fw' if funnel else ''}{'_hw' if hold else ''}{'_parts' if parts else ''}{f'_st{stack}' if stack else ''}{'_tl' if tiles else ''}"
                    f"{f'_tile{tile}' if tile >= 0 else ''}{'_staged' if tile == STAGED else ''}{tune}")
            slots = vector_slots(kernel, vec, points=bool(chunks))  # (chunks at width 1: a row held a point a load)
            got = self._variants[key] = Variant(kernel, vec, idx, o, name, slots, threads, chunks, outer, tile,
                                                smem_row, cluster, shift, double, keep_weights, funnel, flat, few,
                                                batch, drawn, parts, hold, stack, tiles, period)
        return got

    def typical_variants(self) -> list[Variant]:
        """The general variant and the vectorized 32-bit one of each kernel (of
        a reduction kernel: each row width's 32-bit one)."""
        out = []
        for k in self.kernels:
            if k.reduced and self._outer(k):
                out += [self.variant(k, 1, "long long", outer=True), self.variant(k, 1, "int", outer=True),
                        self.variant(k, self._vec[id(k)], "int", outer=True)]
                narrow = outer_lanes(6 * self._vec[id(k)], self._vec[id(k)])
                if narrow:  # a narrow kept dim's tile
                    out.append(self.variant(k, self._vec[id(k)], "int", narrow, outer=True))
                if n := outer_batch(k, self._vec[id(k)], 0, 256, [1 << 12] * len(k.extent_vals), 8):  # lanes' batches
                    out.append(self.variant(k, self._vec[id(k)], "int", outer=True, batch=n))
                if shifted_ok(k, self._vec[id(k)]):  # lanes shifted: kept points off vectors' boundaries
                    out.append(self.variant(k, self._vec[id(k)], "int", outer=True, shift=True, batch=n))
                if self._flat(k):  # read flat: odd kept points, many rows of lanes, or one
                    out += [self.variant(k, flat_width(k), "int", c, outer=True, flat=True) for c in (35, 855)
                            if flat_bytes(k, c) <= SHARED_BYTES]
            elif k.reduced:
                out += [self.variant(k, 1, "long long", rows.ROW_THREADS[0])]
                out += [self.variant(k, self._vec[id(k)], "int", t) for t in rows.ROW_THREADS[::2]]
                out += [self.variant(k, self._vec[id(k)], "int", *self._row_schedule(k, n)) for n in (6, 256, 1000)]
                if self._parted(k, self.variant(k, self._vec[id(k)], "int", 1024)):  # a row over blocks
                    out.append(self.variant(k, self._vec[id(k)], "int", 1024, parts=True))
                if k is self.online:  # its rows are long: several vectors a thread kept
                    out.append(self.variant(k, self._vec[id(k)], "int", *self._row_schedule(k, 4096)))
                elif self._row_schedule(k, 4096)[2]:  # a long row kept in shared memory
                    out.append(self.variant(k, self._vec[id(k)], "int", *self._row_schedule(k, 4096)))
            else:
                out += [self.variant(k, 1, "long long"), self.variant(k, self._vec[id(k)], "int")]
                out += [self.variant(k, 1, "int", tile=t) for t in range(len(k.extent_vals) - 1)
                        if tile_loads(k, t)][:1]
                if staged_gather(k)[0] is not None:
                    out.append(self.variant(k, 1, "int", tile=STAGED))
        return out

    # ------------------------------------------------------------ text
    @property
    def source(self) -> str:
        """The general variant's source (one point per thread, 64-bit indices),
        and the online-softmax kernel's after the plain one's."""
        return "\n".join(self._general(k) for k in self.kernels[:1] + (
            (self.online,) if self.online is not None else ()))

    def _general(self, k: Kernel) -> str:
        if k.reduced and self._outer(k):
            return self.variant(k, 1, "long long", outer=True).source
        return self.variant(k, 1, "long long", rows.ROW_THREADS[0] if k.reduced else 0).source

    def __str__(self) -> str:
        return "\n".join([kernel_text(k) for k in self.kernels] + [self.source])


observers: list = []
"""Functions called with every KernelSpec made (the test suite compiles the
typical variants of each one with NVRTC, for sm_90, without a GPU)."""


def pointwise_spec(seg, name: str, extents: list[int] | None, options: KernelOptions,
                   at=None) -> KernelSpec:
    """The spec of a pointwise segment (raises UnsupportedError where an op has
    no kernel rule). `extents`, a specialized plan's iteration extents, or `at`,
    the values of the call a symbolic plan is made for, let the scheduler
    choose paired lanes (`lower_pointwise`)."""
    plain, paired = lower_pointwise(seg, name, extents, options.pairing, at)
    return _made(KernelSpec(name, plain, paired, options))


def reduction_spec(seg, name: str, options: KernelOptions) -> KernelSpec:
    """The spec of a reduction segment (UnsupportedError where it has no kernel
    yet), with its online-softmax form where one folds (options.online)."""
    plain = ReductionLowering(seg, name).run()
    online = online_softmax(plain) if options.online else plain
    return _made(KernelSpec(name, plain, None, options, online if online is not plain else None))


def _made(spec: KernelSpec) -> KernelSpec:
    for observe in observers:
        observe(spec)
    return spec
