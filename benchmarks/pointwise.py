"""Pointwise fusions: hostir vs torch eager vs torch.compile, in one run.

GB/s counts the fewest bytes a case must move (each input read once, each
output written once); % is of the copy bandwidth measured in the same run.

    python benchmarks/pointwise.py [--out DIR] [--small]
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import run_suite  # noqa: E402

from hostir import DataType, FusionDefinition  # noqa: E402


def rotation_case(n):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        size = fd.ops.size(t0, 0)
        half = fd.ops.div(size, 2)
        t3 = fd.ops.cat([fd.ops.slice(t0, [half], [size]), fd.ops.slice(t0, [0], [half])], 0)
        fd.add_output(fd.ops.add(t0, t3))

    def eager(x):
        h = x.shape[0] // 2
        return x + torch.cat([x[h:], x[:h]])
    return "rotation+residual fp32", fd, eager, lambda d: [torch.randn(n, device=d)], 2 * 4 * n


def rotation_dynamic_case(n):
    """rotation_case after calls at 7 other sizes near n: the changing slice
    bounds have made its plan symbolic (seed 001's fallback); timed at n."""
    _, fd, eager, inputs, nbytes = rotation_case(n)

    def warmed(dev):
        for k in range(1, 8):
            fd.execute([torch.randn(n + 1024 * k, device=dev)])
        return inputs(dev)
    return "rotation+residual fp32, N varying", fd, eager, warmed, nbytes


def rope_case(b, h, s, d):
    with FusionDefinition() as fd:
        xb = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=True, dtype=DataType.BFloat16)
        cosb = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.BFloat16)
        sinb = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.BFloat16)
        # compute in float, as the eager function (and Thunder's traces) do
        x, cos, sin = (fd.ops.cast(t, DataType.Float) for t in (xb, cosb, sinb))
        dd = fd.ops.size(x, 3)
        hh = fd.ops.div(dd, 2)
        bb, nh, ss = (fd.ops.size(x, i) for i in range(3))
        x1 = fd.ops.slice(x, [0, 0, 0, 0], [bb, nh, ss, hh])
        x2 = fd.ops.slice(x, [0, 0, 0, hh], [bb, nh, ss, dd])
        rot = fd.ops.cat([fd.ops.neg(x2), x1], -1)
        cb = fd.ops.broadcast_in_dim(cos, [bb, nh, ss, dd], [2, 3])
        sb = fd.ops.broadcast_in_dim(sin, [bb, nh, ss, dd], [2, 3])
        out = fd.ops.add(fd.ops.mul(x, cb), fd.ops.mul(rot, sb))
        fd.add_output(fd.ops.cast(out, DataType.BFloat16))

    def eager(x, cos, sin):
        hd = x.shape[-1] // 2
        rot = torch.cat([-x[..., hd:], x[..., :hd]], -1)
        return (x.float() * cos.float() + rot.float() * sin.float()).to(torch.bfloat16)

    def inputs(dev):
        return [torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16),
                torch.randn(s, d, device=dev, dtype=torch.bfloat16),
                torch.randn(s, d, device=dev, dtype=torch.bfloat16)]
    nbytes = 2 * (2 * b * h * s * d + 2 * s * d)
    return "RoPE bf16", fd, eager, inputs, nbytes


def gelu_bwd_case(shape):
    with FusionDefinition() as fd:
        s0, s1, s2, s3 = (fd.define_scalar(None, dtype=DataType.Double) for _ in range(4))
        t5 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.Float)
        t6 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.Float)
        t8 = fd.ops.mul(0.5, t6)
        t13 = fd.ops.add(t6, fd.ops.mul(0.044715, fd.ops.pow(t6, 3.0)))
        t16 = fd.ops.tanh(fd.ops.mul(0.797885, t13))
        t18 = fd.ops.add(1.0, t16)
        t20 = fd.ops.mul(t5, t18)
        t23 = fd.ops.mul(1.0, fd.ops.mul(t5, t8))
        t26 = fd.ops.sub(1.0, fd.ops.mul(t16, t16))
        t30 = fd.ops.mul(1.0, fd.ops.mul(fd.ops.mul(t23, t26), s3))
        t32 = fd.ops.mul(fd.ops.mul(t30, s2), s1)
        t36 = fd.ops.add(t30, fd.ops.mul(t32, fd.ops.pow(t6, 2.0)))
        fd.add_output(fd.ops.add(t36, fd.ops.mul(t20, s0)))

    def eager(s0, s1, s2, s3, t5, t6):
        t16 = torch.tanh(0.797885 * (t6 + 0.044715 * t6 ** 3))
        t30 = t5 * (0.5 * t6) * (1.0 - t16 * t16) * s3
        return t30 + t30 * s2 * s1 * t6 ** 2 + t5 * (1.0 + t16) * s0
    n = shape[0] * shape[1] * shape[2]

    def inputs(dev):
        return [1.0, 2.0, 3.0, 4.0, torch.randn(shape, device=dev), torch.randn(shape, device=dev)]
    return "seed-003 GELU-bwd pointwise fp32", fd, eager, inputs, 3 * 4 * n


