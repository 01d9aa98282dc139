"""Outer reductions over more kept points than the flat schedule takes, no
multiple of a vector, read in virtual rows of F x C points
(codegen/cuda_period.py, on here for every point size): results against torch over
shapes with no whole virtual row, a part row, several shares, several kept
and reduced dims, prologues and epilogues, max, two reductions (var_mean's
pivot row is not flat: cuda_flat.flat_ok); the launch's
rule (views off a boundary, strided, or kept points a multiple of a vector
take the tiles; by default 4-byte points only); the split, workspace and grid. CPU runs check the kernel IR
(the interpreter) and the rule on the same tensors, and NVRTC compiles each
kernel; GPU runs the kernel."""
from __future__ import annotations

import pytest
import torch

from hostir import DataType as D
from hostir.codegen import cuda_period
from ops_util import TEST_DEVICE, check, declare, rand
from test_ops_reduction import _reduction_specs, _run_keeping_fd


@pytest.fixture(autouse=True)
def _period(monkeypatch):
    """Virtual rows for every point size (the default takes PERIOD_SIZES)."""
    monkeypatch.setattr(cuda_period, "OUTER_PERIOD", True)
    monkeypatch.setattr(cuda_period, "PERIOD_SIZES", (1, 2, 4, 8))


def _chosen(fd, ins, extents):
    (spec,) = _reduction_specs(fd)
    k, ext = spec.kernel_for(list(extents))
    var = spec.choose(k, ext, ins, None, [])
    import conftest  # (the session's NVRTC compile: variants past Spec.typical_variants)
    conftest._KERNEL_SOURCES.setdefault(var.source, var.name)
    return spec, var, ext


_SHAPES = [(1, 1031), (3, 1025), (7, 2047), (8, 1027), (9, 1025), (64, 2047), (300, 4095), (777, 1283),
           (2000, 1029)]
_GPU_SHAPES = [(1619, 41427), (8192, 4095), (1000, 50257)]


@pytest.mark.parametrize("shape", _SHAPES + (_GPU_SHAPES if TEST_DEVICE == "cuda" else []), ids=str)
@pytest.mark.parametrize("kind,dtype", [("sum", D.BFloat16), ("sum", D.Half), ("sum", D.Float),
                                        ("max", D.BFloat16), ("mean of squares", D.Half),
                                        ("sum and max", D.BFloat16), ("int sum", D.Int32)], ids=str)
def test_period_matches_torch(shape, kind, dtype):
    """Each kind over 2-byte, fp32 and int32 points, from a part of one
    virtual row (fewer rows than a vector's points) to many shares."""
    R, C = shape
    x = torch.randint(-50, 50, shape, dtype=torch.int32) if dtype == D.Int32 else rand(shape, dtype)

    def build(fd):
        t = declare(fd, x, "sym")
        if kind in ("sum", "int sum"):
            fd.add_output(fd.ops.sum(t, [0]))
        elif kind == "max":
            fd.add_output(fd.ops.max(t, [0]))
        elif kind == "mean of squares":  # a prologue in fp32, an epilogue
            f = fd.ops.cast(t, D.Float)
            fd.add_output(fd.ops.div(fd.ops.sum(fd.ops.mul(f, f), [0]), float(R)))
        else:  # two reductions of one load
            fd.add_output(fd.ops.sum(t, [0]))
            fd.add_output(fd.ops.max(t, [0]))
    outs, fd = _run_keeping_fd(build, [x])
    xd = x.double()
    if kind == "int sum":
        check(outs[0], x.sum(0))
    elif kind == "sum":
        check(outs[0], xd.sum(0).to(x.dtype), kind="reduction", atol=3e-2 * R ** 0.5, rtol=2e-2)
    elif kind == "max":
        check(outs[0], x.amax(0))
    elif kind == "mean of squares":
        check(outs[0], (xd * xd).mean(0).float(), kind="reduction", atol=1e-4 * R ** 0.5)
    else:
        check(outs[0], xd.sum(0).to(x.dtype), kind="reduction", atol=3e-2 * R ** 0.5, rtol=2e-2)
        check(outs[1], x.amax(0))
    spec, var, ext = _chosen(fd, [x], shape)
    assert var.outer and var.period and var.block == cuda_period.PERIOD_BLOCK, var.name
    assert var.vec == 16 // x.element_size()


@pytest.mark.parametrize("shape,reduced", [((2, 5, 1500), [0, 1]), ((40, 3, 701), [0]), ((3, 11, 2, 1001), [0, 1])],
                         ids=str)
def test_period_several_dims(shape, reduced):
    """Several reduced dims (leading) and several kept dims: the kept points
    counted as one."""
    x = rand(shape, D.BFloat16)

    def build(fd):
        fd.add_output(fd.ops.sum(declare(fd, x, "sym"), reduced))
    (out,), fd = _run_keeping_fd(build, [x])
    R = 1
    for d in reduced:
        R *= shape[d]
    check(out, x.double().sum(reduced).to(x.dtype), kind="reduction", atol=3e-2 * R ** 0.5, rtol=2e-2)
    assert _chosen(fd, [x], shape)[1].period


def test_period_rule():
    """Views off a 16-byte boundary or strided, kept points a multiple of a
    vector, or few enough for the flat schedule take other schedules; by
    default (PERIOD_SIZES) 2-byte points do not; with OUTER_PERIOD off, none. The split is the aligned tiles' over the virtual
    rows; the workspace each share's partials at every virtual point; the grid
    a block a virtual tile and share."""
    def var_of(x, extents):
        def build(fd):
            fd.add_output(fd.ops.sum(declare(fd, x, "sym" if x.is_contiguous() else "strided"), [0]))
        (out,), fd = _run_keeping_fd(build, [x])
        check(out, x.double().sum(0).to(x.dtype), kind="reduction", atol=3e-2 * extents[0] ** 0.5, rtol=2e-2)
        return _chosen(fd, [x], extents)

    base = rand((300, 4099), D.BFloat16)
    assert not var_of(base[:, 1:4096], (300, 4095))[1].period  # off a boundary (and strided)
    assert not var_of(rand((300, 4096), D.BFloat16), (300, 4096))[1].period  # aligned vectors
    assert not var_of(rand((300, 1001), D.BFloat16), (300, 1001))[1].period  # flat
    spec, var, ext = var_of(rand((300, 4095), D.BFloat16), (300, 4095))
    assert var.period
    for sms in (1, 132):
        split = spec.split(var, ext, sms)
        nbytes, counters = spec.scratch_size(var, 4095, split)
        assert split >= 1 and counters == -(-4095 // 256) and nbytes >= 4 * 8 * 4095 * split
        assert spec.grid(var, 4095, sms, split, ext) == -(-4095 // 32) * split
    assert spec.split(var, [8192, 4095], 132) > 1  # few virtual tiles: shares
    cuda_period.PERIOD_SIZES = (4,)  # (the default: 4-byte points)
    assert not var_of(rand((300, 4095), D.BFloat16), (300, 4095))[1].period
    assert var_of(rand((300, 4095), D.Float), (300, 4095))[1].period
    cuda_period.OUTER_PERIOD = False
    assert not var_of(rand((300, 4095), D.Float), (300, 4095))[1].period
