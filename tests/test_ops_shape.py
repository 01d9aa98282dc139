"""View, resize and factory ops of fd.ops (broadcast_in_dim, broadcast,
squeeze, expand, reshape, permute, slice, pad, cat, full, iota, size),
compared with torch eager on random data."""
import pytest
import torch
import torch.nn.functional as F

from hostir import DataType, FusionDefinition
from hostir.ir.errors import DefinitionError
from ops_util import ALL, TORCH, check, declare, rand, relayout, run

D = DataType
SOME = ALL                                   # dtypes for the per-case sweeps
LAYOUTS = ["sym", "strided", "transposed"]    # how the (first) input is declared


def _id(v):
    return str(v).replace(" ", "")


def _exact(out, expected):
    check(out, expected, rtol=0, atol=0)


# Where the op under test sits: on a fusion input ("input": a view ops chain
# from an input may become an alias, launching nothing) or between two
# pointwise ops ("mid": the op is part of a generated kernel's index math).
STAGES = ["input", "mid"]


def _pre(fd, t):
    return fd.ops.logical_not(t) if t.dtype is D.Bool else fd.ops.neg(t)


def _post(fd, t):
    return fd.ops.logical_not(t) if t.dtype is D.Bool else fd.ops.abs(t)


def _pre_t(x):
    return torch.logical_not(x) if x.dtype == torch.bool else torch.neg(x)


def _post_t(x):
    return torch.logical_not(x) if x.dtype == torch.bool else torch.abs(x)


def staged(fd, stage, op, *ts):
    """`op(*ts)`, or with stage "mid" `post(op(*(pre(t) for t in ts)))`."""
    if stage == "input":
        return op(*ts)
    return _post(fd, op(*(_pre(fd, t) for t in ts)))


def staged_t(stage, op, *xs):
    if stage == "input":
        return op(*xs)
    return _post_t(op(*(_pre_t(x) for x in xs)))


# ------------------------------------------------------------------ broadcast_in_dim

BID_CASES = [
    # (input shape, input decl, output shape, broadcast_dims)
    ((3,), "sym", [2, 3], [1]),
    ((3,), "sym", [3, 2], [0]),
    ((1, 4), "bcast", [5, 4], [0, 1]),
    ((2, 3), "sym", [2, 4, 3], [0, 2]),
    ((2, 3), "strided", [2, 3, 1], [0, 1]),
    ((4, 1), "bcast", [2, 4, 3], [1, 2]),
    ((), "sym", [2, 3], []),
    ((3,), "static", [4, 3], [-1]),
]


def _bid_expected(x, shape, bdims):
    n = len(shape)
    view = [1] * n
    for i, d in enumerate(bdims):
        view[d % n] = x.shape[i]
    return x.reshape(view).expand(shape)


@pytest.mark.parametrize("dtype", SOME, ids=lambda d: d.name)
@pytest.mark.parametrize("shape,decl,out_shape,bdims", BID_CASES, ids=_id)
@pytest.mark.parametrize("stage", STAGES)
def test_broadcast_in_dim(shape, decl, out_shape, bdims, dtype, stage):
    x = rand(shape, dtype)
    xs = relayout(x, decl)
    (out,) = run(lambda fd: fd.add_output(staged(
        fd, stage, lambda t: fd.ops.broadcast_in_dim(t, out_shape, bdims), declare(fd, xs, decl))), [xs])
    _exact(out, staged_t(stage, lambda v: _bid_expected(v, out_shape, bdims), x))


def test_broadcast_in_dim_with_symbolic_shape_from_another_tensor():
    x, y = rand((3,), D.Float), rand((5, 3), D.Float)

    def build(fd):
        tx, ty = declare(fd, x), declare(fd, y)
        b = fd.ops.broadcast_in_dim(tx, ty.shape(), [1])
        fd.add_output(fd.ops.add(b, ty))
        fd.add_output(b)

    out, b = run(build, [x, y])
    check(out, x.expand(5, 3) + y)
    _exact(b, x.expand(5, 3))


def test_broadcast_in_dim_with_scalar_input_extent():
    x = rand((1, 3), D.Float)

    def build(fd):
        tx = declare(fd, x, "bcast")
        n = fd.define_scalar(None, dtype=D.Int)
        fd.add_output(fd.ops.broadcast_in_dim(tx, [n, 3], [0, 1]))

    for n in (4, 7):
        (out,) = run(build, [x, n])
        _exact(out, x.expand(n, 3))


# ------------------------------------------------------------------ broadcast

