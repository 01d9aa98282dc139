"""Indexing ops at 2^26 elements: an embedding lookup (65536 tokens of a
[32768, 1024] bf16 table: rows read + rows written), index_select of fp32 rows,
gather along the rows of [8192, 8192] fp32 with an Int32 index of the same
shape, and take_along_axis with a broadcast index; hostir vs torch eager vs
torch.compile in one run (the reduction harness). GB/s counts what must move:
the output written, the rows or elements read, the index read. On CPU (or
with --small) the sizes are tiny.

    python benchmarks/indexing.py [--out DIR] [--small] [--no-compile]
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import run_suite  # noqa: E402

from hostir import DataType, FusionDefinition  # noqa: E402

BF16, F32, I64, I32 = DataType.BFloat16, DataType.Float, DataType.Int, DataType.Int32


def embedding_case(tokens, vocab, dim):
    with FusionDefinition() as fd:
        idx = fd.define_tensor(shape=[-1], contiguity=True, dtype=I64)
        w = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=BF16)
        fd.add_output(fd.ops.embedding_fwd(idx, w, None, None, 2.0, False, False))
    return (f"embedding bf16 {tokens} tokens of [{vocab}, {dim}]", fd,
            lambda i, w: torch.nn.functional.embedding(i, w),
            lambda d: [torch.randint(0, vocab, (tokens,), device=d),
                       torch.randn(vocab, dim, device=d, dtype=torch.bfloat16)],
            2 * tokens * dim * 2 + 8 * tokens)


def index_select_case(rows, cols, n):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=F32)
        i = fd.define_tensor(shape=[-1], contiguity=True, dtype=I64)
        fd.add_output(fd.ops.index_select(x, i, 0))
    return (f"index_select fp32 {n} rows of [{rows}, {cols}]", fd,
            lambda x, i: torch.index_select(x, 0, i),
            lambda d: [torch.randn(rows, cols, device=d), torch.randint(0, rows, (n,), device=d)],
            2 * 4 * n * cols + 8 * n)


def gather_case(r, c):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=F32)
        i = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=I32)
        fd.add_output(fd.ops.gather(x, i, 1))
    return (f"gather fp32 [{r}, {c}] along rows, Int32 index", fd,
            lambda x, i: torch.gather(x, 1, i.long()),
            lambda d: [torch.randn(r, c, device=d),
                       torch.randint(0, c, (r, c), device=d, dtype=torch.int32)],
            (4 + 4 + 4) * r * c)


def take_case(r, c, k):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=F32)
        i = fd.define_tensor(shape=[1, -1], contiguity=True, dtype=I64)
        fd.add_output(fd.ops.take_along_axis(x, i, 1))
    return (f"take_along_axis fp32 [{r}, {c}], index [1, {k}]", fd,
            lambda x, i: torch.take_along_dim(x, i, 1),
            lambda d: [torch.randn(r, c, device=d), torch.randint(0, c, (1, k), device=d)],
            2 * 4 * r * k + 8 * k)


def scatter_case(r, c, k):
    """torch.scatter along rows: k distinct positions of each row of [r, c]
    written (a random choice per row), the rest kept from the input."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=F32)
        i = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=I32)
        src = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=F32)
        fd.add_output(fd.ops.scatter(x, i, src, 1))

    def make(d):
        idx = torch.rand(r, c, device=d).argsort(1)[:, :k].to(torch.int32).contiguous()
        return [torch.randn(r, c, device=d), idx, torch.randn(r, k, device=d)]
    return (f"scatter fp32 [{r}, {c}] along rows, {k} positions a row", fd,
            lambda x, i, s: torch.scatter(x, 1, i.long(), s), make, 4 * 2 * r * c + (4 + 4) * r * k)


def cases(small: bool):
    return [make() for make in makers(small)]


def makers(small: bool):
    """The cases' makers (each call a fresh FusionDefinition)."""
    if small:
        makers = [lambda: embedding_case(256, 512, 64), lambda: index_select_case(512, 64, 256),
                  lambda: gather_case(64, 256), lambda: take_case(64, 256, 128),
                  lambda: scatter_case(64, 256, 100)]
    else:
        makers = [lambda: embedding_case(1 << 16, 1 << 15, 1024),
                  lambda: index_select_case(1 << 16, 1024, 1 << 16),
                  lambda: gather_case(8192, 8192), lambda: take_case(8192, 8192, 8192),
                  lambda: scatter_case(8192, 8192, 4096)]
    return makers


def main(argv=None):
    run_suite("indexing", cases, argv)


if __name__ == "__main__":
    main()
