"""The row schedules of reduction and normalization kernels: how many threads
take a row and how much of it each keeps in registers or shared memory, or
loops over (KernelSpec._row_schedule and holds read these; a benchmark sets a
knob here and every rule sees it). The threads of a one-pass row (a row sum, a
var_mean) and their loads' batches are one_pass.py's."""
from __future__ import annotations


ROW_THREADS = (32, 64, 128, 256, 512, 1024)
PERSISTENT_POINTS = 16
"""Points of a row each thread of a persistent normalization keeps in registers
(PERSISTENT_POINTS // vector width vectors): 16 fit in 32 registers, so an SM
holds 2048 threads (cuda_schedules.FULL_OCCUPANCY asks the compiler for that).
Measured on an H100 (tune_reduction.py): layernorm bf16 16384x8192 ran at 88 %
of copy with 32 points a thread at 62 % occupancy; torch.compile's kernel keeps
16 at 100 %. Rows longer than 1024 threads' worth take more a thread, up to
PERSISTENT_MAX_CHUNKS vectors; longer rows than that loop over the row."""
REGISTER_ROW_POINTS = 24
"""... but a row that the registers of 1024 threads or fewer hold at that
(not a long row) aims at this many points a thread (register_row's
`chunks`): at 16, short rows spread over more lanes than they filled. H100 %
of copy, same run, 16 (twice) / 24 / 32 (PERSISTENT_POINTS then, which set
both): softmax bf16 200000x333 58.5, 58.4 / 92.9 / 93.6, rmsnorm bf16
400000x150 71.2, 71.5 / 86.3 / 86.2, 57309x1171 84.2, 85.5 / 94.3 / 94.3,
layernorm bf16 379146x177 65.7, 67.1 / 74.3 / 74.6, 699050x96 95.3, 96.2 /
98.1 / 98.2, fp32 65344x1027 96.9, 96.9 / 98.2 / 98.2, rmsnorm fp16
161708x415 84.8, 86.1 / 86.1 / 94.3; but 32 lost rows of 64 (softmax bf16
1048576x64 97.4, 98.4 / 98.4 / 90.8); 16 others of the sweep within the
run's order."""
REGISTER_SHIFTED_POINTS = 16
"""... and a row of 4-byte points off vector boundaries (a shifted variant,
whose head and tail points, shifts and weights take registers of their own)
at this many. H200 % of copy, same run, 24 / 16 (torch.compile): rmsnorm fp32
721600x93 (4 threads x 6 vectors, 52 registers / 8 x 3, 38) 64.1 / 89.5
(90.4), layernorm fp32 721600x93 65.9 / 82.4 (63.5), softmax 79.3 / 94.2
(72.1), rmsnorm fp32 200000x333 92.4 / 95.9 (92.0); next run: softmax fp32
677867x99 81.3 / 94.3, log-softmax fp32 201528x333 95.1 / 96.8, 5 other fp32
rows within 0.8. 2-byte rows keep 24: layernorm fp16 16380x4097 88.3 / 70.7
(others within 1). ncu on the rmsnorm at 24: 0.40 warps issued a scheduler,
13.5 of 22.6 cycles an instruction waiting on loads, 35 warps an SM."""
SHORT_SHIFTED_VECTORS = 128
SHORT_SHIFTED_POINTS = 8
"""... and one of SHORT_SHIFTED_VECTORS vectors of 4-byte points or fewer
(short_shifted) at SHORT_SHIFTED_POINTS (more threads a row, fewer
registers), its weights read a point at a time where it reads two or more
(spec: no funnel, FUNNEL_WEIGHTS). H200 % of copy, same run, before / 8
points / funnel off / both (torch.compile): rmsnorm fp32 1000000x61 (4 x 4
vectors / 8 x 2) 72.0 / 94.3 / 66.5 / 92.3 (91.9), softmax 76.8 / 94.8 / -
/ - (70.6), layernorm 78.8 / 79.5 / 75.2 / 93.3 (70.9); layernorm fp32
721600x93 (8 x 3 either way) 87.4 / - / 91.7 (64.2), 200000x333 88.7 / - /
91.8 (88.6), 300000x223 90.9 / - / 94.1 (91.4); rmsnorm fp32 721600x93 90.0
/ - / 91.3, 200000x333 95.5 / 95.5 / 95.1. Longer rows lost with either:
layernorm fp32 65344x1027 95.7 / 91.6 / 93.8 / 87.6, 5101x6577 90.0 / 90.1
/ 88.0 (rmsnorm fp32 65344x1027 96.9 / 98.4 / 96.9). A layernorm's from 20
vectors: row_widths.SHORT_SHIFTED_LONG."""


def short_shifted(vec: int, vectors: int) -> bool:
    """Is a shifted row of `vectors` vectors of `vec` points short
    (SHORT_SHIFTED_VECTORS: 4-byte points)?"""
    return vec <= 4 and vectors <= SHORT_SHIFTED_VECTORS


