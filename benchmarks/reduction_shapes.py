"""Reductions and normalizations beyond issue 11's listed shapes: rows of 64 to
262144 points (odd lengths among them: vocabularies of 32001, 50257, 151935;
rows no multiple of a vector, with and without a weight), inner and outer
reductions, bf16 / fp16 / fp32. Each case moves about `--elements` points of
input (2^26 by default). hostir vs torch eager vs torch.compile, one run,
contenders alternating, % of the copy bandwidth measured in the run.

    python benchmarks/reduction_shapes.py [--out DIR] [--only REGEX] [--elements N] [--small]

`--only` keeps the cases whose name matches (say `--only "softmax|rmsnorm"`), so
a long sweep can be split over several calls.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import COLUMNS, copy_bandwidth, measure, meta_for, write_results  # noqa: E402
from reduction import (column_sum_case, layernorm_case, log_softmax_case, rmsnorm_case,  # noqa: E402
                       row_sum_case, softmax_case)

from hostir import DataType  # noqa: E402

BF16, F16, F32 = DataType.BFloat16, DataType.Half, DataType.Float

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
    args = ap.parse_args(argv)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    elements = 1 << 14 if args.small or dev.type == "cpu" else args.elements
    bw = copy_bandwidth(dev)
    rows = []
    for case in cases(elements, args.only):
        rows.append(measure(case, dev, bw, args.rounds, use_compile=not args.no_compile))
        print(f"{rows[-1]['case']}: {rows[-1]['% copy']:.1f} % of copy, "
              f"vs compile {rows[-1].get('vs compile', float('nan')):.2f}", flush=True)
    meta = meta_for(dev)
    meta["copy GB/s"] = round(bw / 1e9, 1)
    write_results(Path(args.out), "reduction_shapes", meta, rows, COLUMNS)


if __name__ == "__main__":
    main()
