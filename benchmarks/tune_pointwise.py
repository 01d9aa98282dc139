"""Tuning sweep for generated pointwise kernels — threads per block, evict-first
stores, programmatic dependent launch — beside torch.compile, timed in
alternating batches in one run.

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
from pointwise import cases  # noqa: E402

from hostir.host.lower import KernelLaunch  # noqa: E402

DEFAULT = KernelLaunch.tuning()


def configs():
    for block, streaming, pdl in itertools.product((128, 256, 512), (False, True), (False, True)):
        label = f"b{block}{' cs' if streaming else ''}{' pdl' if pdl else ''}"
        yield label, (block, streaming, pdl)


def set_tuning(t):
    KernelLaunch.BLOCK, KernelLaunch.STREAMING, KernelLaunch.PDL = t


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
    for name, fd, eager, make_inputs, nbytes in cases(args.small or dev.type == "cpu"):
        inputs = make_inputs(dev)
        ref = eager(*inputs)
        fns = []
        for label, t in cfgs:
            def run(t=t):
                if KernelLaunch.tuning() != t:
                    set_tuning(t)
                    for hit in fd._cache._fast.values():  # direct runners hold the old variant
                        hit.direct, hit.tried = None, False
                return fd.execute(inputs)
            (got,) = run()
            torch.testing.assert_close(got.float(), ref.float(), rtol=2e-3, atol=2e-3)
            fns.append(run)
        labels = [c[0] for c in cfgs]
        try:
            compiled = torch.compile(eager)
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
        set_tuning(DEFAULT)
        del inputs, ref
    meta = meta_for(dev)
    meta["copy GB/s"] = round(bw / 1e9, 1)
    meta["figures"] = "% of copy bandwidth, median of alternating batches"
    cols = ["case"] + [k for k in rows[0] if k != "case"]
    write_results(Path(args.out), "tune_pointwise", meta, rows, cols)


if __name__ == "__main__":
    main()
