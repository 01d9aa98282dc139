"""row_widths.WORD_ROWS: rows of 2-byte points on 4-byte but not 16-byte
boundaries read in 4-byte words, a warp a row, each warp taking several rows
at once (cuda_row_stack). Results against torch on random rows (on a GPU the
stacked kernels run; the nvrtc check compiles them). Dense rows of up to
row_tiles.TILE_ROW_POINTS points take tiles first (test_row_tiles): these
tests run the word rows with tiles off."""
from __future__ import annotations

import math

import pytest

from hostir import DataType as D
from hostir.codegen import row_tiles, row_widths
from hostir.codegen.cuda_row_stack import body_names, stacked
from ops_util import rand
import torch

from ops_util import FROM_TORCH, check, declare
from test_ops_reduction import (_layernorm_checked, _norm_checked, _reduction_specs, _rmsnorm_weighted_checked,
                                _run_keeping_fd)


@pytest.fixture(autouse=True)
def _no_tiles(monkeypatch):
    monkeypatch.setattr(row_tiles, "TILE_ROWS", False)  # (dense short rows take tiles first: test_row_tiles)

import conftest


def _rmsnorm_strided(x, w):
    """_rmsnorm_weighted_checked's rmsnorm of rows read with a stride (x declared strided)."""
    def build(fd):
        t = fd.ops.cast(declare(fd, x, "strided"), D.Float)
        ms = fd.ops.sum(fd.ops.mul(t, t), [1], keepdim=True)
        y = fd.ops.mul(t, fd.ops.rsqrt(fd.ops.add(fd.ops.div(ms, fd.ops.size(t, 1)), 1e-6)))
        fd.add_output(fd.ops.cast(fd.ops.mul(y, fd.ops.cast(declare(fd, w), D.Float)), FROM_TORCH[x.dtype]))
    (out,), fd = _run_keeping_fd(build, [x, w])
    t = x.double()
    check(out, (t * torch.rsqrt(t.square().mean(1, keepdim=True) + 1e-6) * w.double()).to(out.dtype),
          kind="reduction")
    (spec,) = _reduction_specs(fd)
    return spec


