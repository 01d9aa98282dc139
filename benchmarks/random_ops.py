"""Random numbers at 2^26 elements: uniform fp32 generation, normal bf16, and a
fused dropout (rand_like, compare, select, scale) of an fp32 tensor; hostir vs
torch eager vs torch.compile in one run (the reduction harness). GB/s counts
the output written (and the dropout's input read). On CPU (or with --small)
the sizes are tiny.

    python benchmarks/random_ops.py [--out DIR] [--small] [--no-compile]
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import run_suite  # noqa: E402

from hostir import DataType, FusionDefinition  # noqa: E402


def uniform_case(n):
    """rand_like: the input gives the shape and device only (it is not read)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1], contiguity=[True])
        fd.add_output(fd.ops.rand_like(x))
    return (f"rand_like fp32 {n}", fd, torch.rand_like, lambda d: [torch.empty(n, device=d)], 4 * n)


def normal_case(n):
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1], contiguity=[True], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.randn_like(x))
    return (f"randn_like bf16 {n}", fd, torch.randn_like,
            lambda d: [torch.empty(n, device=d, dtype=torch.bfloat16)], 2 * n)


def dropout_case(n, p=0.1):
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1], contiguity=[True])
        keep = fd.ops.ge(fd.ops.rand_like(x), p)
        fd.add_output(fd.ops.where(keep, fd.ops.mul(x, 1.0 / (1 - p)), 0.0))
    return (f"dropout fp32 {n}", fd, lambda x: torch.nn.functional.dropout(x, p),
            lambda d: [torch.randn(n, device=d)], 2 * 4 * n)


def cases(small: bool):
    n = 1 << 14 if small else 1 << 26
    return [uniform_case(n), normal_case(n), dropout_case(n)]


def main(argv=None):
    run_suite("random_ops", cases, argv)


if __name__ == "__main__":
    main()
