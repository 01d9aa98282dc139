"""row_tiles.TILE_ROWS: short rows of 2-byte points off vector boundaries, a
thread a row, staged through shared memory a warp's tile of 32 rows at a time
(cuda_row_tiles). Results against torch on random rows (on a GPU the tiled
kernels run, partial last tiles and blocks looping over several tiles among
them; the nvrtc check compiles them), the rule's reach, and where it refuses."""
from __future__ import annotations

import math

import pytest
import torch

from hostir import DataType as D
from hostir.codegen import row_tiles
from ops_util import TEST_DEVICE, check, declare, rand
from test_ops_reduction import (_layernorm_checked, _norm_checked, _reduction_specs, _rmsnorm_weighted_checked,
                                _run_keeping_fd)

from test_word_rows import _rmsnorm_strided

import conftest


def _tiled(spec, ins, extents) -> bool:
    """Does the launch rule stage these extents' rows in tiles? (Its grid: the
    blocks of 128 rows, at most the device's resident blocks, even.)"""
    k = spec.kernels[0]
    var = spec.choose(k, extents, ins, None, [])
    conftest._KERNEL_SOURCES.setdefault(var.source, var.name)
    if not var.tiles:
        return False
    rows_count, n = math.prod(extents[:-1]), extents[-1]
    assert (var.vec, var.threads, var.chunks, var.block) == (2, 1, n // 2, row_tiles.TILE_BLOCK), var.name
    assert var.smem == row_tiles.tiles_smem(n // 2)
    count = spec.count(k, extents, var.vec)
    for resident in (0, 132 * 5):
        want = -(-rows_count // 128)
        if resident:
            want = min(want, resident)
        assert spec.grid(var, count, 132, 1, extents, resident) == want
    return True


def _sum_checked(x):
    (out,), fd = _run_keeping_fd(lambda fd: fd.add_output(fd.ops.sum(declare(fd, x), [1])), [x])
    check(out, x.double().sum(1).to(out.dtype), kind="reduction")
    (spec,) = _reduction_specs(fd)
    return spec


def _var_mean_checked(x):
    def build(fd):
        var, mean = fd.ops.var_mean(fd.ops.cast(declare(fd, x), D.Float), [1], correction=1)
        fd.add_output(var)
        fd.add_output(mean)
    (var, mean), fd = _run_keeping_fd(build, [x])
    want_var, want_mean = torch.var_mean(x.double(), 1, correction=1)
    check(var, want_var.float(), kind="reduction")
    check(mean, want_mean.float(), kind="reduction")
    (spec,) = _reduction_specs(fd)
    return spec


@pytest.mark.parametrize("dtype", [D.BFloat16, D.Half], ids=lambda d: d.name)
@pytest.mark.parametrize("n", [5, 7, 30, 45, 58, 61, 62, 75, 101, 119, 126, 127, 141, 159])
@pytest.mark.parametrize("rows_count", [1, 31, 33, 300])
def test_short_2byte_rows_staged_in_tiles(dtype, n, rows_count):
    """Rows of 4 to 128 points off 16-byte boundaries, of a layernorm (a
    weight and a bias), an rmsnorm (a weight), a softmax and a layernorm's
    mean and output, are computed a thread a row from their warp's tile in
    shared memory: every point against torch, tiles of 1 to 32 rows (the
    last one partial), a weight kept at both shifts (a softmax's rows up to
    TILE_PASSES_POINTS). Rows on 4-byte boundaries take tiles before word
    rows (row_widths.WORD_ROWS) up to 64 points, or with two weights
    (row_tiles.before_word_rows); a var_mean's and a sum's rows (no full
    output) are not tiled."""
    x, w, b = rand((rows_count, n), dtype), rand((n,), dtype), rand((n,), dtype)
    runs = [(_layernorm_checked(x, w, b), [x, w, b]), (_rmsnorm_weighted_checked(x, w), [x, w]),
            (_norm_checked("softmax", x), [x]), (_norm_checked("layernorm", x), [x])]
    for j, (spec, ins) in enumerate(runs):
        var = spec.choose(spec.kernels[0], [rows_count, n], ins, None, [])
        if j == 2 and n > row_tiles.TILE_PASSES_POINTS:  # (a softmax's three passes: TILE_PASSES_POINTS)
            assert not var.tiles, var.name
            continue
        words = n % 2 == 0 and not row_tiles.before_word_rows(spec.kernels[0], n)  # (row_widths.WORD_ROWS)
        assert _tiled(spec, ins, [rows_count, n]) or (words and var.stack), (spec.name, var.name)
    for spec, ins in ((_var_mean_checked(x), [x]), (_sum_checked(x), [x])):
        assert not _tiled(spec, ins, [rows_count, n])


@pytest.mark.skipif(TEST_DEVICE == "cpu", reason="many rows: each block loops over several tiles (GPU)")
@pytest.mark.parametrize("n,rows_count", [(45, 200003), (75, 150001), (119, 90017)])
def test_tiled_rows_loop_over_many_tiles(n, rows_count):
    """A launch of more rows than the device's resident blocks take at once:
    each warp takes tile after tile, the next copied while it computes this one."""
    x, w, b = rand((rows_count, n), D.BFloat16), rand((n,), D.BFloat16), rand((n,), D.BFloat16)
    assert _tiled(_layernorm_checked(x, w, b), [x, w, b], [rows_count, n])
    assert _tiled(_rmsnorm_weighted_checked(x, w), [x, w], [rows_count, n])


def test_tiles_where_the_layout_or_the_rows_refuse_them():
    """Rows on 16-byte boundaries (vectors of 8: no shift), rows past
    TILE_ROW_POINTS, fp32 rows, rows of a stride, a row tensor off 16 bytes
    (its storage offset), and a kernel reading two row tensors (a residual)
    take the other schedules; with TILE_ROWS off, none take tiles."""
    rows_count = 40
    x = rand((rows_count, 75), D.BFloat16)
    w = rand((75,), D.BFloat16)
    assert _tiled(_rmsnorm_weighted_checked(x, w), [x, w], [rows_count, 75])
    for n in (64, row_tiles.TILE_ROW_POINTS + 1):
        xn, wn = rand((rows_count, n), D.BFloat16), rand((n,), D.BFloat16)
        assert not _tiled(_rmsnorm_weighted_checked(xn, wn), [xn, wn], [rows_count, n])
    xf, wf = rand((rows_count, 75), D.Float), rand((75,), D.Float)
    assert not _tiled(_rmsnorm_weighted_checked(xf, wf), [xf, wf], [rows_count, 75])
    strided = rand((rows_count, 80), D.BFloat16)[:, 2:77]
    off = rand((rows_count * 75 + 1,), D.BFloat16)[1:].view(rows_count, 75)
    for xs, checked in ((strided, _rmsnorm_strided), (off, _rmsnorm_weighted_checked)):
        assert not _tiled(checked(xs, w), [xs, w], [rows_count, 75]), xs.stride()
    r = rand((rows_count, 75), D.BFloat16)

    def residual(fd):
        t = fd.ops.add(fd.ops.cast(declare(fd, x), D.Float), fd.ops.cast(declare(fd, r), D.Float))
        fd.add_output(fd.ops.cast(fd.ops.div(t, fd.ops.sum(t, [1], keepdim=True)), D.BFloat16))
    (out,), fd = _run_keeping_fd(residual, [x, r])
    t = x.double() + r.double()
    check(out, (t / t.sum(1, keepdim=True)).to(out.dtype), kind="reduction")
    (spec,) = _reduction_specs(fd)
    assert row_tiles.tile_slots(spec.kernels[0]) is None
    assert not _tiled(spec, [x, r], [rows_count, 75])


def test_tiles_off(monkeypatch):
    """With TILE_ROWS off, short shifted 2-byte rows take the other schedules."""
    monkeypatch.setattr(row_tiles, "TILE_ROWS", False)
    x, w = rand((40, 75), D.BFloat16), rand((75,), D.BFloat16)
    assert not _tiled(_rmsnorm_weighted_checked(x, w), [x, w], [40, 75])


@pytest.mark.parametrize("resident", [1, 3])
@pytest.mark.parametrize("n", [45, 62, 75])
def test_tiled_rows_of_one_block_and_weights_of_any_layout(n, resident, monkeypatch):
    """A grid of 1 or 3 blocks (the device's resident blocks, faked): each
    warp takes tile after tile of 1000 rows, the last one partial; weights
    of another dtype (fp32 with bf16 rows) and strided ones are kept at both
    shifts too (placed a point at a time)."""
    from hostir.runtime import backend, launch
    monkeypatch.setattr(backend, "sm_count", lambda device: 1)
    monkeypatch.setattr(launch.CompiledKernel, "resident_blocks", lambda self, device, block: resident)
    rows_count = 1000
    x = rand((rows_count, n), D.BFloat16)
    wf, bf = rand((n,), D.Float), rand((n,), D.Float)
    ws, bs = rand((2 * n,), D.BFloat16)[::2], rand((n,), D.BFloat16)
    for w, b, decl in ((wf, bf, "sym"), (ws, bs, "strided")):
        spec = _layernorm_checked(x, w, b, decl)
        assert _tiled(spec, [x, w, b], [rows_count, n])
        var = spec.choose(spec.kernels[0], [rows_count, n], [x, w, b], None, [])
        assert spec.grid(var, spec.count(spec.kernels[0], [rows_count, n], 2), 1, 1, [rows_count, n],
                         resident) == resident