PERSISTENT_MAX_CHUNKS = 8
LOOP_ROW_THREADS = 512
LOOP_ROW_BYTES = 64 * 1024
LOOP_MIN_POINTS = 16385
LOOP_VECTORS = 4
"""The loop over a row of a normalization (rows read twice, the second time
from L1 or L2; _row_schedule): rows of LOOP_MIN_POINTS points and
more (past what registers hold: 16 points a thread of 1024), LOOP_ROW_BYTES at
most, about LOOP_VECTORS vectors of 16 bytes a thread, 128 to LOOP_ROW_THREADS
threads. Since a persistent row's first pass loads all its vectors before it
uses them (cuda_schedules.FIRST_LOADS_AHEAD), registers beat the loop on the
rows they hold (H100, % of copy, same run, loop / registers): layernorm fp32
16384x16384 96.1 / 100.4, 16384x8192 97.8 / 98.6; layernorm fp16 16384x16384
97.9 / 99.5; layernorm bf16 16384x8192 97.7 / 99.8, 16384x12288 95.8 / 98.1;
softmax bf16 16384x8192 96.3 / 99.8, 32768x4096 98.3 / 99.7 (one loss: layernorm
fp32 16384x5120 100.1 / 98.7); the loop stays for longer rows (shared memory
instead: rmsnorm bf16 4096x32768 98.8 / 86.5, layernorm 8192x20480 97.5 / 79.1).
Before that (rows from 4096 points looped), measured on an H100, % of copy:
- against the row in registers: layernorm bf16 16384x8192 98.7 % (90.8 %),
  32768x6144 93.6 % (85.1 %); layernorm fp32 16384x4096 99.8 % (90.8 %);
  softmax bf16 32768x4096 94.1 % (89.0 %), 16384x8192 93.3 % (86.2 %);
  rmsnorm bf16 16384x8192 100 % (99.9 %). But softmax fp32 16384x4096 93.5 %
  against 100.2 % in registers (4 vectors a thread there): a three-read kernel
  loops only where registers would hold fewer than LOOP_VECTORS vectors.
- threads: bf16 layernorm 16384x8192 at 256 threads 99.0 %, at 512 80.0 %;
  fp32 layernorm 8192x8192 at 4 vectors a thread 98.9 %, at 8 93.0 %.
- past LOOP_ROW_BYTES the rows in flight pass L2 (50 MB) between the reads:
  rmsnorm bf16 2048x65536 72 % looped against 87 % in shared memory,
  layernorm 512x262144 60 % against 68 %."""
REGISTER_LONG_WORDS = 16
"""A kernel that reads its row twice keeps rows past LOOP_MIN_POINTS (up to
LOOP_ROW_BYTES) in registers, 1024 threads a row, where the vectors a thread
holds at once take this many registers at most (row_loads.held_words):
two blocks an SM then fit 32 registers a thread. H100 bf16 % of copy, same
run, loop / registers: rmsnorm 8192x24576 94.4 / 99.4 (torch.compile 99.8);
but layernorm 8192x24576 (weight and bias: 20 words, 46 registers, one block
an SM) 96.5 / 82.8."""
FULL_OCCUPANCY_WORDS = 20
PART_OCCUPANCY_WORDS = 24
"""Persistent rows whose vectors a thread holds at once take this many
registers at most ask for 2048 threads an SM (cuda_schedules' bounds), more
for 1536 (40 registers), past PART_OCCUPANCY_WORDS for 1280 (48)."""
BOUNDED_POINTS = 32
BOUNDED_WORDS = 32
"""... and rows of more than PERSISTENT_POINTS points a thread, up to this
many, ask for 1536 (40 registers; without bounds a layernorm's 4 vectors of x,
a weight's and a bias's took 48 to 62: two blocks of 512 an SM, or four of
256). H200 % of copy, same run, none / 1536 (torch.compile): layernorm bf16
8192x16384 84.0 / 93.9 (94.7), 16384x8192 92.6 / 95.7, 21845x3072 90.5 / 93.4,
43690x1536 82.8 / 89.7, fp16 8192x12288 95.3 / 96.0, softmax bf16 10922x6144
97.8 / 98.5; softmax bf16 16384x8192 98.1 / 97.4, rmsnorm bf16 16384x8192 97.8 /
97.4 and four others within 0.4. At 1280 (two blocks of 512): layernorm
8192x16384 86.2, fp16 8192x12288 81.2.
Past PART_OCCUPANCY_WORDS, up to BOUNDED_WORDS, they ask for 1280 (48
registers; at 1536, 40 and 60 bytes of spill): layernorm fp32 88301x760, a
warp a row, 6 vectors of x a thread (32 words: 95 registers without bounds),
none / 1280 92.1 / 96.0 (torch.compile 96.6)."""
REGISTER_LONG_MOST = 24
"""... and up to this many where the row is off vector boundaries (a shifted
row: no launch bounds). H100 % of copy, same run, loop / registers (24 words
any row): layernorm bf16 2730x24577 61.7 / 69.4, 2219x30237 59.9 / 73.5,
2086x32167 60.1 / 74.9, rmsnorm fp16 2730x24577 82.7 / 84.6; layernorm bf16
8192x24576 (20 words) 92.0 / 88.8, fp16 3355x20000 (20 too) 87.2 / 93.0.
Rows on vector boundaries past REGISTER_LONG_WORDS loop: their one block of
1024 an SM (bounds past FULL_OCCUPANCY_WORDS; two blocks spill at 17-20) lost
on the H200 (same run, registers / loop: layernorm bf16 4096x32768 76.4 /
88.7, 2048x32768 74.6 / 86.2, 3000x30000 72.3 / 78.4), where on an H100
2048x32768 had run 91.1 / 87.5. (H200, shifted, registers / loop: layernorm
bf16 2730x24577 51.5 / 48.3, 2086x32167 56.7 / 49.6.)"""