def pad_broadcast_case(n, m, c, k, d):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1] * 5, contiguity=True, dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1] * 5, contiguity=True, dtype=DataType.Float)
        p = fd.ops.pad(t0, [0, 0, -1, 0, 0, 0, 0, -1])  # dims 3 and 1: 2 -> 1 (broadcast)
        fd.add_output(fd.ops.mul(t1, p))

    def eager(t0, t1):
        return t1 * torch.nn.functional.pad(t0, [0, 0, -1, 0, 0, 0, 0, -1])

    def inputs(dev):
        return [torch.randn(n, 2, c, 2, d, device=dev), torch.randn(n, m, c, k, d, device=dev)]
    return "seed-001 pad-to-broadcast mul fp32", fd, eager, inputs, 4 * (2 * n * m * c * k * d + n * c * d)


def broadcast_add_case(r, c):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.add(x, fd.ops.broadcast_in_dim(b, x.shape(), [1])))

    def inputs(dev):
        return [torch.randn(r, c, device=dev), torch.randn(c, device=dev)]
    return "broadcast add fp32", fd, lambda x, b: x + b, inputs, 4 * (2 * r * c + c)


def case_makers(small: bool):
    """Functions each making one case (with a new FusionDefinition) per call."""
    if small:
        return [lambda: rotation_case(1 << 20), lambda: rotation_dynamic_case(1 << 20),
                lambda: rope_case(2, 4, 128, 128),
                lambda: gelu_bwd_case((4, 64, 256)), lambda: pad_broadcast_case(2, 4, 16, 4, 256),
                lambda: broadcast_add_case(512, 1024)]
    return [lambda: rotation_case(1 << 28), lambda: rotation_dynamic_case(1 << 26),
            lambda: rope_case(8, 32, 2048, 128),
            lambda: gelu_bwd_case((16, 512, 4096)), lambda: pad_broadcast_case(16, 8, 64, 8, 1024),
            lambda: broadcast_add_case(8192, 8192)]


def tiny_cases():
    """The cases at tiny sizes (`hostir bench --tiny`: checks that the suite runs)."""
    return [rotation_case(1 << 12), rotation_dynamic_case(1 << 12), rope_case(1, 2, 16, 32),
            gelu_bwd_case((2, 8, 32)),
            pad_broadcast_case(1, 2, 4, 2, 32), broadcast_add_case(32, 64)]


def cases(small: bool):
    return [make() for make in case_makers(small)]


def sweep(tiny: bool):
    """Per fusion, its cases at growing sizes (`hostir bench --plot`: bandwidth vs size)."""
    ns = [1 << 10, 1 << 12, 1 << 14] if tiny else [1 << k for k in range(16, 29, 2)]
    rows = [64, 256, 1024] if tiny else [256, 1024, 4096, 8192, 16384]
    seqs = [16, 64, 128] if tiny else [256, 512, 1024, 2048, 4096]
    return [("rotation+residual fp32", [lambda n=n: rotation_case(n) for n in ns]),
            ("broadcast add fp32", [lambda r=r: broadcast_add_case(r, r if not tiny else 64)
                                    for r in rows]),
            ("RoPE bf16", [lambda s=s: rope_case(2 if tiny else 8, 4 if tiny else 32, s,
                                                 32 if tiny else 128) for s in seqs])]


def main(argv=None):
    run_suite("pointwise", cases, argv)


if __name__ == "__main__":
    main()
