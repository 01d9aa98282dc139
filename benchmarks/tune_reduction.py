"""Tuning sweep for generated normalization kernels: how many vectors of a row
each thread keeps in registers (codegen.rows.PERSISTENT_POINTS, which sets the threads
per row) with and without asking for a full SM (cuda_schedules.FULL_OCCUPANCY),
beside torch.compile, in one run. Each setting
plans its own FusionDefinitions (specs read the knob when a launch picks its
variant).

    python benchmarks/tune_reduction.py [--out DIR] [--small]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import copy_bandwidth, meta_for, time_interleaved, write_results  # noqa: E402
from reduction import _rows, layernorm_case, rmsnorm_case, softmax_case  # noqa: E402

from hostir import DataType, FusionDefinition  # noqa: E402


def bare_layernorm_case(r, c):
    """A diagnostic: layernorm without weight and bias (does reading them cost?)."""
    with FusionDefinition() as fd:
        x = fd.ops.cast(_rows(fd, DataType.BFloat16), DataType.Float)
        var, mean = fd.ops.var_mean(x, [1], correction=0)
        shape = x.shape()
        y = fd.ops.mul(fd.ops.sub(x, fd.ops.broadcast_in_dim(mean, shape, [0])),
                       fd.ops.broadcast_in_dim(fd.ops.rsqrt(fd.ops.add(var, 1e-5)), shape, [0]))
        fd.add_output(fd.ops.cast(y, DataType.BFloat16))

    def eager(x):
        return torch.nn.functional.layer_norm(x.float(), (c,), eps=1e-5).bfloat16()
    return (f"layernorm without weight, bias bf16 {r}x{c}", fd, eager,
            lambda d: [torch.randn(r, c, device=d, dtype=torch.bfloat16)], 2 * 2 * r * c)

from hostir import config  # noqa: E402
from hostir.codegen import cuda_schedules, rows as row_rules  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/out")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    small = args.small or dev.type == "cpu"
    bw = copy_bandwidth(dev)
    makers = ([lambda: softmax_case(64, 512), lambda: rmsnorm_case(64, 512)] if small else
              [lambda: softmax_case(32768, 4096), lambda: rmsnorm_case(16384, 8192),
               lambda: layernorm_case(16384, 8192), lambda: bare_layernorm_case(16384, 8192),
               lambda: softmax_case(4096, 32768),
               lambda: softmax_case(262144, 512), lambda: layernorm_case(65536, 1024)])
    rows = []
    for make in makers:
        name, fd0, eager, make_inputs, nbytes = make()
        inputs = make_inputs(dev)
        fns, labels = [], []
        for points, full in ((8, True), (16, True), (32, True), (16, False)):
            row_rules.PERSISTENT_POINTS, cuda_schedules.FULL_OCCUPANCY = points, full
            fd = make()[1]
            fd.execute(inputs)
            fns.append(lambda fd=fd: fd.execute(inputs))
            labels.append(f"{points} points{'' if full else ', occupancy not asked'}")
        row_rules.PERSISTENT_POINTS, cuda_schedules.FULL_OCCUPANCY = 16, True
        # HOSTIR_ENABLE=fast_math (off by default): is the kernel bound by arithmetic?
        with config.override(enable=config.get().enable | {"fast_math"}):
            fd = make()[1]
            fd.execute(inputs)
        fns.append(lambda fd=fd: fd.execute(inputs))
        labels.append("fast_math")
        try:
            torch._dynamo.reset()  # a static compile of this case alone
            compiled = torch.compile(eager, dynamic=False)
            compiled(*inputs)
            fns.append(lambda: compiled(*inputs))
            labels.append("torch.compile")
        except Exception as e:  # no compiler here
            print(f"torch.compile unavailable: {type(e).__name__}")
        times = time_interleaved(fns, dev, rounds=args.rounds)
        for label, t in zip(labels, times):
            rows.append({"case": name, "setting": label, "us": t * 1e6,
                         "% copy": 100 * nbytes / t / bw})
    meta = meta_for(dev)
    meta["copy GB/s"] = round(bw / 1e9, 1)
    write_results(Path(args.out), "tune_reduction", meta, rows, ["case", "setting", "us", "% copy"])


if __name__ == "__main__":
    main()