REGISTER_ROWS = True
REGISTER_ROW_THREADS = (128, 512)
REGISTER_MAX_POINTS = 40
SHIFTED_ROW_THREADS = 256
SHIFTED_ROW_POINTS = 64
"""Shifted rows in 8-point vectors (2-byte) whose kernel asks no bounds (a
layernorm's weight and bias: cuda_row_shift.SHIFT_BOUNDS_WEIGHTS), held in
registers, take up to SHIFTED_ROW_THREADS threads a row, up to
SHIFTED_ROW_POINTS points a thread (register_row's `wide`). Without bounds
the compiler takes 53 registers at 512 threads x 4 vectors (two rows an SM;
the aligned twin's bounds, 40, spilled), 73 at 256 x 7 (three rows an SM).
H200 % of copy, same run, the rule off / on: layernorm bf16 5101x13155 67.9 /
83.4 (another run: 68.0 / 83.2), fp16 4000x16001 73.8 / 84.3, bf16 10000x7001
75.2 / 83.9 (128 x 7 against 256 x 4), 8000x10001 85.0 / 85.4, 13104x5121
within the run's spread (the same variant); a second run, with the weights
kept up to KEEP_NARROW_WEIGHTS_BYTES: bf16 6000x12001 66.8 / 87.5, fp16
6000x16001 75.9 / 87.9, bf16 10000x7001 77.6 / 88.6, 5101x13155 67.7 / 83.2
(and 86.6 with cuda_row_shift.SHIFTED_ROW_BOUNDS). Their weights kept in
dynamic shared memory past static's 48 KiB (57 KiB a block of 256 x 7) lost:
bf16 6000x12001 87.5 / 75.1, fp16 6000x16001 87.9 / 84.0 (5101x13155 83.2 /
84.3; tried, removed). A block a row asks 1024 threads an SM
(cuda_row_shift.SHIFTED_ROW_BOUNDS: 64 registers, where the compiler takes
72-74 at 7 or 8 vectors a thread, three blocks of 256 an SM; at 64 ptxas
spills none, sm_90), unbounded / asked, two runs: layernorm bf16 5101x13155
(256 x 7) 83.2 / 86.6, 83.4 / 86.6; fp16 6000x16001 (256 x 8) 87.9 / 90.0,
4000x16001 84.3 / 85.7; bf16 10000x7001 (128 x 7, 72 registers) 88.6 / 88.3,
83.9 / 83.0; rows of fewer vectors a thread take 64 or fewer unbounded (the
same occupancy either way). fp32 rows keep the rule off
(layernorm fp32 5101x6577 84.2 / 71.4: 128 x 13 vectors of 4), and so does
a row of 128 threads at most (REGISTER_ROW_THREADS): 128 x 13 lost (bf16
5101x13155 76.2, fp16 4000x16001 66.9)."""


