"""Outer reductions whose kept points are off the vectors' boundaries read in
shifted lanes (codegen/cuda_outer_shift.py): results against torch over
shapes that put every row at another shift, views that start past a boundary,
splits, several tiles and a part tile, prologues and epilogues; the launch's
rule and its refusals; the kernel's source (the batch's loads before its
shuffles; tiles of 31 lanes' points). CPU runs check the kernel IR (the
interpreter) and the rule on the same tensors; GPU runs the kernel."""
from __future__ import annotations

import re

import pytest
import torch

from hostir import DataType as D
from hostir.codegen import cuda_flat, cuda_outer, cuda_outer_shift, cuda_period
from ops_util import TEST_DEVICE, check, declare, rand
from test_ops_reduction import _reduction_specs, _run_keeping_fd


@pytest.fixture(autouse=True)
def _no_period(monkeypatch):
    """Shifted lanes, not virtual rows (cuda_period, whichever the default)."""
    monkeypatch.setattr(cuda_period, "OUTER_PERIOD", False)


def _view(shape, dtype, layout: str):
    """Random data of `shape` laid out as `layout` asks: contiguous, or a view
    starting 1 to 3 points past the allocation's start (rows strided wider)."""
    if layout == "contiguous":
        return rand(shape, dtype)
    lo = {"offset1": 1, "offset3": 3}[layout]
    base = rand((shape[0], shape[1] + lo + 2), dtype)
    return base[:, lo:lo + shape[1]]


def _build(kind: str, x: torch.Tensor, y: torch.Tensor | None = None):
    def build(fd):
        t = declare(fd, x, "sym" if x.is_contiguous() else "strided")
        if kind == "sum":
            fd.add_output(fd.ops.sum(t, [0]))
        elif kind == "max":
            fd.add_output(fd.ops.max(t, [0]))
        elif kind == "mean of squares":  # a prologue in fp32, an epilogue
            f = fd.ops.cast(t, D.Float)
            fd.add_output(fd.ops.div(fd.ops.sum(fd.ops.mul(f, f), [0]), float(x.shape[0])))
        elif kind == "dot":  # two inputs, each its own shift
            u = declare(fd, y, "sym" if y.is_contiguous() else "strided")
            fd.add_output(fd.ops.sum(fd.ops.mul(fd.ops.cast(t, D.Float), fd.ops.cast(u, D.Float)), [0]))
        elif kind == "int sum":
            fd.add_output(fd.ops.sum(t, [0]))
    return build


def _want(kind: str, x: torch.Tensor, y: torch.Tensor | None = None):
    xd = x.double()
    if kind == "sum":
        return xd.sum(0).to(x.dtype)
    if kind == "max":
        return x.amax(0)
    if kind == "mean of squares":
        return (xd * xd).mean(0).float()
    if kind == "dot":
        return (xd * y.double()).sum(0).float()
    return x.sum(0)


_SHAPES = [(5, 1025), (1, 1031), (64, 2047), (300, 4095), (2, 250), (33, 249), (17, 257), (700, 1009),
           (3000, 1283)]
_GPU_SHAPES = [(1619, 41427), (8192, 4095)]


@pytest.mark.parametrize("shape", _SHAPES + (_GPU_SHAPES if TEST_DEVICE == "cuda" else []), ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "offset1", "offset3"])
@pytest.mark.parametrize("kind,dtype", [("sum", D.BFloat16), ("sum", D.Half), ("max", D.BFloat16),
                                        ("mean of squares", D.Half), ("dot", D.BFloat16)], ids=str)
