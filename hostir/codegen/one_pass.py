"""The threads of a one-pass row (a row sum, a max, a var_mean: rows no pass
keeps), the batches its threads load their vectors in, and the blocks few such
rows are split over: the rules' constants (knobs a benchmark sets here),
row_threads and row_parts. The rows held in registers or
shared memory, split over clusters or looped over are codegen/rows.py's."""
from __future__ import annotations

from . import rows


ROW_WORK = 4
"""Vectors (or points) a thread of a one-pass row (a row sum; rows no pass
keeps) of a warp or more takes at most (row_threads): more threads a row, more
rows' loads in flight. H100 % of copy, same run, 16 / 8 / 4: row sum fp32
67108x1000 97.3 / 97.4 / 100, bf16 16380x4097 91.0 / 94.4 / 97.2."""


ROW_WORK_LONG = 16
LONG_FROM_THREADS = 1024
SEVERAL_FROM_THREADS = 512
"""A one-pass row that ROW_WORK gives LONG_FROM_THREADS threads (a kernel of
SEVERAL_REDUCTIONS reductions or more, a var_mean: SEVERAL_FROM_THREADS) or
more takes the fewest threads of up to ROW_WORK_LONG vectors each (0: off):
fewer block barriers and more rows at once an SM. ncu, H200, var_mean bf16
7746x8663 at 512 threads (2.1 vectors a thread): 0.85 warps issued a
scheduler, 57 % DRAM, 5364 instructions a row (two reductions' shuffles
and block combines, three divisions). H200 % of copy, same run, var_means
at up to 4 (the rule then) / 8 / 16 / 32 vectors a thread: bf16 7746x8663
62.2 / 76.6 / 81.0 / 80.1 (128 threads at 16), 1766x37992 74.3 / 75.1 /
84.0 / 87.1, 1067x62841 78.6 / 79.7 / 81.8 / 80.6, 4096x16384 92.4 / 93.5 /
93.6 / 91.1; fp32 3000x20000 91.4 / 91.4 / 98.8 / 99.8, 3976x16875 84.0 /
84.1 / 90.9 / 91.0; fp16 1373x48843 81.0 / 81.9 / 82.8 / 79.3; but rows of
256 threads or fewer lost: bf16 16384x4096 (128 threads of 4) 92.7 / 90.6
/ 86.4, 32768x2048 90.6 / 88.5 / 88.6 (16384x8192, 256 threads, 100 / 101
/ 98.5 / 94.1, keeps 256). One reduction, next run, 4 / 16 from 512
threads: row max fp32 3027x22163 83.0 / 96.0 (torch.compile 74.7; 90.1 in
another run), row sum bf16 2735x24536 93.5 / 96.0, fp16 1373x48843 90.0 /
94.6, fp32 6311x10632 101 / 102, 3947x17000 102 / 101, bf16 7746x8663 82.2
/ 92.3, but fp32 8192x8191 (512 threads of 4, full) 102 / 96.2: rows of
1024 threads only."""
ROW_WORK_LONGER = 32
LONGER_FROM_THREADS = 1024
"""... and where that gives it LONGER_FROM_THREADS threads, it takes the
fewest of up to ROW_WORK_LONGER vectors each (0: off): half the threads,
twice the blocks an SM. H200 % of copy, 16 / 32, three runs: var_mean bf16
782x85811 (1024 threads at 16) 87.1 / 91.9, 85.2, 87.6 / 89.5 and 86.1, 88.2
/ 90.2; 800x83837 84.8, 85.5 / 87.5; fp16 700x100001 84.3, 84.7 / 85.5, fp32
600x50001 85.0, 86.3 / 87.1; row max bf16 800x80001 93.1, 94.5 / 96.2, row
sum fp32 600x50001 85.2, 85.8 / 88.9, bf16 712x94152 96.7, 97.4 / 96.3. Rows of 512 threads at 16 halved were mixed, so they keep
16: var_mean bf16 1719x39029 85.6 / 90.8, 1766x37992 86.2 / 90.2, row max fp32
2656x25259 88.7 / 96.2 (another run: 87.5 / 93.5), bf16 1954x34336 93.7 /
97.9; but var_mean fp16 1373x48843 89.9 / 87.8 and 88.1, 90.4 / 85.5, bf16
1067x62841 88.3, 91.0 / 87.2, row max fp32 3027x22163 96.5, 96.8 / 94.9.
Rows of 256 threads or fewer at 16 lost at 32 (var_mean bf16 2500x25000 89.4
/ 79.6; 5264x12747, 128 threads at 16, 91.6 / 82.9), and so did a floor of
256 threads where 32 gives fewer (7746x8663 at 256 threads: 82.0 against
89.3)."""
SHORT_GROUP_WORK = 4
SHORT_GROUP_LEAST = 8
SEVERAL_GROUP_LEAST = 1
SEVERAL_REDUCTIONS = 2
SEVERAL_GROUP_WORK = 6
SHIFTED_GROUP_WORK = 6
"""A short row (rows.SHORT_ROW_WORK) in groups of SHORT_GROUP_LEAST threads or
more (of a kernel of SEVERAL_REDUCTIONS reductions or more, a var_mean:
SEVERAL_GROUP_LEAST) takes up to SHORT_GROUP_WORK vectors a thread (rows of
17 to 64 vectors in 8 or 16 threads, not 16 or 32; a var_mean's of 8 in 2,
not 4; 2: off). H200 % of copy, same run, a var_mean's groups of 8 or more / 1
or more (4 or more): var_mean bf16 1048576x64 67.8 / 75.3 (69.7), fp32
81.6 / 93.2 (93.1; torch.compile 89.3), fp16 69.5 / 75.5 (71.3), bf16
2097152x32 73.4 / 82.8 (74.1). H200 % of copy, same run, off / on /
off: var_mean bf16 164482x408 58.2 / 81.0 / 58.4 (torch.compile 59.3), fp32
262144x256 85.0 / 97.0 / 85.1 (94.4), row sum bf16 300000x200 87.4 / 95.0 /
88.1, row max bf16 300000x200 84.2 / 94.7 / 87.4, row sum fp16 466033x144
93.5 / 95.2 / 95.3; 8 others within 1.2. Every short row at 4 (rows of 16
vectors in 4 threads, not 8) had lost: row sum fp32 1048576x64 96.1 / 93.2.
A var_mean's groups take up to SEVERAL_GROUP_WORK (rows of shifted vectors:
SHIFTED_GROUP_WORK): its two reductions' shuffles and three divisions a row
spread over more vectors. H200 % of copy, same run, 4 / 6 / 8: var_mean
bf16 400000x160 74.5 / 82.6 / 81.6 (8 threads / 4 / 4), 164482x408 81.3 /
82.5 / 83.5, 1048576x64 81.5 / 82.4 / 67.7 (one thread at 8), fp32
466033x144 87.6 / 91.1 / 90.1, 1048576x64 93.5 / 94.7 / 88.7; shifted rows
(with the masked rows of cuda_row_shift.MASKED_ROWS), 4 / 6: var_mean fp32
203978x329 88.8 / 96.6, 466033x143 84.4 / 94.4, 1000000x37 78.0 / 81.0,
bf16 2000000x45 68.4 / 76.5, fp16 2000000x50 76.0 / 79.1, bf16 500000x123
80.8 / 81.7; but fp16 664444x101 79.5 / 71.1 and bf16 300007x77 48.9 / 43.5
(4 threads / 2: the rule's one loss, kept for the rest)."""
SHIFTED_WIDE_WORK = 12
SHIFTED_WIDE_FROM = 4
SHIFTED_WIDE_VEC = 8
"""... and shifted rows (vectors of SHIFTED_WIDE_VEC points or more: 2-byte
points) that those rules give more threads than SHIFTED_WIDE_FROM take the
fewest from SHIFTED_WIDE_FROM of up to SHIFTED_WIDE_WORK vectors each (0:
off): a var_mean's fixed work a row (two reductions' shuffles, three
divisions: ncu, H200, fp16 114325x587 at 32 threads, 286 instructions a
row, 0.79 warps issued a scheduler, 50 % DRAM) over fewer threads' groups
(rows of 17 to 48 vectors in 4 threads, 49 to 96 in 8, 97 to 192 in 16: not
8, 16, 32, 64 or 128). H200 % of copy, same run, off / 16 / 12: var_mean
fp16 444444x151 68.0 / 76.5 / 77.6, 227487x295 69.0 / 78.6 / 79.3,
114325x587 71.5 / 82.1 / 81.9, 44000x1525 84.2 / 86.3 / 86.4, 164082x409
82.8 / 78.0 / 81.0, 65000x1031 87.6 / 82.1 / 85.9 (16 and 12 the same
threads there: the run's noise), bf16 222955x301 72.3 / 79.5 / 79.4,
86370x777 82.0 / 82.0 / 85.6, 545600x123 84.6 / 85.6 / 85.4; fp16
664444x101 76.7 / 77.9 / 77.7, 330579x203 77.2 / 77.3 / 77.5 (threads
unchanged). fp32 rows (vectors of 4) keep theirs: 12 there lost as much as
it won (664444x101 92.4 / 89.6, 222955x301 94.3 / 89.4; 114325x587 86.9 /
91.6)."""
SHIFTED_NARROW_WORK = 4
"""... but shifted rows of 2-byte points (vectors of 8) that SHIFTED_GROUP_WORK
puts in groups of two threads or more take up to this many vectors a thread
(rows of 9 to 12 vectors in 4 threads, not 2; those of up to 6 stay in one).
H200 % of copy, same run, 6 / this rule (twice at 6): var_mean fp16
664444x101 67.5, 68.3 / 77.0, 600000x99 65.7, 66.7 / 75.0, bf16 700000x90
68.8, 70.2 / 72.8, 300007x77 53.3, 61.3 / 57.7; fp32 rows keep 6 (4 there:
466033x143 92.0 -> 83.7), as do rows of one thread (4 there: bf16
2000000x45 72.0 -> 67.0, fp16 2000000x50 76.0 -> 74.4)."""