@pytest.mark.parametrize("dtype", ALL, ids=lambda d: d.name)
@pytest.mark.parametrize("shape,flags,index", [
    ((3, 4), [True, False, True, False], (None, slice(None), None, slice(None))),
    ((3, 4), [False, False, True], (slice(None), slice(None), None)),
    ((5,), [True, True, False], (None, None, slice(None))),
    ((), [True, True], (None, None)),
    ((2, 3), [False, False], (slice(None), slice(None))),
], ids=_id)
@pytest.mark.parametrize("decl", ["sym", "transposed"])
@pytest.mark.parametrize("stage", STAGES)
def test_broadcast(shape, flags, index, dtype, decl, stage):
    x = rand(shape, dtype)
    xs = relayout(x, decl)
    (out,) = run(lambda fd: fd.add_output(staged(
        fd, stage, lambda t: fd.ops.broadcast(t, flags), declare(fd, xs, decl))), [xs])
    _exact(out, staged_t(stage, lambda v: v[index], x))


# ------------------------------------------------------------------ squeeze

@pytest.mark.parametrize("dtype", ALL, ids=lambda d: d.name)
@pytest.mark.parametrize("shape,dims", [
    ((1, 3, 1, 4), [0, 2]),
    ((1, 3, 1, 4), [-2]),
    ((3, 1), [1]),
    ((1,), [0]),
    ((1, 1, 5), [0, 1]),
], ids=_id)
@pytest.mark.parametrize("stage", STAGES)
def test_squeeze(shape, dims, dtype, stage):
    x = rand(shape, dtype)
    (out,) = run(lambda fd: fd.add_output(staged(
        fd, stage, lambda t: fd.ops.squeeze(t, dims), declare(fd, x, "bcast"))), [x])

    def expected(v):
        for d in sorted((d % v.ndim for d in dims), reverse=True):
            v = v.squeeze(d)
        return v

    _exact(out, staged_t(stage, expected, x))


def test_squeeze_of_a_broadcast_then_pointwise():
    x, y = rand((3, 4), D.Float), rand((3, 4), D.Float)

    def build(fd):
        tx, ty = declare(fd, x), declare(fd, y)
        b = fd.ops.broadcast(fd.ops.exp(tx), [False, True, False])
        fd.add_output(fd.ops.mul(fd.ops.squeeze(b, [1]), ty))

    (out,) = run(build, [x, y])
    check(out, torch.exp(x) * y)


def test_squeeze_expanded_dim():
    x = rand((1, 3), D.Float)

    def build(fd):
        e = fd.ops.expand(declare(fd, x, "bcast"), [5, 3])
        with pytest.raises(DefinitionError):
            fd.ops.squeeze(e, [0])
        fd.add_output(fd.ops.squeeze(e, [0], squeeze_expanded=True))

    (out,) = run(build, [x])
    _exact(out, x.expand(5, 3)[0])


def test_squeeze_rejects_symbolic_dim():
    with pytest.raises(DefinitionError):
        run(lambda fd: fd.add_output(fd.ops.squeeze(fd.define_tensor([-1, -1]), [0])),
            [rand((1, 3), D.Float)])


# ------------------------------------------------------------------ expand

@pytest.mark.parametrize("dtype", SOME, ids=lambda d: d.name)
@pytest.mark.parametrize("shape,target", [
    ((1, 3), [4, 3]),
    ((1, 3), [4, -1]),
    ((1, 3, 1), [2, -1, 5]),
    ((2, 1), [2, 6]),
    ((1,), [7]),
    ((2, 3), [-1, -1]),
], ids=_id)
@pytest.mark.parametrize("stage", STAGES + ["cast"])
def test_expand(shape, target, dtype, stage):
    x = rand(shape, dtype)

    def build(fd):
        t = declare(fd, x, "bcast")
        if stage == "cast":
            fd.add_output(fd.ops.cast(fd.ops.expand(t, target), D.Double))
        else:
            fd.add_output(staged(fd, stage, lambda v: fd.ops.expand(v, target), t))

    (out,) = run(build, [x])
    if stage == "cast":
        _exact(out, x.expand(target).double())
    else:
        _exact(out, staged_t(stage, lambda v: v.expand(target), x))


def test_expand_to_scalar_inputs_and_sizes():
    x, y = rand((1, 3), D.Float), rand((6, 3), D.Float)

    def build(fd):
        tx, ty = declare(fd, x, "bcast"), declare(fd, y)
        n = fd.define_scalar(None, dtype=D.Int)
        fd.add_output(fd.ops.expand(tx, [n, 3]))
        fd.add_output(fd.ops.sub(fd.ops.expand(tx, [ty.size(0), -1]), ty))

    a, b = run(build, [x, y, 4])
    _exact(a, x.expand(4, 3))
    check(b, x.expand(6, 3) - y)