def test_shifted_outer_matches_torch(shape, layout, kind, dtype, monkeypatch):
    """Column reductions of 2-byte floats whose kept points are no multiple of
    a vector (or whose view starts past a boundary) take shifted lanes (flat
    reads off: kept points up to cuda_flat.FLAT_MAX_KEPT would read flat;
    any split: cuda_outer_shift.OUTER_SHIFT_FILL off), and match torch."""
    monkeypatch.setattr(cuda_flat, "OUTER_FLAT", False)
    monkeypatch.setattr(cuda_outer_shift, "OUTER_SHIFT_FILL", 0)
    x = _view(shape, dtype, layout)
    y = _view(shape, dtype, "offset1" if layout == "contiguous" else "contiguous") if kind == "dot" else None
    ins = [x] if y is None else [x, y]
    (out,), fd = _run_keeping_fd(_build(kind, x, y), ins)
    want = _want(kind, x, y)
    narrow = kind in ("sum",)
    check(out, want, kind="reduction", atol=(3e-2 if narrow else 1e-4) * shape[0] ** 0.5,
          rtol=2e-2 if narrow else None)
    (spec,) = _reduction_specs(fd)
    k, ext = spec.kernel_for(list(shape))
    var = spec.choose(k, ext, ins, None, [])
    assert var.outer and var.shift and var.vec == 8 and var.tile_lanes == 31, var.name
    import conftest  # (the session's NVRTC compile: variants past Spec.typical_variants)
    conftest._KERNEL_SOURCES.setdefault(var.source, var.name)


@pytest.mark.parametrize("shape", [(5, 1025), (300, 4095), (33, 249), (3000, 1283)], ids=str)
@pytest.mark.parametrize("kind,layout", [("sum", "contiguous"), ("sum", "offset3"), ("dot", "offset1")], ids=str)
def test_shifted_outer_a_shift_a_load(shape, kind, layout, monkeypatch):
    """The lanes' loop that takes each row's shift at each load (what runs
    where a warp's rows do not share one: cuda_outer_shift.OUTER_SHIFT_FIXED)
    matches torch too."""
    monkeypatch.setattr(cuda_flat, "OUTER_FLAT", False)
    monkeypatch.setattr(cuda_outer_shift, "OUTER_SHIFT_FILL", 0)
    monkeypatch.setattr(cuda_outer_shift, "OUTER_SHIFT_FIXED", False)
    x = _view(shape, D.BFloat16, layout)
    y = _view(shape, D.BFloat16, "contiguous") if kind == "dot" else None
    ins = [x] if y is None else [x, y]
    (out,), fd = _run_keeping_fd(_build(kind, x, y), ins)
    check(out, _want(kind, x, y), kind="reduction", atol=(3e-2 if kind == "sum" else 1e-4) * shape[0] ** 0.5,
          rtol=2e-2 if kind == "sum" else None)
    (spec,) = _reduction_specs(fd)
    k, ext = spec.kernel_for(list(shape))
    var = spec.choose(k, ext, ins, None, [])
    assert var.shift and "switch (" not in var.source, var.name
    import conftest  # (the session's NVRTC compile)
    conftest._KERNEL_SOURCES.setdefault(var.source, var.name)


@pytest.mark.parametrize("shape", [(64, 1027), (300, 4095), (5, 33)], ids=str)
@pytest.mark.parametrize("dtype", [D.Int32, D.BFloat16], ids=str)
def test_shifted_outer_of_a_broadcast_row(shape, dtype, monkeypatch):
    """A sum over rows of one row broadcast along them: the lanes' one load
    does not move with the row (its shift, fixed, is the row's own), matches
    torch, and its kernel compiles (the NVRTC session)."""
    monkeypatch.setattr(cuda_flat, "OUTER_FLAT", False)
    monkeypatch.setattr(cuda_outer_shift, "OUTER_SHIFT_FILL", 0)
    R, N = shape
    row = rand((N + 1,), dtype)[1:] if dtype == D.BFloat16 else torch.randint(-9, 9, (N,), dtype=torch.int32)

    def build(fd):
        t = declare(fd, row, "sym")
        fd.add_output(fd.ops.sum(fd.ops.broadcast_in_dim(t, [R, N], [1]), [0]))
    (out,), fd = _run_keeping_fd(build, [row])
    want = row.expand(R, N).sum(0) if dtype == D.Int32 else row.double().expand(R, N).sum(0).to(row.dtype)
    check(out, want, kind="reduction", atol=3e-2 * R ** 0.5 if dtype == D.BFloat16 else 0, rtol=2e-2)
    (spec,) = _reduction_specs(fd)
    k, ext = spec.kernel_for([R, N])
    var = spec.choose(k, ext, [row], None, [])
    import conftest  # (the session's NVRTC compile)
    conftest._KERNEL_SOURCES.setdefault(var.source, var.name)


