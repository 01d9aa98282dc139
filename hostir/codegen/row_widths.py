"""The widths a row off its vector boundaries is read in, other than its
kernel's shifted vectors (spec.KernelSpec.choose asks these first): a point a
load (POINT_ROWS: an rmsnorm's short fp32 rows), unshifted narrower vectors
(NARROW_ROWS: a layernorm's rows on 8-byte boundaries), shifted vectors of
half the width (HALF_SHIFT_POINTS: short 2-byte rows), 4-byte words, a
warp a row, several rows a warp at once (WORD_ROWS: 2-byte rows on word
boundaries). A benchmark sets a knob here (`row_widths.X`) and every rule
sees it. The rows' threads are rows.py's (register_row, KernelSpec._row_schedule at the width chosen)."""
from __future__ import annotations

from . import rows


NARROW_ROWS = (448, 1024)
NARROW_ROW_BYTES = 8
NARROW_SPAN_BYTES = 256
"""Rows of a kernel that reduces in its first pass only (a layernorm, an
rmsnorm), off the boundaries of its 16-byte vectors, of more than
NARROW_ROWS[0] and up to NARROW_ROWS[1] bytes (of the points at the kernel's
vector width: 16 bytes a vector), whose tensors are aligned
for vectors of a half or a quarter of the width, of NARROW_ROW_BYTES bytes
or more, read in those (fp32 rows of 150 points: 8-byte vectors; bf16 of
252), not in shifted vectors, by threads enough that each load of a row's
threads reads NARROW_SPAN_BYTES (32 threads a row of 8-byte vectors: not a
sector each few threads). H200 % of copy, same run, shifted / narrow:
layernorm fp32 400000x150 89.2 / 94.6, 330000x198 81.4 / 96.8, 250000x254
88.7 / 96.3 (torch.compile 93.0, 94.8, 93.7), layernorm bf16 262144x252
78.0 / 80.8-83.3. Not kept, below NARROW_ROWS[0]: layernorm fp32 1000000x62
94.3 / 66.1, 800000x78 92.9 / 71.3, 600000x102 86.0 / 84.8, rmsnorm bf16
1000000x60 79.2 / 62.2, layernorm bf16 600000x100 74.6 / 49.5; above
NARROW_ROWS[1]: layernorm fp32 130000x510 94.5 / 92.3, rmsnorm fp32
65344x1026 96.8 / 95.6 (but layernorm bf16 65344x1020 82.2 / 88.8). Narrower
vectors a thread, 4 bytes (NARROW_ROW_BYTES 4), lost: rmsnorm bf16
400000x150 79.2 / 54.5 (8 threads a row), 81.2 (16), 45.6 (64), rmsnorm bf16
1000000x62 71.7 / 36.9 (4 threads a row; ncu: 62 % of the sectors
excessive), 73.0 (16); layernorm bf16 1000000x62 65.1 / 58.1 (16), softmax
bf16 800000x78 77.2 / 66.4, rmsnorm fp16 500000x130 88.2 / 79.3; so did a
softmax's rows (a reduction in its second pass): softmax fp32 500000x126
95.8 / 90.4."""


HALF_SHIFT_LEAST = 40
HALF_SHIFT_POINTS = 96
"""Rows of 2-byte points of a kernel of several passes, of more than
HALF_SHIFT_LEAST and up to HALF_SHIFT_POINTS points, off the boundaries of
4-point vectors too, read in shifted vectors of 4 points (8 bytes: a head
and tail of 6 points at most, not 14, so fewer a thread), not of 8; at 4
points a vector they take the short 4-byte rows' rules (SHORT_SHIFTED_POINTS:
2 vectors a thread; a layernorm's two weights a point at a time; an
rmsnorm's one funnel-shifted: hir_funnel8). H200 %
of copy, same run, 8 / 4: rmsnorm bf16 1032444x65 67.0 / 75.0, 1000000x62
72.2 / 75.3, rmsnorm fp16 1000000x45 46.4 / 56.0, softmax fp16 700000x93
72.9 / 80.1, softmax bf16 800000x77 70.8 / 74.0, layernorm bf16 1000000x61
58.1 / 59.7. Not kept: layernorm bf16 1000000x37 40.5 / 37.0, log-softmax
bf16 600000x111 84.7 / 73.4, rmsnorm bf16 400000x150 79.1 / 76.1, layernorm
bf16 250000x254 79.4 / 60.3, row sum bf16 400000x151 93.5 / 83.0; rows on
4-point boundaries in unshifted vectors of 4: rmsnorm bf16 1000000x60
79.2 / 62.2."""


