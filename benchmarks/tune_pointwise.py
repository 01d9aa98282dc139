"""Tuning sweep for generated pointwise kernels: threads per block and
evict-first stores, on the benchmark cases, in one run.

    python benchmarks/tune_pointwise.py [--out DIR]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import copy_bandwidth, meta_for, time_fn, write_results  # noqa: E402
from pointwise import cases  # noqa: E402

from hostir.host.lower import KernelLaunch  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/out")
    ap.add_argument("--repeat", type=int, default=2, help="sweeps (to see the run-to-run spread)")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    bw = copy_bandwidth(dev)
    rows = []
    for name, fd, eager, make_inputs, nbytes in cases(False):
        inputs = make_inputs(dev)
        row = {"case": name}
        for rep in range(args.repeat):
            for block in (128, 256, 512):
                for streaming in (False, True):
                    KernelLaunch.BLOCK, KernelLaunch.STREAMING = block, streaming
                    fd.execute(inputs)
                    t = time_fn(lambda: fd.execute(inputs), dev, warmup=5, reps=50)
                    key = f"b{block}{'cs' if streaming else ''} %"
                    row[key] = (row[key] + "/" if key in row else "") + f"{100 * nbytes / t / bw:.1f}"
        rows.append(row)
        del inputs
    KernelLaunch.BLOCK, KernelLaunch.STREAMING = 128, False
    import os
    os.environ["HOSTIR_DISABLE"] = "paired_lanes"
    from hostir import config
    config.reload()
    for row, (name, fd, eager, make_inputs, nbytes) in zip(rows, cases(False)):
        inputs = make_inputs(dev)
        fd.execute(inputs)
        vals = [f"{100 * nbytes / time_fn(lambda: fd.execute(inputs), dev, warmup=5, reps=50) / bw:.1f}"
                for _ in range(args.repeat)]
        row["b128 unpaired %"] = "/".join(vals)
        del inputs
    os.environ.pop("HOSTIR_DISABLE")
    config.reload()
    cols = ["case"] + [k for k in rows[0] if k != "case"]
    meta = meta_for(dev)
    meta["copy GB/s"] = round(bw / 1e9, 1)
    write_results(Path(args.out), "tune_pointwise", meta, rows, cols)


if __name__ == "__main__":
    main()