@pytest.mark.parametrize("shape", [(40, 1027), (9, 3001)], ids=str)
def test_shifted_outer_bytes(shape, monkeypatch):
    """1-byte inputs (a bool column count into int64 accumulators: lanes of 8
    points, 8-byte vectors) take shifted lanes too; fp32 ones do not
    (cuda_outer_shift.OUTER_SHIFT_SIZES)."""
    monkeypatch.setattr(cuda_flat, "OUTER_FLAT", False)
    monkeypatch.setattr(cuda_outer_shift, "OUTER_SHIFT_FILL", 0)
    x = rand(shape, D.Bool)
    (out,), fd = _run_keeping_fd(_build("int sum", x), [x])
    check(out, x.sum(0))
    (spec,) = _reduction_specs(fd)
    k, ext = spec.kernel_for(list(shape))
    var = spec.choose(k, ext, [x], None, [])
    assert var.outer and var.shift and "hir_funnel8(" in var.source, var.name
    f = rand(shape, D.Float)
    (out,), fd = _run_keeping_fd(_build("sum", f), [f])
    check(out, f.double().sum(0).float(), kind="reduction", atol=1e-5 * shape[0] ** 0.5)
    (spec,) = _reduction_specs(fd)
    k, ext = spec.kernel_for(list(shape))
    assert not spec.choose(k, ext, [f], None, []).shift


def test_shifted_outer_refusals(monkeypatch):
    """Shifted lanes read a weight along the kept points shifted too (its own
    shift) and one a row reads as it is; none where a load a lane past the
    kept points would take reads out of bounds (a slice of the kept points
    within the fusion: not a vector load), where the reduction stores at every
    point, where the kept points are strided, or where the vectors are
    aligned; with OUTER_SHIFTED off, none."""
    monkeypatch.setattr(cuda_flat, "OUTER_FLAT", False)
    monkeypatch.setattr(cuda_outer_shift, "OUTER_SHIFT_FILL", 0)
    shape = (50, 1025)
    x, b = rand(shape, D.BFloat16), rand((shape[1],), D.BFloat16)

    def chosen(build, ins, want):
        outs, fd = _run_keeping_fd(build, ins)
        for o, w in zip(outs, want):
            check(o, w, kind="reduction", atol=3e-2 * shape[0] ** 0.5, rtol=2e-2)
        (spec,) = _reduction_specs(fd)
        k, ext = spec.kernel_for(list(ins[0].shape))
        return spec.choose(k, ext, ins, None, [])

    s = rand((shape[0], 1), D.BFloat16)

    def biased(fd):
        t = fd.ops.mul(fd.ops.add(declare(fd, x), declare(fd, b)), declare(fd, s, "bcast"))
        fd.add_output(fd.ops.sum(t, [0]))
    v = chosen(biased, [x, b, s], [((x + b) * s).double().sum(0).to(x.dtype)])
    shift_of = "(int)(reinterpret_cast<unsigned long long>(in{} + "
    assert v.shift and shift_of.format(0) in v.source and shift_of.format(1) in v.source and \
        shift_of.format(2) not in v.source

    def sliced(fd):
        t = declare(fd, x)
        fd.add_output(fd.ops.sum(fd.ops.slice(t, [0, 1], [t.size(0), t.size(1)]), [0]))
    assert not chosen(sliced, [x], [x[:, 1:].double().sum(0).to(x.dtype)]).shift

    def both(fd):
        t = fd.ops.mul(declare(fd, x), 2.0)
        fd.add_output(t)
        fd.add_output(fd.ops.sum(t, [0]))
    v = chosen(both, [x], [x * 2.0, (x * 2.0).double().sum(0).to(x.dtype)])
    assert not v.shift
    xt = rand((shape[1], shape[0]), D.BFloat16).t()  # the kept points strided
    assert not chosen(_build("sum", xt), [xt], [xt.double().sum(0).to(xt.dtype)]).shift
    xa = rand((50, 1024), D.BFloat16)
    assert not chosen(_build("sum", xa), [xa], [xa.double().sum(0).to(xa.dtype)]).shift
    monkeypatch.setattr(cuda_outer_shift, "OUTER_SHIFTED", False)
    assert not chosen(_build("sum", x), [x], [x.double().sum(0).to(x.dtype)]).shift


