"""Tuning sweep for generated pointwise kernels — threads per block, evict-first
stores, programmatic dependent launch — beside torch.compile, timed in
alternating batches in one run. Each setting gets its own FusionDefinition,
planned under `config.override` (plans keep the knobs they were made with).

    python benchmarks/tune_pointwise.py [--out DIR] [--small]
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import copy_bandwidth, meta_for, time_interleaved, write_results  # noqa: E402
from pointwise import case_makers  # noqa: E402

from hostir import config  # noqa: E402


def configs():
    for block, streaming, pdl in itertools.product((128, 256, 512), (False, True), (False, True)):
        label = f"b{block}{' cs' if streaming else ''}{' pdl' if pdl else ''}"
        disable = config.get().disable - {"pdl"} if pdl else config.get().disable | {"pdl"}
        yield label, {"block": block, "streaming": streaming, "disable": disable}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/out")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    bw = copy_bandwidth(dev)
    rows = []
    cfgs = list(configs())
    for make in case_makers(args.small or dev.type == "cpu"):
        name, _, eager, make_inputs, nbytes = make()
        inputs = make_inputs(dev)
        ref = eager(*inputs)
        fns = []
        for label, knobs in cfgs:
            fd = make()[1]
            with config.override(**knobs):  # the plan is made here and keeps these knobs
                (got,) = fd.execute(inputs)
            torch.testing.assert_close(got.float(), ref.float(), rtol=2e-3, atol=2e-3)
            fns.append(lambda fd=fd: fd.execute(inputs))
        labels = [c[0] for c in cfgs]
        try:
            torch._dynamo.reset()  # a static compile of this case alone
            compiled = torch.compile(eager, dynamic=False)
            compiled(*inputs)
            fns.append(lambda: compiled(*inputs))
            labels.append("torch.compile")
        except Exception as e:
            print(f"torch.compile unavailable: {type(e).__name__}: {e}", file=sys.stderr)
        times = time_interleaved(fns, dev, rounds=args.rounds)
        row = {"case": name}
        for label, t in zip(labels, times):
            row[label] = 100 * nbytes / t / bw
        rows.append(row)
        del inputs, ref, fns
    meta = meta_for(dev)
    meta["copy GB/s"] = round(bw / 1e9, 1)
    meta["figures"] = "% of copy bandwidth, median of alternating batches"
    cols = ["case"] + [k for k in rows[0] if k != "case"]
    write_results(Path(args.out), "tune_pointwise", meta, rows, cols)


if __name__ == "__main__":
    main()