HALF_ALIGNED_POINTS = 128
HALF_ALIGNED_WEIGHTS = 1
"""Rows of 2-byte points of a kernel that reduces in its first pass only
and reads HALF_ALIGNED_WEIGHTS weights or fewer (an rmsnorm), of more than
HALF_SHIFT_LEAST and up to HALF_ALIGNED_POINTS points, off the boundaries
of 8-point vectors but on those of 4-point ones (a row of 60: 120 bytes),
read in unshifted vectors of 4 points, two a thread (a row of 60: 8 threads
a row, no head or tail points), not in shifted vectors of 8 (spec_rows
_half_aligned). H200 % of copy, same run, shifted 8 / unshifted 4
(torch.compile): rmsnorm bf16 1000000x60 79.3 / 87.4 (68.1; 80-88 in
other runs), 1000000x44 64.8 / 79.8 (67.8), 500000x124 86.3 / 92.7 (88.9),
rmsnorm fp16 700000x84 81.7 / 82.9 (90.6). Not kept: a layernorm's (two
weights: bf16 900000x68 70.9 / 51.9, 600000x100 74.5 / 71.8, but fp16
500000x124 76.5 / 80.8) and a softmax's (a reduction in its second pass:
bf16 700000x92 82.4 / 73.7, log-softmax 600000x116 85.5 / 84.9). The
next run, the rule's tree (d8f2fa8), off / on (torch.compile): rmsnorm bf16
1000000x60 79.3 / 85.6 (86.6: still behind), 1000000x44 65.7 / 77.5,
800000x52 67.8 / 80.1, 500000x124 86.1 / 90.0, 700000x76 77.9 / 76.5, fp16
600000x100 82.2 / 86.6, 700000x84 82.6 / 82.7."""


POINT_ROWS = 224
POINT_ROWS_LEAST = 56
POINT_ROW_POINTS = 7
"""Rows of 4-byte points off vector boundaries, of more than
POINT_ROWS_LEAST and up to POINT_ROWS points, of a kernel that reduces
once, in its first pass only (an rmsnorm), held in registers a point a load
(vector width 1: scalar loads, coalesced over the row's threads), about
POINT_ROW_POINTS points a thread (register_row), where the row tensors are
contiguous along the row; not in shifted vectors. H200 % of copy, same run,
shifted / points: rmsnorm fp32 1000000x62 94.8 / 96.1, 1000000x65 94.4 /
96.6, 800000x77 90.3 / 97.1, 721600x93 90.0 / 96.3-96.7, 600000x101 93.7 /
96.4, 528000x127 95.6 / 96.7, 400000x150 87.9 / 97.7, 379000x177 95.2 /
97.7, 300000x199 93.3 / 96.3 (torch.compile 89-96.6). Not kept: 8 points a
thread (rmsnorm fp32 528000x127 91.5, 590000x113 91.0 against 94.7); rows
past 224 (291000x230 95.9 / 89.9, 263000x255 96.7 / 92.3; 333 to 769
points within 1); layernorms and softmaxes (two reductions: layernorm fp32
800000x77 92.6 / 83.3, 200000x333 91.2 / 82.7, softmax fp32 800000x77 94.4
/ 84.2, 500000x127 95.3 / 84.2); 2-byte rows (layernorm bf16 1000000x61
57.3 / 38.6, softmax fp16 130000x509 94.9 / 67.7)."""