def test_expand_then_reduce_counts_every_copy():
    x = rand((1, 6), D.Double)
    (out,) = run(lambda fd: fd.add_output(
        fd.ops.sum(fd.ops.expand(declare(fd, x, "bcast"), [5, 6]), [0])), [x])
    check(out, x.expand(5, 6).sum(0), kind="reduction")


# ------------------------------------------------------------------ reshape

RESHAPES = [
    ((2, 3, 4), [6, 4]),
    ((2, 3, 4), [-1]),
    ((2, 3, 4), [4, -1, 2]),
    ((2, 3, 4), [2, 12]),
    ((2, 3, 4), [2, 1, 12]),
    ((6, 4), [2, 3, 4]),
    ((1, 5), [5]),
    ((5,), [1, 5, 1]),
    ((4, 6), [3, 8]),
]


@pytest.mark.parametrize("dtype", SOME, ids=lambda d: d.name)
@pytest.mark.parametrize("shape,new_shape", RESHAPES, ids=_id)
@pytest.mark.parametrize("decl", LAYOUTS)
@pytest.mark.parametrize("stage", STAGES)
def test_reshape(shape, new_shape, dtype, decl, stage):
    x = rand(shape, dtype)
    xs = relayout(x, decl)
    (out,) = run(lambda fd: fd.add_output(staged(
        fd, stage, lambda t: fd.ops.reshape(t, new_shape), declare(fd, xs, decl))), [xs])
    _exact(out, staged_t(stage, lambda v: v.reshape(new_shape), x))


def test_reshape_with_symbolic_sizes():
    x = rand((3, 4, 5), D.Float)

    def build(fd):
        t = declare(fd, x)
        r = fd.ops.reshape(t, [t.size(0) * t.size(1), t.size(2)])
        fd.add_output(fd.ops.mul(r, 2.0))

    (out,) = run(build, [x])
    check(out, x.reshape(12, 5) * 2.0)


def test_reshape_after_permute_and_before_pointwise():
    x = rand((2, 3, 4), D.Float)
    y = rand((4, 6), D.Float)

    def build(fd):
        t = fd.ops.permute(declare(fd, x), [2, 0, 1])
        fd.add_output(fd.ops.add(fd.ops.reshape(t, [4, 6]), declare(fd, y)))

    (out,) = run(build, [x, y])
    check(out, x.permute(2, 0, 1).reshape(4, 6) + y)


# ------------------------------------------------------------------ permute

@pytest.mark.parametrize("dtype", ALL, ids=lambda d: d.name)
@pytest.mark.parametrize("shape,dims", [
    ((2, 3, 4), [2, 0, 1]),
    ((2, 3, 4), [1, 2, 0]),
    ((2, 3, 4), [-1, 0, 1]),
    ((3, 5), [1, 0]),
    ((1, 3), [1, 0]),
    ((2, 3, 4, 5), [0, 2, 3, 1]),
], ids=_id)
@pytest.mark.parametrize("decl", ["sym", "bcast", "transposed"])
@pytest.mark.parametrize("stage", STAGES)
def test_permute(shape, dims, dtype, decl, stage):
    x = rand(shape, dtype)
    xs = relayout(x, decl)
    (out,) = run(lambda fd: fd.add_output(staged(
        fd, stage, lambda t: fd.ops.permute(t, dims), declare(fd, xs, decl))), [xs])
    _exact(out, staged_t(stage, lambda v: v.permute(dims), x))


def test_permute_then_pointwise_with_other_layout():
    x, y = rand((3, 5), D.Float), rand((5, 3), D.Float)
    (out,) = run(lambda fd: fd.add_output(
        fd.ops.mul(fd.ops.permute(declare(fd, x), [1, 0]), declare(fd, y))), [x, y])
    check(out, x.t() * y)


# ------------------------------------------------------------------ slice

SLICES = [
    # (shape, starts, ends, strides)
    ((10,), [2], [7], None),
    ((10,), [-3], [10], None),
    ((10,), [-100], [100], None),
    ((10,), [8], [3], None),
    ((10,), [12], [20], None),
    ((10,), [0], [-1], None),
    ((10,), [1], [9], [3]),
    ((10,), [-8], [-1], [2]),
    ((6, 8), [1, -5], [5, -1], [2, 1]),
    ((6, 8), [0, 0], [6, 8], None),
    ((6, 8), [-1, 2], [6, 100], [1, 4]),
    ((4, 5, 6), [1, 0, 2], [3, 5, 6], [1, 2, 3]),
    ((1, 7), [0, 2], [1, 5], None),
]