def test_shifted_outer_source_and_grid(monkeypatch):
    """The shifted variant's kernel: a batch's aligned vectors all read before
    any shuffle (their shifts declared ahead), tiles of 31 lanes x 8 points,
    the partials and epilogue guarded past the kept points; the launch's grid
    and split count tiles of 31 lanes; with OUTER_SHIFT_NARROWER off, kept
    points whose 8-byte vectors are aligned read those instead."""
    monkeypatch.setattr(cuda_flat, "OUTER_FLAT", False)
    monkeypatch.setattr(cuda_outer_shift, "OUTER_SHIFT_FILL", 0)
    shape = (1619, 41427) if TEST_DEVICE == "cuda" else (64, 41427)
    x = rand(shape, D.BFloat16)
    (out,), fd = _run_keeping_fd(_build("sum", x), [x])
    check(out, x.double().sum(0).to(x.dtype), kind="reduction", atol=3e-2 * shape[0] ** 0.5, rtol=2e-2)
    (spec,) = _reduction_specs(fd)
    k, ext = spec.kernel_for(list(shape))
    var = spec.choose(k, ext, [x], None, [])
    src = var.source
    assert var.shift and "(nslots + 247) / 248" in src and "tx < 31 && " in src and "ii < nslots" in src
    assert "if (row + u < nslots) ws0[" in src
    batch = var.batch or cuda_outer.OUTER_BATCH
    # the warp's loop once for each shift its rows share (OUTER_SHIFT_FIXED): the shift 0's
    # shuffles nothing, the others' shifts constants; then a shift a load (the default)
    assert "switch ((long long)split * 8 * (in0_s0) % 8 == 0 ? mf_ : 8) {" in src
    cases = [src.index(f"case {m}: {{") for m in range(8)] + [src.index("default: {")]
    assert cases == sorted(cases) and "hir_shfl_down(" not in src[cases[0]:cases[1]]
    assert "hir_funnel16(w_, hir_shfl_down(w_), 3 * 2)" in src[cases[3]:cases[4]]
    body = src[src.index("// the vectors' shifts"):]  # (the default: the batch's loads before its shuffles)
    arr = re.search(r"alignas\(16\) hir_bf16 (\w+)\[", body).group(1)
    loads, shuffles = body.index(f"{arr}[{batch - 1}]) = "), body.index("hir_shfl_down(")
    assert loads < shuffles and body.count("hir_funnel16(") >= batch
    split = spec.split(var, ext, 132)
    assert spec.grid(var, shape[1], 132, split, ext) == -(-shape[1] // 248) * split
    x4 = rand((50, 1028), D.BFloat16)  # 8-byte vectors aligned
    (out,), fd = _run_keeping_fd(_build("sum", x4), [x4])
    (spec,) = _reduction_specs(fd)
    k, ext = spec.kernel_for([50, 1028])
    assert spec.choose(k, ext, [x4], None, []).shift
    monkeypatch.setattr(cuda_outer_shift, "OUTER_SHIFT_NARROWER", False)
    v = spec.choose(k, ext, [x4], None, [])
    assert not v.shift and v.vec == 4


@pytest.mark.parametrize("shape,shifted", [((1619, 41427), True), ((8192, 4095), False), ((1000, 50257), False),
                                           ((16384, 4097), True), ((6000, 11111), True), ((20, 4097), False)],
                         ids=str)
def test_shifted_outer_fill(shape, shifted):
    """Shifted lanes only where their split (the full blocks an SM aimed at:
    OUTER_SHIFT_AIM) fills OUTER_SHIFT_FILL of them; else tiles of a point a
    lane. The rule on the shape's extents (132 SMs) and the launch's choice
    on tensors of the shape (meta: no data)."""
    x = rand((4, shape[1]), D.BFloat16)
    (out,), fd = _run_keeping_fd(_build("sum", x), [x])
    check(out, x.double().sum(0).to(x.dtype), kind="reduction")
    (spec,) = _reduction_specs(fd)
    k, ext = spec.kernel_for(list(shape))
    assert cuda_outer_shift.shifted_fills(k, 8, 256, ext, 132) == shifted
    meta = torch.empty(shape, dtype=torch.bfloat16, device="meta")
    var = spec.choose(k, ext, [meta], None, [])
    assert var.shift == shifted and var.outer, var.name
    if shifted:
        split = spec.split(var, ext, 132)
        tiles = -(-shape[1] // 248)
        assert split == min(4 * 132 // tiles, shape[0] // (cuda_outer.OUTER_MIN_POINTS * 8))
