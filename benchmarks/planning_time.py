"""Planning time of a first call: everything but NVRTC, measured on the CPU.

A first `fd.execute` validates the inputs, concretizes the fusion, runs the
pre-segmentation passes, alias analysis and segmentation, lowers the segments
to kernel IR and a host program, and runs it. Planning is that first call's
time minus a steady call of the same signature (which only runs the plan).
Each sample defines a fresh FusionDefinition, so nothing is cached but the
Python modules; tensors are tiny so the run itself is cheap.

    python benchmarks/planning_time.py [--samples N] [--out DIR]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import meta_for, write_results  # noqa: E402
from pointwise import rope_case, rotation_case  # noqa: E402

from hostir import DataType, FusionDefinition  # noqa: E402


def seed003_definition(fd) -> None:
    """Seed 003's whole fusion (GELU backward and the bias-gradient sum), as written there."""
    s0, s1, s2, s3 = (fd.define_scalar(None, dtype=DataType.Double) for _ in range(4))
    t4, t5, t6 = (fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.Float)
                  for _ in range(3))
    t16 = fd.ops.tanh(fd.ops.mul(0.797885, fd.ops.add(t6, fd.ops.mul(0.044715, fd.ops.pow(t6, 3.0)))))
    t19 = fd.ops.sum(t4, dims=[0, 1], keepdim=False, dtype=DataType.Null)
    t23 = fd.ops.mul(1.0, fd.ops.mul(t5, fd.ops.mul(0.5, t6)))
    t30 = fd.ops.mul(1.0, fd.ops.mul(fd.ops.mul(t23, fd.ops.sub(1.0, fd.ops.mul(t16, t16))), s3))
    t35 = fd.ops.mul(fd.ops.mul(fd.ops.mul(t30, s2), s1), fd.ops.pow(t6, 2.0))
    t37 = fd.ops.mul(fd.ops.mul(t5, fd.ops.add(1.0, t16)), s0)
    fd.add_output(t19)
    fd.add_output(fd.ops.add(fd.ops.add(t30, t35), t37))


def seed003_case():
    def make():
        with FusionDefinition() as fd:
            seed003_definition(fd)
        return fd
    return "seed-003 GELU-bwd + bias grad", make, lambda: [1.0, 2.0, 3.0, 4.0] + [
        torch.randn(2, 3, 8) for _ in range(3)]


def _fresh(case_fn, *args):
    """(name, make_fd, make_inputs) for a pointwise.py case: a new fd per call."""
    name, _, _, inputs, _ = case_fn(*args)
    return name, lambda: case_fn(*args)[1], lambda: inputs("cpu")


def cases():
    return [_fresh(rope_case, 2, 4, 16, 32), seed003_case(), _fresh(rotation_case, 64)]


def measure(make, make_inputs, samples: int) -> dict:
    firsts, steadies = [], []
    for _ in range(samples):
        fd = make()
        inputs = make_inputs()
        t0 = time.perf_counter()
        fd.execute(inputs)
        t1 = time.perf_counter()
        for _ in range(3):
            fd.execute(inputs)
        t2 = time.perf_counter()
        fd.execute(inputs)
        t3 = time.perf_counter()
        firsts.append(t1 - t0)
        steadies.append(t3 - t2)
    first, steady = statistics.median(firsts), statistics.median(steadies)
    return {"first call ms": first * 1e3, "steady call ms": steady * 1e3,
            "planning ms": (first - steady) * 1e3}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--out", default="benchmarks/out")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    rows = []
    for name, make, make_inputs in cases():
        measure(make, make_inputs, 3)  # warm the modules and torch's own caches
        rows.append({"case": name, **measure(make, make_inputs, args.samples)})
    write_results(Path(args.out), "planning_time", meta_for(torch.device("cpu")), rows,
                  ["case", "first call ms", "steady call ms", "planning ms"])


if __name__ == "__main__":
    main()