def _slice_expected(x, starts, ends, strides):
    strides = strides or [1] * x.ndim
    return x[tuple(slice(a, b, s) for a, b, s in zip(starts, ends, strides))]


@pytest.mark.parametrize("dtype", SOME, ids=lambda d: d.name)
@pytest.mark.parametrize("shape,starts,ends,strides", SLICES, ids=_id)
@pytest.mark.parametrize("bounds", ["python", "scalar_input"])
@pytest.mark.parametrize("stage", STAGES)
def test_slice(shape, starts, ends, strides, dtype, bounds, stage):
    x = rand(shape, dtype)
    expected = staged_t(stage, lambda v: _slice_expected(v, starts, ends, strides), x)
    n = x.ndim

    def build(fd):
        t = declare(fd, x, "bcast")
        if bounds == "python":
            s, e = starts, ends
        else:
            s = [fd.define_scalar(None, dtype=D.Int) for _ in range(n)]
            e = [fd.define_scalar(None, dtype=D.Int) for _ in range(n)]
        fd.add_output(staged(fd, stage, lambda v: fd.ops.slice(v, s, e, strides), t))

    inputs = [x] + (list(starts) + list(ends) if bounds == "scalar_input" else [])
    (out,) = run(build, inputs)
    _exact(out, expected)


@pytest.mark.parametrize("decl", ["strided", "transposed", "sliced_fp"])
def test_slice_of_noncontiguous_input(decl):
    x = rand((6, 8), D.Float)
    xs = relayout(x, decl)

    def build(fd):
        t = declare(fd, xs, decl)
        fd.add_output(fd.ops.slice(t, [1, 2], [5, 7], [2, 1]))
        fd.add_output(fd.ops.add(fd.ops.slice(t, [0, 0], [6, 4]), 1.0))

    a, b = run(build, [xs])
    _exact(a, x[1:5:2, 2:7])
    check(b, x[:, :4] + 1.0)


