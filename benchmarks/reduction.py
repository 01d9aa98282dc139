"""Reductions, normalizations and transposes (issue 11's cases): hostir vs
torch eager vs torch.compile, in one run; GB/s counts each input read once
and each output written once, % is of the copy bandwidth measured in the run.

    python benchmarks/reduction.py [--out DIR] [--small]
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import run_suite  # noqa: E402

from hostir import DataType, FusionDefinition, config  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_seed003 import eager as seed003_eager  # noqa: E402
from test_seed003 import make_fd as seed003_fd  # noqa: E402

BF16, F32 = DataType.BFloat16, DataType.Float
TORCH = {DataType.BFloat16: torch.bfloat16, DataType.Half: torch.float16, DataType.Float: torch.float32}
SHORT = {DataType.BFloat16: "bf16", DataType.Half: "fp16", DataType.Float: "fp32"}


def _rows(fd, dtype):
    return fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=dtype)


def row_sum_case(r, c, dtype=BF16):
    return _sum_case(r, c, 1, dtype)


def column_sum_case(r, c, dtype=F32):
    """An outer reduction: the sum over the rows of r x c (a bias gradient's)."""
    return _sum_case(r, c, 0, dtype)


def _sum_case(r, c, dim, dtype):
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.sum(_rows(fd, dtype), [dim]))
    return (f"{'row' if dim else 'column'} sum {SHORT[dtype]} {r}x{c}", fd, lambda x: x.sum(dim),
            lambda d: [torch.randn(r, c, device=d, dtype=TORCH[dtype])],
            dtype.itemsize * (r * c + (r if dim else c)))


def row_max_case(r, c):
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.max(_rows(fd, F32), [1]))
    return (f"row max fp32 {r}x{c}", fd, lambda x: x.amax(1),
            lambda d: [torch.randn(r, c, device=d)], 4 * (r * c + r))


def mean_square_case(r, c):
    """rmsnorm's statistic: mean(x * x) of bf16 rows, in fp32."""
    with FusionDefinition() as fd:
        x = fd.ops.cast(_rows(fd, BF16), F32)
        fd.add_output(fd.ops.mean(fd.ops.mul(x, x), [1]) if hasattr(fd.ops, "mean")
                      else fd.ops.div(fd.ops.sum(fd.ops.mul(x, x), [1]), float(c)))
    return (f"mean of squares bf16 {r}x{c}", fd, lambda x: x.float().square().mean(1),
            lambda d: [torch.randn(r, c, device=d, dtype=torch.bfloat16)], 2 * r * c + 4 * r)


def outer_sum_case(b, s, h):
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.sum(fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=F32),
                                 [0, 1]))
    return (f"sum over [0, 1] fp32 {b}x{s}x{h}", fd, lambda x: x.sum((0, 1)),
            lambda d: [torch.randn(b, s, h, device=d)], 4 * (b * s * h + h))


def softmax_case(r, c, dtype=BF16):
    td = TORCH[dtype]
    with FusionDefinition() as fd:
        x = fd.ops.cast(_rows(fd, dtype), F32)
        shape = x.shape()
        m = fd.ops.broadcast_in_dim(fd.ops.max(x, [1]), shape, [0])
        e = fd.ops.exp(fd.ops.sub(x, m))
        s = fd.ops.broadcast_in_dim(fd.ops.sum(e, [1]), shape, [0])
        fd.add_output(fd.ops.cast(fd.ops.div(e, s), dtype))
    return (f"softmax {SHORT[dtype]} {r}x{c}", fd, lambda x: torch.softmax(x.float(), 1).to(td),
            lambda d: [torch.randn(r, c, device=d, dtype=td)], 2 * dtype.itemsize * r * c)


