"""Short rows of 2-byte points off vector boundaries, a thread a row, staged
through shared memory a warp's tile of 32 rows at a time (spec.Variant.tiles;
the printer's side: cuda_row_tiles).

Each warp copies its tile's bytes (32 dense rows, 16-byte aligned) into
shared memory by cp.async in aligned 16-byte pieces, the next tile while it
computes this one (two buffers a warp); each lane then computes its row from
shared memory as a shifted row of one thread (4-byte words, the row's
head and tail point a point at a time), writes its full output in place, and
the warp copies the tile back out in aligned 16-byte pieces. What every row
reads alike (a layernorm's weight and bias) is kept in shared memory at each
shift a row may start at, placed once before the rows. No shuffles, no
barriers a row, every global access aligned and coalesced.

Built because short shifted 2-byte rows were issue-bound at 24-45
instructions a point (ncu, H200: a group of 8 threads a row, its weights read
a point at a time, fixed work a row: head and tail points, shuffles,
divisions). Hand kernels first (H200 % of copy, same run, 2026-12-02; the
generated kernel then / torch.compile / tiles, 4 warps a block, two buffers):
layernorm bf16 894784x75 56.9 / 29.8 / 83.4, 1100000x61 59.8 / 38.0 / 84.5,
1082401x62 59.8 / 58.0 / 85.3, 789516x85 63.4 / 33.0 / 82.9, fp16 800000x77
60.0 / 30.8 / 83.6; rmsnorm fp16 1491308x45 56.5 / 44.6 / 85.2, bf16
1157049x58 76.9 / 79.4 / 87.5, fp16 1082401x62 81.7 / 87.6 / 86.6, bf16
563940x119 82.4 / 70.8 / 84.2. Three buffers a warp, or 8 warps a block, were
within 1.5 of these."""
from __future__ import annotations

from .cuda import index_deps, vector_loads
from .kir import K, Kernel, split_stores
from .row_loads import kept_weights, row_invariant_loads

TILE_ROWS = True
TILE_ROW_POINTS = 160
"""Rows of this many points at most (2-byte: 10 KiB a tile). H200 % of copy,
same run, 128 / 160: layernorm bf16 400000x141 67.5 / 79.3, fp16 450000x135
78.1 / 81.6, rmsnorm fp16 420000x155 81.2 / 82.0 (rmsnorm bf16 400000x150
keeps its word rows: before_word_rows)."""
TILE_ROW_LEAST = 4     # ... and this many at least (a word and a head and tail)
TILE_PASSES_POINTS = 104
"""... and of this many at most where the kernel passes over a row three
times or more (a softmax: max, sum, output). Longer, its tiles leave room
for 3 blocks an SM, and it lost: H200 % of copy, same run, shifted / tiles:
softmax bf16 536870x125 90.0 / 80.5 (fp16 800000x77 75.1 / 80.0,
log-softmax bf16 700000x95 81.9 / 84.3; layernorm bf16 528000x127 76.3 /
77.5). Up to 104 points (at 96 then, H200, same run, 96 / 108): softmax fp16
700000x99 72.6 / 83.7, log-softmax fp16 500000x101 76.7 / 85.5; but softmax
bf16 600000x107 84.5 / 82.9. (Tried: each thread's combines split over 4 partial accumulators,
within 1.5 either way, layernorm bf16 600000x93 77.1 / 74.1: not kept.)"""
TILE_BLOCK = 128       # threads a block: 4 warps, a tile each, two buffers each
TILE_VEC = 2           # the rows' vectors: 4-byte words of 2-byte points
TILE_UNROLL = True
"""A whole tile's copies in and out unrolled over a lane's 16-byte pieces
(tile_pieces, each guarded; a part tile's in a loop), not a loop over the
tile's bytes. H200 % of copy, same run, on / off: layernorm bf16 1100000x61
85.5 / 83.0, 528000x127 82.0 / 79.7, 600000x93 83.8 / 81.2, 1000000x66 83.7 /
82.5; rmsnorm bf16 563940x119 85.8 / 84.0, 900000x71 86.1 / 84.5 (others
within 1). Tried and dropped, same runs: the row read again from its tile
in each pass, not held in registers (32-40 registers, not 2 x words + 20):
it lost everywhere, held / read again, layernorm bf16 894784x75 83.3 / 78.8,
1000000x66 84.7 / 81.4, fp16 800000x77 81.4 / 77.7, log-softmax bf16
700000x95 85.7 / 83.6; the kept weights as floats (no conversion a point):
within the run's spread (1.7 on kernels it does not change)."""