def test_slice_bounds_from_sizes():
    x = rand((9, 4), D.Float)

    def build(fd):
        t = declare(fd, x)
        half = fd.ops.div(t.size(0), 2)
        fd.add_output(fd.ops.slice(t, [half, 1], [t.size(0) - 1, t.size(1)]))

    (out,) = run(build, [x])
    _exact(out, x[9 // 2:8, 1:])


def test_slice_with_changing_scalar_bounds():
    x = rand((12,), D.Float)

    def build(fd):
        t = declare(fd, x)
        s, e = fd.define_scalar(None, dtype=D.Int), fd.define_scalar(None, dtype=D.Int)
        fd.add_output(fd.ops.mul(fd.ops.slice(t, [s], [e]), 3.0))

    with __import__("hostir").FusionDefinition() as fd:
        build(fd)
    for s, e in [(0, 4), (2, 9), (-5, -1), (3, 3), (-20, 50), (7, 2)]:
        (out,) = fd.execute([x, s, e])
        check(out, x[s:e] * 3.0)


def test_slices_of_the_same_input_read_their_own_offsets():
    # seed rule 1: index per use, not per equal extent
    x = rand((8,), D.Float)

    def build(fd):
        t = declare(fd, x)
        rot = fd.ops.cat([fd.ops.slice(t, [4], [8]), fd.ops.slice(t, [0], [4])], 0)
        fd.add_output(fd.ops.add(t, rot))

    (out,) = run(build, [x])
    check(out, x + torch.cat([x[4:], x[:4]]))


# ------------------------------------------------------------------ pad

PADS = [
    # (shape, widths (torch F.pad order), value)
    ((3, 4), [1, 2], None),
    ((3, 4), [1, 2, 3, 0], 2.5),
    ((3, 4), [-1, 2], None),
    ((3, 4), [0, 0, -1, -1], 1.5),
    ((3, 4), [-2, -1, 1, 1], -3.0),
    ((2, 3, 4), [1, 1], 0.5),
    ((2, 3, 4), [0, 1, 2, 0, 1, 1], None),
    ((5,), [3, 0], -1.0),
    ((1, 4), [0, 0, 2, 1], 4.0),
]


def _pad_value(value, dtype):
    if value is None:
        return None
    if dtype is D.Bool:
        return True
    if dtype.is_int:
        return int(value * 2)
    return value


@pytest.mark.parametrize("dtype", SOME, ids=lambda d: d.name)
@pytest.mark.parametrize("shape,widths,value", PADS, ids=_id)
@pytest.mark.parametrize("stage", STAGES)
def test_pad(shape, widths, value, dtype, stage):
    x = rand(shape, dtype)
    v = _pad_value(value, dtype)
    expected = staged_t(stage, lambda u: F.pad(u, widths, value=0 if v is None else v), x)
    (out,) = run(lambda fd: fd.add_output(staged(
        fd, stage, lambda t: fd.ops.pad(t, widths, v), declare(fd, x, "bcast"))), [x])
    _exact(out, expected)


@pytest.mark.parametrize("decl", ["strided", "transposed"])
def test_pad_noncontiguous_input(decl):
    x = rand((4, 5), D.Float)
    xs = relayout(x, decl)
    (out,) = run(lambda fd: fd.add_output(fd.ops.pad(declare(fd, xs, decl), [2, -1, 1, 1], 7.5)), [xs])
    _exact(out, F.pad(x, [2, -1, 1, 1], value=7.5))


def test_pad_with_scalar_input_widths_and_value():
    x = rand((3, 4), D.Float)

    def build(fd):
        t = declare(fd, x)
        lo, hi = fd.define_scalar(None, dtype=D.Int), fd.define_scalar(None, dtype=D.Int)
        v = fd.define_scalar(None, dtype=D.Double)
        fd.add_output(fd.ops.pad(t, [lo, hi, hi, lo], v))

    for lo, hi, v in [(1, 2, -0.5), (0, 3, 2.25), (-1, 1, 9.0)]:
        (out,) = run(build, [x, lo, hi, v])
        _exact(out, F.pad(x, [lo, hi, hi, lo], value=v))


def test_pad_then_pointwise_with_another_input():
    x, y = rand((3, 4), D.Float), rand((3, 7), D.Float)
    (out,) = run(lambda fd: fd.add_output(
        fd.ops.mul(fd.ops.pad(declare(fd, x), [1, 2], 1.0), declare(fd, y))), [x, y])
    check(out, F.pad(x, [1, 2], value=1.0) * y)


# ------------------------------------------------------------------ cat

CATS = [
    # (shapes, dim, decls)
    ([(2, 3), (4, 3)], 0, ["sym", "sym"]),
    ([(2, 3), (2, 5)], -1, ["sym", "transposed"]),
    ([(2, 3), (2, 1), (2, 4)], 1, ["sym", "bcast", "strided"]),
    ([(3, 2, 4), (3, 5, 4)], -2, ["sym", "sym"]),
    ([(1, 3), (4, 3)], 0, ["bcast", "sym"]),
    ([(5,), (2,), (1,)], 0, ["sym", "sym", "sym"]),
    ([(2, 3, 4), (2, 3, 1)], 2, ["static", "bcast"]),
]


@pytest.mark.parametrize("dtype", SOME, ids=lambda d: d.name)
@pytest.mark.parametrize("shapes,dim,decls", CATS, ids=_id)
@pytest.mark.parametrize("stage", STAGES)
def test_cat(shapes, dim, decls, dtype, stage):
    xs = [rand(s, dtype) for s in shapes]
    ins = [relayout(x, d) for x, d in zip(xs, decls)]
    (out,) = run(lambda fd: fd.add_output(staged(
        fd, stage, lambda *ts: fd.ops.cat(list(ts), dim),
        *[declare(fd, x, d) for x, d in zip(ins, decls)])), ins)
    _exact(out, staged_t(stage, lambda *vs: torch.cat(vs, dim), *xs))


@pytest.mark.parametrize("dtypes", [
    (D.Float, D.Half), (D.Int32, D.Int), (D.Bool, D.Int32), (D.Half, D.BFloat16),
    (D.Int, D.Double, D.Float),
], ids=lambda ds: "-".join(d.name for d in ds))
def test_cat_promotes_like_torch(dtypes):
    xs = [rand((2, i + 1), dt) for i, dt in enumerate(dtypes)]
    (out,) = run(lambda fd: fd.add_output(fd.ops.cat([declare(fd, x) for x in xs], 1)), xs)
    _exact(out, torch.cat(xs, 1))


def test_cat_then_pointwise():
    a, b, c = rand((2, 3), D.Float), rand((2, 2), D.Float), rand((2, 5), D.Float)

    def build(fd):
        ta, tb, tc = (declare(fd, v) for v in (a, b, c))
        fd.add_output(fd.ops.sub(fd.ops.cat([fd.ops.exp(ta), tb], 1), tc))

    (out,) = run(build, [a, b, c])
    check(out, torch.cat([torch.exp(a), b], 1) - c)


# ------------------------------------------------------------------ full

@pytest.mark.parametrize("dtype,fill", [
    (D.Float, 1.75), (D.Double, -0.1), (D.Half, 0.1), (D.BFloat16, 3.3), (D.Int, 7),
    (D.Int32, -3), (D.Bool, True), (D.Float, 2), (D.Int, 2.0), (D.Bool, 0),
], ids=_id)
@pytest.mark.parametrize("shape", [[2, 3], [], [4], [1, 5]], ids=_id)
def test_full(dtype, fill, shape):
    (out,) = run(lambda fd: fd.add_output(fd.ops.full(shape, fill, dtype)), [])
    _exact(out, torch.full(shape, fill, dtype=TORCH[dtype]))


@pytest.mark.parametrize("dtype", [D.Float, D.Half, D.Int], ids=lambda d: d.name)
def test_full_with_scalar_inputs(dtype):
    def build(fd):
        n = fd.define_scalar(None, dtype=D.Int)
        v = fd.define_scalar(None, dtype=D.Double if dtype.is_float else D.Int)
        fd.add_output(fd.ops.full([n, 2], v, dtype))

    for n, v in [(3, -1.25), (1, 6.5), (5, 2.0)]:
        v = v if dtype.is_float else int(v)
        (out,) = run(build, [n, v])
        _exact(out, torch.full((n, 2), v, dtype=TORCH[dtype]))


def test_full_shaped_like_an_input():
    x = rand((3, 4), D.Float)

    def build(fd):
        t = declare(fd, x)
        fd.add_output(fd.ops.add(t, fd.ops.full([t.size(0), t.size(1)], 0.5, D.Float)))

    (out,) = run(build, [x])
    check(out, x + 0.5)


# ------------------------------------------------------------------ iota

@pytest.mark.parametrize("dtype,length,start,step", [
    (D.Int, 5, None, None), (D.Int, 6, 3, 2), (D.Int, 4, 10, -3), (D.Int32, 7, -2, 5),
    (D.Float, 5, 0.5, 0.25), (D.Double, 6, -1.5, 0.1), (D.Float, 3, 2, 3),
    (D.Int, 1, 4, 9),
], ids=_id)
@pytest.mark.parametrize("inputs", [False, True])
def test_iota(dtype, length, start, step, inputs):
    s0 = 0 if start is None else start
    st = 1 if step is None else step
    if dtype.is_float:
        expected = (torch.arange(length, dtype=torch.float64) * st + s0).to(TORCH[dtype])
    else:
        expected = (torch.arange(length, dtype=torch.int64) * int(st) + int(s0)).to(TORCH[dtype])
    sdt = D.Double if dtype.is_float else D.Int

    def build(fd):
        if inputs:
            n = fd.define_scalar(None, dtype=D.Int)
            a = fd.define_scalar(None, dtype=sdt) if start is not None else None
            b = fd.define_scalar(None, dtype=sdt) if step is not None else None
        else:
            n, a, b = length, start, step
        fd.add_output(fd.ops.iota(n, a, b, dtype))

    args = [length] + ([type(s0)(s0) if not dtype.is_float else float(s0)] if start is not None else []) \
        + ([float(st) if dtype.is_float else int(st)] if step is not None else [])
    (out,) = run(build, args if inputs else [])
    check(out, expected, rtol=1e-6 if dtype is D.Float else None)


def test_iota_in_arithmetic():
    x = rand((2, 6), D.Float)

    def build(fd):
        t = declare(fd, x)
        i = fd.ops.cast(fd.ops.iota(t.size(1)), D.Float)
        fd.add_output(fd.ops.mul(t, fd.ops.broadcast_in_dim(i, [2, 6], [1])))

    (out,) = run(build, [x])
    check(out, x * torch.arange(6, dtype=torch.float32))


# ------------------------------------------------------------------ size

@pytest.mark.parametrize("dtype", [D.Float, D.Int32, D.Half, D.Int], ids=lambda d: d.name)
@pytest.mark.parametrize("dim", [0, 1, -1, -3])
def test_size_as_operand(dtype, dim):
    x = rand((4, 1, 6), dtype)

    def build(fd):
        t = declare(fd, x, "bcast")
        fd.add_output(fd.ops.mul(t, fd.ops.size(t, dim)))
        fd.add_output(fd.ops.add(t, t.size(dim)))

    a, b = run(build, [x])
    check(a, x * x.shape[dim])
    check(b, x + x.shape[dim])


def test_size_of_static_and_derived_tensors():
    x = rand((3, 5), D.Float)

    def build(fd):
        t = fd.define_tensor([3, -1], dtype=D.Float)
        p = fd.ops.pad(t, [1, 2])
        s = fd.ops.slice(t, [0, 1], [2, 5], [1, 2])
        c = fd.ops.cat([t, p], 1)
        shape = [fd.ops.size(p, -1), fd.ops.size(s, 1), fd.ops.size(c, 1), t.size(0)]
        fd.add_output(fd.ops.full(shape, 1.5, D.Float))
        r = fd.ops.sum(t, [1])
        fd.add_output(fd.ops.full([r.size(0), s.size(0)], 2.5, D.Float))

    a, b = run(build, [x])
    _exact(a, torch.full((5 + 3, 2, 5 + 8, 3), 1.5))
    _exact(b, torch.full((3, 2), 2.5))


def test_shape_returns_one_scalar_per_dim():
    x = rand((2, 3, 4), D.Float)

    def build(fd):
        t = declare(fd, x)
        fd.add_output(fd.ops.full(t.shape(), 0.25, D.Float))

    (out,) = run(build, [x])
    _exact(out, torch.full((2, 3, 4), 0.25))


def test_empty_slice_in_cat_and_sum():
    x = rand((6,), D.Float)

    def build(fd):
        t = declare(fd, x)
        e = fd.ops.slice(t, [3], [3])
        fd.add_output(fd.ops.cat([e, t, e], 0))
        fd.add_output(fd.ops.sum(e, [0]))

    a, b = run(build, [x])
    _exact(a, torch.cat([x[3:3], x, x[3:3]]))
    check(b, x[3:3].sum(0))


@pytest.mark.parametrize("how", ["contiguity_false", "from_pytorch"])
def test_expanded_stride0_input(how):
    x = rand((1, 5), D.Float).expand(4, 5)   # stride 0 on dim 0

    def build(fd):
        t = fd.define_tensor([-1, -1], contiguity=False) if how == "contiguity_false" \
            else fd.from_pytorch(x)
        fd.add_output(fd.ops.mul(t, 2.5))
        fd.add_output(fd.ops.sum(t, [0]))

    a, b = run(build, [x])
    check(a, x * 2.5)
    check(b, x.sum(0), kind="reduction")


@pytest.mark.parametrize("new_shape", [[24], [2, 2, 2, 3], [8, 3]], ids=_id)
def test_reshape_of_expanded(new_shape):
    x = rand((1, 6), D.Float)
    (out,) = run(lambda fd: fd.add_output(
        fd.ops.reshape(fd.ops.expand(declare(fd, x, "bcast"), [4, 6]), new_shape)), [x])
    _exact(out, x.expand(4, 6).reshape(new_shape))


def test_reshape_of_channels_last_input():
    x = rand((2, 3, 4, 5), D.Float).to(memory_format=torch.channels_last)

    def build(fd):
        t = fd.from_pytorch(x)
        fd.add_output(fd.ops.reshape(t, [-1]))
        fd.add_output(fd.ops.reshape(t, [6, 20]))

    a, b = run(build, [x])
    _exact(a, x.reshape(-1))
    _exact(b, x.reshape(6, 20))


def test_tensor_sizes_and_at_read_extents():
    """nvFuser's tensor_sizes (a Scalar per dim) and at (an entry of a vector)."""
    a = torch.randn(3, 5)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1], dtype=DataType.Float)
        sizes = fd.ops.tensor_sizes(t)
        rows, cols = fd.ops.at(sizes, 0), fd.ops.at(fd.define_vector([7, sizes[1]]), -1)
        fd.add_output(fd.ops.mul(t, fd.ops.add(rows, cols)))
        with pytest.raises(DefinitionError, match="at: index 2 is out of range for a vector of 2"):
            fd.ops.at(sizes, 2)
        with pytest.raises(DefinitionError, match="at: expected a vector of Scalars"):
            fd.ops.at(t, 0)
    (out,) = fd.execute([a])
    torch.testing.assert_close(out, a * 8)
    (out,) = fd.execute([torch.ones(2, 2)])
    torch.testing.assert_close(out, torch.full((2, 2), 4.0))


