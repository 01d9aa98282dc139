"""Scans (cumsum) at 2^26 elements: along the rows of [8192, 8192], along its
outer dim, a 1-D [2^26] tensor, and a fused bf16 row scan; hostir vs torch
eager vs torch.compile in one run (the reduction harness). GB/s counts the
input read once and the output written once; % is of the copy bandwidth
measured in the run. On CPU (or with --small) the sizes are tiny.

    python benchmarks/scan.py [--out DIR] [--small] [--no-compile]
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import run_suite  # noqa: E402

from hostir import DataType, FusionDefinition  # noqa: E402

BF16, F32 = DataType.BFloat16, DataType.Float


TORCH = {BF16: torch.bfloat16, F32: torch.float32}
SHORT = {BF16: "bf16", F32: "fp32"}
EAGER = {"cumsum": torch.cumsum, "cumprod": torch.cumprod,
         "cummax": lambda x, d: torch.cummax(x, d).values, "cummin": lambda x, d: torch.cummin(x, d).values}


def cumsum_case(shape, dim, op="cumsum", dtype=F32):
    """`op` (cumsum, cumprod, cummax, cummin) along `dim`; cumprod's data near 1
    (a product of 2^26 random numbers would over- or underflow)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1] * len(shape), contiguity=True, dtype=dtype)
        fd.add_output(getattr(fd.ops, op)(x, dim))
    n = 1
    for s in shape:
        n *= s
    where = "rows" if dim in (-1, len(shape) - 1) else f"dim {dim}"
    td = TORCH[dtype]

    def make(d):
        x = torch.randn(*shape, device=d, dtype=torch.float32)
        return [(1 + x * 1e-4 if op == "cumprod" else x).to(td)]
    return (f"{op} {SHORT[dtype]} {'x'.join(map(str, shape))} along {where}", fd,
            lambda x: EAGER[op](x, dim), make, 2 * dtype.itemsize * n)


def fused_case(r, c):
    """A bf16 row scan with a prologue and an epilogue: cumsum(x * w) * w."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=BF16)
        w = fd.define_tensor(shape=[-1], contiguity=True, dtype=BF16)
        fd.add_output(fd.ops.mul(fd.ops.cumsum(fd.ops.mul(x, w), 1), w))
    return (f"cumsum(x * w) * w bf16 {r}x{c}", fd, lambda x, w: torch.cumsum(x * w, 1) * w,
            lambda d: [torch.randn(r, c, device=d, dtype=torch.bfloat16),
                       torch.randn(c, device=d, dtype=torch.bfloat16)], 2 * (2 * r * c + c))


def cases(small: bool):
    if small:
        makers = [lambda: cumsum_case((64, 256), 1), lambda: cumsum_case((64, 256), 0),
                  lambda: cumsum_case((1 << 14,), 0), lambda: fused_case(64, 256)]
    else:
        makers = [lambda: cumsum_case((8192, 8192), 1), lambda: cumsum_case((8192, 8192), 0),
                  lambda: cumsum_case((1 << 26,), 0), lambda: cumsum_case((1 << 16, 1024), 1),
                  lambda: cumsum_case((1 << 20, 64), 1), lambda: fused_case(8192, 8192),
                  lambda: cumsum_case((1 << 26,), 0, dtype=BF16),
                  lambda: cumsum_case((1 << 26,), 0, "cumprod"), lambda: cumsum_case((1 << 26,), 0, "cummax"),
                  lambda: cumsum_case((8192, 8192), 1, "cummin", BF16),
                  lambda: cumsum_case((8192, 8192), 0, "cumprod")]
    return [make() for make in makers]


def main(argv=None):
    run_suite("scan", cases, argv)


if __name__ == "__main__":
    main()