def register_row(vectors: int, chunks: int, vec: int, wide: bool = False) -> tuple[int, int, int]:
    """(threads, vectors a thread, 0) of a row held in registers. A row longer
    than 64 threads hold at `chunks` vectors a thread: the fewest vectors left
    over, then the nearest to `chunks` vectors a thread (then the fewest
    threads), of REGISTER_ROW_THREADS threads and up to `chunks` vectors or
    REGISTER_MAX_POINTS points a thread. Otherwise (or without REGISTER_ROWS)
    the fewest threads that hold the row at `chunks` vectors each. H100, % of
    copy, this rule / the fewest threads at `chunks` (bf16: 2, fp32: 4):
    - softmax bf16 16384x6144 256x3 89.6 / 512x2 76.3; 16384x10240 256x5
      86.3 / 77.2; 32768x3072 128x3 87.7 / 256x2 79.5; log-softmax bf16
      16384x6144 90.0 / 78.2;
    - layernorm bf16 32768x1536: 64 threads x 3 ran at 79.3 against 91.7
      (128 x 2): 128 threads at least;
    - bf16 256 threads x 7 vectors (56 points): softmax 16384x12296 73.9,
      512 x 4 82.7.
    `wide`: a shifted row's threads that ask no bounds (SHIFTED_ROW_THREADS)."""
    lo, hi = REGISTER_ROW_THREADS
    most = REGISTER_MAX_POINTS
    if wide:
        hi, most = min(hi, SHIFTED_ROW_THREADS), max(most, SHIFTED_ROW_POINTS)
    fits = [(t * c - vectors, abs(c - chunks), t, c) for t in ROW_THREADS
            if lo <= t <= hi for c in [-(-vectors // t)]
            if c <= max(chunks, most // vec)]
    if REGISTER_ROWS and fits and vectors > chunks * 64:
        _, _, t, c = min(fits)
        return t, c, 0
    t = fuller_group(vectors, next(t for t in group_threads() if vectors <= chunks * t))
    if t == 2 * ROW_THREADS[0] and vectors <= ONE_WARP_CHUNKS * t // 2:
        t //= 2  # one warp a row (ONE_WARP_CHUNKS)
    return t, max(1, -(-vectors // t)), 0


ONE_WARP_CHUNKS = 4
"""A row that two warps would hold at the kept rows' vectors a thread, and
one warp at this many vectors a thread or fewer, takes one warp (2-byte rows
of 513 to 1024 points): its combines are shuffles alone, no block barrier,
and each thread has twice the loads in flight (0: off). H100 % of copy, same
run, off / 4 / 8: softmax fp16 87267x769 87.6 / 96.6 / 96.4, rmsnorm bf16
87267x769 81.8 / 86.7 / 86.7, layernorm bf16 87267x769 73.1 / 81.8 / 82.1,
rmsnorm bf16 67108x1000 95.7 / 96.5 / 96.3; rows of 512, 768, 1000 (fp32
too), 1027 and 3000 points within 0.6. Tried: such a row whose last vectors a
thread leave most of the warp idle (769 shifted points: 97 vectors of 8, 4 a
thread of 32, the fourth one thread's) in vectors half as wide, 7 a thread
(194 of 224): H100 % of copy, same run, 8 wide / 4 wide (twice): softmax fp16
87267x769 96.3 / 93.0, 95.1, rmsnorm bf16 86.5 / 89.3, 89.9, layernorm bf16
82.5 / 79.9, 82.0 (54 registers against 48); not kept."""


ROW_FILL_VECTORS = 5
ROW_FILL_GAIN = 0.1
ROW_FILL_LEAST = 8
"""A short row kept in registers (register_row: the fewest threads that hold
it at its `chunks` vectors a thread) takes fewer threads, ROW_FILL_LEAST at
least, up to ROW_FILL_VECTORS vectors (80 bytes) a thread, where that fills
ROW_FILL_GAIN more of its threads' slots (fuller_group; 0: off): 37 vectors of bf16 296
points in 8 threads of 5, 40 slots, not 16 of 3, 48. H200 % of copy, same
run, 16 x 3 / 8 x 5 (torch.compile): layernorm bf16 229040x296 79.9 / 87.1
(76.9), softmax bf16 229040x293 80.7 / 89.7, rmsnorm 80.3 / 82.9, layernorm
66.1 / 66.5; layernorm fp16 62660x1072 (64 x 3 / 32 x 5) 83.3 / 95.8, 1071
72.1 / 78.0; rows it leaves alone within 1.3 (layernorm bf16 87267x769,
fp32 88301x760); in the next run layernorm bf16 57309x1171 67.9 / 76.9 (64 x
3 / 32 x 5), softmax 83.0 / 92.0, but rmsnorm bf16 52428x1280 98.2 / 95.3
and 400000x150 (shifted: 18 whole vectors, 6 head and tail points) 77.0 /
72.8 in 4 threads of 5, not 8 of 3, where each thread takes up to 4 of the
row's head and tail points, not 1 (torch.compile 82.5): groups of
ROW_FILL_LEAST threads or more. (Measured as REGISTER_ROW_POINTS 40 for every row, which
also took rows of 64 from 4 threads of 2 to 2 of 4: that had lost on an H100,
softmax bf16 1048576x64 98.4 / 90.8.)"""


def fuller_group(vectors: int, t: int) -> int:
    """The threads of a group holding a short row of `vectors` vectors: `t`,
    or fewer (ROW_FILL_LEAST at least) where ROW_FILL_VECTORS a thread fill
    ROW_FILL_GAIN more of their slots (the fullest, then the most threads)."""
    def fill(n: int) -> float:
        return vectors / (n * -(-vectors // n))
    fewer = [n for n in group_threads() if ROW_FILL_LEAST <= n < t and -(-vectors // n) <= ROW_FILL_VECTORS]
    best = max(fewer, key=lambda n: (fill(n), n), default=t)
    return best if ROW_FILL_GAIN and fill(best) >= fill(t) + ROW_FILL_GAIN else t


def loop_threads(vectors: int) -> int:
    """Threads of a looped row: about LOOP_VECTORS vectors each, 128 to LOOP_ROW_THREADS."""
    t = 1 << max(0, (vectors // LOOP_VECTORS).bit_length() - 1)
    return max(128, min(LOOP_ROW_THREADS, t))


ONLINE_LOOP_THREADS = 256
"""Threads of the online softmax's looped rows (rows the plain kernel holds in
neither registers nor shared memory, up to LOOP_ROW_BYTES). Before a
persistent row's first pass loaded its vectors ahead, rows of 8192 to 16384
points that registers would hold with a quarter of their vectors idle took
this loop too (softmax bf16 16384x16384 85 % against 78 %); registers now
take them (H100 % of copy: softmax bf16 16384x12296 99.8, 16384x8704 100.5)."""
SMEM_ROW_CHUNKS = 8          # vectors a thread keeps of a row held in shared memory
SMEM_ROW_BYTES = 96 * 1024   # a block's share of such a row at most (two blocks an SM)
SMEM_SHIFTED_ROW_BYTES = 112 * 1024
"""... a shifted row's (rows off vector boundaries): what shared memory does
not keep stays in registers (SMEM_REST_WORDS), where a shifted row's head and
tail points and its funnelled weights already take theirs; at 32 registers a
thread (two blocks of 1024 an SM) the rest spilled, and with shared memory
taking the SM's L1 the spills went to L2 (rmsnorm bf16 568x118107: 36 bytes a
thread). H200 % of copy, same run, 96 / 112 KiB: rmsnorm bf16 568x118107 62.4
/ 70.1, 1024x65531 75.5 / 80.2, layernorm bf16 259x258961 52.3 / 59.0,
1024x65531 63.4 / 67.2, fp16 1031x65087 64.4 / 67.4; rmsnorm fp32 300x200001
71.6 / 70.5, softmax fp32 926x72471 76.0 / 76.0. Rows on boundaries keep 96
KiB (layernorm bf16 259x258968 66.3 / 62.1, rmsnorm bf16 1024x65536 90.5 /
91.5, 568x118112 77.4 / 77.4)."""
SMEM_PER_SM = 224 * 1024     # shared memory an SM's blocks share (an H100's 227 KiB, less the slots)
SMEM_ROW_PARTIAL = True      # keep part of a row in shared memory for more blocks an SM
SMEM_REST_WORDS = 16
"""A row kept in part in shared memory keeps the rest in registers where it
takes this many a thread at most (row_loads.rest_words), not read again
from L2 in each pass; its block copies the shared part by cp.async and loads
the rest, all before use (a block of SMEM_ASYNC_THREADS). H100, % of copy,
same run, the rest read again / in registers: softmax bf16 4096x65536 87.9 /
98.6, fp16 2048x65536 86.9 / 100.1, fp32 4096x32768 86.4 / 98.0 (torch.compile
87.8); rmsnorm bf16 2048x65536 95.0 / 98.9, layernorm 91.6 / 95.4."""
CLUSTER_ROWS = True
"""Rows of a kernel that passes over them more than once, past what one block
keeps in shared memory (and, for a softmax, past one block an SM:
SMEM_ROW_LONG_CHUNKS), split over a thread-block cluster of 2, 4 or 8 CTAs,
each keeping its share in shared memory and registers, two blocks an SM; the
CTAs combine their results through distributed shared memory
(spec.KernelSpec._cluster; HOSTIR_DISABLE=clusters). H100, % of copy, same
run, loop / clusters: bf16 rmsnorm 1024x131072 82.1 / 88.8, layernorm 77.5 /
82.3; 512x262144 softmax 68.5 / 82.8, log-softmax 69.1 / 84.8, rmsnorm 68.8 /
86.5, layernorm 65.4 / 79.9; softmax 256x524288 63.7 / 77.7; fp32 softmax
1024x131072 70.0 / 90.4, layernorm 64.3 / 87.7, 1024x65536 79.6 / 86.7,
softmax 512x262144 64.7 / 85.0; fp16 layernorm 1024x131072 78.5 / 82.7. Where
one block an SM keeps a softmax's row, it stays (bf16 2048x98304: 94.0, in
clusters of 2 69.0). A row split over a cluster is read in chunks of
its CTAs' threads (CTA q the q-th 1024 vectors of each): where its last chunk
is in part, the first CTAs take more of the row, and every CTA waits for them
at each cluster barrier: clusters only where the row fills CLUSTER_MIN_FILL of
its chunks (log-softmax bf16 1000x140000, 85 %: loop 75.7, clusters 73.3;
CLUSTER_MIN_FILL 0.9 then). At 0.8, H100 % of copy, same run, 0.9 (twice) /
0.8: layernorm bf16 984x68184 72.2, 72.4 / 78.1, softmax fp16 388x172839 72.9,
73.6 / 77.8, bf16 386x173681 73.6, 73.7 / 76.9, rmsnorm bf16 1000x67000 79.5,
81.0 / 83.2; but softmax fp32 671x100000 88.6, 88.7 / 86.6; 17 other long
rows within the run's order.
CTAs that each take a contiguous part of the row lost: rmsnorm bf16
1024x131072 88.8 -> 83.8, layernorm 82.3 -> 70.4."""
CLUSTER_MIN_FILL = 0.8
CLUSTER_SIZES = (2, 4, 8)
ONLINE_CLUSTER_SIZES = (2, 3, 4, 8)
"""The CTAs a cluster that splits a row may have, in the order they are
tried; a softmax's (the rows the online kernel takes from the plain one:
ONLINE_KEPT) ONLINE_CLUSTER_SIZES. H200 % of copy, same run, (2, 4, 8) / (2,
3, 4, 8): softmax fp32 926x72472 66.6 / 78.1, 800x80000 71.2 / 79.4, bf16
400x160000 68.3 / 72.5, fp16 388x172839 66.8 / 72.8, log-softmax fp32
800x80000 76.7 / 83.8, bf16 441x151936 69.1 / 75.7 (rows of 4 or 8 within
0.3); but rows read twice in clusters of 3 lost: layernorm fp32 791x84840
77.8 / 74.6, rmsnorm fp32 800x80000 87.4 / 85.6, bf16 400x160000 77.8 /
77.5, layernorm fp16 400x160000 71.0 / 72.4. Clusters of 5 to 7 lost
wherever taken: layernorm bf16 259x258968 64.6 / 59.6 (5), rmsnorm 71.7 /
69.2, layernorm fp32 791x84840 77.8 / 66.4 (5). Tried, 2026-11-29 (H200, same
run): a softmax's clusters of 4 tried before 3 lost (log-softmax fp16
458x146480 77.2 / 69.0, softmax fp16 447x150000 74.3 / 67.2, fp32 800x80000
80.4 / 70.4); CTAs of 512 threads (4 an SM, up to 56 KiB a share in shared
memory, clusters of 8 where 1024-thread CTAs take 2 or 4) lost nearly
everywhere, 1024 / 512: rmsnorm bf16 512x131072 86.2 / 78.5, layernorm
77.9 / 71.5, fp32 791x84840 78.1 / 70.3, fp16 408x164368 70.4 / 66.0,
log-softmax bf16 403x166184 74.3 / 70.1 (the online kernel on 8: 71.6); but
rmsnorm bf16 568x118107 67.4 / 68.7, softmax fp32 671x100000 75.9 / 77.4."""
CLUSTER_DRAWN = True
"""A cluster variant of the plain kernel that copies no row ahead (shifted
rows: cuda_row_copies.draws_rows) launches the clusters the device runs at
once (cuOccupancyMaxActiveClusters), each drawing its next row from a ticket
counter as it goes (rank 0's thread 0 as the row starts, published at the
row's first cluster barrier: hir_next_row; spec.KernelSpec.grid). Before, the
grid had a cluster a row and the device launched the next cluster as one
ended. CTA timestamps (%globaltimer; H200, log-softmax fp16 458x146480, 79
clusters of 3 at once) showed each SM slot idle a median 2.1-2.9 us between
a CTA's end and the next one's start, against 10.7 us a CTA's row; the
resident clusters each taking rows b, b + clusters, ... (no draw) removed
that gap but lost: the rows' times vary by SM, and the last cluster ended 20
us after 90 % of the rows (8 us launched a row each). H200 % of copy, same
run, a cluster a row / drawn: layernorm bf16 259x258961 59.6 / 62.4, rmsnorm
bf16 568x118107 70.4 / 74.4, fp32 300x200001 70.3 / 78.2 (another run:
59.3 / 61.9, 70.5 / 74.7). Not kept where it lost, same runs:
- the online kernel's rows (a softmax's): log-softmax fp16 458x146480 77.3 /
  73.5, 860x146480 81.9 / 78.6, softmax fp16 447x150000 74.5 / 67.9, bf16
  256x262144 74.5 / 69.9, fp32 671x100000 76.1 / 75.9. Its timestamps: the
  slots' gaps gone (0.2 us), but each row took longer (a write phase 7.1 us
  against 5.2): the DRAM, not the launches, bounds it.
- drawn at the row's first cluster barrier, not as it starts (the atomic's
  wait then holds the barrier): log-softmax fp16 458x146480 70.6 / 73.5,
  rmsnorm bf16 568x118107 73.3 / 74.7, layernorm bf16 259x258961 61.4 / 61.9.
- the rows copied ahead (resident clusters already; the drawn row copied in
  the last pass), static / drawn: rmsnorm bf16 512x131072 86.5 / 81.4,
  layernorm bf16 1024x131072 82.7 / 76.8, 512x131072 81.2 / 75.1, 259x258968
  66.1 / 65.2, fp32 791x84840 76.7 / 75.4; and drawn with no copy ahead
  (ROW_AHEAD off), copied ahead / drawn, another run: rmsnorm bf16 512x131072
  87.2 / 83.9, fp16 264x254000 77.8 / 78.3, layernorm bf16 408x164368 68.4 /
  69.4. (rmsnorm fp16 264x254000's timestamps: 62 clusters of 4 at once take
  264 rows in 5 rounds, the fifth a quarter full; each CTA's row 17 us.)"""
STAMPS = False
"""A debugging aid, not a schedule: kernels whose rows take a block or a
cluster each stamp each row's start, first barrier and end (%globaltimer)
with its SM into a device array (kernels/hostir.cuh, hir_stamps), which
benchmarks/timeline.py reads back and summarizes (the SMs' slots idle between
rows, each phase's time, the tail). The stamps are extra stores: time the
kernels without them."""
BLOCK_DRAWN = False
"""Rows a block keeps in shared memory, a block a row (no cluster): the grid
the blocks the device runs at once (cuOccupancyMaxActiveBlocksPerMultiprocessor
x SMs), each drawing its next row as CLUSTER_DRAWN's clusters do (thread 0 as
the row starts, published at the row's first block barrier). Off: it lost
everywhere measured. H200 % of copy, same run, a block a row / drawn: softmax
bf16 4096x32768 95.2 / 89.9, log-softmax bf16 1024x131072 89.6 / 85.7,
rmsnorm bf16 2048x65536 94.0 / 90.3."""
CLUSTER_ONE_BLOCK = 12
"""Clusters whose CTAs take one block an SM each (a softmax's shares of this
many vectors a thread of 1024 or more, up to SMEM_ROW_LONG_CHUNKS; 0: none)
where no cluster of two blocks an SM holds the row (spec.KernelSpec._cluster).
H100 % of copy, same run, loop / these: softmax fp32 1000x100000 (13 vectors)
70.7 / 82.9, bf16 700x200000 (13) 68.9 / 75.6; but log-softmax bf16
1000x140000 (9) 76.4 / 74.5, softmax 75.4 / 71.4 (another run: 70.5, 67.4)."""
SMEM_ROW_LONG_CHUNKS = 16
"""Rows of a kernel that reads them three times (a softmax) of more than
SMEM_ROW_CHUNKS and up to this many vectors a thread of 1024 take one block
an SM: up to SMEM_PER_SM of the row in shared memory, the rest in registers
(SMEM_REST_WORDS), not a loop that reads the row again from L2. H100, % of
copy, same run, loop / one block: softmax bf16 1024x131072 82.1 / 87.9,
log-softmax 83.3 / 89.4, softmax bf16 2048x98304 83.5 / 94.4, log-softmax
2048x81920 82.2 / 96.3, fp16 1024x131072 83.0 / 90.6, fp32 1024x65536 81.9 /
94.7, fp32 2048x40960 78.4 / 97.2. Kernels that read the row twice keep the
loop: rmsnorm bf16 1024x131072 82.3 / 81.6, layernorm 78.0 / 73.8."""

SHIFTED_WEIGHTS = True
"""Rows off vector boundaries (launch_checks.shift_ok) read in shifted vectors
also where every row reads a weight or a bias (an rmsnorm's, a layernorm's): the
rows in vectors at their boundaries, the weight a point at a time (its vectors
would sit off their own boundaries; the shifted printer drops it from its vector
loads). Off, such rows are read a point at a time. H100 % of copy, same run,
off / on (torch.compile): rmsnorm bf16 16380x4097 62.4 / 99.1 (55.9), layernorm
bf16 13104x5121 48.8 / 79.6 (42.2) (`benchmarks/knobs.py --set
rows.SHIFTED_WEIGHTS=False,True`)."""

def shifted_vectors(points: int, vec: int) -> int:
    """The vectors a row of `points` off vector boundaries is scheduled by: its
    vectors wholly of the row, points // vec at most (its head and tail
    points are a point a thread: cuda_row_shift._edge_points), one at least
    (a row shorter than a vector: all head and tail). Before, every vector
    that holds a point of the row (one more, or two): H200 % of copy, same
    run, those / these: layernorm bf16 87267x769 61.6 / 74.9 (96 vectors: 3 a
    thread of a warp, not 4), rmsnorm bf16 87267x769 84.7 / 88.2, var_mean
    fp16 664444x101 50.3 / 67.6, layernorm fp32 65344x1027 85.3 / 91.3, bf16
    4096x4097 58.7 / 62.0; but layernorm bf16 13104x5121 73.8 / 69.7 (640
    vectors: 5 a thread of 128, not 3 of 256); 15 others within 1.2.
    (Shifted rows asking for occupancy in that run, cuda_row_shift's
    SHIFT_BOUNDS_WEIGHTS: softmax bf16 536870x125 77.8 / 82.1, but layernorm
    fp32 65344x1027 91.3 / 81.2, fp16 16380x4097 74.4 / 66.9; not taken then.)"""
    return max(1, points // vec)


ROW_WAITS = True
"""A row a block copies into shared memory by cp.async (cuda_row_copies.async_row)
commits each chunk's copies as a group, and its first pass waits for each
chunk's own group before it reads it, not for the whole row: the row's first
pass runs while its later chunks arrive. H100 % of copy, same run, off / on
(ROW_AHEAD off): softmax bf16 512x131072 77.5 / 80.2, 256x262144 77.6 / 78.2,
fp16 447x150000 72.1 / 72.9, rmsnorm bf16 256x262144 81.9 / 82.6; others
within 0.5."""
ROW_AHEAD = True
"""... and where a row is split over a cluster's CTAs, the clusters the device
runs at once (spec.KernelSpec.grid) each take several rows, the last pass
copying the cluster's next row into each slot as soon as it has read it
(cuda_row_copies.copies_ahead): the next row's reads fly while this row's last
pass computes and stores. Blocks that each keep a whole row lost with it (H100,
same run, off / on: softmax bf16 3072x32768 99.8 / 90.9, 2048x49152 99.3 /
86.3; 512x131072, one block an SM, 80.2 / 80.0): they take a block a row. H100 %
of copy, same run, off / on (ROW_WAITS on): rmsnorm bf16 512x131072 86.7 /
89.4, 256x262144 82.6 / 85.7, layernorm bf16 512x131072 79.6 / 81.3, softmax
fp16 447x150000 72.9 / 75.7, fp32 671x100000 79.6 / 80.8; but softmax bf16
256x262144 78.2 / 73.3, layernorm fp32 1024x65536 87.9 / 83.7, softmax bf16
512x131072 80.2 / 80.0. (H200: softmax fp32 671x100000 60.0 / 69.6, bf16
256x262144 64.0 / 60.9.) Tried with it: a softmax's kept rows in the online
kernel, a pair combine a point: H200 softmax fp32 3355x20001 91.1 -> 57.1,
bf16 512x131072 64.9 -> 60.3, fp16 447x150000 61.2 -> 38.9 (ncu: ALU 59 %,
issue 71 %); with a vector's pair and without ROW_AHEAD, they take it
(ONLINE_KEPT)."""
ROW_DOUBLE = False
"""Rows past what two blocks an SM keep (one block an SM, or clusters) split
over a cluster whose CTAs, one of 1024 threads an SM, each keep their share
whole in one of two buffers of shared memory and copy the cluster's next row
into the other at the start of each row (spec.KernelSpec._double;
cuda_row_copies._copy_next_row): the next row's reads fly through all of this
row's passes, where one buffer left an SM's reads idle while it computed (at
2^26 points, rows of 131072 bf16 points ran at 81 % of copy, 1024 such rows at
91.6: the first rounds, every SM computing at once, weigh less). It lost
everywhere: H100 % of copy, same run, off / on: softmax bf16 512x131072 78.1 /
59.2, 256x262144 76.3 / 54.6, rmsnorm bf16 512x131072 86.8 / 78.5, layernorm
fp32 1024x65536 82.3 / 74.9 (ncu, softmax bf16 512x131072: 30 clusters of 4,
169.6 us against 120.1, DRAM 43 % against 61 %: a row's share of 64 KiB is too
little work for its block and cluster reductions, each row's fixed wait)."""

ONLINE_KEPT = True
"""A softmax's rows that the plain kernel keeps in shared memory one block an
SM, or splits over a cluster, run the online kernel (spec.KernelSpec.kernel_for)
on the plain kernel's schedule: the max and the sum in the first pass, which
runs while the row arrives (ROW_WAITS), a vector's points a pair
(cuda_combine.ONLINE_VECTORS): the row is read from shared memory twice, not
three times, and one reduction across the block waits, not two; the rows the
plain kernel then had no reads in flight for shrink by one pass. Not with
ROW_AHEAD (cuda_row_copies.copies_ahead). H100 % of copy, same run, off / on:
softmax bf16 512x131072 78.4 / 82.8, 256x262144 72.7 / 80.9, fp32 671x100000
78.7 / 81.7, log-softmax bf16 512x131072 81.5 / 84.6; but fp16 447x150000
73.4 / 70.6 (its threads take 37 points a row, bf16 256x262144's 64, and ncu
found both issue-bound, each row's fixed instructions, chiefly the cross-warp
combine of pairs, weighing most where a row's points a thread are fewest: with
the warps' combine a tree of shuffles, cuda_row_combine's WARPS_TREE note, it
runs at 80.2); rows it does not take within 1.5 (the run's spread). With a pair
a point (ONLINE_VECTORS off) it had lost: 256x262144 60.5, fp16 447x150000
54.5."""

ONLINE_KEPT_CLUSTER = 4
"""... where the plain kernel's cluster has this many CTAs at most: rows it
splits over 8 (fp32 rows of 131073 to 262144 points, 2-byte rows to 524288)
keep the plain kernel, three reads from shared memory. H200 % of copy, same
run, online on 8 CTAs / plain / a loop (disable=clusters): softmax fp32
477x140472 37.7 / 62.0 / 62.8 (torch.compile 52.4, eager 45.2), 256x262144
54.8 / 68.7 / 62.4, log-softmax fp32 400x160000 42.7 / 70.1 / 61.7."""

SHORT_ROWS = True
SHORT_ROW_THREADS = (1, 2, 4, 8, 16)
SHORT_ROW_WORK = 2
"""Rows shorter than a warp's work take part of a warp each (hir_warp_reduce
over groups of 1 to 16 lanes): a one-pass reduction SHORT_ROW_WORK vectors
(or points) a thread, a kept row its chunks (register_row). A warp a row left
lanes idle: H100 % of copy (torch.compile), bf16 rows of 64 points: softmax
34.8 (92.1), rmsnorm 45.8 (91.6); fp32 row sum 1048576x64 57.1 (98.4), bf16
9586980x7 3.5 (87). Work 4 / 2 / 1 (H100, same run): row sum fp32
1048576x64 93.0 / 99.0 / 99.0, 3355443x20 98.8 / 100 / 73.0, bf16 9586980x7
83.1 / 85.2 / 55.4; rmsnorm bf16 1048576x64 96.3 / 97.3 / 98.3, softmax bf16
96.8 / 98.4 / 98.5, layernorm bf16 699050x96 94.5 / 95.7 / 96.2 (about 1 of
those the run's order: rows it leaves alone moved as much)."""

KEEP_WEIGHTS = True
KEEP_WEIGHTS_ROWS = 4096
KEEP_WEIGHTS_BYTES = 32 * 1024
KEEP_WEIGHTS_LOADS = 2
KEEP_WEIGHTS_BLOCK = 256
KEEP_NARROW_WEIGHTS_BYTES = 45 * 1024
"""Shifted rows (SHIFTED_WEIGHTS) kept in registers, at least KEEP_WEIGHTS_ROWS of
them: each block keeps what every row reads (a layernorm's weight and bias) in
shared memory (static, up to KEEP_WEIGHTS_BYTES a block, KEEP_NARROW_WEIGHTS_BYTES
where the weights are 2-byte floats), placed as shifted as
the block's rows start (point j at j + m_), so a vector of the row reads its
weights as one aligned vector from shared memory, not a point at a time from
global memory (16 scalar loads a vector of 8 points for a layernorm's two:
ncu, H100, layernorm bf16 13104x5121: L1 86 % busy, DRAM 56 %). The grid is
then what the device runs at once, a multiple of the vector (spec.grid): a
block's rows all start as far past a boundary, so it places the weights once;
a row that starts elsewhere places them again (cuda_row_shift, `kept_m_`).
Only where every point reads KEEP_WEIGHTS_LOADS weights or more, in blocks of
KEEP_WEIGHTS_BLOCK threads or more. H100 % of copy, same run, off / on:
layernorm bf16 13104x5121 (a weight and a bias; a row a block of 256) 81.4 /
86.5 and 82.2 / 86.2, 87267x769 (four rows a block of 256) 54.9 / 74.6; but
in blocks of 128 (a row each) layernorm fp16 16380x4097 85.4 / 82.0 and
rmsnorm bf16 16380x4097 (a weight) 95.8 / 85.3: ncu found the rmsnorm's
point loads no bottleneck (L1 70 % busy) and the kept variant waiting longer
on the rows' loads (long scoreboard 10.1 against 4.2 cycles an instruction,
0.48 issued warps a scheduler against 0.74; grid 1184 blocks against 16380),
not understood. (Tried and removed, 2026-11-28: where a block has as many
groups as a vector has points, placing the weights once before the first row
at every shift a row may start at, each row reading its shift's share, no vote
and no block barrier a row: H100, layernorm bf16 87267x769, default / every
shift / default 82.5 / 80.4 / 82.8 % of copy.) 2-byte weights up to 45 KiB a
block, not 32: H200 % of copy, same run, 32 / 45 / 32 again: layernorm bf16
57309x1171 82.1 / 85.2 / 83.6, fp16 62660x1071 81.2 / 84.5 / 81.3 (another
run: 80.6 / 84.8), bf16 229040x293 71.2 / 78.7 / 72.3 (71.6 / 78.5); but
fp32 weights at 33 KiB lost (layernorm fp32 65344x1027 95.9 / 85.4 / 95.8:
not understood)."""
KEEP_WEIGHTS_VEC = 8
"""... and rows in vectors of this many points or more (2-byte rows; the
measurements above). fp32 rows lost: H200 % of copy, same run, kept / not:
layernorm fp32 721600x93 (8 threads x 3 vectors) 82.0 / 87.7, 200000x333
88.5 / 89.0; at 4 threads x 6 vectors (then), a share a shift, 66.0 / 71.4."""
FUNNEL_WEIGHTS = True
"""... and, where that weight is read in 16-byte vectors, its shifted vector
funnel-shifted from the two aligned vectors around it (cuda_row_shift
_funnel_load, hir_funnel16; the weight's start must lie on a boundary), not
read a point at a time. Built because ncu on an H200 found layernorm bf16
13104x5121 with point loads at 83 % memory throughput (L1) against 36 % DRAM
(16 scalar loads a vector of 8 points); measured on an H100, off / on, % of
copy: layernorm bf16 13104x5121 79.7 / 77.9 (its kernel took 52 registers
against 48: four blocks of 256 an SM instead of five), rmsnorm bf16 16380x4097
99.1 / 99.3. Since weights are kept (KEEP_WEIGHTS), rows that do not keep them
read them funnel-shifted, where their vectors start at boundaries (else a
point at a time: spec.Variant.funnel). H100 % of copy, same run, off (twice) /
on: rmsnorm bf16 87267x769 84.1, 86.3 / 92.5; layernorm fp16 16380x4097
(blocks of 128: not kept) 83.1, 84.3 / 91.7."""


def group_threads() -> tuple[int, ...]:
    """The threads a row's group may have, fewest first."""
    return (SHORT_ROW_THREADS if SHORT_ROWS else ()) + ROW_THREADS


L2_ROW_BYTES = 40 * 1024 * 1024
"""The bytes of rows a looped kernel keeps in flight at most (an H100's L2: 50
MB), so that a row's later passes read it from L2 (resident_rows)."""


def resident_rows(row_bytes: int, block: int, sm_count: int) -> int:
    """The blocks (a row each at a time) a kernel that reads its rows again in
    later passes launches where the rows its SMs would hold by threads pass
    L2_ROW_BYTES: whole blocks an SM, at least one; 0 where no cap helps (even
    one row an SM passes it). H100 bf16, % of copy, a block of 1024 threads an
    SM against two: log-softmax 1024x131072 71.4 / 67.3, softmax 67.2 / 63.8,
    rmsnorm 81.0 / 71.4; rows of 262144 points (even one an SM passes L2):
    softmax 60.2 / 64.3, layernorm 67.0 / 69.2."""
    by_threads = max(1, 2048 // block)
    if by_threads * sm_count * row_bytes <= L2_ROW_BYTES:
        return 0
    per_sm = L2_ROW_BYTES // (sm_count * row_bytes)
    return per_sm * sm_count if per_sm else 0