def _stack(n: int) -> int:
    words = -(-n // 64)
    return next(s for k, s in row_widths.WORD_ROW_STACK if words <= k)


def _words(n: int, weights: int) -> bool:
    """Does the rule read rows of n points of a kernel of `weights` weights in words?"""
    k = -(-n // 64)
    least, most = row_widths.WORD_ROWS[min(weights, len(row_widths.WORD_ROWS) - 1)]
    return least <= k <= most and n >= 64 * k * row_widths.WORD_ROWS_FILL


def _expect_words(spec, var, rows_count: int, n: int, weights: int) -> None:
    """var reads rows of n points in stacked words; with `weights` weights it
    holds them in registers across its stacked rows, up to WORD_ROWS_HOLD
    words a thread;
    the grid takes every row once, device-resident blocks or not."""
    assert (var.vec, var.threads, var.chunks, var.shift) == (2, 32, -(-n // 64), False), var.name
    assert var.hold == (0 < -(-n // 64) * weights <= row_widths.WORD_ROWS_HOLD), var.name
    assert var.stack == _stack(n) and var.block == row_widths.WORD_ROW_BLOCK, var.name
    k = spec.kernels[0]
    per_block = var.block // 32 * var.stack
    for resident in (0, 132 * 12):
        assert spec.grid(var, spec.count(k, [rows_count, n], var.vec), 132, 1, [rows_count, n], resident) == \
            math.ceil(rows_count / per_block)
    conftest._KERNEL_SOURCES.setdefault(var.source, var.name)


@pytest.mark.parametrize("dtype", [D.BFloat16, D.Half], ids=lambda d: d.name)
@pytest.mark.parametrize("n", [46, 50, 62, 66, 126, 190, 254, 318, 510, 770, 1022, 1030])
@pytest.mark.parametrize("rows_count", [1, 5, 37])
@pytest.mark.parametrize("hold", [16, 0], ids=["held", "reread"])
def test_2byte_rows_on_word_boundaries_read_in_stacked_words(dtype, n, rows_count, hold, monkeypatch):
    """Rows of 33-1024 points on 4-byte boundaries, off 16-byte ones, of an
    rmsnorm (one weight) or a layernorm (two), are read in words, ceil(n /
    64) a thread, a warp a row, 16 rows a warp at once at 1 word a thread,
    4 up to 4 words, 2 up to 8, 1 up to 16 (WORD_ROW_STACK), where
    WORD_ROWS's range for the
    kernel's weights holds and the words fill WORD_ROWS_FILL of the slots;
    the weights held in registers across the stacked rows, read once before
    them (WORD_ROWS_HOLD words a thread or fewer: an rmsnorm's up to 16
    words a thread, a layernorm's up to 8) or read each row; rows past the last
    (rows_count not a multiple of a block's rows) store nothing; elsewhere
    (rows of 1030: 17 words a thread; a layernorm's of 1 word; rows of 46
    and 66, short of the fill) shifted vectors."""
    monkeypatch.setattr(row_widths, "WORD_ROWS_HOLD", hold)
    x, w, b = rand((rows_count, n), dtype), rand((n,), dtype), rand((n,), dtype)
    for spec, ins in ((_rmsnorm_weighted_checked(x, w), [x, w]), (_layernorm_checked(x, w, b), [x, w, b])):
        var = spec.choose(spec.kernels[0], [rows_count, n], ins, None, [])
        if _words(n, len(ins) - 1):
            _expect_words(spec, var, rows_count, n, len(ins) - 1)
        else:
            assert not var.stack and var.shift, var.name


@pytest.mark.parametrize("n", [126, 190])
def test_word_rows_of_every_kind_and_layout(n, monkeypatch):
    """A softmax's rows (a reduction in a later pass) take words only where
    WORD_ROWS_PASSES; rows with a stride on word boundaries take them too,
    rows of an odd stride (off word boundaries), rows whose weight is off
    word boundaries and rows on 8-byte
    boundaries (WORD_ROWS_QUAD off) do not. (A layernorm without weights
    takes a row sum's range.)"""
    rows_count = 19
    x = rand((rows_count, n), D.BFloat16)
    spec = _norm_checked("softmax", x)
    assert not spec.choose(spec.kernels[0], [rows_count, n], [x], None, []).stack
    monkeypatch.setattr(row_widths, "WORD_ROWS_PASSES", True)
    for kind in ("softmax", "log_softmax", "layernorm"):
        spec = _norm_checked(kind, x)
        _expect_words(spec, spec.choose(spec.kernels[0], [rows_count, n], [x], None, []), rows_count, n, 0)
    monkeypatch.setattr(row_widths, "WORD_ROWS_PASSES", False)
    w = rand((n,), D.BFloat16)
    strided = rand((rows_count, n + 4), D.BFloat16)[:, 1:n + 1]  # (rows of stride n + 4 starting a point in)
    odd = rand((rows_count, n + 1), D.BFloat16)[:, :n]
    for xs, words in ((strided, False), (odd, False), (rand((rows_count, n + 2), D.BFloat16)[:, 2:], True)):
        spec = _rmsnorm_strided(xs, w)
        var = spec.choose(spec.kernels[0], [rows_count, n], [xs, w], None, [])
        if words:
            _expect_words(spec, var, rows_count, n, 1)
        else:
            assert not var.stack, var.name
    wo = rand((n + 1,), D.BFloat16)[1:]  # (a weight off word boundaries: shifted rows)
    spec = _rmsnorm_weighted_checked(x, wo)
    assert not spec.choose(spec.kernels[0], [rows_count, n], [x, wo], None, []).stack
    m = 188  # (on 8-byte boundaries)
    xq, wq = rand((rows_count, m), D.BFloat16), rand((m,), D.BFloat16)
    spec = _rmsnorm_weighted_checked(xq, wq)
    assert not spec.choose(spec.kernels[0], [rows_count, m], [xq, wq], None, []).stack
    monkeypatch.setattr(row_widths, "WORD_ROWS_QUAD", True)
    spec = _rmsnorm_weighted_checked(xq, wq)
    _expect_words(spec, spec.choose(spec.kernels[0], [rows_count, m], [xq, wq], None, []), rows_count, m, 1)


def test_stacked_rows_make_each_rows_names_its_own():
    """cuda_row_stack.stacked: each row's declared names suffixed, members
    (threadIdx.x) and outer names (lane, R) kept, `base` offset by the row,
    the rows' parts in turn."""
    body = ["    const bool active = base + threadIdx.x / 32 < nslots;",
            "    alignas(16) hir_bf16 v1[4];",
            "    for (int c = 0; c < 2; ++c) v1[c] = in0[lane + c];",
            "    float a0 = 0.0f;",
            "    a0 = hir_warp_reduce<32>(a0, [](float x, float y) { return x + y; });",
            "    if (active) out0[base] = a0 * R;"]
    assert body_names(body) == {"active", "v1", "c", "a0", "x", "y"}
    out = stacked(body, [3, 5], 2, 4)
    assert len(out) == 2 * len(body)
    assert out[0] == "    const bool active_s0 = (base + 0) + threadIdx.x / 32 < nslots;"
    assert out[3] == "    const bool active_s1 = (base + 4) + threadIdx.x / 32 < nslots;"
    assert out[5] == "    for (int c_s1 = 0; c_s1 < 2; ++c_s1) v1_s1[c_s1] = in0[lane + c_s1];"
    assert out[6:8] == ["    float a0_s0 = 0.0f;",
                        "    a0_s0 = hir_warp_reduce<32>(a0_s0, [](float x_s0, float y_s0) { return x_s0 + y_s0; });"]
    assert out[-1] == "    if (active_s1) out0[(base + 4)] = a0_s1 * R;"