def log_softmax_case(r, c, dtype=BF16):
    """A vocabulary-sized log-softmax (a cross-entropy's): rows of r x c logits."""
    td = TORCH[dtype]
    with FusionDefinition() as fd:
        x = fd.ops.cast(_rows(fd, dtype), F32)
        shape = x.shape()
        s = fd.ops.sub(x, fd.ops.broadcast_in_dim(fd.ops.max(x, [1]), shape, [0]))
        total = fd.ops.sum(fd.ops.exp(s), [1])
        fd.add_output(fd.ops.cast(fd.ops.sub(s, fd.ops.broadcast_in_dim(fd.ops.log(total), shape, [0])),
                                  dtype))
    return (f"log-softmax {SHORT[dtype]} {r}x{c}", fd, lambda x: torch.log_softmax(x.float(), 1).to(td),
            lambda d: [torch.randn(r, c, device=d, dtype=td)], 2 * dtype.itemsize * r * c)


class Planned:
    """A FusionDefinition planned under other settings: its first call (which
    makes the plan that later calls of the same inputs reuse) runs with config
    `fields` (say `disable=...`), so one run times settings side by side."""

    def __init__(self, fd, **fields):
        self.fd, self.fields, self.planned = fd, fields, False

    def execute(self, inputs):
        if self.planned:
            return self.fd.execute(inputs)
        with config.override(**self.fields):
            out = self.fd.execute(inputs)
        self.planned = True
        return out


def without(case, feature: str):
    """`case` with HOSTIR_DISABLE=`feature` (online_softmax: the max and the
    sum of exp(x - max) as two passes over the row; smem_rows: long rows kept
    in registers, not shared memory)."""
    name, fd, eager, make_inputs, nbytes = case
    fd = Planned(fd, disable=config.get().disable | {feature})
    return f"{name}, {feature} disabled", fd, eager, make_inputs, nbytes


def rmsnorm_case(r, c, dtype=BF16):
    td = TORCH[dtype]
    with FusionDefinition() as fd:
        xb = _rows(fd, dtype)
        w = fd.define_tensor(shape=[-1], contiguity=True, dtype=dtype)
        x = fd.ops.cast(xb, F32)
        shape = x.shape()
        ms = fd.ops.div(fd.ops.sum(fd.ops.mul(x, x), [1]), float(c))
        inv = fd.ops.rsqrt(fd.ops.add(ms, 1e-6))
        y = fd.ops.mul(fd.ops.mul(x, fd.ops.broadcast_in_dim(inv, shape, [0])),
                       fd.ops.broadcast_in_dim(fd.ops.cast(w, F32), shape, [1]))
        fd.add_output(fd.ops.cast(y, dtype))

    def eager(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.square().mean(1, keepdim=True) + 1e-6) * w.float()).to(td)
    return (f"rmsnorm {SHORT[dtype]} {r}x{c}", fd, eager,
            lambda d: [torch.randn(r, c, device=d, dtype=td),
                       torch.randn(c, device=d, dtype=td)], dtype.itemsize * (2 * r * c + c))


def layernorm_case(r, c, dtype=BF16):
    td = TORCH[dtype]
    with FusionDefinition() as fd:
        xb = _rows(fd, dtype)
        w = fd.define_tensor(shape=[-1], contiguity=True, dtype=dtype)
        b = fd.define_tensor(shape=[-1], contiguity=True, dtype=dtype)
        x = fd.ops.cast(xb, F32)
        shape = x.shape()
        var, mean = fd.ops.var_mean(x, [1], correction=0)
        xhat = fd.ops.mul(fd.ops.sub(x, fd.ops.broadcast_in_dim(mean, shape, [0])),
                          fd.ops.broadcast_in_dim(fd.ops.rsqrt(fd.ops.add(var, 1e-5)), shape, [0]))
        y = fd.ops.add(fd.ops.mul(xhat, fd.ops.broadcast_in_dim(fd.ops.cast(w, F32), shape, [1])),
                       fd.ops.broadcast_in_dim(fd.ops.cast(b, F32), shape, [1]))
        fd.add_output(fd.ops.cast(y, dtype))

    def eager(x, w, b):
        return torch.nn.functional.layer_norm(x.float(), (c,), w.float(), b.float(), 1e-5).to(td)
    return (f"layernorm {SHORT[dtype]} {r}x{c}", fd, eager,
            lambda d: [torch.randn(r, c, device=d, dtype=td), torch.randn(c, device=d, dtype=td),
                       torch.randn(c, device=d, dtype=td)], dtype.itemsize * (2 * r * c + 2 * c))


