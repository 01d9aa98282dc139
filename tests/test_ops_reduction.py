"""Reductions (sum, max, min, var_mean, var) and the matmul family (matmul,
linear) of fd.ops, compared with torch computed in float64 (or torch eager
for integers) on random data."""
import math
import re

import pytest
import torch
import torch.nn.functional as F

from hostir import DataType, FusionDefinition
from hostir.codegen import one_pass, row_tiles
from hostir.ir.errors import DefinitionError
from ops_util import (COMPLEX, FLOATS, FROM_TORCH, TEST_DEVICE, TORCH, check, declare, rand, relayout, run,
                      to_device_exact)

D = DataType
RED_DTYPES = [D.Float, D.Double, D.Half, D.BFloat16, D.Int, D.Int32, D.Bool]

# (shape, decl, dims)
RED_CASES = [
    ((4, 5, 6), "sym", [0]),
    ((4, 5, 6), "sym", [1]),
    ((4, 5, 6), "sym", [-1]),
    ((4, 5, 6), "sym", [0, 2]),
    ((4, 5, 6), "sym", None),
    ((4, 5, 6), "transposed", [1, 2]),
    ((6, 7), "strided", [0]),
    ((6, 7), "sliced_fp", [1]),
    ((4, 1, 6), "bcast", [1]),
    ((4, 1, 6), "bcast", [0, 1]),
    ((1, 5), "sym", [0]),
    ((9,), "sym", [0]),
]


def _dims(x, dims):
    return tuple(range(x.ndim)) if dims is None else tuple(d % x.ndim for d in dims)


def _torch_sum(x, dims, keepdim, dtype=None):
    """torch.sum, accumulated in float64 (complex128) for floating (complex) results."""
    out = torch.sum(x, _dims(x, dims), keepdim=keepdim, dtype=dtype)
    if out.is_floating_point() or out.is_complex():
        ref = torch.sum(x.to(dtype) if dtype is not None else x, _dims(x, dims), keepdim=keepdim,
                        dtype=torch.complex128 if out.is_complex() else torch.float64)
        return ref.to(out.dtype)
    return out


def _case_id(c):
    shape, decl, dims = c
    return f"{'x'.join(map(str, shape))}-{decl}-{dims}"


@pytest.mark.parametrize("dtype", RED_DTYPES + COMPLEX, ids=lambda d: d.name)
@pytest.mark.parametrize("case", RED_CASES, ids=_case_id)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum(case, dtype, keepdim):
    shape, decl, dims = case
    x = rand(shape, dtype, low=-1.0, high=1.0)
    xs = relayout(x, decl)
    (out,) = run(lambda fd: fd.add_output(
        fd.ops.sum(declare(fd, xs, decl), dims, keepdim)), [xs])
    check(out, _torch_sum(x, dims, keepdim), kind="reduction")


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", RED_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("case", RED_CASES, ids=_case_id)
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min(op, case, dtype, keepdim):
    shape, decl, dims = case
    x = rand(shape, dtype)
    xs = relayout(x, decl)
    fn = torch.amax if op == "max" else torch.amin
    (out,) = run(lambda fd: fd.add_output(
        getattr(fd.ops, op)(declare(fd, xs, decl), dims, keepdim)), [xs])
    check(out, fn(x, _dims(x, dims), keepdim=keepdim), rtol=0, atol=0)


@pytest.mark.parametrize("src,dst", [
    (D.Float, D.Double), (D.Half, D.Float), (D.BFloat16, D.Float), (D.Int32, D.Int32),
    (D.Int32, D.Int), (D.Int, D.Float), (D.Bool, D.Int32), (D.Float, D.Int), (D.Int32, D.Double),
    (D.Double, D.Half), (D.Float, D.ComplexFloat), (D.ComplexFloat, D.ComplexDouble),
    (D.Int32, D.ComplexDouble), (D.ComplexDouble, D.ComplexFloat),
], ids=lambda d: d.name)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_with_dtype(src, dst, keepdim):
    x = rand((5, 8), src, low=-4.0, high=4.0)
    (out,) = run(lambda fd: fd.add_output(
        fd.ops.sum(declare(fd, x), [1], keepdim, dtype=dst)), [x])
    check(out, _torch_sum(x, [1], keepdim, dtype=TORCH[dst]), kind="reduction")


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("src,dst", [(D.Float, D.Half), (D.Int32, D.Float), (D.Half, D.Double),
                                     (D.Float, D.Int)], ids=lambda d: d.name)
def test_max_min_with_dtype(op, src, dst):
    x = rand((5, 8), src, low=-4.0, high=4.0)
    fn = torch.amax if op == "max" else torch.amin
    (out,) = run(lambda fd: fd.add_output(
        getattr(fd.ops, op)(declare(fd, x), [0], dtype=dst)), [x])
    check(out, fn(x.to(TORCH[dst]), 0), rtol=0, atol=0)


@pytest.mark.parametrize("dtype,expected", [
    (D.Int32, torch.int64), (D.Bool, torch.int64), (D.Int, torch.int64), (D.Half, torch.float16),
    (D.BFloat16, torch.bfloat16), (D.Float, torch.float32), (D.ComplexFloat, torch.complex64),
    (D.ComplexDouble, torch.complex128),
], ids=lambda d: getattr(d, "name", str(d)))
def test_sum_output_dtype(dtype, expected):
    x = rand((3, 4), dtype)
    (out,) = run(lambda fd: fd.add_output(fd.ops.sum(declare(fd, x), [0])), [x])
    assert out.dtype == torch.sum(x, 0).dtype == expected
    check(out, _torch_sum(x, [0], False), kind="reduction")


def test_sum_axes_keyword_and_reduction_chain():
    x = rand((4, 5, 6), D.Float)

    def build(fd):
        t = declare(fd, x)
        s = fd.ops.sum(t, axes=[2], keepdim=True)
        m = fd.ops.max(fd.ops.sub(t, s), [1])
        fd.add_output(fd.ops.div(m, fd.ops.min(t, [1])))

    (out,) = run(build, [x])
    s = x.sum(2, keepdim=True)
    check(out, (x - s).amax(1) / x.amin(1), rtol=1e-5, atol=1e-5)