def row_threads(reduced: int, batched: bool = False, reductions: int = 1, shifted: bool = False,
                vec: int = 1) -> int:
    """Threads that combine one row of `reduced` vectors (or points, unvectorized)
    in one pass: part of a warp for short rows (rows.SHORT_ROW_WORK a thread,
    SHORT_GROUP_WORK in groups of SHORT_GROUP_LEAST; several `reductions`,
    SEVERAL_GROUP_WORK in groups of SEVERAL_GROUP_LEAST, `shifted` rows
    SHIFTED_GROUP_WORK, of `vec` 8 in groups SHIFTED_NARROW_WORK), a warp up to 32 x
    ROW_WORK, more for long ones (about ROW_WORK a thread; up to ROW_WORK_LONG
    past LONG_FROM_THREADS threads, SEVERAL_FROM_THREADS for several `reductions`;
    ROW_WORK_LONGER where that leaves LONGER_FROM_THREADS or more).
    `batched` (a one-pass row read in vectors, each thread's loaded before their
    uses: ONE_PASS_BATCH): fewer threads, up to SHORT_ROW_MOST
    vectors each, where they leave SHORT_ROW_FILL more of their loads' slots
    filled (SHORT_ROW_FILL)."""
    several = reductions >= SEVERAL_REDUCTIONS
    group_work, one_work = (SEVERAL_GROUP_WORK if several else SHORT_GROUP_WORK), 0
    if several and shifted:
        group_work, one_work = (SHIFTED_NARROW_WORK, SHIFTED_GROUP_WORK) if vec >= 8 else (SHIFTED_GROUP_WORK, 0)
    t = _row_threads(reduced, ROW_WORK, SEVERAL_GROUP_LEAST if several else SHORT_GROUP_LEAST, group_work, one_work)
    if several and shifted and vec >= SHIFTED_WIDE_VEC and SHIFTED_WIDE_WORK:  # (SHIFTED_WIDE_WORK)
        t = min(t, next((n for n in rows.SHORT_ROW_THREADS
                         if n >= SHIFTED_WIDE_FROM and reduced <= SHIFTED_WIDE_WORK * n), t))
    if ROW_WORK_LONG and t >= (SEVERAL_FROM_THREADS if several else LONG_FROM_THREADS):
        t = _row_threads(reduced, ROW_WORK_LONG, SHORT_GROUP_LEAST, SHORT_GROUP_WORK)
        if ROW_WORK_LONGER and t >= LONGER_FROM_THREADS:
            t = _row_threads(reduced, ROW_WORK_LONGER, SHORT_GROUP_LEAST, SHORT_GROUP_WORK)
    if not (batched and rows.SHORT_ROWS and SHORT_ROW_FILL):
        return t

    def fill(n: int) -> float:
        return reduced / (n * -(-reduced // n))
    fewer = [n for n in rows.SHORT_ROW_THREADS if n < t and -(-reduced // n) <= SHORT_ROW_MOST]
    best = max(fewer, key=lambda n: (fill(n), n), default=t)
    return best if fill(best) >= fill(t) + SHORT_ROW_FILL else t


def _row_threads(reduced: int, work: int, least: int, group_work: int, one_work: int = 0) -> int:
    """The fewest threads of a row: short groups of up to `group_work` vectors
    a thread from `least` threads (rows.SHORT_ROW_WORK below; a thread alone
    `one_work` where given), else up to `work`."""
    if rows.SHORT_ROWS:
        t = next((t for t in rows.SHORT_ROW_THREADS
                  if reduced <= (one_work if t == 1 and one_work else group_work if t >= least
                                 else rows.SHORT_ROW_WORK) * t), 0)
        if t:
            return t
    for t in rows.ROW_THREADS:
        if reduced <= work * t:
            return t
    return rows.ROW_THREADS[-1]


ONE_PASS_BATCH = 4
"""One-pass rows (a row sum, a max, a var_mean) of fewer than 1024 threads: the
vectors a thread loads before it uses them (cuda_row_batches' _batch; 0:
`#pragma unroll 4`, whose main body needs 4 whole steps: a thread's 1 to 3
vectors, or 4 past a row's end, were read one load at a time). H200 % of copy, same run, unrolled /
batches (with SHORT_ROW_FILL): row sum fp32 167772x400 87.7 / 102, row max
fp32 78398x856 92.6 / 103, row sum fp16 100000x1000 88.7 / 101, bf16 16380x4097
(shifted) 85.7 / 93.8, var_mean fp32 65536x1000 85.7 / 99.0; short rows: row
sum fp32 466033x144 75.7 / 99.5, var_mean fp32 466033x144 54.5 / 82.7, bf16
400000x160 42.1 / 74.3. Batches of 2 (two round trips for 3 or 4 vectors)
lost: var_mean fp32 65536x1000 82.4, row sum fp32 167772x400 92.7."""
ONE_PASS_VECTORS = 8  # ... at most this many vector loads a batch
ONE_PASS_BOUNDS = True
"""... and such kernels ask for 2048 threads an SM (the printer's bounds)
where the batch's words fit FULL_OCCUPANCY_WORDS (cuda_row_batches'
_bounded_batch; a batch of several inputs' vectors takes the registers it
needs: not measured): a var_mean's 4 vectors took 47 registers without (5
blocks of 256 an SM). H200 % of copy,
same run, without / with (batches of 2 for short rows then): var_mean fp32
466033x144 55.2 / 66.0; others within 2 (var_mean bf16 16384x8192 93.4 / 90.1,
row sum bf16 300000x200 92.4 / 90.4)."""
ONE_PASS_PARTS_BOUNDS = False
"""... but not rows split over blocks (row_parts): at 32 registers their
kernels spilled the loaded batch (64-72 bytes; unbounded, 42-51 registers,
one block of 1024 an SM). H200 % of copy, same run, asked / not (torch.compile):
var_mean fp32 8x8388608 64.9 / 92.4 (87.8), bf16 62.6 / 80.6 (43.4); row sum
fp32 1x67108864 90.9 / 94.9 (95.2), 16x4194304 91.9 / 96.1 (70.5), row max
fp32 4x16777216 90.5 / 94.2 (74.0)."""
ONE_PASS_LONG_BOUNDS = True
"""... and rows of 1024 threads too (two blocks an SM: a var_mean's kernel took
42 registers, one block an SM). H200 % of copy, same run, without / with:
var_mean fp32 3000x20000 66.5 / 92.5, bf16 1766x37992 54.4 / 75.2, 1067x62841
71.4 / 82.6; row sums within 1.5."""
ONE_PASS_LONG = 8
ONE_PASS_LONG_WORDS = 28
"""One-pass rows of 1024 threads (past 4096 vectors) whose threads take more
than 4 vectors and up to ONE_PASS_LONG load them all at once, where those
vectors' words and 8 a reduction come to ONE_PASS_LONG_WORDS at most (a row
sum's 5 vectors; the launch picks the variant of their count:
spec.KernelSpec._long_batch; 0: batches of 4, cuda_row_batches.LOOP_BATCH_THREADS).
H200 % of copy, same run, batches of 4 / all at once: row sum fp32 3947x17000
(5 a thread) 87.9 / 102, bf16 5000x40000 (5) 102 / 106; but at two blocks an
SM a var_mean's spilled: fp32 3000x20000 (5) 92.5 / 74.3, bf16 1067x62841 (8)
82.6 / 26.6. A batch of 8 for every such row (4 or fewer a thread too) had
lost (one block an SM): row sum bf16 2735x24536 (3 a thread) 95.1 / 59.6,
fp32 8192x8191 85.4 / 47.0.
Since ROW_WORK_LONG, rows of 1024 threads take more than 8 vectors a
thread: this applies with ROW_WORK_LONG off only (a knob; at 512 threads,
batches of 4, row sum fp32 3947x17000 ran as fast: 102 / 101)."""


SHORT_ROW_MOST = 4
SHORT_ROW_FILL = 0.1
"""A one-pass row in batched vectors whose rule's threads leave many of their
last loads' slots empty (36 vectors over 32 threads: 36 of 64 slots) takes
fewer threads, up to SHORT_ROW_MOST vectors each, where that fills SHORT_ROW_FILL
more of the slots (16 threads: 36 of 48; 0: off). H200 % of copy, same run,
32 / 16 threads (4 a batch): row sum fp32 466033x144 77.2 / 99.4 (torch.compile
84.2), var_mean fp32 42.3 / 73.3 (80.9); var_mean bf16 400000x160, 16 / 8
threads: 51.0 / 64.1 (47.6)."""


ROW_PARTS = True
ROW_PARTS_WORK = 4
ROW_PARTS_ROWS = 8
"""One-pass rows (a sum, a max, a var_mean: no pass keeps the row, nothing
stored at every point) too few to fill an eighth of a wave of blocks (1 /
ROW_PARTS_ROWS) with a block a row are each split over several blocks, about
a wave in all, a part of ROW_PARTS_WORK vectors a thread at least; the
parts meet in the workspace and the row's last block combines them in a
fixed order (row_parts; cuda_row_combine._part_end). A block a row had run
a sum of 2^26 fp32 points on one SM. H200 % of copy, same run, a block a
row / parts (torch.compile): row sum fp32 1x67108864 2.97 / 92.5 (78.9),
16x4194304 43.8 / 94.4 (99.8), row max fp32 4x16777216 11.7 / 92.6 (76.4),
var_mean fp32 8x8388608 18.2 / 64.8 (69.9); but rows past an eighth of a
wave lost (half a wave, the rule then): row sum bf16 64x1048576 (4 parts)
92.6 / 81.4, var_mean bf16 100x655360 (2 parts) 93.4 / 56.6 (their kernels
then spilled at 32 registers: ONE_PASS_PARTS_BOUNDS). Rows of more
than a wave split so that the last wave fills (328 to 782 rows of 85811 to
204480 points: 2 to 4 parts) lost too, unspilled (var_mean fp16 328x204480
79.6 / 58.2, bf16 612x109504 76.7 / 63.2, row sum fp32 300x200000 99.4 /
72.0; 782x85811 85.2 / 87.1): parts of 6 to 12 vectors a thread."""


ROW_PARTS_POINTS = (4, 1 << 16)
"""... and rows off vector boundaries (shifted vectors: no parts) where they
are this few and this long at least, a point a thread (points_parted): a
block a row left all but 1 to 4 SMs idle (not measured split: a point a
load, as a row off vector boundaries takes where it cannot shift)."""


def points_parted(rows_count: int, points: int) -> bool:
    """Are rows off vector boundaries few and long enough (ROW_PARTS_POINTS)
    to split over blocks a point a thread, not to read in shifted vectors a
    block a row?"""
    return ROW_PARTS and rows_count <= ROW_PARTS_POINTS[0] and points >= ROW_PARTS_POINTS[1]


def row_parts(rows_count: int, vectors: int, threads: int, sm_count: int) -> int:
    """Blocks each of `rows_count` one-pass rows of `vectors` vectors (or
    points) in blocks of `threads` is split over (ROW_PARTS): as many as
    leave every row the same count within a wave of blocks (2048 threads an
    SM), where the rows take 1 / ROW_PARTS_ROWS of a wave or less; 1 elsewhere."""
    slots = sm_count * max(1, 2048 // threads)
    if not ROW_PARTS or rows_count < 1 or ROW_PARTS_ROWS * rows_count > slots:
        return 1
    return max(1, min(slots // rows_count, vectors // (threads * ROW_PARTS_WORK)))