def test_every_fd_op_is_tested():
    """Fails when fd.ops grows an op that tests/test_ops_*.py does not cover."""
    import pathlib

    from hostir.fd_ops import Ops
    names = {n for n in dir(Ops) if not n.startswith("_")}
    here = pathlib.Path(__file__).parent
    text = "".join(p.read_text() for p in here.glob("test_ops_*.py"))
    import test_ops_pointwise as pw
    covered = set(pw.UNARY_TABLE) | set(pw.BINARY_TABLE)
    missing = sorted(n for n in names - covered if f"fd.ops.{n}(" not in text
                     and f'"{n}"' not in text)
    assert not missing, f"fd.ops without a test: {missing}"



# Transposes that are not views (the output runs along a dim the input is not
# contiguous in): on GPUs through 32 x 32 shared-memory tiles, odd edges included.
@pytest.mark.parametrize("shape,perm", [((64, 40), [1, 0]), ((33, 70), [1, 0]), ((3, 40, 50), [0, 2, 1]),
                                        ((40, 3, 50), [2, 1, 0]), ((1, 32), [1, 0]), ((0, 40), [1, 0]),
                                        ((70, 100), [1, 0]), ((3, 100, 65), [0, 2, 1])])
@pytest.mark.parametrize("dtype", [DataType.Float, DataType.BFloat16], ids=lambda d: d.name)
def test_transpose_with_an_epilogue(shape, perm, dtype):
    x = rand(shape, dtype)
    y = rand([shape[p] for p in perm], dtype)

    def build(fd):
        t = fd.ops.permute(declare(fd, x), perm)
        fd.add_output(fd.ops.add(fd.ops.mul(t, 2.0), declare(fd, y)))
    (out,) = run(build, [x, y])
    check(out, (x.permute(*perm).double() * 2 + y.double()).to(x.dtype))