WORD_ROWS = ((2, 3), (1, 16), (2, 16))
WORD_ROWS_FILL = 0.75
WORD_ROW_STACK = ((1, 16), (4, 4), (8, 2), (16, 1))
WORD_ROW_BLOCK = 128
WORD_ROWS_QUAD = False
WORD_ROWS_PASSES = False
WORD_ROWS_HOLD = 16
"""Rows of 2-byte points on 2-point (4-byte) boundaries but off 8-point ones,
of a kernel that reduces in its first pass only (WORD_ROWS_PASSES: any
kernel), of K words of 32 threads, K in WORD_ROWS's range for the kernel's
weights (none, one, two or more: a row sum 2-3, 65-192 points; an rmsnorm
1-16, 33-1024; a layernorm 2-16, 65-1024), the row's words filling
WORD_ROWS_FILL of the K x 32 at least, read in 4-byte words, K a thread, a
warp a row, unshifted (no head or tail points), each warp taking several
rows at once (WORD_ROW_STACK: (K at most, rows): 16 at K 1, 4 up to 4, 2 up
to 8, 1 up to 16), every row's loads before any row's uses, the rows'
combines in turn (cuda_row_stack), in blocks of WORD_ROW_BLOCK threads, a
block's rows once (the full grid); each thread's words of the weights read
once before its rows and held in registers across them (spec.Variant.hold)
where they take WORD_ROWS_HOLD words or fewer (an rmsnorm's up to 16 words a
thread, a layernorm's up to 8), else read for each row (from L1); rows on
4-point boundaries too where WORD_ROWS_QUAD (else their own rules:
HALF_ALIGNED_POINTS, NARROW_ROWS). H200 % of copy, same run, shifted / words
(torch.compile), 2026-12-01 (twenty-fourth session, weights read each row):
rmsnorm bf16 532610x126 79.4 / 89.0 (69.4), 353204x190 88.2 / 89.6 (83.6),
fp16 532610x126 88.6 / 91.3 (87.1); layernorm bf16 264208x254 78.2 / 83.1
(71.8), 250000x254 77.8 / 82.3 (75.1), fp16 264208x254 80.1 / 85.6 (69.3).
Twenty-fifth, weights held (the ranges widened with them; before, an
rmsnorm's 2-3, a layernorm's 4): words reread / held: rmsnorm bf16
532610x126 91.1 / 93.0, 353204x190 88.6 / 90.8, fp16 532610x126 91.3 / 93.2
(87.1-87.9); shifted / held: rmsnorm bf16 264208x254 89.6 / 91.8 (84.2),
200000x318 86.4 / 93.0 (80.0), 150000x446 88.2 / 90.3, 131586x510 92.6 /
93.8 (92.7), 92820x722 92.7 / 93.2 (85.2), 65344x1022 91.5 / 93.0 (86.2);
layernorm bf16 532610x126 76.6 / 81.7 (60.7), 353204x190 82.2 / 87.1 (78.9),
250000x254 83.8 (words, reread) / 89.6 (88.9), 200000x318 81.0 / 89.2
(66.9), 131586x510 77.7 / 89.2 (71.3), fp16 131586x510 78.8 / 92.4 (86.5);
shifted / words reread / held: layernorm bf16 87266x770 83.8 / 87.0 / 66.1
(72.2), 65344x1022 82.3 / 86.5 / 64.1, fp16 87266x770 83.9 / 87.5 / 66.9,
130000x578 85.4 / 88.6 / 81.7 (a layernorm's 26-32 weight words: 104-146
registers). One lost: layernorm fp16 264208x254 85.7 (reread) / 82.6 (held;
torch.compile 76.3-87.5 in these runs). An rmsnorm's rows of a word a
thread, 16 rows a warp, shifted / words: bf16 1000000x62 75.3 / 80.8 (76.5;
the next run 80.3, 79.0), 1000000x58 71.7 / 78.0 (76.1; 78.2, 81.9),
1000000x50 65.5 / 70.0 (69.3; 70.3, 78.0), fp16 1000000x62 73.1 / 81.2
(84.7; 80.9, 83.1); 4, 8 and 32 rows a warp lost (bf16 x62 76.1, 73.3, 72.4;
fp16 x62 75.9, 83.0, 60.7), blocks of 64 threads lost on some (fp16 x62
71.7, bf16 532610x126 78.1 against 93.2) and of 256 tied; a layernorm's lost
(bf16 1000000x62 60.6 / 50.0, fp16 1000000x58 58.1 / 47.5). Held on a grid
of the device-resident blocks, each taking rows in turn, they lost: rmsnorm
bf16 532610x126 90.3 / 78.4 (the reread rows so too: 91.0 / 75.1). Not kept
(the ranges, rows read each row): rmsnorm K 4 and 8 (x254 90.0 / 88.3, x510
90.3 / 86.1), layernorm K 2-3 (x126 76.9 / 72.4); short of the fill: rmsnorm
bf16 1000000x66 79.4 / 67.6 (33 words of 64). Not kept either: a softmax's
rows (PASSES; bf16 264208x254 94.8 / 90.6, fp16 532610x126 91.4 / 82.5, log-
softmax bf16 353204x190 90.6 / 85.1), rows on 4-point boundaries (QUAD;
rmsnorm bf16 266305x252 92.7 / 89.1, layernorm bf16 262144x252 83.2 / 83.4)."""


SHORT_SHIFTED_LONG = 20
SHORT_SHIFTED_LONG_POINTS = 16
"""A short shifted row (rows.SHORT_SHIFTED_POINTS: 8 points a thread) of
SHORT_SHIFTED_LONG vectors or more (0: none) of a kernel of two weights or
more (a layernorm's, read a point at a time) aims at
SHORT_SHIFTED_LONG_POINTS a thread (short_points). H200 % of copy, same
run, 8 / 16 (torch.compile): layernorm fp32 600000x102 (16 x 2 / 8 x 4) 84.3 / 92.2
(76.2), 263000x255 (32 x 2 / 16 x 4) 88.6 / 93.8 (91.7), 528000x127 94.4 /
90.6 (79.4), bf16 789516x85 63.7 / 64.0, fp16 700000x95 71.4 / 71.9. Not
for one weight or none: rmsnorm fp32 263000x255 97.0 / 94.0, softmax fp32
664444x101 91.0 / 93.5, 528000x127 95.7 / 92.9."""


def short_points(vectors: int, weights: int) -> int:
    """The points a thread a short shifted row of `vectors` vectors of a
    kernel of `weights` weights aims at (rows.SHORT_SHIFTED_POINTS, SHORT_SHIFTED_LONG)."""
    return SHORT_SHIFTED_LONG_POINTS if SHORT_SHIFTED_LONG and vectors >= SHORT_SHIFTED_LONG and \
        weights >= 2 else rows.SHORT_SHIFTED_POINTS