def seed003_case(shape):
    n = shape[0] * shape[1] * shape[2]

    def eager(s0, s1, s2, s3, bias_in, grad, x):
        th = torch.tanh(0.797885 * (x + 0.044715 * x.pow(3)))
        a = grad * (0.5 * x) * (1 - th * th) * s3
        return bias_in.sum((0, 1)), a + a * s2 * s1 * x * x + grad * (1 + th) * s0
    assert seed003_eager  # the tests' float64 oracle of the same fusion
    return (f"seed-003 full fusion fp32 {'x'.join(map(str, shape))}", seed003_fd(), eager,
            lambda d: [1.0, 2.0, 3.0, 4.0, *(torch.randn(shape, device=d) for _ in range(3))],
            4 * (4 * n + shape[2]))


def transpose_case(r, c):
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.mul(fd.ops.permute(_rows(fd, F32), [1, 0]), 2.0))
    return (f"transpose fp32 {r}x{c}", fd, lambda x: (x.t() * 2).contiguous(),
            lambda d: [torch.randn(r, c, device=d)], 2 * 4 * r * c)


def cases(small: bool):
    if small:
        makers = [lambda: row_sum_case(64, 256), lambda: row_max_case(32, 512),
                  lambda: mean_square_case(64, 256), lambda: outer_sum_case(2, 16, 64),
                  lambda: softmax_case(64, 256), lambda: rmsnorm_case(64, 256),
                  lambda: layernorm_case(64, 256), lambda: seed003_case((2, 16, 64)),
                  lambda: transpose_case(256, 128), lambda: softmax_case(8, 20000),
                  lambda: without(softmax_case(8, 20000), "online_softmax")]
    else:
        makers = [lambda: row_sum_case(32768, 4096), lambda: row_max_case(16384, 8192),
                  lambda: mean_square_case(16384, 8192), lambda: outer_sum_case(16, 512, 4096),
                  lambda: softmax_case(32768, 4096), lambda: rmsnorm_case(16384, 8192),
                  lambda: layernorm_case(16384, 8192), lambda: seed003_case((16, 512, 4096)),
                  lambda: transpose_case(8192, 8192),
                  # long rows: looped (up to 64 KiB, or the online form looped), in shared
                  # memory (and without it); past shared memory: the online form and the passes
                  lambda: softmax_case(4096, 32768), lambda: without(softmax_case(4096, 32768), "smem_rows"),
                  lambda: layernorm_case(4096, 32768), lambda: layernorm_case(8192, 16384),
                  lambda: softmax_case(2048, 49152), lambda: log_softmax_case(8192, 16384),
                  lambda: log_softmax_case(1024, 131072),
                  lambda: without(log_softmax_case(1024, 131072), "online_softmax")]
    return [make() for make in makers]


def sweep(tiny: bool):
    """Per fusion, its cases at growing sizes (`hostir bench --plot`: bandwidth vs size)."""
    rows = [16, 64, 256] if tiny else [1024, 4096, 16384, 32768]
    c = 128 if tiny else 4096
    return [("row sum bf16", [lambda r=r: row_sum_case(r, c) for r in rows]),
            ("softmax bf16", [lambda r=r: softmax_case(r, c) for r in rows]),
            ("rmsnorm bf16", [lambda r=r: rmsnorm_case(r, c) for r in rows])]


def main(argv=None):
    run_suite("reduction", cases, argv)


if __name__ == "__main__":
    main()