@pytest.mark.parametrize("static_first", [True, False])
def test_cat_of_a_static_and_a_symbolic_extent_that_disagree_is_an_error(static_first):
    """A static extent beside a symbolic one on a dim cat does not join is
    compared per call: a mismatch names the op, the tensors and both extents
    (it read the wrong columns before)."""
    from hostir import ExecutionError, FusionDefinition
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[3, 4], contiguity=[True, True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.cat([a, b] if static_first else [b, a], 0))
    x, y = torch.randn(3, 4), torch.randn(2, 4)
    (out,) = fd.execute([x, y])
    torch.testing.assert_close(out, torch.cat([x, y] if static_first else [y, x], 0))
    with pytest.raises(ExecutionError, match=r"cat -> .*dim 1.* extent 4.* extent 5|cat -> .*dim 1.* extent 5.* extent 4"):
        fd.execute([x, torch.randn(2, 5)])


def _strides_for(shape, order):
    """Strides of a dense tensor whose dim i has stride rank order[i] (0 fastest)."""
    strides, step = [0] * len(shape), 1
    for d in sorted(range(len(shape)), key=lambda d: order[d]):
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


@pytest.mark.parametrize("shape,order", [((2, 3, 4, 5), [3, 0, 2, 1]), ((2, 1, 4, 5), [3, 0, 2, 1]),
                                         ((7, 9), [0, 1]), ((7, 9), [1, 0]), ((1, 1, 6), [0, 2, 1]),
                                         ((5, 8, 3), [1, 2, 0])])
