"""Reductions and normalizations beyond issue 11's listed shapes: rows of 64 to
262144 points (odd lengths among them: vocabularies of 32001, 50257, 151935;
rows no multiple of a vector, with and without a weight), inner and outer
reductions, bf16 / fp16 / fp32. Each case moves about `--elements` points of
input (2^26 by default). hostir vs torch eager vs torch.compile, one run,
contenders alternating, % of the copy bandwidth measured in the run.

    python benchmarks/reduction_shapes.py [--out DIR] [--only REGEX] [--elements N] [--small]
    python benchmarks/reduction_shapes.py --draw 24 [--seed S] [--no-compile]

`--only` keeps the cases whose name matches (say `--only "softmax|rmsnorm"`), so
a long sweep can be split over several calls. `--draw N` times N cases drawn
at random instead: a kind (the sweep's, row max, var_mean), a dtype, a row
length log-uniform over 64 to 262144 points, half of them no multiple of 8
(column sums: 8 to 65536 columns). They are new each run: shapes nobody
tuned for. It prints its seed (`--seed` draws the same cases again).
"""
from __future__ import annotations

import argparse
import random
import re
import time
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import COLUMNS, copy_bandwidth, measure, meta_for, write_results  # noqa: E402
from reduction import (column_sum_case, layernorm_case, log_softmax_case, rmsnorm_case,  # noqa: E402
                       row_sum_case, softmax_case)

from reduction import SHORT, TORCH, _rows  # noqa: E402
from reduction import mean_square_case, outer_sum_case, seed003_case, transpose_case  # noqa: E402

from hostir import DataType, FusionDefinition  # noqa: E402

BF16, F16, F32 = DataType.BFloat16, DataType.Half, DataType.Float


def row_max_case(r, c, dtype=F32):
    """The max of each row, in the input's dtype."""
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.max(_rows(fd, dtype), [1]))
    return (f"row max {SHORT[dtype]} {r}x{c}", fd, lambda x: x.amax(1),
            lambda d: [torch.randn(r, c, device=d, dtype=TORCH[dtype])], dtype.itemsize * (r * c + r))


def var_mean_case(r, c, dtype=BF16):
    """torch.var_mean over each row (correction 1), in fp32: two outputs a row."""
    with FusionDefinition() as fd:
        var, mean = fd.ops.var_mean(fd.ops.cast(_rows(fd, dtype), F32), [1], correction=1)
        fd.add_output(var)
        fd.add_output(mean)
    return (f"var_mean {SHORT[dtype]} {r}x{c}", fd, lambda x: torch.var_mean(x.float(), 1),
            lambda d: [torch.randn(r, c, device=d, dtype=TORCH[dtype])], dtype.itemsize * r * c + 8 * r)

# (case maker, dtype, row lengths): rows of each length, as many as --elements allows
# (softmax bf16 98304, fp32 40960: rows of 12 and 10 vectors a thread one block an SM
# keeps, which rows.ONLINE_KEPT moved to the online kernel; layernorm bf16 769, fp16
# 4097: rows off vector boundaries with a weight and a bias, rows.KEEP_WEIGHTS)
SWEEP = [
    (softmax_case, BF16, [64, 1000, 5121, 32001, 32768, 49152, 50257, 98304, 131072, 262144]),
    (softmax_case, F32, [48, 1000, 4097, 20001, 40960, 100000]),
    (softmax_case, F16, [768, 769, 150000]),
    (log_softmax_case, BF16, [32001, 131072, 151935]),
    (rmsnorm_case, BF16, [64, 769, 1000, 4097, 24576, 131072, 262144]),
    (layernorm_case, BF16, [96, 512, 769, 5121, 12288, 131072]),
    (layernorm_case, F32, [1000, 1027, 65536]),
    (layernorm_case, F16, [3000, 4097]),
    (row_sum_case, F32, [20, 64, 1000, 100000]),
    (row_sum_case, BF16, [7, 4097]),
    (column_sum_case, F32, [8, 64, 1000, 4096, 65536]),
    (column_sum_case, BF16, [96, 768, 4096, 5000]),
]