def before_word_rows(kern: Kernel, per_row: int) -> bool:
    """Do tiles take rows of `per_row` points before the word rows
    (row_widths.WORD_ROWS) would: where those take one word a thread (rows
    of up to 64 points), or the kernel reads two weights or more (a
    layernorm's). H200 % of copy, same run, tiles / word rows: rmsnorm bf16
    1157049x58 87.5 / 78.9, 900000x54 84.1 / 73.5, fp16 1082401x62 86.2 /
    81.2; layernorm bf16 700000x98 82.1 / 66.3, fp16 560000x118 83.6 / 78.3;
    but rmsnorm's two words a thread and more kept theirs: bf16 600000x110
    85.7 / 91.0, fp16 550000x126 86.2 / 92.9, 650000x102 85.6 / 89.4, bf16
    400000x150 81.6 / 87.7."""
    return per_row <= 64 or len(kept_weights(kern, TILE_VEC)) >= 2


def tile_slots(kern: Kernel) -> tuple[int, int] | None:
    """The input whose rows a tiled variant stages and the output it computes
    in place, or None where the kernel cannot take
    tiles: one reduced dim, the innermost; one input moving along the rows,
    2-byte, read at each row's points in vectors (the point's own indices) or
    at fixed points of the row; other loads every row reads alike (weights)
    or one a row; one full output, of the input's width, stored at the
    point's own indices. Kernels without a full output (a var_mean, a row
    sum) keep their schedules: tiled, they lost (H200 % of copy, same run,
    shifted / tiles: var_mean bf16 664444x101 79.0 / 72.1, row sum bf16
    9586980x7 73.7 / 60.0). (Its tensors' layout: tiles_ok.)"""
    nd = len(kern.extent_vals)
    if tuple(kern.reduced) != (nd - 1,) or nd < 2:
        return None
    dims = list(range(nd))
    along, kept = index_deps(kern, kern.reduced), index_deps(kern, kern.kept)
    vl, inv = vector_loads(kern, TILE_VEC), row_invariant_loads(kern)
    moving = [n for n in kern.order if n.op == K.LOAD and id(n) in along and id(n) in kept]
    if len({n.arg for n in moving}) != 1:
        return None
    a = moving[0].arg
    if kern.inputs[a].dtype.itemsize != 2:
        return None
    for n in kern.order:  # (every read of it in its own row: at the point, or at a fixed point: its start)
        if n.op != K.LOAD or n.arg != a:
            continue
        ix = n.src[1:]
        if not _own_point(ix[:-1], dims[:-1]) or len(ix) != nd:
            return None
        if id(ix[-1]) in along and not (id(n) in vl and id(n) not in inv and _own_point(ix, dims)):
            return None
    full, _ = split_stores(kern)
    if len({s for s, *_ in full}) != 1:  # (none: a var_mean, a row sum)
        return None
    s, node, ix = full[0]
    if kern.outputs[s].dtype.itemsize != 2 or not _own_point(ix, dims):
        return None
    return a, s


def _own_point(ix, dims) -> bool:
    """Are these a tensor's indices at the point itself (the iteration's index
    of each dim, in order)?"""
    return len(ix) == len(dims) and all(i.op == K.INDEX and i.arg == d for i, d in zip(ix, dims))


def tile_bytes(chunks: int) -> int:
    """A tile's shared memory for rows of up to 2 x chunks + 1 points (a
    shifted row of `chunks` words and its head and tail): 16-byte pieces, and
    one more."""
    return -(-(32 * (TILE_VEC * chunks + 1) * 2 + 16) // 16) * 16


def tiles_smem(chunks: int) -> int:
    """Dynamic shared memory of a tiled block: two tiles a warp."""
    return TILE_BLOCK // 32 * 2 * tile_bytes(chunks)


def tile_pieces(chunks: int) -> int:
    """The 16-byte pieces a lane copies of a tile at most (32 lanes a piece each)."""
    return -(-(32 * (TILE_VEC * chunks + 1) * 2) // (16 * 32))


def _dense(t, extents: list[int]) -> bool:
    return list(t.shape) == list(extents) and t.is_contiguous() and t.data_ptr() % 16 == 0


def tiles_ok(kern: Kernel, ins: list, outs, extents: list[int]) -> bool:
    """Can a launch stage its rows in tiles: the staged input and the full
    output dense rows of the launch's extents (contiguous, 16-byte aligned;
    `outs` None: new contiguous outputs)?"""
    got = tile_slots(kern)
    if got is None or not TILE_ROWS:
        return False
    a, s = got
    if not _dense(ins[a], extents):
        return False
    return outs is None or _dense(outs[s], extents)