@pytest.mark.parametrize("decl", ["sym", "strided", "transposed"])
def test_stride_order_lays_out_an_output(shape, order, decl):
    """fd.ops.stride_order(t, order) as an output: t's values in add_output's
    stride_order layout (entry i is dim i's stride rank); as an intermediate it
    changes no values."""
    x = relayout(rand(shape, DataType.Float), decl)

    def build(fd):
        t = declare(fd, x, decl)
        fd.add_output(fd.ops.stride_order(fd.ops.relu(t), order))
        fd.add_output(fd.ops.mul(fd.ops.stride_order(t, order), 2.0))
    out, twice = run(build, [x])
    check(out, torch.relu(x))
    check(twice, x * 2)
    # Sizes of 1 may take any stride; compare the others.
    got = [s for s, n in zip(out.stride(), shape) if n != 1]
    want = [s for s, n in zip(_strides_for(shape, order), shape) if n != 1]
    assert got == want, f"strides {out.stride()}, stride_order {order} wants {_strides_for(shape, order)}"


@pytest.mark.parametrize("order", [[0, 0], [0, 2], [1]])
def test_stride_order_that_is_not_a_permutation_is_refused(order):
    from hostir import FusionDefinition
    with pytest.raises(DefinitionError, match="not a permutation|stride_order"):
        with FusionDefinition() as fd:
            fd.ops.stride_order(fd.define_tensor([-1, -1]), order)