DRAWN = [(softmax_case, (BF16, F16, F32)), (log_softmax_case, (BF16, F16, F32)),
         (rmsnorm_case, (BF16, F16, F32)), (layernorm_case, (BF16, F16, F32)),
         (row_sum_case, (BF16, F32)), (column_sum_case, (BF16, F32)), (row_max_case, (BF16, F32)),
         (var_mean_case, (BF16, F16, F32))]


def drawn(n: int, seed: int, elements: int):
    """`n` cases drawn with `seed` (see the module's note)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        make, dtypes = rng.choice(DRAWN)
        dtype = rng.choice(dtypes)
        lo, hi = (3, 16) if make is column_sum_case else (6, 18)
        c = int(2 ** rng.uniform(lo, hi))
        c = c | 1 if rng.random() < 0.5 else max(8, c // 8 * 8)
        out.append(make(max(1, elements // c), c, dtype))
    return out


KINDS = {"softmax": softmax_case, "log-softmax": log_softmax_case, "rmsnorm": rmsnorm_case,
         "layernorm": layernorm_case, "row sum": row_sum_case, "column sum": column_sum_case,
         "row max": row_max_case, "var_mean": var_mean_case}
DTYPES = {"bf16": BF16, "fp16": F16, "fp32": F32}


# issue 11's other listed kinds (benchmarks/reduction.py), of one dtype and rank each
LISTED = {"mean of squares": (mean_square_case, "bf16", 2), "transpose": (transpose_case, "fp32", 2),
          "sum over [0, 1]": (outer_sum_case, "fp32", 3),
          "seed-003 full fusion": (lambda *shape: seed003_case(shape), "fp32", 3)}


def by_name(name: str):
    """The case a name this module or benchmarks/reduction.py prints stands
    for ("column sum fp32 1917396x35", "sum over [0, 1] fp32 16x512x4096": its
    shape as given), or None."""
    m = re.fullmatch(r"(.+) (bf16|fp16|fp32) (\d+(?:x\d+)+)", name.strip())
    if m is None:
        return None
    kind, dtype, shape = m.group(1), m.group(2), [int(e) for e in m.group(3).split("x")]
    if kind in KINDS and len(shape) == 2:
        return KINDS[kind](*shape, DTYPES[dtype])
    if kind in LISTED and LISTED[kind][1:] == (dtype, len(shape)):
        return LISTED[kind][0](*shape)
    return None


def cases(elements: int, only: str | None):
    out = []
    for make, dtype, lengths in SWEEP:
        for c in lengths:
            r = max(1, elements // c)
            case = make(r, c, dtype)
            if only is None or re.search(only, case[0]):
                out.append(case)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/out")
    ap.add_argument("--only", default=None, help="a regex: the cases whose name matches")
    ap.add_argument("--elements", type=int, default=1 << 26, help="input points per case")
    ap.add_argument("--small", action="store_true", help="2^14 points a case (a smoke run)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--draw", type=int, default=0, help="time this many cases drawn at random")
    ap.add_argument("--seed", type=int, default=None, help="the draw's seed (default: the time)")
    args = ap.parse_args(argv)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    elements = 1 << 14 if args.small or dev.type == "cpu" else args.elements
    bw = copy_bandwidth(dev)
    rows = []
    if args.draw:
        seed = args.seed if args.seed is not None else int(time.time()) % 100000
        drew = f"--draw {args.draw} --seed {seed}"
        print(f"drawn cases: {drew}", flush=True)
        todo = drawn(args.draw, seed, elements)
    else:
        drew, todo = None, cases(elements, args.only)
    for case in todo:
        rows.append(measure(case, dev, bw, args.rounds, use_compile=not args.no_compile))
        print(f"{rows[-1]['case']}: {rows[-1]['% copy']:.1f} % of copy, "
              f"vs compile {rows[-1].get('vs compile', float('nan')):.2f}", flush=True)
    meta = meta_for(dev)
    meta["copy GB/s"] = round(bw / 1e9, 1)
    if drew:
        meta["cases"] = f"drawn at random ({drew})"
    write_results(Path(args.out), "reduction_shapes", meta, rows, COLUMNS)


if __name__ == "__main__":
    main()