def test_softmax_like_normalization():
    x = rand((4, 9), D.Float)

    def build(fd):
        t = declare(fd, x)
        m = fd.ops.max(t, [1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(t, m))
        fd.add_output(fd.ops.div(e, fd.ops.sum(e, [1], keepdim=True)))

    (out,) = run(build, [x])
    check(out, torch.softmax(x.double(), 1).float(), kind="reduction")


def test_reduction_of_half_then_pointwise_with_zero_dim_promotion():
    # sum over every dim gives a 0-dim tensor; Half [n] + 0-dim Float stays Half (torch rule)
    x = rand((4, 6), D.Half)
    y = rand((6,), D.Half)

    def build(fd):
        tx, ty = declare(fd, x), declare(fd, y)
        s = fd.ops.sum(fd.ops.cast(tx, D.Float))
        fd.add_output(fd.ops.add(ty, s))

    (out,) = run(build, [x, y])
    check(out, y + x.float().sum(dtype=torch.float64).float(), rtol=4e-3, atol=4e-3)


# ------------------------------------------------------------------ var_mean

VAR_CASES = [
    ((4, 5, 6), "sym", [0]),
    ((4, 5, 6), "sym", [-1]),
    ((4, 5, 6), "transposed", [0, 2]),
    ((4, 5, 6), "sym", None),
    ((6, 7), "strided", [1]),
    ((4, 1, 6), "bcast", [2]),
]


@pytest.mark.parametrize("dtype", [D.Float, D.Double, D.Half, D.BFloat16, D.Int, D.Int32],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("case", VAR_CASES, ids=_case_id)
@pytest.mark.parametrize("correction", [0, 1, 2])
@pytest.mark.parametrize("keepdim", [False, True])
def test_var_mean(case, dtype, correction, keepdim):
    shape, decl, dims = case
    x = rand(shape, dtype, low=-2.0, high=2.0)
    xs = relayout(x, decl)
    rdims = _dims(x, dims)
    var, mean = torch.var_mean(x.double(), rdims, correction=correction, keepdim=keepdim)
    out_dtype = TORCH[dtype] if dtype.is_float else torch.float32  # integers: Float (as nvFuser)

    def build(fd):
        v, m = fd.ops.var_mean(declare(fd, xs, decl), dims, correction, keepdim)
        fd.add_output(v)
        fd.add_output(m)

    v, m = run(build, [xs])
    check(v, var.to(out_dtype), kind="reduction")
    check(m, mean.to(out_dtype), kind="reduction")


@pytest.mark.parametrize("dtype", COMPLEX, ids=lambda d: d.name)
@pytest.mark.parametrize("case", VAR_CASES, ids=_case_id)
@pytest.mark.parametrize("correction,keepdim", [(0, False), (1, True), (2, False)])
def test_complex_var_mean(case, dtype, correction, keepdim):
    """torch's variance of complex values: real, the real part's plus the
    imaginary part's; the mean stays complex (var also, and welford's sums)."""
    shape, decl, dims = case
    x = rand(shape, dtype, low=-2.0, high=2.0)
    xs = relayout(x, decl)
    rdims = _dims(x, dims)
    var, mean = torch.var_mean(x.to(torch.complex128), rdims, correction=correction, keepdim=keepdim)
    real = torch.float32 if dtype is D.ComplexFloat else torch.float64

    def build(fd):
        t = declare(fd, xs, decl)
        v, m = fd.ops.var_mean(t, dims, correction, keepdim)
        fd.add_output(v)
        fd.add_output(m)
        fd.add_output(fd.ops.var(t, dims, correction, keepdim))
    v, m, v2 = run(build, [xs])
    assert v.dtype == real and m.dtype == TORCH[dtype]
    check(v, var.to(real), kind="reduction")
    check(v2, var.to(real), kind="reduction")
    check(m, mean.to(TORCH[dtype]), kind="reduction")


@pytest.mark.parametrize("correction", [0, 1])
def test_var(correction):
    x = rand((5, 8), D.Float)
    (out,) = run(lambda fd: fd.add_output(fd.ops.var(declare(fd, x), [1], correction)), [x])
    check(out, torch.var(x.double(), 1, correction=correction).float(), kind="reduction")


def test_layer_norm_like():
    x = rand((4, 16), D.BFloat16)

    def build(fd):
        t = fd.ops.cast(declare(fd, x), D.Float)
        v, m = fd.ops.var_mean(t, [1], correction=0, keepdim=True)
        y = fd.ops.mul(fd.ops.sub(t, m), fd.ops.rsqrt(fd.ops.add(v, 1e-5)))
        fd.add_output(fd.ops.cast(y, D.BFloat16))

    (out,) = run(build, [x])
    check(out, F.layer_norm(x.double(), [16], eps=1e-5).to(torch.bfloat16), kind="reduction")


# ------------------------------------------------------------------ matmul

MATMULS = [
    # (a shape, a decl, b shape, b decl)
    ((3,), "sym", (3,), "sym"),
    ((4, 3), "sym", (3,), "sym"),
    ((3,), "sym", (3, 5), "sym"),
    ((4, 3), "sym", (3, 5), "sym"),
    ((4, 3), "strided", (3, 5), "transposed"),
    ((2, 4, 3), "sym", (3, 5), "sym"),
    ((3,), "sym", (2, 3, 5), "sym"),
    ((2, 4, 3), "sym", (3,), "sym"),
    ((2, 4, 3), "transposed", (2, 3, 5), "sym"),
    ((2, 1, 4, 3), "bcast", (3, 3, 5), "sym"),
    ((1, 4, 3), "bcast", (6, 3, 5), "sym"),
    ((6, 4, 3), "sym", (1, 3, 5), "bcast"),
    ((2, 4, 3), "sym", (2, 3, 1), "bcast"),
]


def _mm_id(c):
    a, da, b, db = c
    return f"{'x'.join(map(str, a))}{da[0]}@{'x'.join(map(str, b))}{db[0]}"


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("case", MATMULS, ids=_mm_id)
def test_matmul(case, dtype):
    sa, da, sb, db = case
    a, b = rand(sa, dtype, low=-1, high=1), rand(sb, dtype, low=-1, high=1)
    ia, ib = relayout(a, da), relayout(b, db)
    (out,) = run(lambda fd: fd.add_output(
        fd.ops.matmul(declare(fd, ia, da), declare(fd, ib, db))), [ia, ib])
    check(out, torch.matmul(a.double(), b.double()).to(TORCH[dtype]), kind="reduction")


def test_matmul_then_pointwise():
    a, b, c = rand((4, 3), D.Float), rand((3, 5), D.Float), rand((1, 5), D.Float)

    def build(fd):
        ta, tb, tc = declare(fd, a), declare(fd, b), declare(fd, c, "bcast")
        fd.add_output(fd.ops.relu(fd.ops.add(fd.ops.matmul(ta, tb), tc)))

    (out,) = run(build, [a, b, c])
    check(out, torch.relu(a.double() @ b.double() + c.double()).float(), kind="reduction")


# ------------------------------------------------------------------ linear

LINEARS = [
    # (input shape, weight shape, bias shape or None)
    ((4, 3), (5, 3), (5,)),
    ((4, 3), (5, 3), None),
    ((2, 4, 3), (5, 3), (5,)),
    ((2, 4, 3), (5, 3), None),
    ((4, 3), (3,), None),
    ((4, 3), (3,), ()),
    ((3,), (5, 3), (5,)),
    ((3,), (3,), None),
]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("sa,sw,sbias", LINEARS, ids=lambda v: "x".join(map(str, v)) if v is not None else "nobias")
@pytest.mark.parametrize("decl", ["sym", "transposed"])
def test_linear(sa, sw, sbias, dtype, decl):
    a, w = rand(sa, dtype, low=-1, high=1), rand(sw, dtype, low=-1, high=1)
    bias = rand(sbias, dtype, low=-1, high=1) if sbias is not None else None
    wi = relayout(w, decl)
    expected = a.double() @ (w.double().t() if w.ndim == 2 else w.double())
    if bias is not None:
        expected = expected + bias.double()

    def build(fd):
        ta, tw = declare(fd, a), declare(fd, wi, decl)
        tb = declare(fd, bias) if bias is not None else None
        fd.add_output(fd.ops.linear(ta, tw, tb) if tb is not None else fd.ops.linear(ta, tw))

    (out,) = run(build, [a, wi] + ([bias] if bias is not None else []))
    check(out, expected.to(TORCH[dtype]), kind="reduction")


# Normalizations in one generated kernel, over rows of many lengths: short rows
# (a warp per row), rows kept in registers across passes (aligned, several
# passes), rows looped over (odd lengths: no vectors; very long rows), size-1 and
# empty rows, and a non-contiguous input; each against torch in float64.
NORM_SHAPES = [(3, 64), (5, 1000), (2, 4096), (3, 8192), (3, 16392), (3, 24576), (2, 40000), (1, 65536 + 8),
               (2, 65536), (2, 98304), (2, 131072),
               (4, 1), (1, 7), (6, 24), (0, 16), (3, 0)]


def _norm_build(kind, d=1):
    def build(fd, x_decl):
        t = fd.ops.cast(x_decl, D.Float)
        if kind == "softmax":
            e = fd.ops.exp(fd.ops.sub(t, fd.ops.max(t, [d], keepdim=True)))
            y = fd.ops.div(e, fd.ops.sum(e, [d], keepdim=True))
        elif kind == "log_softmax":
            s = fd.ops.sub(t, fd.ops.max(t, [d], keepdim=True))
            y = fd.ops.sub(s, fd.ops.log(fd.ops.sum(fd.ops.exp(s), [d], keepdim=True)))
        elif kind == "rmsnorm":
            ms = fd.ops.sum(fd.ops.mul(t, t), [d], keepdim=True)
            y = fd.ops.mul(t, fd.ops.rsqrt(fd.ops.add(fd.ops.div(ms, fd.ops.size(t, d)), 1e-6)))
        else:  # layernorm, with the statistics as outputs too
            var, mean = fd.ops.var_mean(t, [d], correction=0, keepdim=True)
            y = fd.ops.mul(fd.ops.sub(t, mean), fd.ops.rsqrt(fd.ops.add(var, 1e-5)))
            fd.add_output(fd.ops.squeeze(mean, [d]))
        fd.add_output(fd.ops.cast(y, x_decl.dtype))
    return build


def _norm_checked(kind, x):
    """Run _norm_build(kind) on x, check its outputs against torch, and return
    the reduction kernel's spec."""
    outs, fd = _run_keeping_fd(lambda fd: _norm_build(kind)(fd, declare(fd, x)), [x])
    for o, w in zip(outs, _norm_expected(kind, x)):
        check(o, w.to(o.dtype), kind="reduction")
    (spec,) = _reduction_specs(fd)
    return spec


def _norm_expected(kind, x, d=1):
    t = x.double()
    if kind == "softmax":
        return [torch.softmax(t, d)]
    if kind == "log_softmax":
        return [torch.log_softmax(t, d)]
    if kind == "rmsnorm":
        return [t * torch.rsqrt(t.square().mean(d, keepdim=True) + 1e-6)]
    var, mean = torch.var_mean(t, d, correction=0, keepdim=True)
    return [mean.squeeze(d), (t - mean) * torch.rsqrt(var + 1e-5)]


@pytest.mark.parametrize("shape", NORM_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kind", ["softmax", "log_softmax", "rmsnorm", "layernorm"])
@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16, D.Half], ids=lambda d: d.name)
def test_normalization_rows(kind, shape, dtype):
    if shape[1] == 0 and kind in ("softmax", "log_softmax"):
        pytest.skip("max over an empty row raises (as torch.amax)")
    x = rand(shape, dtype)
    outs = run(lambda fd: _norm_build(kind)(fd, declare(fd, x)), [x])
    want = _norm_expected(kind, x)
    assert len(outs) == len(want)
    for o, w in zip(outs, want):
        check(o, w.to(o.dtype), kind="reduction")


@pytest.mark.parametrize("kept", [(7,), (3, 5), (3,)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kind", ["softmax", "log_softmax", "rmsnorm", "layernorm", "stored"])
@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16], ids=lambda d: d.name)
def test_looped_rows_several_a_block(kind, kept, dtype, monkeypatch):
    """Looped rows with a grid of 2 blocks (rows.resident_rows forced): each
    block takes rows one after another; an odd count of rows and several kept
    dims; `stored` also stores a value of the first pass at every point and
    the rows' maxima. Rows of 72000 fp32 points or 139264 (bf16; 3 kept:
    every kind) loop, checked on the
    generated kernels; those of 1024 threads load their vectors in batches
    (_ReductionPrinter._batch)."""
    from hostir.codegen import rows
    monkeypatch.setattr(rows, "resident_rows", lambda *a: 2)
    long = kept == (3,) or dtype is D.BFloat16
    shape = (*kept, 139264 if long else 72000)
    x = rand(shape, dtype)
    last = len(shape) - 1

    def build(fd):
        t0 = declare(fd, x)
        if kind != "stored":
            _norm_build(kind, last)(fd, t0)
            return
        t = fd.ops.cast(t0, D.Float)
        m = fd.ops.max(t, [last], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(t, m))
        fd.add_output(fd.ops.cast(fd.ops.mul(t, 2.0), dtype))
        fd.add_output(fd.ops.cast(fd.ops.div(e, fd.ops.sum(e, [last], keepdim=True)), dtype))
        fd.add_output(fd.ops.squeeze(m, [last]))

    outs, fd = _run_keeping_fd(build, [x])
    t = x.double()
    if kind == "stored":
        want = [t * 2, torch.softmax(t, last), t.amax(last)]
    else:
        want = _norm_expected(kind, t, last)
    assert len(outs) == len(want)
    for o, w in zip(outs, want):
        check(o, w.reshape(o.shape).to(o.dtype), kind="reduction")
    specs = _reduction_specs(fd)
    assert specs
    for spec in specs:
        k = spec.kernel_for(list(shape))[0]
        vec = spec._vec[id(k)]
        threads, chunks, _ = spec._row_schedule(k, shape[-1] // vec)
        assert vec > 1 and threads and not chunks
        src = spec.variant(k, vec, "int", threads).source
        assert ("r0 < R" in src) == (threads == 1024), (threads, src)


@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16], ids=lambda d: d.name)
def test_launch_rule_of_long_rows(dtype, monkeypatch):
    """Rows registers hold (up to 16 points a thread of 1024: LOOP_MIN_POINTS)
    stay in registers; longer rows of a kernel that reads them twice
    (layernorm, rmsnorm) stay there while a thread's vectors take
    REGISTER_LONG_WORDS registers at most (bf16 rmsnorm to 24576 points, not
    layernorm: its weight and bias take 8), else loop with about LOOP_VECTORS
    vectors a thread while a row is LOOP_ROW_BYTES at most (bf16 rows past
    16384 points), past that they go to shared memory; a softmax (three reads)
    loops only rows an SM's L1 holds, which registers hold too: it keeps them
    there. Rows a block's shared memory holds in part keep the rest in
    registers (SMEM_REST_WORDS); a softmax's rows of up to
    SMEM_ROW_LONG_CHUNKS vectors a thread of 1024 take one block an SM."""
    from hostir.codegen import rows as S
    x = rand((2, 64), dtype)
    specs = {}
    for kind in ("layernorm", "rmsnorm", "softmax"):
        _, fd = _run_keeping_fd(lambda fd: _norm_build(kind)(fd, declare(fd, x)), [x])
        specs[kind] = _reduction_specs(fd)[0]
    w, b = rand((64,), dtype), rand((64,), dtype)

    def affine(fd):  # a layernorm with a weight and a bias
        xt, wt, bt = declare(fd, x), declare(fd, w), declare(fd, b)
        t = fd.ops.cast(xt, D.Float)
        var, mean = fd.ops.var_mean(t, [1], correction=0, keepdim=True)
        y = fd.ops.mul(fd.ops.sub(t, mean), fd.ops.rsqrt(fd.ops.add(var, 1e-5)))
        y = fd.ops.add(fd.ops.mul(y, fd.ops.broadcast_in_dim(fd.ops.cast(wt, D.Float), [2, 64], [1])),
                       fd.ops.broadcast_in_dim(fd.ops.cast(bt, D.Float), [2, 64], [1]))
        fd.add_output(fd.ops.cast(y, xt.dtype))
    _, fd = _run_keeping_fd(affine, [x, w, b])
    specs["affine"] = _reduction_specs(fd)[0]
    size = 2 if dtype is D.BFloat16 else 4
    assert S.LOOP_MIN_POINTS == S.PERSISTENT_POINTS * S.ROW_THREADS[-1] + 1
    assert [S.loop_threads(v) for v in (512, 1024, 1536, 2048, 1 << 20)] == [128, 256, 256, 512, 512]
    for kind in ("layernorm", "rmsnorm", "affine", "softmax"):
        sp = specs[kind]
        k, vec = sp.plain, sp._vec[id(sp.plain)]
        for n in (2048, 4096, 8192, 12288, 16384):
            assert sp._row_schedule(k, n // vec)[1] > 0  # in registers
        longest = S.LOOP_ROW_BYTES // size
        if kind == "softmax" or size == 4:  # no loop: rows past registers are past 64 KiB in fp32
            assert sp._row_schedule(k, 20480 // vec)[1] > 0  # shared memory
            continue
        if kind != "affine":  # x alone: 4 vectors a thread of 1024 take 16 words
            for n in (20480, 24576, longest):
                c = -(-n // (1024 * vec))
                assert sp._row_schedule(k, n // vec) == (1024, c, 0)
                assert "__launch_bounds__(1024, 2)" in sp.variant(k, vec, "int", 1024, c).source
            continue
        for n in (20480, 24576):  # 3 vectors of x, one of the weight and bias: 20 (bounds of 2 blocks spill)
            assert sp._row_schedule(k, n // vec) == (S.loop_threads(n // vec), 0, 0)
            # ... but a shifted row (no bounds) keeps them, up to REGISTER_LONG_MOST
            assert sp._row_schedule(k, n // vec + 1, shift=True) == (1024, -(-(n // vec + 1) // 1024), 0)
        # 4 vectors of x: 24 words loop on boundaries; a shifted row keeps them
        # (rows.REGISTER_LONG_MOST), one block an SM (no bounds)
        assert sp._row_schedule(k, longest // vec) == (S.LOOP_ROW_THREADS, 0, 0)
        assert sp._row_schedule(k, longest // vec, shift=True) == (1024, 4, 0)
        monkeypatch.setattr(S, "REGISTER_LONG_MOST", 16)
        assert sp._row_schedule(k, longest // vec, shift=True) == (S.LOOP_ROW_THREADS, 0, 0)
        assert sp._row_schedule(k, 2 * longest // vec)[1] > 0  # shared memory (or registers)
    if dtype is D.BFloat16:  # a row in shared memory: read past L1 (its kept part), stored evict-first
        sp = specs["rmsnorm"]
        k, vec = sp.plain, sp._vec[id(sp.plain)]
        sched = sp._row_schedule(k, 65536 // vec)
        assert sched == (1024, 8, 6)  # 6 vectors a thread in shared memory, 2 in registers
        src = sp.variant(k, vec, "int", *sched).source
        assert f"if (c < {sched[2]})" in src and "__stcs(" in src and "_r[16];" in src
        # each chunk waits for its own copy; a block a row (no copy of a next row ahead)
        assert src.count("hir_cp_async<16>(") == 1 and "hir_cp_async_wait();" not in src
        assert "hir_cp_async_wait_pending(5 - c)" in src and "hir_cp_async_after" not in src
        assert "__launch_bounds__(1024, 2)" in src
        var = sp.variant(k, vec, "int", *sched)
        assert sp.grid(var, 4096, 132, 1, [4096, 65536]) == 4096
        monkeypatch.setattr(S, "ROW_WAITS", False)
        sp._variants.clear()
        src = sp.variant(k, vec, "int", *sched).source
        assert src.count("hir_cp_async_wait();") == 1 and "wait_pending" not in src
        monkeypatch.undo()
        sp._variants.clear()
        monkeypatch.setattr(S, "SMEM_REST_WORDS", 0)  # the rest read again in each pass
        sp._variants.clear()
        src = sp.variant(k, vec, "int", *sched).source
        assert "_r[" not in src and "hir_cp_async" not in src and "L1::no_allocate" in src
        monkeypatch.undo()
        soft = specs["softmax"]
        sk = soft.plain
        assert soft._row_schedule(sk, 131072 // vec) == (1024, 16, 14)  # one block an SM
        assert soft._row_schedule(sk, 98304 // vec) == (1024, 12, 12)
        assert sp._row_schedule(sp.plain, 131072 // vec)[1:] == (0, 0)  # two reads: loops
        sched = sp._row_schedule(k, 40000 // vec)  # kept whole by 1024 threads: cp.async, then read
        assert sched[0] == 1024 and sched[1] == sched[2]
        src = sp.variant(k, vec, "int", *sched).source
        assert src.count("hir_cp_async<16>(") == 1 and "hir_cp_async_wait_pending(" in src


# ------------------------------------------------------------------ online softmax
# A max M and the next pass's sum of exp(a - M) fold into one pass of online
# (max, sum) pairs (codegen/online.py) where the persistent schedule does not
# hold the row: rows longer than 16384 points (and than shared memory and
# clusters hold), rows of a length no multiple of the vector width that
# shifted vectors cannot read (these tests run the online form with
# HOSTIR_DISABLE=shifted_rows, so odd rows take it: a GPU's launch does where
# the tensors refuse shifted vectors), and rows along a kept innermost dim. The launch rule
# decides from the extents alone, so these CPU runs take the kernel a GPU
# would. HOSTIR_DISABLE=online_softmax keeps the passes.

INF, NAN = float("inf"), float("nan")
ONLINE_KINDS = ["softmax", "log_softmax", "logsumexp"]
# (shape, online?): rows longer than the persistent schedules hold (past shared
# memory and one block an SM, in every dtype) and odd long rows, short odd rows,
# size-1 rows; rows held in registers and, just past 16384 points, in shared memory
ONLINE_SHAPES = [((6, 524296), True), ((6, 20001), True), ((6, 7), True), ((6, 1), True),
                 ((6, 64), False), ((6, 16392), False), ((4, 12288), False), ((4, 16384), False),
                 ((4, 8192), False)]


def test_rows_held_in_registers():
    """Rows of a softmax kept in registers take the threads that leave the
    fewest vectors over (128 to 512 threads, up to 40 points a thread), short
    rows the fewest threads, fewer where their slots fill more (rows.
    ROW_FILL_GAIN); rows
    of 8192 to 16384 points stay there rather than take the online kernel
    while at most a quarter of the vectors idle."""
    from hostir.codegen.rows import register_row
    assert register_row(768, 2, 8) == (256, 3, 0)      # bf16 6144 points
    assert register_row(1536, 2, 8) == (512, 3, 0)     # bf16 12288
    assert register_row(1152, 2, 8) == (256, 5, 0)     # bf16 9216: 10 % idle
    assert register_row(192, 2, 8) == (128, 2, 0)      # bf16 1536: no fewer than 128 threads
    assert register_row(64, 2, 8) == (32, 2, 0)        # short rows: the fewest threads
    assert register_row(8, 2, 8) == (4, 2, 0)          # bf16 64: part of a warp
    assert register_row(8, 3, 8) == (4, 2, 0)          # ... all slots full at 4 threads of 2
    assert register_row(37, 3, 8) == (8, 5, 0)         # bf16 296: 8 x 5 fill 92 % (16 x 3: 77 %)
    assert register_row(134, 3, 8) == (32, 5, 0)       # fp16 1072: 84 % (64 x 3: 70 %)
    assert register_row(41, 3, 8) == (16, 3, 0)        # bf16 333: no fewer threads at 5 or fewer
    assert register_row(18, 3, 8) == (8, 3, 0)         # bf16 150: no fewer than 8 (4 x 5 fills 90 %)
    assert register_row(3072, 4, 4) == (512, 6, 0)     # fp32 12288
    assert register_row(4096, 4, 4) == (512, 8, 0)     # fp32 16384
    # a shifted layernorm's 2-byte rows (rows.SHIFTED_ROW_THREADS): 256 threads at most, 64 points a thread
    assert register_row(1644, 3, 8) == (512, 4, 0) and register_row(1644, 3, 8, wide=True) == (256, 7, 0)
    assert register_row(875, 3, 8) == (256, 4, 0) and register_row(875, 3, 8, wide=True) == (128, 7, 0)
    assert register_row(2000, 3, 8, wide=True) == (256, 8, 0)   # fp16 16001
    assert register_row(640, 3, 8, wide=True) == (128, 5, 0)    # bf16 5121: as before
    x = rand((4, 12296), D.BFloat16)
    _, fd = _run_keeping_fd(lambda fd: _online_build("softmax")(fd, declare(fd, x)), [x])
    (spec,) = _reduction_specs(fd)
    assert not _is_online(spec.kernel_for([4, 12296])[0])   # 512 x 4 vectors, 25 % idle


@pytest.mark.parametrize("shape,kind,dtype,threads", [
    ((37, 144), "var_mean", D.Float, 8), ((50, 160), "var_mean", D.BFloat16, 4), ((9, 400), "sum", D.Float, 32),
    ((5, 856), "max", D.Float, 64), ((3, 4105), "sum", D.BFloat16, 256), ((40, 12), "sum", D.Float, 1),
    ((33, 64), "sum", D.Half, 4), ((7, 36), "var_mean", D.Float, 2), ((9, 400), "dot", D.Float, 32),
    ((5, 1000), "dot", D.BFloat16, 32), ((6, 408), "var_mean", D.BFloat16, 16), ((5, 8663), "var_mean", D.BFloat16, 128),
    ((3, 20000), "var_mean", D.Float, 512), ((3, 22163), "max", D.Float, 512), ((2, 24536), "sum", D.BFloat16, 256), ((5, 85811), "var_mean", D.BFloat16, 512)],
    ids=str)
def test_one_pass_rows_load_batches(shape, kind, dtype, threads):
    """A one-pass row (a sum, a max, a var_mean) read in vectors loads each
    thread's few vectors (up to ROW_WORK, or one_pass.SHORT_ROW_MOST short) before
    it uses them (one_pass.ONE_PASS_BATCH), in blocks that ask for 2048 threads an
    SM where the batch's words fit rows.FULL_OCCUPANCY_WORDS (not two inputs'
    4 vectors each: `dot`); a short row whose threads' last loads would leave
    many slots empty takes fewer threads (one_pass.SHORT_ROW_FILL: 9 vectors over
    4 threads, not 8); groups of 8 threads or more take up to 4 vectors each
    (one_pass.SHORT_GROUP_WORK: 36 over 16 threads, not 32); a var_mean's groups
    of any size up to 6 (one_pass.SEVERAL_GROUP_WORK, shifted rows
    SHIFTED_GROUP_WORK: 20 over 4; 2-byte ones in groups SHIFTED_NARROW_WORK:
    12 over 4, not 2; past that, from 4 threads, up to 12 vectors each:
    one_pass.SHIFTED_WIDE_WORK, 74 over 8, not 32); rows of 1024 threads up to 16 (a var_mean's
    of 512 threads or more: one_pass.ROW_WORK_LONG), up to 32 where 16 leaves
    1024 threads (ROW_WORK_LONGER). Results
    against torch (the GPU runs the batches), the rule, the kernel's loop and
    bounds (none where few rows split over blocks: one_pass.ONE_PASS_PARTS_BOUNDS)."""
    assert one_pass.row_threads(36, batched=True) == 16 and one_pass.row_threads(36) == 16 and \
        one_pass.row_threads(65) == 32
    assert one_pass.row_threads(9, batched=True) == 4 and one_pass.row_threads(9) == 8 and one_pass.row_threads(17) == 8
    assert one_pass.row_threads(1083) == 512 and one_pass.row_threads(1083, reductions=2) == 128
    assert one_pass.row_threads(1024, reductions=2) == 256 and one_pass.row_threads(5000, reductions=2) == 512
    assert one_pass.row_threads(2047) == 512 and one_pass.row_threads(5540) == 512 and one_pass.row_threads(3067) == 256
    assert one_pass.row_threads(10727, reductions=2) == 512 and one_pass.row_threads(16384) == 512
    assert one_pass.row_threads(16385) == 1024 and one_pass.row_threads(70000) == 1024  # (ROW_WORK_LONGER)
    assert one_pass.row_threads(8, batched=True, reductions=2) == 2 and one_pass.row_threads(8, batched=True) == 4
    assert one_pass.row_threads(20, reductions=2) == 4 and one_pass.row_threads(20, reductions=2, shifted=True) == 4
    assert one_pass.row_threads(12, reductions=2, shifted=True, vec=8) == 4 and \
        one_pass.row_threads(12, reductions=2, shifted=True, vec=4) == 2 and \
        one_pass.row_threads(6, reductions=2, shifted=True, vec=8) == 1  # (one_pass.SHIFTED_NARROW_WORK)
    assert [one_pass.row_threads(n, reductions=2, shifted=True, vec=8) for n in (17, 37, 48, 49, 74, 192, 193)] == \
        [4, 4, 4, 8, 8, 16, 64] and one_pass.row_threads(74, reductions=2, shifted=True, vec=4) == 16  # (SHIFTED_WIDE_WORK)
    assert one_pass.row_threads(20, batched=True) == 8 and one_pass.row_threads(8, batched=True) == 4
    assert one_pass.row_threads(3, batched=True) == 1 and one_pass.row_threads(100, batched=True) == 32
    x, y = rand(shape, dtype), rand(shape, dtype)

    def build(fd):
        t = declare(fd, x)
        if kind == "var_mean":
            var, mean = fd.ops.var_mean(t, [1], correction=1)
            fd.add_output(var)
            fd.add_output(mean)
        elif kind == "dot":
            fd.add_output(fd.ops.sum(fd.ops.mul(fd.ops.cast(t, D.Float), fd.ops.cast(declare(fd, y), D.Float)), [1]))
        else:
            fd.add_output(getattr(fd.ops, kind)(t, [1]))
    outs, fd = _run_keeping_fd(build, [x, y] if kind == "dot" else [x])
    xd = x.double()
    if kind == "dot":
        check(outs[0], (xd * y.double()).sum(1).float(), kind="reduction", atol=1e-4 * shape[1] ** 0.5)
    elif kind == "var_mean":
        v, m = torch.var_mean(xd, 1, correction=1)
        check(outs[0], v.to(x.dtype), kind="reduction")
        check(outs[1], m.to(x.dtype), kind="reduction")
    else:
        check(outs[0], (xd.sum(1) if kind == "sum" else xd.amax(1)).to(x.dtype), kind="reduction")
    (spec,) = _reduction_specs(fd)
    k = spec.kernel_for(list(shape))[0]
    var = spec.choose(k, list(shape), [x, y] if kind == "dot" else [x], None, [])
    assert var.threads == threads and not var.chunks and var.vec > 1, var.name
    src = var.source
    start = ("plo_ + " if var.parts else "") + (f"lane * {var.vec}" if not var.shift else "")
    assert f"for (int r0 = {start}" in src  # (few rows: a row over blocks, one_pass.row_parts)
    bounded = f"__launch_bounds__({var.block}, {2048 // var.block})" in src
    # (rows split over blocks ask none: one_pass.ONE_PASS_PARTS_BOUNDS)
    assert bounded == (kind != "dot" and not var.parts) and (bounded or f"__launch_bounds__({var.block})" in src)
    off = one_pass.ONE_PASS_BATCH
    try:
        one_pass.ONE_PASS_BATCH = 0
        plain = kernel_text_source(var)
        assert "for (int r0" not in plain and "#pragma unroll 4" in plain
    finally:
        one_pass.ONE_PASS_BATCH = off


@pytest.mark.parametrize("cols,kind,batch", [(17000, "sum", 5), (20000, "var_mean", 0), (16000, "sum", 0),
                                             (40000, "max", 0), (20480, "sum", 5)], ids=str)
def test_long_one_pass_rows_load_at_once(cols, kind, batch, monkeypatch):
    """A one-pass row of 1024 threads whose threads take 5 to 8 vectors loads
    them at once where their words and the reductions' fit
    one_pass.ONE_PASS_LONG_WORDS (a row sum's 5, not a var_mean's: it spilled),
    the launch picking the variant of that count (`_n5`); others batches of 4;
    all ask for two blocks an SM (one_pass.ONE_PASS_LONG_BOUNDS). Results against
    torch, the rule, the kernel's batch array. (Rows of 5 to 8 vectors a
    thread of 1024 take fewer threads, up to 16 vectors each:
    one_pass.ROW_WORK_LONG, off here.)"""
    monkeypatch.setattr(one_pass, "ROW_WORK_LONG", 0)
    x = rand((3, cols), D.Float)

    def build(fd):
        t = declare(fd, x)
        if kind == "var_mean":
            for o in fd.ops.var_mean(t, [1], correction=1):
                fd.add_output(o)
        else:
            fd.add_output(getattr(fd.ops, kind)(t, [1]))
    outs, fd = _run_keeping_fd(build, [x])
    xd = x.double()
    want = list(torch.var_mean(xd, 1, correction=1)) if kind == "var_mean" else \
        [xd.sum(1) if kind == "sum" else xd.amax(1)]
    for got, w in zip(outs, want):
        check(got, w.float(), kind="reduction", atol=1e-5 * cols ** 0.5)
    (spec,) = _reduction_specs(fd)
    k = spec.kernel_for([3, cols])[0]
    var = spec.choose(k, [3, cols], [x], None, [])
    assert var.threads == 1024 and var.batch == batch and not var.chunks, var.name
    assert ("_n5_" in var.name) == (batch == 5)
    assert f"float v1[{4 * (batch or 4)}];" in var.source or kind == "var_mean"
    assert ("__launch_bounds__(1024, 2)" in var.source) != var.parts  # (one_pass.ONE_PASS_PARTS_BOUNDS)
    import conftest  # (the session's NVRTC compile: variants past Spec.typical_variants)
    conftest._KERNEL_SOURCES.setdefault(var.source, var.name)


def kernel_text_source(var):
    """A variant's source printed anew (Variant.source is cached)."""
    from hostir.codegen.cuda import kernel_source
    return kernel_source(var.kernel, var.vec, var.idx, var.block, threads=var.threads, shift=var.shift,
                         funnel=var.funnel, name=var.name)


@pytest.mark.parametrize("dtype", [D.BFloat16, D.Half, D.Float])
@pytest.mark.parametrize("kind", ["sum", "mean", "max", "product"])
def test_outer_lanes_of_many_rows_batch_more(dtype, kind):
    """An outer tile kernel whose lanes load one input's 2-byte vectors into
    4-byte accumulators and take cuda_outer.OUTER_NARROW_ROWS points each or
    more takes OUTER_BATCH_NARROW points a batch (the launch's variant, its
    loads issued first), one of fp32 vectors OUTER_BATCH_WIDE; fewer 2-byte
    rows a lane, two inputs: OUTER_BATCH.
    Results against torch: on GPUs of a shape the rule takes (2^17 rows), on
    CPUs (the interpreter, the same kernel IR) of 4096 rows, which it takes
    on 8 SMs."""
    from hostir.codegen import cuda_outer
    from hostir.codegen.cuda_outer import outer_batch
    shape = (1 << 17, 1024) if TEST_DEVICE == "cuda" else (4096, 1024)
    x = rand(shape, dtype)
    y = rand(shape, dtype)
    def build(fd):
        a = declare(fd, x)
        v = fd.ops.mul(a, declare(fd, y)) if kind == "product" else a
        r = fd.ops.max(v, [0]) if kind == "max" else fd.ops.sum(v, [0])
        fd.add_output(fd.ops.div(r, float(shape[0])) if kind == "mean" else r)
    ins = [x, y] if kind == "product" else [x]
    (out,), fd = _run_keeping_fd(build, ins)
    xf = x.float()
    want = {"sum": xf.sum(0), "mean": xf.mean(0), "max": xf.amax(0), "product": (xf * y.float()).sum(0)}[kind]
    narrow = dtype is not D.Float
    check(out, want.to(out.dtype), kind="reduction", atol=(2e-2 if narrow else 1e-4) * shape[0] ** 0.5,
          rtol=1.6e-2 if narrow else None)
    (spec,) = _reduction_specs(fd)
    k = spec.kernel_for(list(shape))[0]
    vec = 8 if narrow else 4
    lanes = cuda_outer.outer_lanes(1024, vec, k)
    one = kind != "product"
    var = spec.choose(k, list(shape), ins, None, [])
    if narrow:  # 2-byte lanes: where they take many rows
        B = cuda_outer.OUTER_BATCH_NARROW
        assert var.outer and var.batch == (B if one and TEST_DEVICE == "cuda" else 0)
        for rows_count, sms, taken in [(4096, 8, one), (4096, 132, False), (1 << 20, 132, one)]:
            got = outer_batch(k, vec, lanes, 256, [rows_count, 1024], sms)
            assert got == (B if taken else 0), (rows_count, sms, got)
    else:  # fp32 lanes of one input: any rows
        B = cuda_outer.OUTER_BATCH_WIDE
        assert var.outer and var.batch == (B if one else 0)
        assert outer_batch(k, vec, lanes, 256, [64, 1024], 132) == (B if one else 0)
    if one:  # the variant and its source: batches of B points
        var = spec.variant(k, vec, "int", lanes, outer=True, batch=B)
        assert f"for (; (long long)r0 + {B - 1}LL * " in var.source and f"[{B}][{vec}];" in var.source
        assert f"_n{B}" in var.name


@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16], ids=lambda d: d.name)
@pytest.mark.parametrize("kind", ["sum", "max", "var_mean", "mean of squares", "argmax"])
@pytest.mark.parametrize("rows_count,odd", [(1, False), (3, False), (16, False), (1, True), (4, True)])
def test_few_long_rows_split_over_blocks(rows_count, odd, kind, dtype):
    """One-pass rows too few to fill an eighth of a wave of blocks (a sum of every
    point, a var_mean of a few rows) are each split over several blocks
    (one_pass.row_parts: the launch's split, a variant's `parts`), their parts'
    partials combined in a fixed order by each row's last block. Results
    against torch (on GPUs the split kernel, 2^20 points a row; on CPUs the
    interpreter of the same kernel IR); the rule, the variant and the split
    as a GPU of 132 SMs takes them. Very few long rows of an `odd` length
    (off vector boundaries after the first) take a point a thread, split
    too (one_pass.points_parted: on CPUs a 2^16 + 3 long row)."""
    n = (1 << 20) + 8 * 37 if TEST_DEVICE == "cuda" else 4096 * 6 + 8
    n = (n if TEST_DEVICE == "cuda" else 1 << 16) + 3 if odd else n
    x = rand((rows_count, n), dtype)

    def build(fd):
        t = fd.ops.cast(declare(fd, x), D.Float)
        if kind == "var_mean":
            v, m = fd.ops.var_mean(t, [1], correction=1)
            fd.add_output(v)
            fd.add_output(m)
        elif kind == "mean of squares":
            fd.add_output(fd.ops.div(fd.ops.sum(fd.ops.mul(t, t), [1]), float(n)))
        elif kind == "argmax":
            fd.add_output(fd.ops.argmax(t, 1, False))
        else:
            fd.add_output(getattr(fd.ops, kind)(t, [1]))
    outs, fd = _run_keeping_fd(build, [x])
    xf = x.double()
    if kind == "var_mean":
        v, m = torch.var_mean(xf, 1, correction=1)
        check(outs[0], v.float(), kind="reduction")
        check(outs[1], m.float(), kind="reduction")
    elif kind == "argmax":
        assert torch.equal(outs[0].cpu(), x.float().argmax(1).cpu())
    else:
        want = {"sum": xf.sum(1), "max": xf.amax(1), "mean of squares": (xf * xf).mean(1)}[kind]
        check(outs[0], want.float(), kind="reduction", atol=1e-5 * n ** 0.5)
    (spec,) = _reduction_specs(fd)
    k = spec.kernel_for([rows_count, n])[0]
    var = spec.choose(k, [rows_count, n], [x], None, [])
    vectors = n // var.vec
    want_split = one_pass.row_parts(rows_count, vectors, var.threads, 132)
    assert var.parts == (want_split > 1), var.name
    assert var.vec == 1 if odd else var.vec > 1  # (odd: a point a thread, its parts too)
    assert var.parts or not odd
    assert one_pass.points_parted(4, 1 << 16) and not one_pass.points_parted(5, 1 << 20) and \
        not one_pass.points_parted(1, (1 << 16) - 1)
    assert want_split > 1 or TEST_DEVICE != "cuda"
    if var.parts:
        assert spec.split(var, [rows_count, n], 132) == want_split
        assert spec.grid(var, rows_count, 132, want_split, [rows_count, n]) == rows_count * want_split
        assert "if (!last_) continue;" in var.source
    assert one_pass.row_parts(rows_count, 1 << 18, 1024, 132) == min(264 // rows_count, 64)
    assert one_pass.row_parts(64, 1 << 18, 1024, 132) == 1  # (past an eighth of a wave: a block a row)
    assert one_pass.row_parts(33, 1 << 18, 1024, 132) == 8 and one_pass.row_parts(34, 1 << 18, 1024, 132) == 1


def test_looped_rows_in_flight_fit_l2():
    """A kernel that reads its looped rows again (rows past registers and
    shared memory) launches whole blocks an SM such that its rows in flight fit
    rows.L2_ROW_BYTES: a 256 KiB row one block an SM (not two by threads);
    no cap where even one row an SM passes it, or where the rows already fit;
    none either where a weight and bias every row reads outweigh the row."""
    from hostir.codegen import rows
    assert rows.resident_rows(256 * 1024, 1024, 132) == 132
    assert rows.resident_rows(512 * 1024, 1024, 132) == 0        # even one an SM passes L2
    assert rows.resident_rows(64 * 1024, 512, 132) == 0          # 4 an SM fit
    assert rows.resident_rows(96 * 1024, 256, 132) == 3 * 132    # 8 an SM by threads, 3 fit
    assert rows.resident_rows(1 << 20, 256, 16) == 32            # fewer SMs: 2 an SM

    def grid(kind, n, **kw):
        x = rand((4, n), D.BFloat16)
        more = [rand((n,), D.BFloat16) for _ in range(kw.get("params", 0))]
        _, fd = _run_keeping_fd(lambda fd: kw["build"](fd, declare(fd, x), *[declare(fd, m) for m in more]),
                                [x, *more])
        (spec,) = _reduction_specs(fd)
        k = spec.kernel_for([4096, n])[0]
        var = spec.variant(k, spec._vec[id(k)], "int", *spec._row_schedule(k, n // spec._vec[id(k)]))
        assert var.threads and not var.chunks  # a looped row
        return spec.grid(var, 4096, 132, 1, [4096, n])

    def rms(fd, x, w):
        a = fd.ops.cast(x, D.Float)
        r = fd.ops.rsqrt(fd.ops.add(fd.ops.sum(fd.ops.mul(a, a), [1], keepdim=True), 1e-6))
        fd.add_output(fd.ops.cast(fd.ops.mul(fd.ops.mul(a, r), fd.ops.cast(w, D.Float)), D.BFloat16))

    def ln(fd, x, w, b):
        a = fd.ops.cast(x, D.Float)
        m = fd.ops.sum(a, [1], keepdim=True)
        d = fd.ops.sub(a, m)
        r = fd.ops.rsqrt(fd.ops.add(fd.ops.sum(fd.ops.mul(d, d), [1], keepdim=True), 1e-5))
        y = fd.ops.add(fd.ops.mul(fd.ops.mul(d, r), fd.ops.cast(w, D.Float)), fd.ops.cast(b, D.Float))
        fd.add_output(fd.ops.cast(y, D.BFloat16))
    assert grid("rmsnorm", 131072, build=rms, params=1) == 132    # bf16: 256 KiB rows
    assert grid("rmsnorm", 262144, build=rms, params=1) == 4096    # 512 KiB rows: uncapped
    assert grid("layernorm", 139264, build=ln, params=2) == 4096   # weight and bias outweigh the row


def _online_build(kind, prologue=None, dim=1, factor=None):
    """softmax, log_softmax or logsumexp (max + log(sum(exp(a - max)))) of
    a = prologue(float(x)) along `dim`, in x's dtype; `factor(fd, e)` makes
    the sum's terms from e = exp(a - max)."""
    def build(fd, x, *more):
        a = fd.ops.cast(x, D.Float)
        if prologue is not None:
            a = prologue(fd, a, *more)
        m = fd.ops.max(a, [dim], keepdim=True)
        s = fd.ops.sub(a, m)
        e = fd.ops.exp(s)
        total = fd.ops.sum(e if factor is None else factor(fd, e, *more), [dim], keepdim=True)
        if kind == "softmax":
            y = fd.ops.div(e, total)
        elif kind == "log_softmax":
            y = fd.ops.sub(s, fd.ops.log(total))
        else:
            y = fd.ops.squeeze(fd.ops.add(fd.ops.log(total), m), [dim])
        fd.add_output(fd.ops.cast(y, x.dtype))
    return build


def _online_expected(kind, a, dim=1, c=None):
    """torch eager in float64. torch.logsumexp takes an infinite max as 0 (-inf
    for a row all -inf); the fusion's composite gives NaN there, as its softmax."""
    if kind == "softmax" and c is None:
        return torch.softmax(a, dim)
    if kind == "log_softmax" and c is None:
        return torch.log_softmax(a, dim)
    m = a.amax(dim, keepdim=True)
    e = torch.exp(a - m)
    total = (e if c is None else e * c).sum(dim, keepdim=True)
    if kind == "softmax":
        return e / total
    if kind == "log_softmax":
        return a - m - torch.log(total)
    return (torch.log(total) + m).squeeze(dim)


def _special_rows(shape, dtype):
    """Random rows, then: -inf at every third point (the first too: a leading
    -inf), a row all -inf, a NaN, a +inf, values whose exp overflows without
    the max's shift, tiny values."""
    x = rand(shape, dtype)
    rows, n = shape
    big, tiny = (5e3, 1e-6) if dtype is D.Half else (1e30, 1e-30)
    for r, fill in enumerate([None, "all -inf", "nan", "inf", "big", "tiny"][:rows]):
        if fill is None:
            x[r, ::3] = -INF
        elif fill == "all -inf":
            x[r] = -INF
        elif fill in ("nan", "inf"):
            x[r, n // 2] = NAN if fill == "nan" else INF
        else:
            x[r] = x[r] * (big if fill == "big" else tiny)
    return x


def _reduction_specs(fd):
    from hostir.host.steps import KernelStep
    steps = [s.target for s in fd._cache.last_plan.program.body
             if isinstance(getattr(s, "target", None), KernelStep)]
    return [st.spec for st in steps if st.spec.plain.reduced]


def _is_online(kernel) -> bool:
    from hostir.codegen.kir import kernel_text
    return "reduce [online_softmax]" in kernel_text(kernel)


def _run_both(build, inputs, extents, online: bool):
    """Outputs with the online form and with HOSTIR_DISABLE=online_softmax,
    checking which kernel each launch rule picks for `extents`."""
    from hostir import config
    with config.override(disable=config.get().disable | {"shifted_rows"}):
        outs, fd = _run_keeping_fd(build, inputs)
    (spec,) = _reduction_specs(fd)
    assert spec.online is not None and _is_online(spec.online)
    assert _is_online(spec.kernel_for(extents)[0]) is online
    with config.override(disable=config.get().disable | {"online_softmax"}):
        passes, fd = _run_keeping_fd(build, inputs)
    (spec,) = _reduction_specs(fd)
    assert spec.online is None and not _is_online(spec.kernel_for(extents)[0])
    return outs, passes


@pytest.mark.parametrize("shape,online", [((6, 7), False), ((6, 1), False), ((6, 20001), False),
                                          ((3, 16395), False), ((2, 524297), True)], ids=str)
def test_odd_rows_that_shifted_vectors_hold_keep_the_passes(shape, online):
    """A row of a length no multiple of the vector width that shifted vectors
    read (launch_checks.shift_possible) takes the persistent kernel where it
    holds the row, not the online loop (H200 softmax bf16 2097x32001: 68.0 %
    of copy against 43.0); rows past what it holds still take the online one."""
    x = _special_rows(shape, D.Float)
    (out,), fd = _run_keeping_fd(lambda fd: _online_build("softmax")(fd, declare(fd, x)), [x])
    (spec,) = _reduction_specs(fd)
    assert _is_online(spec.kernel_for(list(shape))[0]) is online
    check(out, torch.softmax(x.double(), 1).float(), kind="reduction")


@pytest.mark.parametrize("shape,online", ONLINE_SHAPES, ids=lambda s: "x".join(map(str, s))
                         if isinstance(s, tuple) else ("online" if s else "passes"))
@pytest.mark.parametrize("kind", ONLINE_KINDS)
@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16, D.Half], ids=lambda d: d.name)
def test_online_softmax_rows(kind, shape, online, dtype):
    x = _special_rows(shape, dtype)
    (out,), (passes,) = _run_both(lambda fd: _online_build(kind)(fd, declare(fd, x)), [x],
                                  list(shape), online)
    want = _online_expected(kind, x.double()).to(x.dtype)
    check(out, want, kind="reduction")
    check(passes, want, kind="reduction")
    check(out, passes, kind="reduction")
    assert torch.equal(out.isnan(), passes.isnan())  # NaN rows exactly where the passes give them
    if kind != "logsumexp":  # torch's own softmax, log_softmax (-inf and NaN rows included)
        fn = torch.softmax if kind == "softmax" else torch.log_softmax
        check(out, fn(x.double(), 1).to(x.dtype), kind="reduction")


@pytest.mark.parametrize("decl", ["transposed", "strided"])
@pytest.mark.parametrize("kind", ONLINE_KINDS)
def test_online_softmax_of_non_contiguous_rows(kind, decl):
    x = _special_rows((6, 20003), D.Float)
    xs = relayout(x, decl)
    (out,), (passes,) = _run_both(lambda fd: _online_build(kind)(fd, declare(fd, xs, decl)), [xs],
                                  [6, 20003], True)
    want = _online_expected(kind, x.double()).float()
    check(out, want, kind="reduction")
    check(out, passes, kind="reduction")


@pytest.mark.parametrize("kind", ONLINE_KINDS)
@pytest.mark.parametrize("shape", [(6, 524304), (3, 5)], ids=lambda s: "x".join(map(str, s)))
def test_online_softmax_with_a_scale_and_mask_prologue_and_an_epilogue(kind, shape):
    """a = where(mask, x * scale, -inf) (a row all masked: NaN, as torch); the
    result, also times a weight along the row plus 1, and the row's max."""
    x = _special_rows(shape, D.BFloat16)
    mask = torch.rand(shape) < 0.7
    mask[1] = False
    w = rand(shape[1:], D.Float)
    scale = 0.125

    def build(fd):
        xt, mask_t, w_t = declare(fd, x), declare(fd, mask), declare(fd, w)
        scale_s = fd.define_scalar(None, dtype=D.Double)
        a = fd.ops.where(mask_t, fd.ops.mul(fd.ops.cast(xt, D.Float), scale_s), -INF)
        m = fd.ops.max(a, [1], keepdim=True)
        s = fd.ops.sub(a, m)
        e = fd.ops.exp(s)
        total = fd.ops.sum(e, [1], keepdim=True)
        if kind == "softmax":
            y = fd.ops.div(e, total)
        elif kind == "log_softmax":
            y = fd.ops.sub(s, fd.ops.log(total))
        else:
            y = fd.ops.squeeze(fd.ops.add(fd.ops.log(total), m), [1])
        fd.add_output(fd.ops.cast(y, D.BFloat16))
        if kind != "logsumexp":
            y = fd.ops.add(fd.ops.mul(y, fd.ops.broadcast_in_dim(w_t, y.shape(), [1])), 1.0)
        fd.add_output(fd.ops.mul(y, 2.0) if kind == "logsumexp" else y)
        fd.add_output(fd.ops.squeeze(m, [1]))
    outs, passes = _run_both(build, [x, mask, w, scale], list(shape), True)
    a = (x.double() * scale).masked_fill(~mask, -INF)
    y = _online_expected(kind, a)
    want = [y.bfloat16(), (y * 2 if kind == "logsumexp" else y * w + 1).float(), a.amax(1).float()]
    assert len(outs) == len(want) == len(passes)
    for o, p, wt in zip(outs, passes, want):
        check(o, wt, kind="reduction")
        check(o, p, kind="reduction")


@pytest.mark.parametrize("kind", ONLINE_KINDS)
@pytest.mark.parametrize("first", [True, False])
def test_online_softmax_of_a_sum_with_a_factor(kind, first):
    """sum(exp(a - max) * c) (c independent of the max, either operand of the
    product) folds too: the online sum adds c * exp(a - m)."""
    x = _special_rows((6, 20001), D.Float)
    c = rand((6, 20001), D.Float, low=0.0, high=2.0)
    c[0, 1] = 0.0

    def factor(fd, e, c_t):
        return fd.ops.mul(e, c_t) if first else fd.ops.mul(c_t, e)
    build = _online_build(kind, prologue=lambda fd, a, c_t: a, factor=factor)
    (out,), (passes,) = _run_both(lambda fd: build(fd, declare(fd, x), declare(fd, c)), [x, c],
                                  [6, 20001], True)
    want = _online_expected(kind, x.double(), c=c.double()).float()
    check(out, want, kind="reduction")
    check(out, passes, kind="reduction")


@pytest.mark.parametrize("kind", ONLINE_KINDS)
@pytest.mark.parametrize("shape", [(37, 5), (20001, 3)], ids=lambda s: "x".join(map(str, s)))
def test_online_softmax_along_a_kept_innermost_dim(kind, shape):
    """Rows along dim 0 (no vectors: the passes would each read the column);
    a log-sum-exp is then one pass (the outer schedule on GPUs)."""
    x = rand(shape, D.Float)
    x[::4, 0] = -INF
    x[:, 1] = -INF
    (out,), (passes,) = _run_both(lambda fd: _online_build(kind, dim=0)(fd, declare(fd, x)), [x],
                                  list(shape), True)
    check(out, _online_expected(kind, x.double(), dim=0).float(), kind="reduction")
    check(out, passes, kind="reduction")
    if kind == "logsumexp":
        from hostir.codegen.kir import passes as kernel_passes
        from hostir.codegen.online import online_softmax
        outs, fd = _run_keeping_fd(lambda fd: _online_build(kind, dim=0)(fd, declare(fd, x)), [x])
        (spec,) = _reduction_specs(fd)
        assert kernel_passes(spec.plain) == [0, 1] and kernel_passes(online_softmax(spec.plain)) == [0]
        assert spec._outer(spec.online)


def test_online_softmax_of_empty_and_zero_rows():
    build = _online_build("softmax")
    x = torch.randn(0, 20001)
    (out,), (passes,) = _run_both(lambda fd: build(fd, declare(fd, x)), [x], [0, 20001], True)
    assert out.shape == passes.shape == (0, 20001)
    from hostir import ExecutionError
    with FusionDefinition() as fd:
        build(fd, fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=D.Float))
    with pytest.raises(ExecutionError, match="max/min/argmax over empty dims"):
        fd.execute([torch.randn(3, 0)])


def test_online_softmax_is_refused_by_the_environment(monkeypatch):
    """HOSTIR_DISABLE=online_softmax, read by hostir/config.py, keeps the passes."""
    from hostir import config
    monkeypatch.setenv("HOSTIR_DISABLE", "online_softmax")
    try:
        config.reload()
        x = torch.randn(2, 20001)
        (out,), fd = _run_keeping_fd(lambda fd: _online_build("softmax")(fd, declare(fd, x)), [x])
        (spec,) = _reduction_specs(fd)
        assert spec.online is None and spec.kernel_for([2, 20001])[0] is spec.plain
        check(out, torch.softmax(x.double(), 1).float(), kind="reduction")
    finally:
        monkeypatch.undo()
        config.reload()


def test_online_combine_of_the_interpreter_matches_the_passes():
    """The interpreter's online combine (hir_online's rule, a tree over each
    row) against max and sum(c * exp(a - max)) computed pass by pass, with the
    projection's NaN where the max is infinite; in any order of the points."""
    from hostir.codegen.interpret import _online
    torch.manual_seed(1)
    rows, n = 9, 1001
    a = torch.randn(rows, n) * 10
    c = torch.rand(rows, n) * 3
    a[0, :500] = -INF                 # a leading -inf run, then finite values
    a[1] = -INF                       # all -inf
    a[2, 7] = NAN
    a[3, 3] = INF
    a[4, -1] = INF
    a[4, 0] = -INF
    a[5, ::2] = -INF
    c[5, 0] = INF                     # c * exp(-inf - M) = inf * 0: NaN, online as pass by pass
    a[6] = a[6] * 1e30                # exp overflows without the shift
    a[7, :-1] = -INF                  # one finite value, last
    m_ref = a.amax(1)
    s_ref = (c * torch.exp(a - m_ref[:, None])).sum(1)
    for perm in (torch.arange(n), torch.randperm(n), torch.arange(n).flip(0)):
        m, s = _online(a[:, perm].reshape(-1), c[:, perm].reshape(-1), rows, n)
        s = torch.where(torch.isinf(m), m - m, s)  # PROJECT[sum]
        torch.testing.assert_close(m, m_ref, equal_nan=True, rtol=0, atol=0)
        torch.testing.assert_close(s, s_ref, equal_nan=True, rtol=1e-5, atol=1e-6)
    m, s = _online(torch.empty(0), torch.empty(0), 3, 0)  # empty rows: the identity
    assert m.tolist() == [-INF] * 3 and s.tolist() == [0.0] * 3


def test_online_softmax_pass_folds_only_what_it_may():
    """The rewrite is a pure Kernel -> Kernel pass: the kernel it is given is
    unchanged, the result verifies, and kernels whose sum is not exp(a - max)
    in one float type (rmsnorm; a softmax computed in BFloat16, each term
    rounded; a temperature after the shift) come back as they are."""
    from hostir.codegen.kir import kernel_text, verify_kernel
    from hostir.codegen.online import foldable, online_softmax
    x = torch.randn(2, 20001)
    _, fd = _run_keeping_fd(lambda fd: _online_build("softmax")(fd, declare(fd, x)), [x])
    (spec,) = _reduction_specs(fd)
    before = kernel_text(spec.plain)
    folded = online_softmax(spec.plain)
    assert kernel_text(spec.plain) == before and folded is not spec.plain
    verify_kernel(folded)
    assert len(foldable(spec.plain)) == 1 and not foldable(folded)
    assert "reduce [max]" not in kernel_text(folded) and "project [sum]" in kernel_text(folded)

    def bf16_softmax(fd):
        t = declare(fd, x.bfloat16())
        e = fd.ops.exp(fd.ops.sub(t, fd.ops.max(t, [1], keepdim=True)))
        fd.add_output(fd.ops.div(e, fd.ops.sum(e, [1], keepdim=True)))

    def temperature(fd):
        t = declare(fd, x)
        e = fd.ops.exp(fd.ops.mul(fd.ops.sub(t, fd.ops.max(t, [1], keepdim=True)), 0.5))
        fd.add_output(fd.ops.div(e, fd.ops.sum(e, [1], keepdim=True)))

    def rmsnorm(fd):
        _norm_build("rmsnorm")(fd, declare(fd, x))
    for build, inputs, want in [
            (bf16_softmax, [x.bfloat16()], torch.softmax(x.bfloat16().double(), 1).bfloat16()),
            (temperature, [x], torch.softmax(x.double() * 0.5, 1).float()),
            (rmsnorm, [x], _norm_expected("rmsnorm", x)[0].float())]:
        (out,), fd = _run_keeping_fd(build, inputs)
        (spec,) = _reduction_specs(fd)
        assert spec.online is None and online_softmax(spec.plain) is spec.plain
        check(out, want, kind="reduction")


def test_kernel_verifier_keeps_online_pairs_behind_projections():
    from hostir.codegen.kir import K, KernelVerificationError, verify_kernel
    from hostir.codegen.online import online_softmax
    from hostir.ir.node import Op
    x = torch.randn(2, 20001)
    _, fd = _run_keeping_fd(lambda fd: _online_build("logsumexp")(fd, declare(fd, x)), [x])
    (spec,) = _reduction_specs(fd)
    k = online_softmax(spec.plain)
    pair = next(n for n in k.order if n.op == K.REDUCE)
    slot, value, ix = k.stores[0]
    bad = type(value)(Op.NEG, value.dtype, (pair,))
    k.order.append(bad)
    k.stores[0] = (slot, bad, ix)
    with pytest.raises(KernelVerificationError, match="reads an online_softmax pair"):
        verify_kernel(k)


@pytest.mark.parametrize("correction", [0, 1, 2.5])
def test_var_mean_of_a_transposed_input_and_a_short_row(correction):
    x = rand((37, 5), D.Float).t()  # rows of 37 elements, 5 rows, non-contiguous
    for rows in (x, x[:, :1]):
        def build(fd):
            var, mean = fd.ops.var_mean(declare(fd, rows, "transposed"), [1], correction=correction)
            fd.add_output(var)
            fd.add_output(mean)
        var, mean = run(build, [rows])
        v, m = torch.var_mean(rows.double(), 1, correction=correction)
        check(var, v.float(), kind="reduction")
        check(mean, m.float(), kind="reduction")


# Outer reductions (the innermost dim kept): tiles of kept points, blocks split
# over long reduced dims on GPUs (partials combined in order by the last block;
# 600000x8: a split of over cuda_outer_split.OUTER_GROUP shares, combined in two levels).
OUTER_CASES = [((4096, 64), [0]), ((3000, 5), [0]), ((64, 300, 33), [0, 1]), ((2, 70000, 3), [1]),
               ((5, 1, 7), [0, 1]), ((0, 9), [0]), ((7, 0), [0]), ((600000, 8), [0]), ((9001, 600), [0]),
               ((1000, 35), [0]), ((300, 141), [0]), ((129, 568), [0]), ((50, 1300), [0]), ((40, 67), [0]),
               ((3, 855), [0]), ((4099, 1), [0]), ((10001, 33), [0]), ((7, 9, 1023), [0, 1])]


@pytest.mark.parametrize("shape,dtype,lanes,block,vec", [
    ((1000, 35), D.Float, 35, 256, 1), ((300, 141), D.Float, 141, 1024, 1), ((300, 141), D.BFloat16, 141, 1024, 1),
    ((1000, 67), D.Float, 67, 1024, 1), ((3000, 5), D.Float, 5, 256, 1), ((129, 568), D.BFloat16, 32, 256, 8),
    ((70, 96), D.BFloat16, 16, 256, 8), ((9001, 600), D.Float, 32, 256, 4), ((4096, 64), D.Float, 16, 256, 4),
    ((100, 4096), D.Float, 32, 256, 4), ((50, 1300), D.BFloat16, 32, 256, 4)], ids=str)
def test_outer_wrapped_tiles(shape, dtype, lanes, block, vec, monkeypatch):
    """Kept points that tiles of 32 lanes or narrow ones cover with many lanes
    idle take one tile as wide as they are (cuda_outer.OUTER_WRAPPED): a lane
    a point (no vectors), the block's rows of lanes side by side, a block of
    256, 512 or 1024 threads with few idle; others keep their tiles. Kept
    points that refuse a vector take the widest they allow (bf16 1300: 4,
    not 1). The rule, the kernel's lanes, results against torch (OUTER_CASES
    runs more). (Tiles where the flat schedule does not run: cuda_flat.)"""
    from hostir.codegen import cuda_flat, cuda_outer, cuda_outer_shift
    monkeypatch.setattr(cuda_flat, "OUTER_FLAT", False)
    monkeypatch.setattr(cuda_outer_shift, "OUTER_SHIFTED", False)  # (2-byte points: shifted lanes first)
    x = rand(shape, dtype)
    fd_outs, fd = _run_keeping_fd(lambda fd: fd.add_output(fd.ops.sum(declare(fd, x), [0])), [x])
    check(fd_outs[0], _torch_sum(x, [0], False), kind="reduction", atol=1e-5 * shape[0] ** 0.5)
    (spec,) = _reduction_specs(fd)
    k = spec.kernel_for(list(shape))[0]
    var = spec.choose(k, list(shape), [x], None, [])
    assert var.outer and (var.threads or 32) == lanes and var.block == block and var.vec == vec, var.name
    if cuda_outer.wrapped(lanes):
        assert f"threadIdx.x % {lanes}, ty = threadIdx.x / {lanes};" in var.source
        rows_of_lanes = block // lanes
        assert f"red0[{rows_of_lanes}][{lanes * var.vec + 1}]" in var.source
        assert (f"ty < {rows_of_lanes} ? g * {rows_of_lanes}" in var.source) == (block % lanes != 0)
        assert spec.split(var, list(shape), 132) >= 1


@pytest.mark.parametrize("shape,wide", [((9001, 1024), True), ((87381, 768), True), ((600000, 8), False),
                                        ((699050, 96), False), ((1024, 65536), True)], ids=str)
def test_outer_shares_interleave_their_rows(shape, wide, monkeypatch):
    """Blocks that share a tile of an outer reduction take every split-th
    group of rows each (cuda_outer's OUTER_INTERLEAVED note), and split it
    finer where the kept points fill one tile than where they take several
    (cuda_outer.OUTER_WIDE_SHARE). The split rule against its constants; the
    kernel's row loop; results: OUTER_CASES. (Tiles: cuda_flat off.)"""
    from hostir.codegen import cuda_flat, cuda_outer
    monkeypatch.setattr(cuda_flat, "OUTER_FLAT", False)
    x = rand((4, shape[1]), D.BFloat16)
    fd_outs, fd = _run_keeping_fd(lambda fd: fd.add_output(fd.ops.sum(declare(fd, x), [0])), [x])
    check(fd_outs[0], x.double().sum(0).to(x.dtype), kind="reduction")
    (spec,) = _reduction_specs(fd)
    k = spec.kernel_for(list(shape))[0]
    var = spec.choose(k, list(shape), [x], None, [])
    assert var.outer
    lanes, vec = var.threads or 32, var.vec
    tiles = -(-shape[1] // (lanes * vec))
    assert (tiles > 1) == wide
    aim = min(cuda_outer.OUTER_BLOCKS_PER_SM, cuda_outer.outer_blocks(vec, var.block))
    want = max(1, (aim // cuda_outer.OUTER_WIDE_SHARE if wide else aim) * 132 // tiles)
    split = spec.split(var, list(shape), 132)
    least = cuda_outer.OUTER_MIN_POINTS * (var.block // lanes)
    assert split == max(1, min(want, shape[0] // least, cuda_outer.OUTER_MAX_SPLIT))
    if shape in [(87381, 768), (699050, 96)]:  # (bf16: 4 blocks an SM, 2 over several tiles)
        assert split * tiles == (264 if wide else 528)
    assert split * tiles <= 4 * 132  # (no SM takes a block more than the rest)
    assert f"r0 < R; r0 += split * {var.block // lanes})" in var.source  # (after the batches: OUTER_BATCH)


@pytest.mark.parametrize("shape,dtype,few", [
    ((300, 1001), D.BFloat16, True), ((2000, 4095), D.Half, True), ((513, 33), D.BFloat16, False),
    ((300, 1001), D.Float, False), ((100, 4223), D.BFloat16, True), ((100, 4225), D.BFloat16, False),
    ((64, 1024), D.BFloat16, False)], ids=str)
def test_outer_few_blocks(shape, dtype, few, monkeypatch):
    """Column sums of 2-byte floats whose kept points refuse a vector (tiles of
    a warp's lanes of a point each) and take no more tiles than the SMs ask for
    cuda_outer.OUTER_FEW_BLOCKS blocks an SM (their registers: the rows' loads
    in flight), and the split aims at it; 4-byte floats, vectors, more tiles
    than SMs (132 here: 4225 points take 133) and narrow or wrapped tiles keep
    the full-occupancy bounds. Results against torch, the rule, the bounds."""
    from hostir.codegen import cuda_flat, cuda_outer, cuda_outer_shift
    monkeypatch.setattr(cuda_flat, "OUTER_FLAT", False)
    monkeypatch.setattr(cuda_outer_shift, "OUTER_SHIFTED", False)  # (2-byte points: shifted lanes first)
    x = rand(shape, dtype)
    fd_outs, fd = _run_keeping_fd(lambda fd: fd.add_output(fd.ops.sum(declare(fd, x), [0])), [x])
    check(fd_outs[0], x.double().sum(0).to(x.dtype), kind="reduction")
    (spec,) = _reduction_specs(fd)
    k = spec.kernel_for(list(shape))[0]
    var = spec.choose(k, list(shape), [x], None, [])
    assert var.outer and var.few == few, var.name
    blocks = cuda_outer.OUTER_FEW_BLOCKS if few else cuda_outer.outer_blocks(var.vec, var.block)
    assert f"__launch_bounds__({var.block}, {blocks})" in var.source
    import conftest  # (the session's NVRTC compile: variants past Spec.typical_variants)
    conftest._KERNEL_SOURCES.setdefault(var.source, var.name)
    tiles = -(-shape[1] // ((var.threads or 32) * var.vec))
    big = [1 << 20, shape[1]]  # (rows enough for the split to reach its aim)
    aim = blocks // cuda_outer.OUTER_WIDE_SHARE if tiles > 1 else blocks
    assert spec.split(var, big, 132) == min(max(1, aim * 132 // tiles), cuda_outer.OUTER_MAX_SPLIT)
    monkeypatch.setattr(cuda_outer, "OUTER_FEW_BLOCKS", 0)
    assert not spec.choose(k, list(shape), [x], None, []).few


def _flat_build(kind: str, x: torch.Tensor, y: torch.Tensor, decl: str):
    def build(fd):
        t = declare(fd, x, decl)
        if kind == "product":  # two inputs read flat, a prologue and an epilogue
            r = fd.ops.sum(fd.ops.mul(t, declare(fd, y)), [0])
            fd.add_output(fd.ops.mul(fd.ops.cast(r, D.Float), 0.5))
        elif kind == "bias":  # a weight along the kept dim: not flat (tiles)
            fd.add_output(fd.ops.sum(fd.ops.add(t, declare(fd, y[0])), [0]))
        elif kind == "abs max":
            fd.add_output(fd.ops.max(fd.ops.abs(t), [0]))
        else:
            fd.add_output(getattr(fd.ops, kind)(t, [0]))
    return build


def _flat_want(kind: str, x: torch.Tensor, y: torch.Tensor):
    xd, yd = x.double(), y.double()
    if kind == "product":
        return ((x * y).double().sum(0).to(x.dtype).double() * 0.5).float()
    if kind == "bias":
        return (x + y[0]).double().sum(0).to(x.dtype)
    if kind == "abs max":
        return x.abs().amax(0)
    return {"sum": xd.sum(0), "min": xd.amin(0), "prod": xd.prod(0)}[kind].to(x.dtype)


@pytest.mark.parametrize("shape,layout,flat", [
    ((1000, 35), "contiguous", True), ((129, 855), "contiguous", True), ((3, 855), "contiguous", True),
    ((2050, 96), "contiguous", True), ((77, 1), "contiguous", True), ((33, 1023), "contiguous", True),
    ((40, 1025), "contiguous", False), ((1000, 35), "offset", False), ((1000, 35), "strided", False),
    ((64, 128), "contiguous", False), ((40000, 35), "contiguous", True)], ids=str)
@pytest.mark.parametrize("kind", ["sum", "product", "bias", "abs max", "min", "prod"])
@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16, D.Half], ids=lambda d: d.name)
def test_outer_flat(shape, layout, flat, kind, dtype, monkeypatch):
    """Column sums over few kept points (cuda_flat.FLAT_MAX_KEPT) whose tiles
    would read narrow vectors or leave lanes idle read their contiguous span
    flat, in 16-byte vectors across the rows' boundaries, where every input
    is contiguous from a 16-byte boundary (`offset`: one point past it;
    `strided`: every other row) and read at the point's own place (`bias`, a
    weight along the kept dim: tiles). Results against torch, the rule, and
    the kernel's steps (40000 rows: on GPUs each block takes whole batches of
    FLAT_BATCH steps, then the rest a step at a time; past FLAT_MAX_KEPT the
    tiles, not cuda_period's virtual rows)."""
    from hostir.codegen import cuda_period
    monkeypatch.setattr(cuda_period, "OUTER_PERIOD", False)
    lo, hi = (0.97, 1.03) if kind == "prod" else (-3.0, 3.0)
    x = rand((2 * shape[0], shape[1]), dtype, low=lo, high=hi)
    if layout == "offset":
        x = x.flatten()[1:1 + math.prod(shape)].view(shape)
    else:
        x = x[::2] if layout == "strided" else x[:shape[0]]
    y = rand(shape, dtype)
    ins = {"product": [x, y], "bias": [x, y[0]]}.get(kind, [x])
    (out,), fd = _run_keeping_fd(_flat_build(kind, x, y, "strided" if layout == "strided" else "sym"), ins)
    want = _flat_want(kind, x, y)
    narrow = dtype is not D.Float  # (the product's sum rounded to it, then a float: rtol of that rounding)
    check(out, want, kind="reduction", atol=(1e-2 if narrow else 1e-5) * shape[0] ** 0.5,
          rtol=1.6e-2 if narrow else None)
    (spec,) = _reduction_specs(fd)
    k = spec.kernel_for(list(shape))[0]
    var = spec.choose(k, list(shape), ins, None, [])
    assert var.outer and var.flat == (flat and kind != "bias"), var.name
    if var.flat:
        from hostir.codegen import cuda_flat
        m = max(1, cuda_flat.FLAT_BLOCK // shape[1])
        assert var.vec == 16 // x.element_size() and var.block == -(-m * shape[1] // 32) * 32
        assert f"const int f = ((s + b_ * split) * {m * shape[1]} + threadIdx.x) * {var.vec};" in var.source
        B = cuda_flat.FLAT_BATCH  # (whole batches of steps, their loads first, then a step at a time)
        assert f"for (; (long long)s + {B - 1}LL * split < full; s += {B} * split) {{" in var.source
        split = spec.split(var, list(shape), 132)
        steps = shape[0] * shape[1] // (m * shape[1] * var.vec)
        assert split >= 1 and (shape[0] < 20000 or steps // split > B), (split, steps)
    elif var.vec > 1:  # tiles of vectors: batches of rows, their loads first (cuda_outer.OUTER_BATCH;
        from hostir.codegen import cuda_outer  # one input's fp32 lanes: OUTER_BATCH_WIDE; 2-byte: few rows here)
        one_wide = kind not in ("product", "bias") and dtype is D.Float and var.vec == 4
        assert var.batch == (cuda_outer.OUTER_BATCH_WIDE if one_wide else 0)
        B = var.batch or cuda_outer.OUTER_BATCH
        assert f"for (; (long long)r0 + {B - 1}LL * " in var.source and f"[{B}][{var.vec}];" in var.source


@pytest.mark.parametrize("shape,dims", OUTER_CASES, ids=lambda c: str(c))
@pytest.mark.parametrize("op", ["sum", "max", "mean"])
@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16, D.Int32], ids=lambda d: d.name)
def test_outer_reduction_with_epilogue(shape, dims, op, dtype):
    if op == "mean" and dtype is D.Int32 or op == "max" and 0 in [shape[d] for d in dims]:
        pytest.skip("torch raises (mean of ints, max over an empty dim)")
    x = rand(shape, dtype)

    def build(fd):
        t = declare(fd, x)
        # (var_mean: two passes, not the outer schedule: its rows are strided, and correct)
        r = getattr(fd.ops, op)(t, dims) if op != "mean" else fd.ops.var_mean(t, dims)[1]
        fd.add_output(fd.ops.mul(r, 2))
    (out,) = run(build, [x])
    if op == "sum":
        want = _torch_sum(x, dims, False)
    elif op == "max":
        want = x.amax(_dims(x, dims))
    else:
        want = x.double().mean(_dims(x, dims)).to(x.dtype)
    # (an fp32 sum of n points, in the kernel's order, is off torch's float64 by about sqrt(n) roundings)
    n = math.prod(shape[d] for d in dims)
    check(out, want * 2, kind="reduction", atol=1e-5 * max(1.0, n ** 0.5) if op == "sum" and dtype is D.Float else None)


# Found by the random-fusion tests on a GPU: a reduction kernel that also stores
# its prologue (vector lanes must each compute their own point), and reduced
# dims listed out of order (the innermost must be split last: vector alignment).
@pytest.mark.parametrize("n", [1, 5, 9])
def test_reduction_kernel_storing_its_prologue(n):
    x = rand((n,), D.Float)

    def build(fd):
        t = declare(fd, x)
        p = fd.ops.pad(fd.ops.abs(t), [1, 2])
        c = fd.ops.cat([t, fd.ops.neg(t)], 0)
        fd.add_output(p)
        fd.add_output(fd.ops.max(p, [0]))
        fd.add_output(c)
        fd.add_output(fd.ops.max(c, [0]))
    p, pm, c, cm = run(build, [x])
    want_p = F.pad(x.abs(), [1, 2])
    want_c = torch.cat([x, -x])
    for got, want in ((p, want_p), (pm, want_p.amax()), (c, want_c), (cm, want_c.amax())):
        check(got, want, kind="reduction")


@pytest.mark.parametrize("shape", [(1, 4, 4), (2, 3, 8), (3, 8, 4)])
def test_reduction_over_dims_listed_out_of_order(shape):
    x = rand(shape, D.Float)

    def build(fd):
        t = declare(fd, x)
        fd.add_output(fd.ops.max(fd.ops.maximum(t, t), [2, 1, 0], keepdim=True))
        fd.add_output(fd.ops.sum(t, [2, 0]))
    m, s = run(build, [x])
    check(m, x.amax((0, 1, 2), keepdim=True), kind="reduction")
    check(s, x.double().sum((0, 2)).float(), kind="reduction")


@pytest.mark.parametrize("shape", [(2, 3), (4, 8)])
def test_normalization_of_an_input_broadcast_along_the_innermost_dim(shape):
    # the vector lanes share the broadcast value; each writes its own output point
    x = rand(shape, D.Float)

    def build(fd):
        t = fd.ops.broadcast_in_dim(declare(fd, x), [*shape, 8], [0, 1])
        m = fd.ops.max(t, [0, 1, 2], keepdim=True)
        fd.add_output(fd.ops.exp(fd.ops.sub(t, m)))
    (out,) = run(build, [x])
    want = (x - x.amax()).exp()[..., None].expand(*shape, 8)
    check(out, want, kind="reduction")


@pytest.mark.parametrize("case", RED_CASES + [((3, 0), "sym", [1])], ids=_case_id)
@pytest.mark.parametrize("dtype", [D.Float, D.Double, D.BFloat16, D.Int, D.Int32, D.Bool] + COMPLEX,
                         ids=lambda d: d.name)
def test_prod(case, dtype):
    shape, decl, dims = case
    x = relayout(rand(shape, dtype, low=0.5, high=1.5, ints=(-3, 4)), decl)

    def build(fd):
        fd.add_output(fd.ops.prod(declare(fd, x, decl), dims))
    (out,) = run(build, [x])
    wide = torch.complex128 if dtype.is_complex else torch.float64
    want = x.to(wide) if dtype.is_inexact else x
    for d in sorted(_dims(x, dims), reverse=True):
        want = want.prod(d)
    want = want.to(x.dtype) if dtype.is_inexact else want
    assert out.dtype == want.dtype
    check(out, want, kind="reduction")


@pytest.mark.parametrize("shape,dims", [((3, 4, 5), [0, 2]), ((6, 7), [1]), ((2, 1, 9), [1, 2])])
@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16], ids=lambda d: d.name)
def test_welford(shape, dims, dtype):
    x = rand(shape, dtype)

    def build(fd):
        mean, var_sum, n = fd.ops.welford(declare(fd, x), dims)
        for o in (mean, var_sum, n):
            fd.add_output(o)
    mean, var_sum, n = run(build, [x])
    v, m = torch.var_mean(x.double(), dims, correction=0)
    count = math.prod(shape[d] for d in dims)
    check(mean, m.to(mean.dtype), kind="reduction")
    check(var_sum, (v * count).to(var_sum.dtype), kind="reduction")
    assert n.dtype == torch.int64 and bool((n.cpu() == count).all())


@pytest.mark.parametrize("n,width", [(2, 3), (5, 1), (1, 4), (33, 7)])
def test_normalization_over_an_expanded_dim_stores_every_point(n, width):
    """A softmax-like normalization over a dim that is an expanded broadcast
    (every value along it equal): its output keeps that dim's full extent, so
    every point is stored, not only the first (a keepdim output's one)."""
    x = rand((n,), DataType.Float)

    def build(fd):
        t = declare(fd, x)
        s = fd.ops.sum(t, dims=[0], keepdim=True)
        y = fd.ops.mul(t, s)
        e = fd.ops.expand(fd.ops.broadcast(y, [False, True]), [t.shape()[0], width])
        m = fd.ops.max(e, dims=[1], keepdim=True)
        fd.add_output(fd.ops.exp(fd.ops.sub(e, m)))
        fd.add_output(fd.ops.mul(e, fd.ops.sum(e, dims=[1], keepdim=True)))
    out, out2 = run(build, [x])
    y = (x * x.sum()).unsqueeze(1).expand(n, width)
    check(out, torch.exp(y - y.amax(1, keepdim=True)), kind="reduction")
    check(out2, y * y.sum(1, keepdim=True), kind="reduction")


# ------------------------------------------------------------------ argmax
# torch.argmax's semantics: the Int64 index of the first greatest value along
# one dim (or of the flattened tensor), NaN the greatest (the first NaN). A
# generated reduction kernel combines (value, index) pairs.

ARGMAX_CASES = [
    # (shape, decl, dim)
    ((4, 5, 6), "sym", 0),
    ((4, 5, 6), "sym", 1),
    ((4, 5, 6), "sym", -1),
    ((4, 5, 6), "sym", None),
    ((4, 5, 6), "transposed", 2),
    ((4, 5, 6), "transposed", 1),
    ((6, 7), "strided", 0),
    ((6, 7), "strided", 1),
    ((6, 7), "sliced_fp", 1),
    ((4, 1, 6), "bcast", 1),
    ((4, 1, 6), "bcast", None),
    ((1, 5), "sym", 0),
    ((1, 5), "sym", 1),
    ((9,), "sym", 0),
    ((13, 1), "static", 1),
    ((3, 37), "static", 1),
    ((37, 3), "static", 0),
    ((0, 5), "sym", 1),
]
ARGMAX_DTYPES = [D.Float, D.Double, D.Half, D.BFloat16, D.Int, D.Int32]


def _argmax_id(c):
    shape, decl, dim = c
    return f"{'x'.join(map(str, shape))}-{decl}-{dim}"


def _run_keeping_fd(build, inputs):
    """`run`, also returning the FusionDefinition (its segments and CUDA code)."""
    made = []
    outs = run(lambda fd: (build(fd), made.append(fd)), inputs)
    return outs, made[0]


def _argmax_run(xs, decl, dim, keepdim, prologue=None):
    def build(fd):
        t = declare(fd, xs, decl)
        fd.add_output(fd.ops.argmax(prologue(fd, t) if prologue else t, dim, keepdim))
    (out,), fd = _run_keeping_fd(build, [xs])
    return out, fd


@pytest.mark.parametrize("dtype", ARGMAX_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("case", ARGMAX_CASES, ids=_argmax_id)
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax(case, dtype, keepdim):
    shape, decl, dim = case
    x = rand(shape, dtype, ints=(-4, 4))  # few distinct ints (and halves): ties, the first wins
    xs = relayout(x, decl)
    out, _ = _argmax_run(xs, decl, dim, keepdim)
    want = torch.argmax(x, dim, keepdim=keepdim)
    assert want.dtype == torch.int64
    check(out, want)


@pytest.mark.parametrize("dim", [0, 1, None])
@pytest.mark.parametrize("dtype", [D.Float, D.Double, D.Half, D.BFloat16], ids=lambda d: d.name)
def test_argmax_nan_inf_and_ties(dim, dtype):
    nan, inf = float("nan"), float("inf")
    rows = [[1.0, nan, 3.0, nan, 2.0],        # the first NaN, not the larger 3
            [-inf, -inf, -inf, -inf, -inf],   # all equal: the first
            [2.0, 5.0, 5.0, -1.0, 5.0],       # ties: the first greatest
            [0.0, -0.0, 0.0, -0.0, -1.0],     # +0 and -0 are equal
            [nan, nan, nan, nan, nan],
            [-1.0, inf, 3.0, inf, nan],       # NaN beats inf
            [-3.0, -2.0, -inf, -2.0, -7.0]]
    x = torch.tensor(rows, dtype=torch.float64).to(TORCH[dtype])
    x = x if dim != 0 else x.t().contiguous()
    for xs in (x, x.t().contiguous().t()):  # contiguous and column-major
        out, _ = _argmax_run(xs, "transposed" if not xs.is_contiguous() else "sym", dim, False)
        check(out, torch.argmax(x, dim))


# a pointwise prologue in the reduction kernel, on inner (a row of threads) and
# outer (tiles of kept points, blocks split over long reduced dims on GPUs) rows
@pytest.mark.parametrize("shape,dim", [((5, 37), 1), ((3, 4096), 1), ((2, 40000), 1), ((4096, 64), 0),
                                       ((3000, 5), 0), ((2, 70000, 3), 1), ((64, 300, 33), 0),
                                       ((7, 1), 1), ((1, 9), 0), ((0, 9), 1), ((9, 0), 0)],
                         ids=lambda c: str(c))
@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16, D.Int32], ids=lambda d: d.name)
def test_argmax_of_a_pointwise_prologue(shape, dim, dtype):
    x = rand(shape, dtype, ints=(-50, 50))
    out, fd = _argmax_run(x, "sym", dim, False,
                          prologue=lambda fd, t: fd.ops.add(fd.ops.mul(t, 2), 1))
    check(out, torch.argmax(x * 2 + 1, dim))  # (bfloat16: each op rounded, in hostir too)
    if 0 not in shape:
        segs = fd.last_segments()
        assert [s.scheduler for s in segs] == ["reduction"], [s.scheduler for s in segs]
        assert "hir_argmax" in fd.last_cuda_code()


def test_argmax_beside_max_and_in_a_normalization():
    """max and argmax of one row in one kernel (torch.max(x, dim)'s pair), and a
    one-hot of the argmax read back at every point of the row (two passes)."""
    x = rand((6, 33), D.Float)

    def build(fd):
        t = declare(fd, x)
        fd.add_output(fd.ops.max(t, [1]))
        fd.add_output(fd.ops.argmax(t, 1))
        a = fd.ops.argmax(t, 1, keepdim=True)
        cols = fd.ops.broadcast(fd.ops.iota(fd.ops.size(t, 1)), [True, False])
        fd.add_output(fd.ops.cast(fd.ops.eq(cols, a), D.Float))
    (m, i, onehot), fd = _run_keeping_fd(build, [x])
    values, indices = torch.max(x, 1)
    check(m, values, rtol=0, atol=0)
    check(i, indices)
    check(onehot, F.one_hot(indices, 33).float())
    segs = fd.last_segments()
    assert ["max", "argmax"] in [list(s.ops) for s in segs]  # one kernel for both
    assert sorted(s.scheduler for s in segs) == ["normalization", "reduction"]
    assert "hir_argmax" in fd.last_cuda_code()


def test_argmax_of_a_zero_dim_tensor_and_keep_dim_spelling():
    x = rand((), D.Float)
    y = rand((3, 4), D.Float)

    def build(fd):
        fd.add_output(fd.ops.argmax(declare(fd, x)))
        fd.add_output(fd.ops.argmax(declare(fd, x), 0))
        fd.add_output(fd.ops.argmax(declare(fd, y), 1, keep_dim=True))
        fd.add_output(fd.ops.argmax(declare(fd, y), None, True))
    a, b, c, d = run(build, [x, x, y, y])
    check(a, torch.argmax(x))
    check(b, torch.argmax(x, 0))
    check(c, torch.argmax(y, 1, keepdim=True))
    check(d, torch.argmax(y, keepdim=True))


@pytest.mark.parametrize("dim,msg", [
    ([0, 1], "dim must be an int or None"), (2, "dim 2 is out of range"), (True, "dim must be"),
])
def test_argmax_bad_dims_are_definition_errors(dim, msg):
    from hostir import FusionDefinition
    from hostir.ir.errors import DefinitionError
    with pytest.raises(DefinitionError, match=msg) as e:
        with FusionDefinition() as fd:
            t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=D.Float)
            fd.ops.argmax(t, dim)
    assert "argmax" in str(e.value) and "T0" in str(e.value)


def test_argmax_of_bool_and_over_an_empty_dim_are_errors():
    from hostir import ExecutionError, FusionDefinition
    from hostir.ir.errors import DefinitionError
    with pytest.raises(DefinitionError, match=r"argmax: .*T0.* is Bool"):
        with FusionDefinition() as fd:
            fd.ops.argmax(fd.define_tensor(shape=[-1], contiguity=[True], dtype=D.Bool), 0)
    with pytest.raises(DefinitionError, match=r"argmax: dim 1 of .*T0.* has extent 0"):
        with FusionDefinition() as fd:
            fd.ops.argmax(fd.define_tensor(shape=[3, 0], contiguity=[True, True], dtype=D.Float), 1)
    with FusionDefinition() as fd:  # empty at run time only
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=D.Float)
        fd.add_output(fd.ops.argmax(fd.ops.exp(t), 1))
    with pytest.raises(ExecutionError, match=r"argmax -> .*: dim 1 of .* has extent 0"):
        fd.execute([torch.randn(3, 0)])
    (out,) = fd.execute([torch.randn(0, 4)])  # an empty kept dim is fine
    assert out.shape == (0,) and out.dtype == torch.int64


# ------------------------------------------------------------------ complex

@pytest.mark.parametrize("shape,dims", OUTER_CASES + [((5, 6, 7), [2]), ((3, 0), [1]), ((11,), [0])],
                         ids=lambda c: str(c))
@pytest.mark.parametrize("dtype", COMPLEX, ids=lambda d: d.name)
def test_complex_sum_with_epilogue(shape, dims, dtype):
    """nvFuser's test_reduction_complex_number, over outer and inner reductions
    (on GPUs a complex128 split reduction's partials take 16 bytes each)."""
    x = rand(shape, dtype, low=-1.0, high=1.0)

    def build(fd):
        t = declare(fd, x)
        s = fd.ops.sum(t, dims, dtype=dtype)
        fd.add_output(fd.ops.mul(s, 0.5 - 1j))
        fd.add_output(fd.ops.abs(s))
    out, mag = run(build, [x])
    want = _torch_sum(x, dims, False)
    check(out, want * (0.5 - 1j), kind="reduction")
    check(mag, want.abs(), kind="reduction")


@pytest.mark.parametrize("shape", [(4, 9), (3, 1), (2, 33), (1, 7)])
@pytest.mark.parametrize("dtype", COMPLEX, ids=lambda d: d.name)
def test_complex_normalization(shape, dtype):
    """Complex rows centred by their mean and scaled by their largest magnitude
    (a normalization: reductions read back at every point)."""
    x = rand(shape, dtype)

    def build(fd):
        t = declare(fd, x)
        n = fd.define_scalar(shape[1], dtype=D.Int)
        mean = fd.ops.div(fd.ops.sum(t, [1], keepdim=True), n)
        big = fd.ops.max(fd.ops.abs(t), [1], keepdim=True)
        fd.add_output(fd.ops.div(fd.ops.sub(t, mean), big))
    (out,) = run(build, [x])
    wide = x.to(torch.complex128)
    want = (wide - wide.sum(1, keepdim=True) / shape[1]) / wide.abs().amax(1, keepdim=True)
    check(out, want.to(x.dtype), kind="reduction")


@pytest.mark.parametrize("call,words", [
    (lambda o, t: o.max(t, [0]), "max: T0 (cfloat[i0, i1]) is complex; complex numbers have no order"),
    (lambda o, t: o.min(t, [1], dtype=D.ComplexDouble), "min: T0 (cfloat[i0, i1]) is complex"),
    (lambda o, t: o.cummax(t, 0), "cummax: T0 (cfloat[i0, i1]) is complex; complex numbers have no order"),
    (lambda o, t: o.cummin(t, 1), "cummin: T0 (cfloat[i0, i1]) is complex; complex numbers have no order"),
], ids=["max", "min", "cummax", "cummin"])
def test_complex_reductions_torch_lacks_or_hostir_does_not_build_are_refused(call, words):
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1], dtype=D.ComplexFloat)
        with pytest.raises(DefinitionError) as err:
            call(fd.ops, t)
        assert str(err.value).startswith(words), str(err.value)
        fd.add_output(t)


def test_max_with_a_complex_dtype_is_refused():
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1], dtype=D.Float)
        with pytest.raises(DefinitionError, match=r"max: .* is complex; complex numbers have no order "
                                                  r"\(dtype=DataType.ComplexFloat\)"):
            fd.ops.max(t, [0], dtype=D.ComplexFloat)
        fd.add_output(t)


def _layernorm_checked(x, w, b, weight_decl="sym"):
    """A layernorm of x's rows (fp32 math, x's dtype out) with weight w (declared
    `weight_decl`) and bias b, run and checked against torch; returns the
    reduction kernel's spec."""
    def build(fd):
        t = fd.ops.cast(declare(fd, x), D.Float)
        var, mean = fd.ops.var_mean(t, [1], correction=0, keepdim=True)
        y = fd.ops.mul(fd.ops.sub(t, mean), fd.ops.rsqrt(fd.ops.add(var, 1e-5)))
        wd = fd.ops.cast(declare(fd, w, weight_decl), D.Float)
        y = fd.ops.add(fd.ops.mul(y, wd), fd.ops.cast(declare(fd, b), D.Float))
        fd.add_output(fd.ops.cast(y, FROM_TORCH[x.dtype]))
    (out,), fd = _run_keeping_fd(build, [x, w, b])
    want = F.layer_norm(x.double(), (x.shape[1],), w.double(), b.double(), 1e-5)
    check(out, want.to(out.dtype), kind="reduction")
    (spec,) = _reduction_specs(fd)
    return spec


@pytest.mark.parametrize("dtype,n,threads", [(D.Float, 2048, 1536), (D.BFloat16, 2048, 2048),
                                             (D.Float, 512, 1536), (D.BFloat16, 512, 2048),
                                             (D.BFloat16, 8192, 1536), (D.BFloat16, 16384, 1536),
                                             (D.Half, 3072, 1536), (D.Float, 760, 1280)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_persistent_rows_ask_for_the_threads_their_registers_allow(dtype, n, threads):
    """A persistent layernorm asks the compiler for a full SM (2048 threads, 32
    registers) where the vectors a thread holds fit (bf16: 2 chunks of x, a
    weight and a bias vector); fp32 (4 chunks of x, weight, bias) spilled at 32
    registers and asks for 1536 (rows.FULL_OCCUPANCY_WORDS); so do rows of
    17 to 32 points a thread (rows.BOUNDED_POINTS: bf16 rows of 8192 and
    16384, 4 vectors a thread; fp16 rows of 3072, 3), and 1280 past 24
    words (fp32 rows of 760: 6 vectors of x a thread of a warp). The results
    match torch either way."""
    x = rand((6, n), dtype)
    spec = _layernorm_checked(x, rand((n,), dtype), rand((n,), dtype))
    k = spec.kernel_for([6, n])[0]
    vec = spec._vec[id(k)]
    sched = spec._row_schedule(k, n // vec)
    assert sched[1] > 0  # in registers
    var = spec.variant(k, vec, "int", *sched)
    assert f"__launch_bounds__({var.block}, {threads // var.block})" in var.source


@pytest.mark.parametrize("n,weights,want", [(102, 2, (8, 4)), (255, 2, (16, 4)), (77, 2, (8, 3)),
                                            (255, 1, (32, 2)), (61, 2, (8, 2))])
def test_short_shifted_rows_of_two_weights_take_longer_threads(n, weights, want):
    """Short fp32 rows off vector boundaries (rows.SHORT_SHIFTED_POINTS: 8
    points a thread) of a kernel of two weights (a layernorm) take 16 points
    a thread from row_widths.SHORT_SHIFTED_LONG vectors (x102: 8 threads of 4
    vectors, not 16 of 2; x255: 16 of 4); an rmsnorm's (one weight: x255, 32 of 2) and rows
    short of that keep 8. Results against torch (rows of n points, no multiple
    of a vector: each starts another point past a boundary); the launch
    rule's schedule."""
    x = rand((5, n), D.Float)
    w, b = rand((n,), D.Float), rand((n,), D.Float)
    if weights == 2:
        spec = _layernorm_checked(x, w, b)
    else:
        spec = _rmsnorm_weighted_checked(x, w)
    k = spec.kernel_for([5, n])[0]
    var = spec.choose(k, [5, n], [x, w, b][:weights + 1], None, [])
    assert var.shift and (var.threads, var.chunks) == want, var.name


@pytest.mark.parametrize("n", [0, 1, 7, 100, 1027, 4097, 50257])
@pytest.mark.parametrize("kind", ["softmax", "log_softmax", "rmsnorm", "sum", "amax", "var_mean"])
@pytest.mark.parametrize("dtype", [D.BFloat16, D.Float], ids=lambda d: d.name)
def test_rows_off_vector_boundaries(kind, dtype, n):
    """Rows whose length is no multiple of a vector, so that each starts at
    another point past a 16-byte boundary: on a GPU they are read in vectors
    at the boundaries (a shifted variant, launch_checks.shift_ok), the points off the
    row masked out of the reductions and the stores. Results against torch;
    the launch takes the shifted variant (compiled by the nvrtc check), and
    HOSTIR_DISABLE=shifted_rows reads the rows a point at a time. A weight
    read by every row keeps the point-at-a-time schedule. One-pass rows of
    few threads (cuda_row_shift.MASKED_ROWS) read the aligned vectors that
    cover them, the points off the row masked."""
    if n == 0 and kind in ("softmax", "log_softmax", "amax"):
        pytest.skip("max over an empty row raises (as torch.amax)")
    if n < 2 and kind == "var_mean":
        pytest.skip("a variance of fewer than 2 points with correction 1 is not a number")
    x = rand((5, n), dtype)
    if kind == "var_mean":
        def build(fd):
            var, mean = fd.ops.var_mean(fd.ops.cast(declare(fd, x), D.Float), [1], correction=1)
            fd.add_output(var)
            fd.add_output(mean)
        want = list(torch.var_mean(x.double(), 1, correction=1))
    elif kind in ("sum", "amax"):
        def build(fd):
            t = fd.ops.cast(declare(fd, x), D.Float)
            fd.add_output(fd.ops.sum(t, [1]) if kind == "sum" else fd.ops.max(t, [1]))
        want = [x.double().sum(1) if kind == "sum" else x.double().amax(1)]
    else:
        def build(fd):
            _norm_build(kind)(fd, declare(fd, x))
        want = _norm_expected(kind, x)
    outs, fd = _run_keeping_fd(build, [x])
    for o, w in zip(outs, want):
        check(o, w.to(o.dtype), kind="reduction")
    import conftest
    from hostir import config
    (spec,) = _reduction_specs(fd)
    for k in spec.kernels:
        vec = spec._vec[id(k)]
        var = spec.choose(k, [5, n], [x], None, [])
        if n == 0:  # empty rows: nothing to shift
            assert not var.shift, var.name
        elif vec == 8 and n % 8 and n % 4 == 0 and spec._half_aligned(k, n):  # (row_widths.HALF_ALIGNED_POINTS)
            assert (var.vec, var.shift, var.chunks) == (4, False, 2) and kind == "rmsnorm", var.name
        elif var.tiles:  # (row_tiles: short 2-byte rows of a full output, a thread each)
            assert var.shift and var.vec == 2 and vec == 8 and n <= 128 and kind not in ("sum", "amax", "var_mean")
        else:
            assert var.vec == vec and var.shift == (n % vec != 0), var.name
        if var.shift:
            from hostir.codegen.cuda_row_shift import MASKED_ROWS
            assert "m_ = (int)" in var.source and "_sh_" in var.name
            slots = -(-(2 * var.vec - 2) // var.threads)  # (head and tail points a thread)
            masked = kind in ("sum", "amax", "var_mean") and 0 < MASKED_ROWS <= slots
            assert ("hir_any_bit(" in var.source) == masked, (var.name, slots)
            if masked:  # (batches of cuda_row_batches.MASKED_BATCH vectors at most)
                from hostir.codegen.cuda_row_batches import MASKED_BATCH
                batches = [int(b) for b in re.findall(r"for \(int c = 0; c < (\d+); \+\+c\)", var.source)]
                assert batches and max(batches) <= MASKED_BATCH, (var.name, batches)
            conftest._KERNEL_SOURCES.setdefault(var.source, var.name)
        with config.override(disable=config.get().disable | {"shifted_rows"}):
            spec2 = _reduction_specs(_run_keeping_fd(build, [x])[1])[0]
            assert spec2.choose(spec2.kernels[0], [5, n], [x], None, []).vec == (1 if var.shift else var.vec)
    if kind == "rmsnorm" and n % vec:  # a weight and a bias every row reads
        _shifted_rows_with_a_weight(x, dtype, n, vec)


def _shifted_rows_with_a_weight(x, dtype, n, vec):
    """Rows off vector boundaries with a weight and a bias: a point at a time,
    or (rows.SHIFTED_WEIGHTS) the rows in shifted vectors and the weight and
    bias a point at a time, or (rows.FUNNEL_WEIGHTS too) funnel-shifted from
    their aligned vectors (short fp32 rows, two weights: a point at a time,
    rows.SHORT_SHIFTED_VECTORS); results against torch each way (on CUDA, the
    variant the knobs pick runs)."""
    import conftest
    from hostir.codegen import rows as row_rules
    w, b = rand((n,), dtype), rand((n,), dtype)

    def weighted(fd):
        t = fd.ops.cast(declare(fd, x), D.Float)
        ms = fd.ops.sum(fd.ops.mul(t, t), [1], keepdim=True)
        y = fd.ops.mul(t, fd.ops.rsqrt(fd.ops.add(fd.ops.div(ms, fd.ops.size(t, 1)), 1e-6)))
        y = fd.ops.add(fd.ops.mul(y, fd.ops.cast(declare(fd, w), D.Float)), fd.ops.cast(declare(fd, b), D.Float))
        fd.add_output(fd.ops.cast(y, dtype))
    t = x.double()
    want = t * torch.rsqrt(t.square().mean(1, keepdim=True) + 1e-6) * w.double() + b.double()
    saved = row_rules.SHIFTED_WEIGHTS, row_rules.FUNNEL_WEIGHTS, row_tiles.TILE_ROWS
    row_tiles.TILE_ROWS = False  # (short dense 2-byte rows: tiles, test_row_tiles)
    try:
        for on, funnel in ((False, False), (True, False), (True, True)):
            row_rules.SHIFTED_WEIGHTS, row_rules.FUNNEL_WEIGHTS = on, funnel
            (out,), fd = _run_keeping_fd(weighted, [x, w, b])
            check(out, want.to(out.dtype), kind="reduction")
            (spec,) = _reduction_specs(fd)
            var = spec.choose(spec.kernels[0], [5, n], [x, w, b], None, [])
            assert (var.vec, var.shift) == ((vec, True) if on else (1, False)), var.name
            if on:  # the weight and bias a point at a time, or funnel-shifted from 16-byte vectors
                assert "m_ = (int)" in var.source
                short = row_rules.short_shifted(vec, row_rules.shifted_vectors(n, vec))  # (two weights: none)
                assert ("hir_funnel16(" in var.source) == (funnel and vec * x.element_size() == 16 and not short)
                assert "const uint4*>(in1" not in var.source  # (never a vector off its boundary)
                conftest._KERNEL_SOURCES.setdefault(var.source, var.name)
    finally:
        row_rules.SHIFTED_WEIGHTS, row_rules.FUNNEL_WEIGHTS, row_tiles.TILE_ROWS = saved


@pytest.mark.parametrize("n", [769, 4097])
def test_shifted_rows_ask_occupancy_by_their_weights(n, monkeypatch):
    """cuda_row_shift.SHIFT_BOUNDS_WEIGHTS, SHIFT_BOUNDS_VEC: a shifted 2-byte
    row's kernel that reads no weight (a layernorm without one), in groups
    of 16 threads or more, asks for the blocks an SM its aligned twin does;
    with a weight and a bias it asks none (but 1024 threads an SM where a
    block takes a row: SHIFTED_ROW_BOUNDS), nor do fp32 rows (they spilled at
    their twins' bounds), and both ask where the rules allow. Results against
    torch."""
    from hostir.codegen import cuda_row_shift
    import conftest

    def bounded(var) -> bool:
        assert var.shift and var.chunks, var.name
        conftest._KERNEL_SOURCES.setdefault(var.source, var.name)
        return f"__launch_bounds__({var.block}, " in var.source

    x = rand((9, n), D.BFloat16)
    spec = _norm_checked("layernorm", x)
    k = spec.kernel_for([9, n])[0]
    var = spec.choose(k, [9, n], [x], None, [])
    assert var.threads >= 16 and bounded(var), var.name
    w, b = rand((n,), D.BFloat16), rand((n,), D.BFloat16)
    wspec = _layernorm_checked(x, w, b, "sym")
    wvar = wspec.choose(wspec.kernels[0], [9, n], [x, w, b], None, [])
    assert bounded(wvar) is (wvar.threads == wvar.block), wvar.name  # (a block a row: SHIFTED_ROW_BOUNDS)
    assert (f"__launch_bounds__({wvar.block}, {1024 // wvar.block})" in wvar.source) is (n == 4097)
    x32 = rand((9, n), D.Float)
    fspec = _norm_checked("layernorm", x32)
    assert not bounded(fspec.choose(fspec.kernel_for([9, n])[0], [9, n], [x32], None, []))
    monkeypatch.setattr(cuda_row_shift, "SHIFT_BOUNDS_WEIGHTS", 3)
    monkeypatch.setattr(cuda_row_shift, "SHIFT_BOUNDS_VEC", 4)
    for sp, args in ((wspec, [x, w, b]), (fspec, [x32])):
        sp._variants.clear()  # (a fresh variant prints its source again)
        k = sp.kernels[0] if sp is wspec else sp.kernel_for([9, n])[0]
        assert bounded(sp.choose(k, [9, n], args, None, []))


@pytest.mark.parametrize("dtype,wdtype,n,want", [(D.BFloat16, D.BFloat16, 13155, (256, 7)),
                                                 (D.Half, D.Half, 16001, (256, 8)),
                                                 (D.BFloat16, D.BFloat16, 7001, (128, 7)),
                                                 (D.BFloat16, D.Float, 7001, (256, 7)),
                                                 (D.BFloat16, D.BFloat16, 13152, (512, 4)),
                                                 (D.Float, D.Float, 6577, (256, 7))],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_shifted_layernorm_rows_take_fewer_threads(dtype, wdtype, n, want):
    """rows.SHIFTED_ROW_THREADS: a layernorm's 2-byte rows off vector
    boundaries (a weight and a bias: no bounds on its registers) held in
    registers take 256 threads a row at most, up to 64 points a thread
    (13155 points: 256 x 7 vectors, not 512 x 4), asking for 1024 threads an
    SM (cuda_row_shift.SHIFTED_ROW_BOUNDS); its aligned twin, fp32
    rows and rows read in vectors of 4 (fp32 weights) keep the plain rule, and
    so does an rmsnorm's (one weight: bounded).
    Rows of odd starts and size-1 rows too; results against torch."""
    from hostir.codegen import rows as row_rules
    for rows_count in (9, 1):
        x = rand((rows_count, n), dtype)
        w, b = rand((n,), wdtype), rand((n,), wdtype)
        spec = _layernorm_checked(x, w, b)
        k = spec.kernels[0]
        var = spec.choose(k, [rows_count, n], [x, w, b], None, [])
        assert (var.threads, var.chunks) == want and var.shift == bool(n % var.vec), var.name
        wide = var.shift and var.vec == 8  # (cuda_row_shift.wide_shift; SHIFTED_ROW_BOUNDS: 1024 threads an SM)
        assert (f"__launch_bounds__({var.block}, {1024 // var.block})" in var.source) is wide, var.name
    if dtype == D.BFloat16 and n == 13155:
        rms = _norm_checked("rmsnorm", x)
        rk = rms.kernel_for([1, n])[0]
        assert (rms.choose(rk, [1, n], [x], None, []).threads, row_rules.SHIFTED_ROW_THREADS) == (512, 256)


@pytest.mark.parametrize("n,want", [(61, (8, 2)), (93, (8, 3)), (150, (8, 5)), (333, (32, 3)), (1027, (64, 4))])
def test_short_fp32_shifted_rows_take_more_threads(n, want, monkeypatch):
    """rows.REGISTER_SHIFTED_POINTS, SHORT_SHIFTED_VECTORS: fp32 rows off
    vector boundaries held in registers aim at 16 points a thread (1027
    points: 64 threads x 4 vectors), those of 128 vectors or fewer at 8 (61
    points: 8 x 2; 93 and 150 fill their groups' slots: ROW_FILL_GAIN), and
    there a layernorm's weight and bias are read a point at a time, not
    funnel-shifted (an rmsnorm's one weight is, at any length); fp32 rows keep
    no weights in shared memory (KEEP_WEIGHTS_VEC). Results against torch, 9
    rows (odd starts) and 1. (The rules that take some of these rows another
    way, row_widths.POINT_ROWS and NARROW_ROWS, off here: their own tests
    below.)"""
    import conftest
    from hostir.codegen import rows as row_rules
    from hostir.codegen import row_widths
    monkeypatch.setattr(row_widths, "POINT_ROWS", 0)
    monkeypatch.setattr(row_widths, "NARROW_ROWS", (0, 0))
    short = row_rules.short_shifted(4, row_rules.shifted_vectors(n, 4))
    assert short == (n < 1000)
    for rows_count in (9, 1):
        x = rand((rows_count, n), D.Float)
        w, b = rand((n,), D.Float), rand((n,), D.Float)

        def rmsnorm(fd):
            t = declare(fd, x)
            ms = fd.ops.sum(fd.ops.mul(t, t), [1], keepdim=True)
            y = fd.ops.mul(t, fd.ops.rsqrt(fd.ops.add(fd.ops.div(ms, fd.ops.size(t, 1)), 1e-6)))
            fd.add_output(fd.ops.mul(y, declare(fd, w)))
        (out,), fd = _run_keeping_fd(rmsnorm, [x, w])
        t = x.double()
        check(out, (t * torch.rsqrt(t.square().mean(1, keepdim=True) + 1e-6) * w.double()).float(), kind="reduction")
        cases = ((_layernorm_checked(x, w, b), [x, w, b], 2), (_reduction_specs(fd)[0], [x, w], 1),
                 (_norm_checked("softmax", x), [x], 0))
        for spec, ins, weights in cases:
            var = spec.choose(spec.kernels[0], [rows_count, n], ins, None, [])
            assert var.shift and (var.threads, var.chunks) == want and not var.keep_weights, var.name
            assert var.funnel == (weights == 1 or (weights == 2 and not short)), (var.name, weights)
            conftest._KERNEL_SOURCES.setdefault(var.source, var.name)


def _rmsnorm_weighted_checked(x, w):
    """An rmsnorm of x's rows (fp32 math, x's dtype out) times weight w, run and
    checked against torch; returns the reduction kernel's spec."""
    def build(fd):
        t = fd.ops.cast(declare(fd, x), D.Float)
        ms = fd.ops.sum(fd.ops.mul(t, t), [1], keepdim=True)
        y = fd.ops.mul(t, fd.ops.rsqrt(fd.ops.add(fd.ops.div(ms, fd.ops.size(t, 1)), 1e-6)))
        fd.add_output(fd.ops.cast(fd.ops.mul(y, fd.ops.cast(declare(fd, w), D.Float)), FROM_TORCH[x.dtype]))
    (out,), fd = _run_keeping_fd(build, [x, w])
    t = x.double()
    want = t * torch.rsqrt(t.square().mean(1, keepdim=True) + 1e-6) * w.double()
    check(out, want.to(out.dtype), kind="reduction")
    (spec,) = _reduction_specs(fd)
    return spec


@pytest.mark.parametrize("n", [45, 61, 93, 150, 199, 333])
def test_short_fp32_rmsnorm_rows_held_a_point_a_load(n):
    """row_widths.POINT_ROWS: fp32 rows off vector boundaries, of 57 to 224 points,
    of a kernel that reduces once, in its first pass only (an rmsnorm), held
    in registers a point a load (vector width 1, scalar loads coalesced over
    the row's threads, about POINT_ROW_POINTS a thread: no shifted vectors);
    shorter and longer rows, and a layernorm's or a softmax's, in shifted
    vectors; a row read with a stride takes the plain point schedule. Results
    against torch (9 rows, 1; on a GPU the variant runs; the nvrtc check
    compiles it)."""
    import conftest
    held = 56 < n <= 224
    for rows_count in (9, 1):
        x, w = rand((rows_count, n), D.Float), rand((n,), D.Float)
        var = (spec := _rmsnorm_weighted_checked(x, w)).choose(spec.kernels[0], [rows_count, n], [x, w], None, [])
        assert (var.vec == 1 and bool(var.chunks) and not var.shift) == held, var.name
        if held:
            assert var.threads * var.chunks >= n and var.chunks <= 7, var.name
            assert "reinterpret_cast<const unsigned int*>(in0 + " in var.source  # (a point a load, kept)
        conftest._KERNEL_SOURCES.setdefault(var.source, var.name)
    x = rand((9, n), D.Float)
    for spec, ins in ((_norm_checked("softmax", x), [x]),
                      (_layernorm_checked(x, rand((n,), D.Float), rand((n,), D.Float)), None)):
        var = spec.choose(spec.kernels[0], [9, n], ins or [x, x[0], x[0]], None, [])
        assert var.vec > 1, var.name
    xs = rand((3, 2 * n), D.Float)[:, ::2]  # (a stride along the row: not held)
    outs, fd = _run_keeping_fd(lambda fd: _norm_build("rmsnorm")(fd, declare(fd, xs, "strided")), [xs])
    check(outs[0], _norm_expected("rmsnorm", xs)[0].float(), kind="reduction")
    (spec,) = _reduction_specs(fd)
    var = spec.choose(spec.kernels[0], [3, n], [xs], None, [])
    assert not var.chunks, var.name


@pytest.mark.parametrize("dtype,n,narrow", [(D.Float, 150, True), (D.Float, 254, True), (D.Float, 98, False),
                                            (D.Float, 510, False), (D.BFloat16, 252, True), (D.Half, 150, False),
                                            (D.BFloat16, 1020, False)])
def test_rows_read_in_narrower_vectors(dtype, n, narrow):
    """row_widths.NARROW_ROWS: rows of a kernel that reduces in its first pass only
    (a layernorm), off the boundaries of its 16-byte vectors but on those of
    8-byte ones, of 449 to 1024 bytes, read in 8-byte vectors (no shift), 32
    threads a row (NARROW_SPAN_BYTES: 256 bytes a load); a softmax's rows (a
    reduction in its second pass), shorter and longer rows: shifted
    vectors; rows of 2-byte points on 2-point boundaries, not 4-point
    ones: words (row_widths.WORD_ROWS), or tiles up to row_tiles.TILE_ROW_POINTS.
    Results against torch (9 rows, 1)."""
    import conftest
    for rows_count in (9, 1):
        x, w, b = rand((rows_count, n), dtype), rand((n,), dtype), rand((n,), dtype)
        spec = _layernorm_checked(x, w, b)
        var = spec.choose(spec.kernels[0], [rows_count, n], [x, w, b], None, [])
        wide = 16 // x.element_size()
        if x.element_size() == 2 and n % 4 == 2:  # (on 2-point boundaries: words, row_widths.WORD_ROWS;
            # a layernorm's rows up to TILE_ROW_POINTS tiles first: row_tiles.before_word_rows)
            assert (var.tiles if n <= row_tiles.TILE_ROW_POINTS else var.stack and not var.shift), var.name
            continue
        assert (var.vec, var.shift) == ((wide // 2, False) if narrow else (wide, True)), var.name
        if narrow:
            assert var.threads == 32 and var.threads * var.chunks * var.vec >= n, var.name
        conftest._KERNEL_SOURCES.setdefault(var.source, var.name)
    spec = _norm_checked("softmax", x)
    assert spec.choose(spec.kernels[0], [1, n], [x], None, []).shift


@pytest.mark.parametrize("dtype,n,half", [(D.BFloat16, 45, True), (D.BFloat16, 62, True), (D.Half, 77, True),
                                          (D.BFloat16, 93, True), (D.BFloat16, 37, False),
                                          (D.BFloat16, 60, False), (D.Half, 101, False)])
def test_short_2byte_rows_in_half_vectors(dtype, n, half, monkeypatch):
    """row_widths.HALF_SHIFT_POINTS: rows of 2-byte points of a kernel of several
    passes, of 41 to 96 points, off the boundaries of 4-point vectors too,
    read in shifted vectors of 4 points (8 bytes: fewer head and tail points
    a thread); an rmsnorm's weight funnel-shifted from two 8-byte vectors
    (hir_funnel8). An rmsnorm's rows on 2-point boundaries: words
    (row_widths.WORD_ROWS); on 4-point ones: unshifted vectors of 4. Rows on
    4-point boundaries, shorter or longer ones, and a row sum's (one pass):
    shifted vectors of 8. Results against torch (9 rows,
    1; on a GPU the variant runs; the nvrtc check compiles it). (Tiles off:
    dense rows take them, row_tiles; these are what other layouts take.)"""
    import conftest
    monkeypatch.setattr(row_tiles, "TILE_ROWS", False)
    for rows_count in (9, 1):
        x, w, b = rand((rows_count, n), dtype), rand((n,), dtype), rand((n,), dtype)
        for spec, ins in ((_rmsnorm_weighted_checked(x, w), [x, w]), (_layernorm_checked(x, w, b), [x, w, b]),
                          (_norm_checked("softmax", x), [x])):
            var = spec.choose(spec.kernels[0], [rows_count, n], ins, None, [])
            if n % 4 == 0 and len(ins) == 2:  # (an rmsnorm's rows on 4-point boundaries: HALF_ALIGNED_POINTS)
                assert (var.vec, var.shift) == (4, False), var.name
                continue
            if n % 2 == 0 and len(ins) == 2:  # (... on 2-point ones: row_widths.WORD_ROWS, test_word_rows)
                assert var.stack and not var.shift, var.name
                continue
            assert var.shift and var.vec == (4 if half else 8), var.name
            if half and len(ins) == 2:
                assert var.funnel and "hir_funnel8(" in var.source, var.name
            conftest._KERNEL_SOURCES.setdefault(var.source, var.name)

    def row_sum(fd):
        fd.add_output(fd.ops.sum(fd.ops.cast(declare(fd, x), D.Float), [1]))
    (out,), fd = _run_keeping_fd(row_sum, [x])
    check(out, x.double().sum(1).float(), kind="reduction")
    (spec,) = _reduction_specs(fd)
    assert spec.choose(spec.kernels[0], [1, n], [x], None, []).vec == 8


@pytest.mark.parametrize("resident", [3, 16])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "offset"])
@pytest.mark.parametrize("n", [93, 333, 769, 5121])  # (769: 2-byte rows' whole vectors fill 3 a thread of 32)
@pytest.mark.parametrize("dtype,wdtype", [(D.BFloat16, D.BFloat16), (D.Float, D.Float), (D.Half, D.Float),
                                          (D.BFloat16, D.Float)], ids=lambda d: d.name)
def test_shifted_rows_keep_their_weights(dtype, wdtype, n, layout, resident, monkeypatch):
    """rows.KEEP_WEIGHTS: a layernorm's rows off vector boundaries (each row
    starts elsewhere past one) with a weight and a bias: each block keeps them
    in shared memory placed as shifted as its rows (a vector of the row reads
    them as one aligned vector), placing them again where a row starts
    elsewhere. The grid is the blocks the device runs at once (here 3 or 16),
    a multiple of the vector where it can be: with 3 every row of a block
    starts elsewhere; weights of another dtype than the rows. Short rows (93
    points: more groups a block than a vector has points) keep a share a
    shift, the groups whose rows start alike reading one. Weights read
    off vector boundaries (strided, or starting a point past one) are not
    kept (they are placed from aligned vectors: launch_checks.keep_weights_ok),
    nor (rows.KEEP_WEIGHTS_VEC, set to 1 here but at the end) are fp32 rows'.
    Results against torch (on GPUs the variant runs; the nvrtc check compiles it)."""
    import conftest
    from hostir.codegen import rows as row_rules
    from hostir.runtime import backend, launch
    monkeypatch.setattr(row_rules, "KEEP_WEIGHTS_ROWS", 1)
    monkeypatch.setattr(row_tiles, "TILE_ROWS", False)  # (short dense rows: tiles, test_row_tiles)
    vec_rule = row_rules.KEEP_WEIGHTS_VEC
    monkeypatch.setattr(row_rules, "KEEP_WEIGHTS_VEC", 1)  # (fp32 rows too: the rule below)
    monkeypatch.setattr(backend, "sm_count", lambda device: 1)
    monkeypatch.setattr(launch.CompiledKernel, "resident_blocks", lambda self, device, block: resident)
    rows_count = 37
    x = rand((rows_count, n), dtype)
    w = {"contiguous": lambda: rand((n,), wdtype), "strided": lambda: rand((2 * n,), wdtype)[::2],
         "offset": lambda: rand((n + 1,), wdtype)[1:]}[layout]()
    b = rand((n,), wdtype)
    spec = _layernorm_checked(x, w, b, "strided" if layout == "strided" else "sym")
    k = spec.kernels[0]
    var_ = spec.choose(k, [rows_count, n], [x, w, b], None, [])
    from hostir.codegen.row_loads import kept_by_shift, kept_share
    by_shift = kept_by_shift(var_.threads, var_.vec, var_.block)  # (short rows: a share a shift, not a group)
    assert by_shift == (var_.vec == 8 and var_.block // var_.threads > 8), var_.name  # (2-byte short rows)
    assert by_shift or not (n == 93 and var_.vec == 8), var_.name  # (93 2-byte points: many groups a block)
    size = (w.element_size() + b.element_size()) * (var_.vec if by_shift else var_.block // var_.threads) * \
        kept_share(var_.chunks, var_.threads, var_.vec)  # (a share: a group's whole vectors, the head and tail)
    most = row_rules.KEEP_NARROW_WEIGHTS_BYTES if w.element_size() == b.element_size() == 2 \
        else row_rules.KEEP_WEIGHTS_BYTES  # (2-byte weights: more bytes a block)
    keeps = (size <= most and layout == "contiguous"
             and var_.block >= row_rules.KEEP_WEIGHTS_BLOCK)
    assert var_.shift and var_.chunks and var_.keep_weights == keeps, var_.name
    if layout != "contiguous":  # (off boundaries: never funnel-shifted either, a point at a time)
        assert not var_.funnel and "hir_funnel16(" not in var_.source, var_.name
    if not keeps:  # (past KEEP_WEIGHTS_BYTES, as fp32 weights of 5121 points; off boundaries)
        return
    assert "kept_m_" in var_.source and "__syncthreads_or(m_ != kept_m_)" in var_.source
    assert "*>(in1 + " in var_.source.split("kept_m_ = m_;")[0]  # (the weights read in vectors to be placed)
    assert "in1" not in var_.source.split("kept_m_ = m_;")[1]  # (then from shared memory only)
    conftest._KERNEL_SOURCES.setdefault(var_.source, var_.name)
    per_block = var_.block // var_.threads
    want = min(-(-rows_count // per_block), resident // var_.vec * var_.vec or resident)
    assert spec.grid(var_, spec.count(k, [rows_count, n], var_.vec), 1, 1, [rows_count, n], resident) == want
    monkeypatch.setattr(row_rules, "KEEP_WEIGHTS_LOADS", 3)  # (a weight and a bias: two loads a point)
    assert not spec.choose(k, [rows_count, n], [x, w, b], None, []).keep_weights
    monkeypatch.setattr(row_rules, "KEEP_WEIGHTS_LOADS", 2)
    monkeypatch.setattr(row_rules, "KEEP_WEIGHTS_BLOCK", 2 * var_.block)  # (blocks too small)
    assert not spec.choose(k, [rows_count, n], [x, w, b], None, []).keep_weights
    monkeypatch.setattr(row_rules, "KEEP_WEIGHTS_BLOCK", var_.block)
    monkeypatch.setattr(row_rules, "KEEP_WEIGHTS_ROWS", rows_count + 1)  # (few rows: read from global memory)
    assert not spec.choose(k, [rows_count, n], [x, w, b], None, []).keep_weights
    monkeypatch.setattr(row_rules, "KEEP_WEIGHTS_ROWS", 1)
    monkeypatch.setattr(row_rules, "KEEP_WEIGHTS_VEC", vec_rule)  # (fp32 rows keep none: vectors of 4)
    assert spec.choose(k, [rows_count, n], [x, w, b], None, []).keep_weights == (var_.vec >= vec_rule)


@pytest.mark.parametrize("dtype,n,aligned", [(D.BFloat16, 60, True), (D.Half, 44, True), (D.BFloat16, 92, True),
                                             (D.BFloat16, 124, True), (D.BFloat16, 62, False), (D.Half, 64, False)])
def test_short_2byte_rows_on_half_boundaries(dtype, n, aligned, monkeypatch):
    """row_widths.HALF_ALIGNED_POINTS: rows of 2-byte points of a kernel that
    reduces in its first pass only (an rmsnorm; a layernorm too where
    HALF_ALIGNED_WEIGHTS allows its two weights), off the boundaries of 8-point
    vectors but on those of 4-point ones, read in unshifted vectors of 4, two
    a thread (no head or tail); a softmax's and rows off 4-point boundaries
    shifted, rows on 8-point ones in vectors of 8. Results against torch (9 rows, 1; on a GPU the variant
    runs; the nvrtc check compiles it)."""
    import conftest
    from hostir.codegen import row_widths
    monkeypatch.setattr(row_widths, "HALF_ALIGNED_WEIGHTS", 2)  # (a layernorm's two weights too, here)
    for rows_count in (9, 1):
        x, w, b = rand((rows_count, n), dtype), rand((n,), dtype), rand((n,), dtype)
        for spec, ins in ((_rmsnorm_weighted_checked(x, w), [x, w]), (_layernorm_checked(x, w, b), [x, w, b]),
                          (_norm_checked("softmax", x), [x])):
            var = spec.choose(spec.kernels[0], [rows_count, n], ins, None, [])
            if len(ins) == 3:  # (a layernorm's rows keep shifted vectors at the rule's default)
                monkeypatch.setattr(row_widths, "HALF_ALIGNED_WEIGHTS", 1)
                assert spec.choose(spec.kernels[0], [rows_count, n], ins, None, []).vec != 4 or not aligned
                monkeypatch.setattr(row_widths, "HALF_ALIGNED_WEIGHTS", 2)
            if aligned and len(ins) > 1:
                assert (var.vec, var.shift) == (4, False) and var.chunks == 2, var.name
                assert var.threads * 8 >= n > var.threads * 4, var.name
            else:  # (a softmax's: its second pass reduces)
                assert var.vec != 4 or var.shift, var.name
            conftest._KERNEL_SOURCES.setdefault(var.source, var.name)


@pytest.mark.parametrize("resident", [3, 16])
@pytest.mark.parametrize("dtype,wdtype,n", [(D.BFloat16, D.BFloat16, 62), (D.BFloat16, D.BFloat16, 150),
                                            (D.Half, D.Half, 61), (D.BFloat16, D.BFloat16, 254),
                                            (D.Float, D.Float, 102), (D.BFloat16, D.Float, 93),
                                            (D.Float, D.BFloat16, 333)], ids=lambda d: getattr(d, "name", str(d)))
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_shifted_rows_hold_their_weights(dtype, wdtype, n, layout, resident, monkeypatch):
    """cuda_row_shift.HOLD_WEIGHTS: an rmsnorm's or a layernorm's rows off
    vector boundaries (each row starts elsewhere past one), kept in registers,
    whose weights no block keeps in shared memory (rows.KEEP_WEIGHTS off
    here): each thread holds its points of the weights in registers across
    its rows (its vectors' points funnel-shifted where the weight's vectors
    start at boundaries, else, strided, a point at a time; its head and tail
    points), read again where a row starts elsewhere past a boundary. The
    grid is the blocks the device runs at once (here 3 or 16), a multiple of
    the vector where it can be: with 3 a thread's rows start elsewhere, and
    it reads them again. Weights of another dtype than the rows. Held only
    within HOLD_WEIGHTS words a thread and past HOLD_WEIGHTS_ROWS rows.
    Results against torch (on GPUs the variant runs, each thread over several
    rows; the nvrtc check compiles it)."""
    import conftest
    from hostir.codegen import cuda_row_shift, row_widths, rows as row_rules
    from hostir.runtime import backend, launch
    monkeypatch.setattr(cuda_row_shift, "HOLD_WEIGHTS", 64)
    monkeypatch.setattr(cuda_row_shift, "HOLD_WEIGHTS_ROWS", 1)
    monkeypatch.setattr(row_widths, "WORD_ROWS", ((0, 0),))  # (shifted rows here; rows in words: test_word_rows)
    monkeypatch.setattr(row_rules, "KEEP_WEIGHTS", False)
    monkeypatch.setattr(row_tiles, "TILE_ROWS", False)  # (short dense rows: tiles, test_row_tiles)
    monkeypatch.setattr(backend, "sm_count", lambda device: 1)
    monkeypatch.setattr(launch.CompiledKernel, "resident_blocks", lambda self, device, block: resident)
    rows_count = 301
    x = rand((rows_count, n), dtype)
    w = {"contiguous": lambda: rand((n,), wdtype), "strided": lambda: rand((2 * n,), wdtype)[::2]}[layout]()
    b = rand((n,), wdtype)
    decl = "strided" if layout == "strided" else "sym"
    runs = [lambda: (_layernorm_checked(x, w, b, decl), [x, w, b])]
    if layout == "contiguous":  # (an rmsnorm's weight declared contiguous)
        runs.append(lambda: (_rmsnorm_weighted_checked(x, w), [x, w]))
    for spec, ins in (run() for run in runs):
        k = spec.kernels[0]
        var = spec.choose(k, [rows_count, n], ins, None, [])
        if not var.shift:  # (an rmsnorm's short rows of 4-byte vectors a point a load: row_widths.POINT_ROWS)
            assert not var.hold and len(ins) == 2, var.name
            continue
        assert var.chunks and var.hold and not var.keep_weights, var.name
        src = var.source
        assert "held_m_" in src and "if (m_ != held_m_)" in src, var.name
        body = src.split("held_m_ = m_;")[1].split("float a0 = ")[1]  # (the passes, after the reads)
        assert "in1[" not in body and "in1 +" not in body, var.name  # (the weight from registers only)
        assert var.funnel == (layout == "contiguous" and "hir_funnel" in src), var.name
        conftest._KERNEL_SOURCES.setdefault(src, var.name)
        per_block = var.block // var.threads
        want = min(-(-rows_count // per_block), resident // var.vec * var.vec or resident)
        assert spec.grid(var, spec.count(k, [rows_count, n], var.vec), 1, 1, [rows_count, n], resident) == want
        monkeypatch.setattr(cuda_row_shift, "HOLD_WEIGHTS_ROWS", rows_count + 1)  # (few rows)
        assert not spec.choose(k, [rows_count, n], ins, None, []).hold
        monkeypatch.setattr(cuda_row_shift, "HOLD_WEIGHTS_ROWS", 1)
        words = sum(var.chunks * var.vec * t.element_size() for t in ins[1:]) // 4
        monkeypatch.setattr(cuda_row_shift, "HOLD_WEIGHTS", words - 1)  # (more registers than allowed)
        assert not spec.choose(k, [rows_count, n], ins, None, []).hold
        monkeypatch.setattr(cuda_row_shift, "HOLD_WEIGHTS", 64)


@pytest.mark.parametrize("kind", ["softmax", "log_softmax", "rmsnorm", "layernorm"])
@pytest.mark.parametrize("dtype,n", [(D.BFloat16, 49152), (D.BFloat16, 131072), (D.Float, 40000), (D.Half, 65536),
                                     (D.BFloat16, 262144)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_blocks_that_take_several_long_rows(kind, dtype, n, monkeypatch):
    """A row split over a cluster's CTAs, each keeping its share in shared
    memory (by cp.async), takes a grid of the clusters the device runs at once,
    each several rows; the last pass copies the cluster's next row into each
    slot it has read (rows.ROW_AHEAD), the first pass waits for each chunk's own
    copy (rows.ROW_WAITS). Rows a block keeps whole take a block a row, each
    chunk waiting for its copy. On GPUs the launch sees one SM and two clusters
    at once here, so two clusters take all 7 rows (the last row has no next
    one). Results against torch."""
    from hostir.codegen import cuda_row_copies
    from hostir.runtime import backend, launch
    monkeypatch.setattr(backend, "sm_count", lambda device: 1)
    monkeypatch.setattr(launch.CompiledKernel, "resident_clusters", lambda self, device, block: 2)
    x = rand((7, n), dtype)
    spec = _norm_checked(kind, x)
    k = spec.kernel_for([7, n])[0]
    vec = spec._vec[id(k)]
    t, c, kept = spec._row_schedule(k, n // vec)
    if (dtype, n) == (D.BFloat16, 49152) or (n == 131072 and kind in ("softmax", "log_softmax")):
        assert t == 1024 and kept and not cuda_row_copies.copies_ahead(k, vec, c, min(kept, c), t, False)
        var = spec.variant(k, vec, "int", t, c, kept)
        assert spec.grid(var, 7, 1, 1, [7, n]) == 7
        assert "hir_cp_async_after<" not in var.source and "hir_cp_async_wait_pending(" in var.source
    q = spec._cluster(k, n // vec)
    if q:  # (262144 points: clusters of 4 CTAs; rmsnorm's and layernorm's 131072: of 2)
        t, c, kept = spec._row_schedule(k, -(-n // (vec * q)))
        var = spec.variant(k, vec, "int", t, c, kept, cluster=q)
        ahead = not _is_online(k)  # (a softmax's kept rows: the online kernel, a cluster a row)
        assert spec.grid(var, 7, 132, 1, [7, n]) == 7 * q and spec.grid(var, 7, 132, 1, [7, n], 2) == (2 if ahead else 7) * q
        assert ("hir_cp_async_after<" in var.source) is ahead
        assert not var.drawn and "hir_next_row(" not in var.source  # (rows.CLUSTER_DRAWN: not these)
        assert (kind in ("softmax", "log_softmax")) is not ahead


def _norm_plan(kind, x):
    """Run _norm_build(kind) on x once; (its FusionDefinition, the reduction
    kernel's spec, the kernel of x's extents)."""
    _, fd = _run_keeping_fd(lambda fd: _norm_build(kind)(fd, declare(fd, x)), [x])
    (spec,) = _reduction_specs(fd)
    return fd, spec, spec.kernel_for(list(x.shape))[0]


def _drawn_calls(fd, kind, x, var, grid, calls):
    """Run `fd` (a normalization `kind` of 7 rows, run once on `x`) `calls`
    times more, on `x` then new rows, each against torch; on a GPU, check the
    launch ran the drawn variant `var` in `grid` blocks and left its ticket
    counter at 7 tickets a call (each launch draws exactly its rows)."""
    import gc
    import warnings
    from hostir.runtime import backend
    outs = None
    for call in range(calls):
        if call:
            x = rand(tuple(x.shape), FROM_TORCH[x.dtype])
        outs = fd.execute([to_device_exact(x, TEST_DEVICE)] if TEST_DEVICE != "cpu" else [x])
        for o, w in zip(outs, _norm_expected(kind, x)):
            check(o.cpu(), w.to(o.dtype), kind="reduction")
        if TEST_DEVICE != "cpu":
            with warnings.catch_warnings():  # (isinstance on every object wakes deprecated aliases)
                warnings.simplefilter("ignore")
                preps = [o for o in gc.get_objects() if isinstance(o, backend.CudaLaunch) and o.variant is var]
            assert len(preps) == 1 and preps[0].grid == grid, "the launch ran the drawn variant"
            (_, counter), = preps[0].scratch_bufs.values()
            assert counter.cpu().view(torch.int64).item() == 7 * (call + 2)  # (and the plan's first call)
    return outs


@pytest.mark.parametrize("kind", ["rmsnorm", "layernorm"])
@pytest.mark.parametrize("dtype,n", [(D.BFloat16, 131071), (D.BFloat16, 258961), (D.Float, 100001),
                                     (D.Half, 150001)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_shifted_cluster_rows_are_drawn(kind, dtype, n, monkeypatch):
    """rows.CLUSTER_DRAWN: rows off vector boundaries split over a cluster
    (no row copied ahead) take a grid of the clusters the device runs at once,
    each drawing its next row from a 64-bit ticket counter as its row starts
    (hir_next_row; published at the row's first cluster barrier). No launch
    resets the counter: each draws exactly as many tickets as rows, so the
    next starts at a multiple of them again. On GPUs the launch sees two
    clusters at once here (7 rows); the fusion runs five more times, and
    after each call the counter holds 7 tickets a call. Results against
    torch at each call."""
    import conftest
    from hostir.codegen import rows
    from hostir.runtime import backend, launch
    monkeypatch.setattr(backend, "sm_count", lambda device: 1)
    monkeypatch.setattr(launch.CompiledKernel, "resident_clusters", lambda self, device, block: 2)
    x = rand((7, n), dtype)
    fd, spec, k = _norm_plan(kind, x)
    vec = spec._vec[id(k)]
    vectors = rows.shifted_vectors(n, vec)
    q = spec._cluster(k, vectors)
    assert q > 1 and n % vec
    var = spec.variant(k, vec, "int", *spec._row_schedule(k, -(-vectors // q), shift=True), cluster=q, shift=True)
    src = var.source
    conftest._KERNEL_SOURCES.setdefault(src, var.name)
    assert var.drawn and f"_q{q}d_" in var.name and "hir_cp_async_after<" not in src
    assert f"(int)hir_next_row(sem, nslots, gridDim.x / {q})" in src and "base = nbase_" in src
    assert spec.grid(var, 7, 132, 1, [7, n], 2) == 2 * q and spec.grid(var, 7, 132, 1, [7, n]) == 7 * q
    assert spec.scratch_size(var, 7, 1) == (0, 2)
    _drawn_calls(fd, kind, x, var, 2 * q, 5)


@pytest.mark.parametrize("kind,dtype,n", [("softmax", D.BFloat16, 32768), ("rmsnorm", D.BFloat16, 65536),
                                          ("log_softmax", D.BFloat16, 131072), ("layernorm", D.Float, 32768)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_block_rows_drawn_where_asked(kind, dtype, n, monkeypatch):
    """rows.BLOCK_DRAWN (off by default): rows a block keeps in shared memory,
    a block each, take a grid of the blocks the device runs at once, each
    drawing its next row from the ticket counter as its row starts (thread
    0; published at the row's first block barrier). On GPUs the launch sees
    two SMs of one block each here (7 rows); the fusion runs three more
    times, and after each call the counter holds 7 tickets a call. Results
    against torch at each call."""
    import conftest
    from hostir.codegen import rows
    from hostir.runtime import backend, launch
    monkeypatch.setattr(rows, "BLOCK_DRAWN", True)
    monkeypatch.setattr(backend, "sm_count", lambda device: 2)
    monkeypatch.setattr(launch.CompiledKernel, "resident_blocks", lambda self, device, block: 1)
    x = rand((7, n), dtype)
    fd, spec, k = _norm_plan(kind, x)
    var = spec.choose(k, [7, n], [x], None, [])
    src = var.source
    conftest._KERNEL_SOURCES.setdefault(src, var.name)
    assert var.drawn and not var.cluster and var.smem_row and var.threads == var.block, var.name
    assert "_drawn_" in var.name and "(int)hir_next_row(sem, nslots, gridDim.x)" in src
    assert "if (threadIdx.x == 0) next_[0] = drawn_;" in src and "base = nbase_" in src
    assert spec.grid(var, 7, 2, 1, [7, n], 2) == 2 and spec.grid(var, 7, 2, 1, [7, n]) == 7
    assert spec.scratch_size(var, 7, 1) == (0, 2)
    _drawn_calls(fd, kind, x, var, 2, 3)
    monkeypatch.setattr(rows, "BLOCK_DRAWN", False)
    assert not spec.variant(k, var.vec, var.idx, var.threads, var.chunks, var.smem_row).drawn


@pytest.mark.parametrize("kind,dtype,n", [("softmax", D.BFloat16, 32768), ("log_softmax", D.Half, 146480),
                                          ("layernorm", D.BFloat16, 258961), ("rmsnorm", D.BFloat16, 1000)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_rows_stamp_where_asked(kind, dtype, n, monkeypatch):
    """rows.STAMPS (a debugging aid for benchmarks/timeline.py): kernels whose
    rows take a block or a cluster each stamp each row's start, first barrier
    and end (hir_stamp_row, hir_stamp_barrier); rows of several a block
    (1000 points) do not. Results against torch with the
    stamps (on a GPU, the stamped kernels; the nvrtc check compiles them)."""
    import conftest
    from hostir.codegen import rows
    monkeypatch.setattr(rows, "STAMPS", True)
    x = rand((3, n), dtype)
    spec = _norm_checked(kind, x)
    k = spec.kernel_for([3, n])[0]
    var = spec.choose(k, [3, n], [x], None, [])
    vectors = spec._row_vectors([3, n])
    q = spec._cluster(k, vectors)
    if q:  # (the variant a GPU that launches clusters takes)
        part = -(-vectors // q)
        var = spec.variant(k, var.vec, "int", *spec._row_schedule(k, part, shift=bool(n % var.vec)),
                           cluster=q, shift=bool(n % var.vec))
    src = var.source
    conftest._KERNEL_SOURCES.setdefault(src, var.name)
    one_a_row = var.threads == var.block
    assert one_a_row is (n > 1000)
    slot = f"(unsigned long long)row * {q} + hir_cluster_rank()" if q else "(unsigned long long)row"
    assert (f"hir_stamp_barrier({slot});" in src and f"hir_stamp_row({slot}, stamp_);" in src
            and "#define HIR_STAMPS 65536\n" in src) is one_a_row, var.name
    monkeypatch.setattr(rows, "STAMPS", False)  # (a fresh plan: a spec keeps the variants it made)
    spec = _norm_checked(kind, x)
    k = spec.kernel_for([3, n])[0]
    plain = spec.variant(k, var.vec, var.idx, var.threads, var.chunks, var.smem_row, cluster=var.cluster,
                         shift=var.shift)
    assert plain.name == var.name and "hir_stamp" not in plain.source and "HIR_STAMPS" not in plain.source


@pytest.mark.parametrize("kind", ["rmsnorm", "layernorm"])
def test_shifted_long_rows_keep_more_in_shared_memory(kind):
    """A shifted row held in shared memory and registers keeps up to
    rows.SMEM_SHIFTED_ROW_BYTES a block in shared memory (112 KiB: 7 of a
    thread's 8 vectors), a vector fewer in registers than a row on vector
    boundaries (rows.SMEM_ROW_BYTES, 96 KiB: 6 of 8): its head and tail points
    and funnelled weights take registers, and its rest spilled. Results
    against torch (on a GPU, the shifted variant)."""
    from hostir.codegen import rows
    n = 65531
    x = rand((3, n), D.BFloat16)
    spec = _norm_checked(kind, x)
    k = spec.kernel_for([3, n])[0]
    vec = spec._vec[id(k)]
    vectors = rows.shifted_vectors(n, vec)
    assert spec._row_schedule(k, vectors) == (1024, 8, 6)
    assert spec._row_schedule(k, vectors, shift=True) == (1024, 8, 7)
    var = spec.variant(k, vec, "int", *spec._row_schedule(k, vectors, shift=True), shift=True)
    assert var.smem == 7 * 1024 * 16 and "_smem7_" in var.name


@pytest.mark.parametrize("kind", ["softmax", "rmsnorm", "layernorm", "var_mean"])
@pytest.mark.parametrize("n", [4096, 150, 77, 1])
def test_bf16_points_convert_from_their_pair_words(kind, n):
    """A bf16 point of a vector that a kernel's loop reads converts to float
    from its pair's 32-bit word (cuda.BF16_PAIRS: hir_bf2f_at), in rows on
    vector boundaries and in shifted ones (150, 77 points: the rows start
    off boundaries); a kernel that reads a point at a time (vector width 1)
    converts the point itself. Results against torch (on a GPU, these kernels)."""
    x = rand((5, n), D.BFloat16)
    if kind == "var_mean":
        def build(fd):
            for t in fd.ops.var_mean(declare(fd, x), [1], int(n > 1), False):
                fd.add_output(t)
        outs, fd = _run_keeping_fd(build, [x])
        v, m = torch.var_mean(x.double(), 1, correction=int(n > 1))
        check(outs[0], v.to(x.dtype), kind="reduction")
        check(outs[1], m.to(x.dtype), kind="reduction")
        (spec,) = _reduction_specs(fd)
    else:
        spec = _norm_checked(kind, x)
    k = spec.kernel_for([5, n])[0]
    var = spec.choose(k, [5, n], [x] + ([torch.ones(n, dtype=torch.bfloat16)] * (len(k.inputs) - 1)), None,
                      [1e-5] * len(k.params))
    src = var.source
    assert ("hir_bf2f_at(" in src) == (var.vec > 1), var.name
    assert var.vec > 1 or n == 1
    one = spec.variant(k, 1, "int", 32).source
    assert "hir_bf2f_at(" not in one and "hir_bf2f(" in one


def test_one_launch_config_for_launches_and_the_cluster_query():
    """launch.launch_config builds the cuLaunchKernelEx configuration a cluster
    or programmatic-dependent launch takes, and the one
    cuOccupancyMaxActiveClusters reads (CompiledKernel.resident_clusters)."""
    from hostir.runtime.launch import launch_config
    cu = pytest.importorskip("cuda.bindings.driver")
    c = launch_config(8, 1024, 65536, 4, True)
    assert (c.gridDimX, c.blockDimX, c.sharedMemBytes, c.numAttrs) == (8, 1024, 65536, 2)
    ids = [a.id for a in c.attrs]
    assert ids == [cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                   cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION]
    assert c.attrs[1].value.clusterDim.x == 4
    assert launch_config(2, 256, 0).numAttrs == 0 and launch_config(2, 256, 0, cluster=1).numAttrs == 0


@pytest.mark.parametrize("kind", ["softmax", "log_softmax", "rmsnorm", "layernorm"])
@pytest.mark.parametrize("dtype,n,q", [(D.BFloat16, 131072, 4), (D.Half, 150000, 4), (D.BFloat16, 262144, 8),
                                       (D.Float, 65536, 4)], ids=lambda v: getattr(v, "name", str(v)))
def test_rows_in_two_buffers(kind, dtype, n, q, monkeypatch):
    """rows.ROW_DOUBLE: rows past what two blocks an SM keep split over a
    cluster of q CTAs, one block of 1024 threads an SM, each keeping its share
    whole in one of two buffers and copying the cluster's next row into the
    other at the start of each row (its groups committed after this row's, so
    the first pass's waits count both). Results against torch (on GPUs: two
    clusters at once take all 7 rows); the variant's source, shared memory,
    launch bounds and grid."""
    from hostir.codegen import rows as row_rules
    from hostir.runtime import launch
    monkeypatch.setattr(row_rules, "ROW_DOUBLE", True)
    monkeypatch.setattr(launch.CompiledKernel, "resident_clusters", lambda self, device, block: 2)
    x = rand((7, n), dtype)
    spec = _norm_checked(kind, x)
    k = spec.kernel_for([7, n])[0]
    vec = spec._vec[id(k)]
    assert spec._double(k, n // vec) == q
    c = -(-n // (vec * q * 1024))
    var = spec.variant(k, vec, "int", 1024, c, c, cluster=q, double=True)
    src = var.source
    import conftest  # (the nvrtc check compiles it with the session's other kernels)
    conftest._KERNEL_SOURCES.setdefault(src, var.name)
    share = c * 1024 * vec * x.element_size()
    assert var.smem == 2 * share <= row_rules.SMEM_PER_SM and var.name.endswith("_db_b256_pdl")
    assert f"(buf_ ^ 1) * {share}" in src and "buf_ ^= 1;" in src and "__launch_bounds__(1024, 1)" in src
    assert f"if (nactive_) hir_cp_async_wait_pending({2 * c - 1} - c); else hir_cp_async_wait_pending({c - 1} - c);" in src
    assert "hir_cp_async_after" not in src  # (no copy into a slot just read: the other buffer)
    assert spec.grid(var, 7, 132, 1, [7, n]) == 7 * q and spec.grid(var, 7, 132, 1, [7, n], 2) == 2 * q
    monkeypatch.setattr(row_rules, "ROW_DOUBLE", False)
    assert spec._double(k, n // vec) == 0


@pytest.mark.parametrize("kind", ["softmax", "log_softmax", "rmsnorm", "layernorm"])
@pytest.mark.parametrize("dtype,n,one", [(D.BFloat16, 785, True), (D.Half, 1000, True), (D.BFloat16, 900, True),
                                         (D.Half, 1024, True), (D.BFloat16, 1042, False), (D.Float, 777, False),
                                         (D.BFloat16, 512, False)], ids=lambda v: getattr(v, "name", str(v)))
def test_rows_two_warps_would_hold_take_one(kind, dtype, n, one, monkeypatch):
    """rows.ONE_WARP_CHUNKS: a kept row that two warps would hold at the kept
    rows' vectors a thread (2-byte rows of 769 to 1024 points: rows.REGISTER_ROW_POINTS) takes one warp
    at up to ONE_WARP_CHUNKS vectors a thread: no block combine. Results
    against torch (rows off vector boundaries among them); with the rule off,
    64 threads. (bf16 rows of 1042 points, 130 vectors, take a warp of 5
    a thread by rows.ROW_FILL_GAIN, 81 % of its slots filled against 68.)"""
    from hostir.codegen import rows as row_rules
    x = rand((7, n), dtype)
    spec = _norm_checked(kind, x)
    k = spec.kernel_for([7, n])[0]
    var = spec.choose(k, [7, n], [x], None, [])
    assert var.chunks > 0, var.name
    if not one:
        assert (var.threads, var.chunks) == ((32, 5) if n == 1042 else (var.threads, var.chunks)), var.name
        monkeypatch.setattr(row_rules, "ROW_FILL_GAIN", 0)
        spec._variants.clear()
        var = spec.choose(k, [7, n], [x], None, [])
        assert var.threads != 32 or n <= 512, var.name
        return
    assert var.threads == 32 and var.chunks <= row_rules.ONE_WARP_CHUNKS, var.name
    assert "__syncthreads();  // the slots' previous readers are done" not in var.source
    import conftest
    conftest._KERNEL_SOURCES.setdefault(var.source, var.name)
    monkeypatch.setattr(row_rules, "ONE_WARP_CHUNKS", 0)
    spec._variants.clear()
    assert spec.choose(k, [7, n], [x], None, []).threads == 64


@pytest.mark.parametrize("kind", ["softmax", "log_softmax", "rmsnorm", "layernorm"])
@pytest.mark.parametrize("dtype,n", [(D.BFloat16, 16384), (D.Float, 4096), (D.Half, 3000), (D.Float, 131072)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_warps_combined_in_a_tree(kind, dtype, n):
    """A row of several warps combines its warps' results by shuffles
    (hir_warps_combine; cuda_row_combine's WARPS_TREE note), each lane taking
    one warp's slot. Results against torch (on GPUs: the kernels run); the row
    kernel's source."""
    x = rand((5, n), dtype)
    spec = _norm_checked(kind, x)
    k = spec.kernel_for([5, n])[0]
    vec = spec._vec[id(k)]
    t, c, kept = spec._row_schedule(k, n // vec)
    var = spec.variant(k, vec, "int", t, c, kept)
    import conftest  # (the nvrtc check compiles it with the session's other kernels)
    conftest._KERNEL_SOURCES.setdefault(var.source, var.name)
    assert t > 32 and f"hir_warps_combine<{t}>(smem0 + first" in var.source  # (64 to 1024 threads a row)
    assert "for (int w = 1;" not in var.source


@pytest.mark.parametrize("kind", ONLINE_KINDS)
def test_rows_over_eight_ctas_keep_the_plain_kernel(kind):
    """rows.ONLINE_KEPT_CLUSTER: fp32 rows of 140472 points, which the plain
    kernel splits over a cluster of 8 CTAs, keep the plain kernel (the online
    one there ran at 38 % of copy against 62). Results against torch, with
    -inf, NaN and +inf rows."""
    x = _special_rows((6, 140472), D.Float)
    (out,), fd = _run_keeping_fd(lambda fd: _online_build(kind)(fd, declare(fd, x)), [x])
    check(out, _online_expected(kind, x.double()).to(x.dtype), kind="reduction")
    (spec,) = _reduction_specs(fd)
    vectors = spec._row_vectors([6, 140472])
    assert spec._cluster(spec.plain, vectors) == 8
    assert spec.kernel_for([6, 140472])[0] is spec.plain and not spec.online_keeps([6, 140472])
    k = spec.plain
    var = spec.variant(k, spec._vec[id(k)], "int", *spec._row_schedule(k, -(-vectors // 8)), cluster=8)
    assert var.smem_row and var.threads == 1024, var.name
    import conftest  # (the nvrtc check compiles it with the session's other kernels)
    conftest._KERNEL_SOURCES.setdefault(var.source, var.name)


@pytest.mark.parametrize("kind", ONLINE_KINDS)
@pytest.mark.parametrize("dtype,n,q", [(D.BFloat16, 131072, 0), (D.Half, 150000, 3), (D.BFloat16, 262144, 4),
                                       (D.Float, 100000, 4), (D.BFloat16, 151935, 3), (D.Half, 98307, 0)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_kept_rows_in_the_online_kernel(kind, dtype, n, q, monkeypatch):
    """rows.ONLINE_KEPT: rows the plain kernel keeps in shared memory one
    block an SM (q 0) or over a cluster of q CTAs take the online kernel on
    the plain kernel's schedule (max and sum in the first pass, a vector's
    points one pair: cuda_combine.online_vector); -inf, NaN and +inf rows
    as the passes give them. Rows off vector boundaries (151935, 98307
    points) too: shifted vectors, the points off the row no part of a pair."""
    from hostir.codegen import rows as row_rules
    monkeypatch.setattr(row_rules, "ONLINE_KEPT", True)
    x = _special_rows((6, n), dtype)
    (out,), fd = _run_keeping_fd(lambda fd: _online_build(kind)(fd, declare(fd, x)), [x])
    want = _online_expected(kind, x.double()).to(x.dtype)
    check(out, want, kind="reduction")
    (spec,) = _reduction_specs(fd)
    k = spec.kernel_for([6, n])[0]
    assert k is spec.online and _is_online(k)
    vectors = spec._row_vectors([6, n])
    assert vectors == n // spec._vec[id(k)]  # (a shifted row's whole vectors: rows.shifted_vectors)
    assert spec._cluster(k, vectors) == spec._cluster(spec.plain, vectors) == q
    part = -(-vectors // max(1, q))
    assert spec._row_schedule(k, part) == spec._row_schedule(spec.plain, part) and spec._row_schedule(k, part)[2]
    shift = n % spec._vec[id(k)] != 0
    var = spec.variant(k, spec._vec[id(k)], "int", *spec._row_schedule(k, part), cluster=q, shift=shift)
    import conftest  # (the nvrtc check compiles it with the session's other kernels)
    conftest._KERNEL_SOURCES.setdefault(var.source, var.name)
    edges = var.source.count("// a point of the row's head or tail")  # (cuda_row_shift._edge_loads)
    assert "if (isinf(m_))" in var.source and bool(edges) == shift
    # no pair a point in the vectors' loop: a pair a point only for a shifted row's head and tail
    # points (one point a thread, in the pass that combines; the other pass stores)
    assert var.source.count("y = hir_ms<") == (edges > 0) and var.source.count("_has) {") == edges
    combine = (f"hir_cluster_warps<32, {q}>(wslot0[parity]" if q  # (the cluster's warps' pairs at once)
               else "hir_warps_combine<1024>(smem0 + first")  # (the warps' pairs: a tree)
    assert combine in var.source
    monkeypatch.setattr(row_rules, "ONLINE_KEPT", False)
    assert spec.kernel_for([6, n])[0] is spec.plain


@pytest.mark.parametrize("kind", ["softmax", "log_softmax", "rmsnorm", "layernorm"])
@pytest.mark.parametrize("dtype,n", [(D.BFloat16, 262144), (D.Half, 150000), (D.BFloat16, 151935),
                                     (D.Float, 131072), (D.BFloat16, 524288)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_cluster_rows_combine_the_warps_at_once(kind, dtype, n):
    """cuda_row_combine._cluster_warps: a row split over a cluster combines
    all of the cluster's warps' results after one cluster barrier (each warp's
    first lane publishes its own; hir_cluster_warps), with no block barrier in
    its reductions. Results against torch (on GPUs of compute capability 9.0
    the cluster variant runs; the nvrtc check compiles it), rows off vector
    boundaries among them (151935 points)."""
    x = rand((5, n), dtype)
    spec = _norm_checked(kind, x)
    k = spec.kernel_for([5, n])[0]
    var = spec.choose(k, [5, n], [x], None, [])
    vectors = spec._row_vectors([5, n])
    q = spec._cluster(k, vectors)
    assert q > 1, (kind, n)
    part = -(-vectors // q)
    var = spec.variant(k, var.vec, "int", *spec._row_schedule(k, part), cluster=q, shift=bool(n % var.vec))
    src = var.source
    import conftest
    conftest._KERNEL_SOURCES.setdefault(src, var.name)
    assert f"hir_cluster_warps<{var.threads // 32}, {q}>(wslot0[parity]" in src
    assert "the slots' previous readers are done" not in src  # (no block barrier of a reduction)
    assert "cta0[" not in src and "smem0[" not in src


@pytest.mark.parametrize("kind", ["softmax", "log_softmax", "rmsnorm", "layernorm", "stored"])
@pytest.mark.parametrize("dtype,n", [(D.BFloat16, 262144), (D.BFloat16, 524288), (D.Float, 131072),
                                     (D.Float, 65536 + 8), (D.BFloat16, 140000), (D.BFloat16, 98304),
                                     (D.BFloat16, 126976)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_rows_split_over_clusters(kind, dtype, n):
    """Rows past what one block keeps in shared memory split over a
    thread-block cluster of q CTAs, each keeping its share in shared memory
    and registers (spec.KernelSpec._cluster; the launch takes them on GPUs of
    compute capability 9.0): results against torch, an odd count of rows, the
    rows' statistics stored by the row's first CTA (`stored`), a last chunk
    in part (126976 points, in clusters of 2 or 4); no cluster
    where the row's last chunk is mostly past its end (65544 and 140000
    points at a rows.CLUSTER_MIN_FILL of 0.9), for a softmax's rows that one block an SM
    keeps (the rmsnorm's and layernorm's take one), nor past what 8 CTAs keep;
    a softmax's shares of 12 to 16 vectors a thread take one block an SM each
    (`stored` 524288); a softmax's clusters may have 3 CTAs
    (rows.ONLINE_CLUSTER_SIZES: 65544 and 140000 points, `stored` 98304)."""
    online = kind in ("softmax", "log_softmax", "stored")
    q = {262144: 4, 524288: 8, 131072: 4, 65544: 3 if online else 4, 140000: 3 if online else 4,
         98304: 2, 126976: 2}[n]
    if kind == "stored" and dtype is D.BFloat16:  # (vectors of 4)
        q = {262144: 8, 524288: 8, 140000: 8, 98304: 3, 126976: 4}[n]
    elif n in (98304, 126976) and kind in ("softmax", "log_softmax"):
        q = 0  # one block an SM keeps it
    x = rand((3, n), dtype)
    if kind == "stored":
        def build(fd):
            t = fd.ops.cast(declare(fd, x), D.Float)
            m = fd.ops.max(t, [1], keepdim=True)
            e = fd.ops.exp(fd.ops.sub(t, m))
            fd.add_output(fd.ops.cast(fd.ops.mul(t, 2.0), dtype))
            fd.add_output(fd.ops.cast(fd.ops.div(e, fd.ops.sum(e, [1], keepdim=True)), dtype))
            fd.add_output(fd.ops.squeeze(m, [1]))
        t = x.double()
        want = [t * 2, torch.softmax(t, 1), t.amax(1)]
    else:
        def build(fd):
            _norm_build(kind)(fd, declare(fd, x))
        want = _norm_expected(kind, x)
    outs, fd = _run_keeping_fd(build, [x])
    assert len(outs) == len(want)
    for o, w in zip(outs, want):
        check(o, w.to(o.dtype), kind="reduction")
    (spec,) = _reduction_specs(fd)
    k = spec.kernel_for([3, n])[0]
    vec = spec._vec[id(k)]
    assert n % vec == 0 and spec._cluster(k, n // vec) == q
    if n in (65544, 140000):  # (their last chunks 80 % and 85 % full: no cluster at a fill of 0.9,
        from hostir.codegen import rows as row_rules  # but a softmax's 140000 in 3 CTAs fills 95 %)
        saved, row_rules.CLUSTER_MIN_FILL = row_rules.CLUSTER_MIN_FILL, 0.9
        try:
            assert spec._cluster(k, n // vec) == (3 if online and n == 140000 else 0)
        finally:
            row_rules.CLUSTER_MIN_FILL = saved
    if not q:
        return
    sched = spec._row_schedule(k, -(-n // (vec * q)))
    assert sched[0] == 1024 and sched[2] > 0  # each CTA's share in shared memory
    var = spec.variant(k, vec, "int", *sched, cluster=q)
    src = var.source
    import conftest  # (the nvrtc check compiles it with the session's other kernels)
    conftest._KERNEL_SOURCES.setdefault(src, var.name)
    assert f"(int)blockIdx.x / {q}" in src and f"hir_cluster_warps<32, {q}>(wslot0[parity]" in src
    assert src.rstrip().splitlines()[-2].strip().startswith("hir_cluster_sync();")
    assert f"__launch_bounds__(1024, {1 if sched[1] > 8 else 2})" in src
    assert spec.grid(var, 3, 132, 1, [3, n]) == 3 * q
    from hostir import config
    with config.override(disable=config.get().disable | {"clusters"}):
        _, fd = _run_keeping_fd(build, [x])
    (spec,) = _reduction_specs(fd)
    assert spec._cluster(spec.kernel_for([3, n])[0], n // vec) == 0
