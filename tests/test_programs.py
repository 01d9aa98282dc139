"""Test programs written in the calling forms of nvFuser's direct-frontend tests
and docs (`with FusionDefinition() as fd:`, `fd.define_tensor(shape=,
contiguity=, dtype=)`, `fd.define_scalar`, `fd.define_vector`, `fd.ops.*`,
`fd.add_output`, `fd.execute`, `fd.validate`), each run on random data against
torch eager. Each PROGRAM is (build(fd), inputs(), reference(*inputs) -> outputs).
They run on CPU, and on the GPU with HOSTIR_TEST_DEVICE=cuda."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from hostir import DataType, FusionDefinition
from ops_util import TEST_DEVICE

D = DataType
PROGRAMS: dict = {}
DEV = TEST_DEVICE


def program(name, inputs, reference, rtol=None, atol=None):
    def register(build):
        assert name not in PROGRAMS, name
        PROGRAMS[name] = (build, inputs, reference, rtol, atol)
        return build
    return register


def r(*shape, dtype=torch.float32, low=-2.0, high=2.0):
    if dtype in (torch.int64, torch.int32):
        return torch.randint(-9, 10, shape, dtype=dtype)
    if dtype == torch.bool:
        return torch.rand(shape) < 0.5
    return (torch.rand(shape, dtype=torch.float64) * (high - low) + low).to(dtype)


def sym(fd, n, dtype=D.Float, contiguity=True):
    return fd.define_tensor(shape=[-1] * n, contiguity=[contiguity] * n if n else [], dtype=dtype)


# ---------------------------------------------------------------- pointwise, nvFuser test style

@program("add_two_inputs", lambda: [r(4, 8), r(4, 8)], lambda a, b: [a + b])
def _(fd):
    t0, t1 = sym(fd, 2), sym(fd, 2)
    fd.add_output(fd.ops.add(t0, t1))


@program("mul_scalar_constant", lambda: [r(3, 5)], lambda a: [a * 3.0])
def _(fd):
    t0 = sym(fd, 2)
    c0 = fd.define_scalar(3.0)
    fd.add_output(fd.ops.mul(t0, c0))


@program("scalar_input_double", lambda: [r(7), 2.5], lambda a, s: [a * s + 1])
def _(fd):
    t0 = sym(fd, 1)
    s0 = fd.define_scalar(None, dtype=D.Double)
    fd.add_output(fd.ops.add(fd.ops.mul(t0, s0), 1.0))


@program("broadcast_add_static_1", lambda: [r(1, 8), r(6, 8)], lambda a, b: [a + b])
def _(fd):
    t0 = fd.define_tensor(shape=[1, -1], contiguity=[None, True], dtype=D.Float)
    t1 = sym(fd, 2)
    fd.add_output(fd.ops.add(t0, t1))


@program("tanh_gelu", lambda: [r(16, 32)], lambda x: [F.gelu(x, approximate="tanh")], 1e-5, 1e-5)
def _(fd):
    x = sym(fd, 2)
    k = math.sqrt(2 / math.pi)
    inner = fd.ops.mul(k, fd.ops.add(x, fd.ops.mul(0.044715, fd.ops.mul(x, fd.ops.mul(x, x)))))
    fd.add_output(fd.ops.mul(fd.ops.mul(0.5, x), fd.ops.add(1.0, fd.ops.tanh(inner))))


@program("erf_gelu", lambda: [r(8, 9)], lambda x: [F.gelu(x)], 1e-5, 1e-5)
def _(fd):
    x = sym(fd, 2)
    fd.add_output(fd.ops.mul(fd.ops.mul(x, 0.5), fd.ops.add(fd.ops.erf(fd.ops.mul(x, 0.7071067811865476)), 1.0)))


@program("silu", lambda: [r(5, 7)], lambda x: [F.silu(x)])
def _(fd):
    fd.add_output(fd.ops.silu(sym(fd, 2)))


@program("sigmoid_mul", lambda: [r(4, 4), r(4, 4)], lambda a, b: [torch.sigmoid(a) * b])
def _(fd):
    a, b = sym(fd, 2), sym(fd, 2)
    fd.add_output(fd.ops.mul(fd.ops.sigmoid(a), b))


@program("where_select", lambda: [r(6, 3), r(6, 3)], lambda a, b: [torch.where(a > b, a, b * 2)])
def _(fd):
    a, b = sym(fd, 2), sym(fd, 2)
    fd.add_output(fd.ops.where(fd.ops.gt(a, b), a, fd.ops.mul(b, 2.0)))


@program("clamp_min_max", lambda: [r(10)], lambda a: [a.clamp(-0.5, 0.75)])
def _(fd):
    fd.add_output(fd.ops.clamp(sym(fd, 1), -0.5, 0.75))


@program("lerp", lambda: [r(5), r(5), r(5)], lambda a, b, w: [torch.lerp(a, b, w)], 1e-6, 1e-6)
def _(fd):
    a, b, w = sym(fd, 1), sym(fd, 1), sym(fd, 1)
    fd.add_output(fd.ops.lerp(a, b, w))


@program("addcmul_value", lambda: [r(4, 3), r(4, 3), r(4, 3)], lambda a, b, c: [torch.addcmul(a, b, c, value=0.5)])
def _(fd):
    a, b, c = sym(fd, 2), sym(fd, 2), sym(fd, 2)
    fd.add_output(fd.ops.addcmul(a, b, c, 0.5))


@program("abs_neg_relu", lambda: [r(9)], lambda a: [torch.relu(-a.abs())])
def _(fd):
    fd.add_output(fd.ops.relu(fd.ops.neg(fd.ops.abs(sym(fd, 1)))))


@program("exp_log_positive", lambda: [r(7, low=0.1, high=3)], lambda a: [torch.log(torch.exp(a) + 1)], 1e-6, 1e-6)
def _(fd):
    fd.add_output(fd.ops.log(fd.ops.add(fd.ops.exp(sym(fd, 1)), 1.0)))


@program("rsqrt_reciprocal", lambda: [r(6, low=0.5, high=4)], lambda a: [torch.rsqrt(a) + torch.reciprocal(a)])
def _(fd):
    t = sym(fd, 1)
    fd.add_output(fd.ops.add(fd.ops.rsqrt(t), fd.ops.reciprocal(t)))


@program("pow_scalar", lambda: [r(8, low=0.1, high=2)], lambda a: [torch.pow(a, 2.5)], 1e-5, 1e-5)
def _(fd):
    fd.add_output(fd.ops.pow(sym(fd, 1), 2.5))


@program("pow_square", lambda: [r(8)], lambda a: [a * a])
def _(fd):
    fd.add_output(fd.ops.pow(sym(fd, 1), 2))


@program("fmod_remainder", lambda: [r(12, low=-5, high=5)], lambda a: [torch.fmod(a, 1.5), torch.remainder(a, 1.5)], 1e-6, 1e-6)
def _(fd):
    t = sym(fd, 1)
    fd.add_output(fd.ops.fmod(t, 1.5))
    fd.add_output(fd.ops.remainder(t, 1.5))


@program("atan2", lambda: [r(5, 4), r(5, 4)], lambda a, b: [torch.atan2(a, b)], 1e-6, 1e-6)
def _(fd):
    a, b = sym(fd, 2), sym(fd, 2)
    fd.add_output(fd.ops.atan2(a, b))


@program("minimum_maximum", lambda: [r(7), r(7)], lambda a, b: [torch.minimum(a, b), torch.maximum(a, b)])
def _(fd):
    a, b = sym(fd, 1), sym(fd, 1)
    fd.add_output(fd.ops.minimum(a, b))
    fd.add_output(fd.ops.maximum(a, b))


@program("comparisons", lambda: [r(10), r(10)], lambda a, b: [a < b, a <= b, a == a, a != b, a >= b])
def _(fd):
    a, b = sym(fd, 1), sym(fd, 1)
    for out in (fd.ops.lt(a, b), fd.ops.le(a, b), fd.ops.eq(a, a), fd.ops.ne(a, b), fd.ops.ge(a, b)):
        fd.add_output(out)


@program("logical_ops", lambda: [r(9, dtype=torch.bool), r(9, dtype=torch.bool)],
         lambda a, b: [a & b, a | b, ~a])
def _(fd):
    a, b = sym(fd, 1, D.Bool), sym(fd, 1, D.Bool)
    fd.add_output(fd.ops.logical_and(a, b))
    fd.add_output(fd.ops.logical_or(a, b))
    fd.add_output(fd.ops.logical_not(a))


@program("bitwise_int", lambda: [r(8, dtype=torch.int64), r(8, dtype=torch.int64)],
         lambda a, b: [a & b, a | b, a ^ b, ~a])
def _(fd):
    a, b = sym(fd, 1, D.Int), sym(fd, 1, D.Int)
    for out in (fd.ops.bitwise_and(a, b), fd.ops.bitwise_or(a, b), fd.ops.bitwise_xor(a, b), fd.ops.bitwise_not(a)):
        fd.add_output(out)


@program("shifts_int32", lambda: [r(8, dtype=torch.int32).abs(), torch.randint(0, 5, (8,), dtype=torch.int32)],
         lambda a, s: [a << s, a >> s])
def _(fd):
    a, s = sym(fd, 1, D.Int32), sym(fd, 1, D.Int32)
    fd.add_output(fd.ops.bitwise_left_shift(a, s))
    fd.add_output(fd.ops.bitwise_right_shift(a, s))


@program("gcd", lambda: [r(10, dtype=torch.int64), r(10, dtype=torch.int64)], lambda a, b: [torch.gcd(a, b)])
def _(fd):
    a, b = sym(fd, 1, D.Int), sym(fd, 1, D.Int)
    fd.add_output(fd.ops.gcd(a, b))


@program("signbit_nextafter", lambda: [r(6), r(6)], lambda a, b: [torch.signbit(a), torch.nextafter(a, b)])
def _(fd):
    a, b = sym(fd, 1), sym(fd, 1)
    fd.add_output(fd.ops.signbit(a))
    fd.add_output(fd.ops.nextafter(a, b))


@program("isnan_isinf_isfinite", lambda: [torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 0.0])],
         lambda a: [torch.isnan(a), torch.isinf(a), torch.isfinite(a), torch.isneginf(a)])
def _(fd):
    a = sym(fd, 1)
    for out in (fd.ops.isnan(a), fd.ops.isinf(a), fd.ops.isfinite(a), fd.ops.isneginf(a)):
        fd.add_output(out)


@program("trig_hyperbolic", lambda: [r(8, low=-0.9, high=0.9)],
         lambda a: [torch.sin(a) + torch.cos(a), torch.asinh(a), torch.atanh(a), torch.tanh(a)], 1e-6, 1e-6)
def _(fd):
    a = sym(fd, 1)
    fd.add_output(fd.ops.add(fd.ops.sin(a), fd.ops.cos(a)))
    fd.add_output(fd.ops.asinh(a))
    fd.add_output(fd.ops.atanh(a))
    fd.add_output(fd.ops.tanh(a))


@program("rounding", lambda: [r(12, low=-4, high=4)],
         lambda a: [torch.floor(a), torch.ceil(a), torch.round(a), torch.trunc(a), torch.frac(a)])
def _(fd):
    a = sym(fd, 1)
    for out in (fd.ops.floor(a), fd.ops.ceil(a), fd.ops.round(a), fd.ops.trunc(a), fd.ops.frac(a)):
        fd.add_output(out)


@program("threshold", lambda: [r(3, 7)], lambda a: [F.threshold(a, 0.1, 20.0)])
def _(fd):
    fd.add_output(fd.ops.threshold(sym(fd, 2), 0.1, 20.0))


# ---------------------------------------------------------------- dtypes and casts

@program("cast_bf16_round_trip", lambda: [r(4, 5)], lambda a: [a.bfloat16().float()])
def _(fd):
    fd.add_output(fd.ops.cast(fd.ops.cast(sym(fd, 2), D.BFloat16), D.Float))


@program("half_inputs_float_math", lambda: [r(6, 4, dtype=torch.half), r(6, 4, dtype=torch.half)],
         lambda a, b: [(a.float() * b.float()).half()])
def _(fd):
    a, b = sym(fd, 2, D.Half), sym(fd, 2, D.Half)
    fd.add_output(fd.ops.cast(fd.ops.mul(fd.ops.cast(a, D.Float), fd.ops.cast(b, D.Float)), D.Half))


@program("bf16_add_promotes", lambda: [r(5, dtype=torch.bfloat16), r(5)], lambda a, b: [a.float() + b])
def _(fd):
    a, b = sym(fd, 1, D.BFloat16), sym(fd, 1)
    fd.add_output(fd.ops.add(a, b))


@program("int_to_float_div", lambda: [r(7, dtype=torch.int64)], lambda a: [a / 2])
def _(fd):
    fd.add_output(fd.ops.truediv(sym(fd, 1, D.Int), 2))


@program("int_floor_div", lambda: [r(7, dtype=torch.int64), torch.randint(1, 5, (7,))],
         lambda a, b: [torch.div(a, b, rounding_mode="floor")])
def _(fd):
    fd.add_output(fd.ops.div(sym(fd, 1, D.Int), sym(fd, 1, D.Int)))


@program("double_math", lambda: [r(6, dtype=torch.float64)], lambda a: [torch.exp(a) * 3 - a])
def _(fd):
    a = sym(fd, 1, D.Double)
    fd.add_output(fd.ops.sub(fd.ops.mul(fd.ops.exp(a), 3.0), a))


@program("bool_to_float_mask", lambda: [r(8), r(8, dtype=torch.bool)], lambda a, m: [a * m.float()])
def _(fd):
    a, m = sym(fd, 1), sym(fd, 1, D.Bool)
    fd.add_output(fd.ops.mul(a, fd.ops.cast(m, D.Float)))


@program("int32_sum_to_int64", lambda: [r(4, 6, dtype=torch.int32)], lambda a: [a.sum(1)])
def _(fd):
    fd.add_output(fd.ops.sum(sym(fd, 2, D.Int32), [1]))


@program("cast_fp8_both_ways", lambda: [r(5, 5, low=-500, high=500), r(5, 5, dtype=torch.bfloat16)],
         lambda a, b: [a.to(torch.float8_e4m3fn), b.to(torch.float8_e5m2).to(torch.bfloat16)])
def _(fd):  # nvFuser's test_cast_fp8 form (e4m3fn saturates at 448, as torch)
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    t1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
    fd.add_output(fd.ops.cast(t0, dtype=DataType.Float8_e4m3fn))
    t2 = fd.ops.cast(t1, dtype=DataType.Float8_e5m2)
    fd.add_output(fd.ops.cast(t2, dtype=DataType.BFloat16))


@program("fp8_dequantize_scale", lambda: [r(4, 16).to(torch.float8_e4m3fn), r(1, 16, low=0.5, high=2.0)],
         lambda q, s: [(q.float() * s).to(torch.bfloat16)])
def _(fd):  # float8 times a Float scale is Float (float8 upcasts), then stored as bf16
    q = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float8_e4m3fn)
    s = fd.define_tensor(shape=[1, -1], contiguity=[None, True], dtype=DataType.Float)
    fd.add_output(fd.ops.cast(fd.ops.mul(q, s), DataType.BFloat16))


@program("erfcinv_probit", lambda: [r(6, 5, low=0.05, high=1.95)],
         lambda x: [torch.special.erfinv(1 - x.double()).float()], 1e-5, 1e-5)
def _(fd):
    fd.add_output(fd.ops.erfcinv(sym(fd, 2)))


# ---------------------------------------------------------------- definition forms

@program("define_tensor_sizes_strides", lambda: [r(3, 4)], lambda a: [a * 2])
def _(fd):
    t = fd.define_tensor(sizes=[3, 4], strides=[4, 1], dtype=D.Float)
    fd.add_output(fd.ops.mul(t, 2.0))


@program("define_tensor_transposed_strides", lambda: [r(4, 3).t()], lambda a: [a + 1])
def _(fd):
    t = fd.define_tensor(sizes=[3, 4], strides=[1, 3], dtype=D.Float)
    fd.add_output(fd.ops.add(t, 1.0))


@program("define_tensor_stride_order", lambda: [r(5, 6).t()], lambda a: [a.exp()], 1e-6, 1e-6)
def _(fd):
    t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=D.Float, stride_order=[0, 1])
    fd.add_output(fd.ops.exp(t))


@program("contiguity_none_on_broadcast", lambda: [r(1, 5), r(4, 5)], lambda a, b: [a * b])
def _(fd):
    a = fd.define_tensor(shape=[1, -1], contiguity=[None, True])
    b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
    fd.add_output(fd.ops.mul(a, b))


@program("non_contiguous_input", lambda: [r(6, 8)[:, ::2]], lambda a: [a * 3])
def _(fd):
    t = fd.define_tensor(shape=[-1, -1], contiguity=[False, False])
    fd.add_output(fd.ops.mul(t, 3.0))


@program("define_scalar_int_input", lambda: [r(5), 3], lambda a, n: [a * n])
def _(fd):
    t = sym(fd, 1)
    n = fd.define_scalar(None, dtype=D.Int)
    fd.add_output(fd.ops.mul(t, n))


@program("define_scalar_bool_input", lambda: [r(5), r(5), True], lambda a, b, f: [a if f else b])
def _(fd):
    a, b = sym(fd, 1), sym(fd, 1)
    f = fd.define_scalar(None, dtype=D.Bool)
    fd.add_output(fd.ops.where(f, a, b))


@program("define_constant_alias", lambda: [r(4)], lambda a: [a + 2])
def _(fd):
    fd.add_output(fd.ops.add(sym(fd, 1), fd.define_constant(2.0)))


@program("scalar_math_on_sizes", lambda: [r(6, 4)], lambda a: [a * (6 * 4)])
def _(fd):
    t = sym(fd, 2)
    n = fd.ops.mul(fd.ops.size(t, 0), fd.ops.size(t, 1))
    fd.add_output(fd.ops.mul(t, fd.ops.cast(n, D.Float)))


@program("define_vector_reshape", lambda: [r(6, 4)], lambda a: [a.reshape(3, 8)])
def _(fd):
    t = sym(fd, 2)
    v = fd.define_vector([3, 8], dtype=D.Int)
    fd.add_output(fd.ops.reshape(t, v))


@program("define_vector_input", lambda: [r(24), [4, 6]], lambda a, s: [a.reshape(4, 6)])
def _(fd):
    t = sym(fd, 1)
    v = fd.define_vector(2)
    fd.add_output(fd.ops.reshape(t, v))


@program("shape_op_into_broadcast", lambda: [r(5), r(3, 5)], lambda a, b: [a + b])
def _(fd):
    a, b = sym(fd, 1), sym(fd, 2)
    fd.add_output(fd.ops.add(fd.ops.broadcast_in_dim(a, fd.ops.shape(b), [1]), b))


@program("tensor_shape_method", lambda: [r(4, 1), r(4, 7)], lambda a, b: [a.expand(4, 7) + b])
def _(fd):
    a = fd.define_tensor(shape=[-1, 1], contiguity=[True, None])
    b = sym(fd, 2)
    fd.add_output(fd.ops.add(fd.ops.expand(a, b.shape()), b))


@program("zero_dim_tensor_input", lambda: [torch.tensor(2.5), r(4)], lambda s, a: [a * s])
def _(fd):
    s = fd.define_tensor(shape=[], contiguity=[], dtype=D.Float)
    a = sym(fd, 1)
    fd.add_output(fd.ops.mul(a, s))


@program("output_alias_input", lambda: [r(5)], lambda a: [a + 1])
def _(fd):
    t = sym(fd, 1)
    fd.add_output(fd.ops.add(t, 1.0))


@program("same_output_twice", lambda: [r(3, 3)], lambda a: [a * 2, a * 2])
def _(fd):
    y = fd.ops.mul(sym(fd, 2), 2.0)
    fd.add_output(y)
    fd.add_output(y)


@program("input_as_output", lambda: [r(4), r(4)], lambda a, b: [a, a + b])
def _(fd):
    a, b = sym(fd, 1), sym(fd, 1)
    fd.add_output(a)
    fd.add_output(fd.ops.add(a, b))


# ---------------------------------------------------------------- shape ops

@program("broadcast_in_dim_rows", lambda: [r(5), r(4, 5)], lambda v, m: [m * v])
def _(fd):
    v, m = sym(fd, 1), sym(fd, 2)
    fd.add_output(fd.ops.mul(m, fd.ops.broadcast_in_dim(v, m.shape(), [1])))


@program("broadcast_in_dim_cols", lambda: [r(4), r(4, 5)], lambda v, m: [m + v[:, None]])
def _(fd):
    v, m = sym(fd, 1), sym(fd, 2)
    fd.add_output(fd.ops.add(m, fd.ops.broadcast_in_dim(v, [m.size(0), m.size(1)], [0])))


@program("broadcast_flags", lambda: [r(3), r(2, 3)], lambda v, m: [m - v])
def _(fd):
    v, m = sym(fd, 1), sym(fd, 2)
    fd.add_output(fd.ops.sub(m, fd.ops.broadcast(v, [True, False])))


@program("expand_static", lambda: [r(1, 4)], lambda a: [a.expand(3, 4) * 1.0])
def _(fd):
    a = fd.define_tensor(shape=[1, -1], contiguity=[None, True])
    fd.add_output(fd.ops.mul(fd.ops.expand(a, [3, a.size(1)]), 1.0))


@program("permute_3d", lambda: [r(2, 3, 4)], lambda a: [a.permute(2, 0, 1) * 2])
def _(fd):
    fd.add_output(fd.ops.mul(fd.ops.permute(sym(fd, 3), [2, 0, 1]), 2.0))


@program("transpose_add", lambda: [r(5, 3), r(3, 5)], lambda a, b: [a.t() + b])
def _(fd):
    a, b = sym(fd, 2), sym(fd, 2)
    fd.add_output(fd.ops.add(fd.ops.permute(a, [1, 0]), b))


@program("reshape_merge", lambda: [r(2, 3, 4)], lambda a: [a.reshape(6, 4) + 1])
def _(fd):
    t = sym(fd, 3)
    fd.add_output(fd.ops.add(fd.ops.reshape(t, [t.size(0) * t.size(1), t.size(2)]), 1.0))


@program("reshape_split_infer", lambda: [r(6, 4)], lambda a: [a.reshape(2, -1, 4)])
def _(fd):
    fd.add_output(fd.ops.reshape(sym(fd, 2), [2, -1, 4]))


@program("squeeze_dims", lambda: [r(3, 1, 4, 1)], lambda a: [a.squeeze(3).squeeze(1)])
def _(fd):
    t = fd.define_tensor(shape=[-1, 1, -1, 1], contiguity=[True, None, True, None])
    fd.add_output(fd.ops.squeeze(t, [1, 3]))


@program("slice_static", lambda: [r(8, 6)], lambda a: [a[2:6, 1:5]])
def _(fd):
    fd.add_output(fd.ops.slice(sym(fd, 2), [2, 1], [6, 5]))


@program("slice_strided", lambda: [r(9)], lambda a: [a[1:8:2]])
def _(fd):
    fd.add_output(fd.ops.slice(sym(fd, 1), [1], [8], [2]))


@program("slice_negative_normalized", lambda: [r(10)], lambda a: [a[-4:]])
def _(fd):
    t = sym(fd, 1)
    fd.add_output(fd.ops.slice(t, [-4], [t.size(0)]))


@program("slice_manual_normalization", lambda: [r(10)], lambda a: [a[3:7]])
def _(fd):
    fd.add_output(fd.ops.slice(sym(fd, 1), [3], [7], manual_normalization=True))


@program("slice_symbolic_bounds", lambda: [r(12), 2, 9], lambda a, lo, hi: [a[lo:hi] * 2])
def _(fd):
    t = sym(fd, 1)
    lo, hi = fd.define_scalar(None, dtype=D.Int), fd.define_scalar(None, dtype=D.Int)
    fd.add_output(fd.ops.mul(fd.ops.slice(t, [lo], [hi]), 2.0))


@program("pad_both_sides", lambda: [r(3, 4)], lambda a: [F.pad(a, (1, 2, 0, 1), value=0.5)])
def _(fd):
    fd.add_output(fd.ops.pad(sym(fd, 2), [1, 2, 0, 1], 0.5))


@program("pad_negative_crop", lambda: [r(6)], lambda a: [F.pad(a, (-1, 2))])
def _(fd):
    fd.add_output(fd.ops.pad(sym(fd, 1), [-1, 2]))


@program("cat_dim0", lambda: [r(2, 3), r(4, 3)], lambda a, b: [torch.cat([a, b], 0)])
def _(fd):
    a, b = sym(fd, 2), sym(fd, 2)
    fd.add_output(fd.ops.cat([a, b], 0))


@program("cat_dim1_three", lambda: [r(3, 1), r(3, 2), r(3, 4)], lambda a, b, c: [torch.cat([a, b, c], 1) * 2])
def _(fd):
    a, b, c = sym(fd, 2), sym(fd, 2), sym(fd, 2)
    fd.add_output(fd.ops.mul(fd.ops.cat([a, b, c], 1), 2.0))


@program("rotation_slice_cat", lambda: [r(16)], lambda a: [a + torch.cat([a[8:], a[:8]])])
def _(fd):
    t = sym(fd, 1)
    n = fd.ops.size(t, 0)
    half = fd.ops.div(n, 2)
    fd.add_output(fd.ops.add(t, fd.ops.cat([fd.ops.slice(t, [half], [n]), fd.ops.slice(t, [0], [half])], 0)))


@program("rope_style", lambda: [r(2, 4, 8), r(4, 8), r(4, 8)],
         lambda x, c, s: [x * c + torch.cat([-x[..., 4:], x[..., :4]], -1) * s], 1e-6, 1e-6)
def _(fd):
    x, c, s = sym(fd, 3), sym(fd, 2), sym(fd, 2)
    sh = x.shape()
    lo, hi = fd.ops.slice(x, [0, 0, 0], [sh[0], sh[1], 4]), fd.ops.slice(x, [0, 0, 4], [sh[0], sh[1], 8])
    rot = fd.ops.cat([fd.ops.neg(hi), lo], -1)
    cb, sb = fd.ops.broadcast_in_dim(c, sh, [1, 2]), fd.ops.broadcast_in_dim(s, sh, [1, 2])
    fd.add_output(fd.ops.add(fd.ops.mul(x, cb), fd.ops.mul(rot, sb)))


@program("triu", lambda: [r(5, 6)], lambda a: [torch.triu(a, 1)])
def _(fd):
    fd.add_output(fd.ops.triu(sym(fd, 2), 1))


@program("iota_full", lambda: [r(6)], lambda a: [a + torch.arange(6) * 2 + 1, torch.full((2, 3), 7.0)])
def _(fd):
    t = sym(fd, 1)
    fd.add_output(fd.ops.add(t, fd.ops.cast(fd.ops.iota(fd.ops.size(t, 0), 1, 2, D.Int), D.Float)))
    fd.add_output(fd.ops.full([2, 3], 7.0, D.Float))


# ---------------------------------------------------------------- reductions and normalizations

@program("sum_dim1", lambda: [r(5, 7)], lambda a: [a.sum(1)], 1e-5, 1e-5)
def _(fd):
    fd.add_output(fd.ops.sum(sym(fd, 2), [1]))


@program("sum_keepdim_dtype", lambda: [r(4, 6, dtype=torch.bfloat16)], lambda a: [a.float().sum(0, keepdim=True)], 1e-2, 1e-2)
def _(fd):
    fd.add_output(fd.ops.sum(sym(fd, 2, D.BFloat16), [0], True, D.Float))


@program("sum_keyword_dims", lambda: [r(3, 4, 5)], lambda a: [a.sum((0, 2))], 1e-5, 1e-5)
def _(fd):
    fd.add_output(fd.ops.sum(sym(fd, 3), dims=[0, 2], keepdim=False))


@program("sum_all_to_scalar", lambda: [r(4, 4)], lambda a: [a.sum()], 1e-5, 1e-5)
def _(fd):
    fd.add_output(fd.ops.sum(sym(fd, 2), [0, 1]))


@program("max_min", lambda: [r(6, 5)], lambda a: [a.amax(1), a.amin(0)])
def _(fd):
    t = sym(fd, 2)
    fd.add_output(fd.ops.max(t, [1]))
    fd.add_output(fd.ops.min(t, [0]))


@program("prod", lambda: [r(3, 4, low=0.5, high=1.5)], lambda a: [a.prod(1)], 1e-5, 1e-5)
def _(fd):
    fd.add_output(fd.ops.prod(sym(fd, 2), [1]))


@program("mean_via_div", lambda: [r(4, 9)], lambda a: [a.mean(1)], 1e-5, 1e-5)
def _(fd):
    t = sym(fd, 2)
    fd.add_output(fd.ops.div(fd.ops.sum(t, [1]), fd.ops.cast(fd.ops.size(t, 1), D.Float)))


@program("var_correction", lambda: [r(5, 11)], lambda a: [a.var(1, correction=0), a.var(1)], 1e-5, 1e-5)
def _(fd):
    t = sym(fd, 2)
    fd.add_output(fd.ops.var(t, [1], 0))
    fd.add_output(fd.ops.var(t, [1]))


@program("var_mean", lambda: [r(6, 8)], lambda a: list(torch.var_mean(a, 1, correction=1)), 1e-5, 1e-5)
def _(fd):
    v, m = fd.ops.var_mean(sym(fd, 2), [1], correction=1)
    fd.add_output(v)
    fd.add_output(m)


@program("welford", lambda: [r(4, 10)], lambda a: [a.var(1, correction=0) * 10, a.mean(1)], 1e-5, 1e-5)
def _(fd):
    avg, m2, n = fd.ops.welford(sym(fd, 2), [1])
    fd.add_output(m2)
    fd.add_output(avg)


@program("softmax", lambda: [r(8, 16)], lambda a: [torch.softmax(a, -1)], 1e-6, 1e-6)
def _(fd):
    x = sym(fd, 2)
    m = fd.ops.broadcast_in_dim(fd.ops.max(x, [1]), x.shape(), [0])
    e = fd.ops.exp(fd.ops.sub(x, m))
    fd.add_output(fd.ops.div(e, fd.ops.broadcast_in_dim(fd.ops.sum(e, [1]), x.shape(), [0])))


@program("log_softmax", lambda: [r(4, 12)], lambda a: [torch.log_softmax(a, 1)], 1e-5, 1e-5)
def _(fd):
    x = sym(fd, 2)
    m = fd.ops.max(x, [1], keepdim=True)
    s = fd.ops.sub(x, m)
    fd.add_output(fd.ops.sub(s, fd.ops.log(fd.ops.sum(fd.ops.exp(s), [1], keepdim=True))))


@program("layer_norm", lambda: [r(6, 32), r(32), r(32)],
         lambda x, w, b: [F.layer_norm(x, (32,), w, b, 1e-5)], 1e-5, 1e-5)
def _(fd):
    x, w, b = sym(fd, 2), sym(fd, 1), sym(fd, 1)
    var, mean = fd.ops.var_mean(x, [1], correction=0)
    sh = x.shape()
    xh = fd.ops.mul(fd.ops.sub(x, fd.ops.broadcast_in_dim(mean, sh, [0])),
                    fd.ops.broadcast_in_dim(fd.ops.rsqrt(fd.ops.add(var, 1e-5)), sh, [0]))
    fd.add_output(fd.ops.add(fd.ops.mul(xh, fd.ops.broadcast_in_dim(w, sh, [1])), fd.ops.broadcast_in_dim(b, sh, [1])))


@program("rms_norm_bf16", lambda: [r(4, 64, dtype=torch.bfloat16), r(64, dtype=torch.bfloat16)],
         lambda x, w: [(x.float() * torch.rsqrt(x.float().pow(2).mean(1, keepdim=True) + 1e-6) * w.float()).bfloat16()],
         2e-2, 2e-2)
def _(fd):
    x, w = sym(fd, 2, D.BFloat16), sym(fd, 1, D.BFloat16)
    xf = fd.ops.cast(x, D.Float)
    ms = fd.ops.div(fd.ops.sum(fd.ops.mul(xf, xf), [1], keepdim=True), fd.ops.cast(fd.ops.size(x, 1), D.Float))
    y = fd.ops.mul(fd.ops.mul(xf, fd.ops.rsqrt(fd.ops.add(ms, 1e-6))),
                   fd.ops.broadcast_in_dim(fd.ops.cast(w, D.Float), x.shape(), [1]))
    fd.add_output(fd.ops.cast(y, D.BFloat16))


@program("batch_norm_stats", lambda: [r(8, 3, 5)], lambda x: [x.mean((0, 2)), x.var((0, 2), correction=0)], 1e-5, 1e-5)
def _(fd):
    var, mean = fd.ops.var_mean(sym(fd, 3), [0, 2], correction=0)
    fd.add_output(mean)
    fd.add_output(var)


@program("bias_grad_sum", lambda: [r(4, 5, 6)], lambda g: [g.sum((0, 1))], 1e-5, 1e-5)
def _(fd):
    fd.add_output(fd.ops.sum(sym(fd, 3), [0, 1]))


@program("l2_normalize", lambda: [r(5, 9)], lambda x: [F.normalize(x, dim=1)], 1e-5, 1e-5)
def _(fd):
    x = sym(fd, 2)
    n = fd.ops.sqrt(fd.ops.sum(fd.ops.mul(x, x), [1], keepdim=True))
    fd.add_output(fd.ops.div(x, n))


@program("reduction_of_expanded", lambda: [r(3, 1)], lambda a: [a.expand(3, 5).sum(1)], 1e-5, 1e-5)
def _(fd):
    a = fd.define_tensor(shape=[-1, 1], contiguity=[True, None])
    fd.add_output(fd.ops.sum(fd.ops.expand(a, [a.size(0), 5]), [1]))


@program("sum_int_input", lambda: [r(5, 3, dtype=torch.int64)], lambda a: [a.sum(0)])
def _(fd):
    fd.add_output(fd.ops.sum(sym(fd, 2, D.Int), [0]))


@program("mse_loss", lambda: [r(7, 3), r(7, 3)], lambda a, b: [F.mse_loss(a, b)], 1e-5, 1e-5)
def _(fd):
    a, b = sym(fd, 2), sym(fd, 2)
    d = fd.ops.sub(a, b)
    fd.add_output(fd.ops.div(fd.ops.sum(fd.ops.mul(d, d), [0, 1]), 21.0))


@program("argmax_greedy_token", lambda: [r(3, 50, dtype=torch.bfloat16)],
         lambda logits: [logits.float().argmax(-1)])
def _(fd):  # a decoder's greedy pick over the vocabulary
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
    t1 = fd.ops.cast(t0, DataType.Float)
    fd.add_output(fd.ops.argmax(t1, dim=-1))


@program("argmax_of_softmax_keepdim", lambda: [r(4, 9)],
         lambda x: [torch.softmax(x, 1).argmax(1, keepdim=True), torch.softmax(x, 1).amax(1)], 1e-6, 1e-6)
def _(fd):
    x = sym(fd, 2)
    e = fd.ops.exp(fd.ops.sub(x, fd.ops.max(x, [1], keepdim=True)))
    p = fd.ops.div(e, fd.ops.sum(e, [1], keepdim=True))
    fd.add_output(fd.ops.argmax(p, 1, True))
    fd.add_output(fd.ops.max(p, [1]))


@program("argmax_outer_and_flat", lambda: [r(40, 3, dtype=torch.int32)],
         lambda a: [a.argmax(0), a.argmax()])
def _(fd):
    a = sym(fd, 2, D.Int32)
    fd.add_output(fd.ops.argmax(a, 0))
    fd.add_output(fd.ops.argmax(a))


# ---------------------------------------------------------------- scans, indexing, random, matmul

@program("cumsum_rows", lambda: [r(4, 9)], lambda a: [a.cumsum(1)], 1e-5, 1e-5)
def _(fd):
    fd.add_output(fd.ops.cumsum(sym(fd, 2), 1))


@program("cummax_dim0", lambda: [r(6, 3)], lambda a: [a.cummax(0).values])
def _(fd):
    fd.add_output(fd.ops.cummax(sym(fd, 2), 0))


@program("cumprod_fused", lambda: [r(3, 5, low=0.5, high=1.5)], lambda a: [(a * 2).cumprod(1) + 1], 1e-5, 1e-5)
def _(fd):
    fd.add_output(fd.ops.add(fd.ops.cumprod(fd.ops.mul(sym(fd, 2), 2.0), 1), 1.0))


@program("index_select", lambda: [r(6, 4), torch.tensor([5, 0, 2, 2])], lambda x, i: [x[i]])
def _(fd):
    fd.add_output(fd.ops.index_select(sym(fd, 2), sym(fd, 1, D.Int), 0))


@program("gather_dim1", lambda: [r(4, 5), torch.randint(0, 5, (4, 3))], lambda x, i: [torch.gather(x, 1, i)])
def _(fd):
    fd.add_output(fd.ops.gather(sym(fd, 2), sym(fd, 2, D.Int), 1))


@program("take_along_axis", lambda: [r(4, 5), torch.randint(0, 5, (4, 2))], lambda x, i: [torch.take_along_dim(x, i, 1)])
def _(fd):
    fd.add_output(fd.ops.take_along_axis(sym(fd, 2), sym(fd, 2, D.Int), 1))


@program("embedding_fwd", lambda: [torch.randint(0, 10, (3, 4)), r(10, 8)], lambda i, w: [F.embedding(i, w)])
def _(fd):
    i, w = sym(fd, 2, D.Int), sym(fd, 2)
    fd.add_output(fd.ops.embedding_fwd(i, w, None, None, 2.0, False, False))


def _topk_rows(x, k, src):
    """nvFuser's scatter tests' inputs: rows picked by topk (distinct per column)."""
    return [x, torch.topk(x, k, dim=0)[1], src]


@program("scatter_output_intermediate", lambda: _topk_rows(r(16, 32), 4, r(4, 32)),
         lambda x, i, s: [torch.sigmoid(torch.scatter(x, 0, i, s))], 1e-6, 1e-6)
def _(fd):
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=D.Float, is_cpu=False,
                          stride_order=[1, 0])
    t1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=D.Int, is_cpu=False,
                          stride_order=[1, 0])
    t2 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=D.Float, is_cpu=False,
                          stride_order=[1, 0])
    fd.add_output(fd.ops.sigmoid(fd.ops.scatter(t0, t1, t2, 0)))


@program("scatter_scalar_src", lambda: _topk_rows(r(16, 32), 4, 1.5),
         lambda x, i, s: [torch.scatter(x, 0, i, s)])
def _(fd):
    t0, t1 = sym(fd, 2), sym(fd, 2, D.Int)
    s2 = fd.define_scalar(None, dtype=D.Double)
    fd.add_output(fd.ops.scatter(t0, t1, s2, 0))


@program("index_put_as_scatter", lambda: [r(6, 5), torch.randperm(6)[:3], r(3, 5)],
         lambda a, i, v: [a.index_put((i,), v)])
def _(fd):
    a, i, v = sym(fd, 2), sym(fd, 1, D.Int), sym(fd, 2)
    rows = fd.ops.broadcast_in_dim(i, [i.shape()[0], a.shape()[1]], [0])  # thunder's translation
    fd.add_output(fd.ops.scatter(a, rows, v, 0))


@program("scatter_dim1_int32_bf16", lambda: [r(4, 9, dtype=torch.bfloat16),
                                             torch.rand(4, 9).argsort(1)[:, :5].to(torch.int32),
                                             r(4, 6, dtype=torch.bfloat16)],
         lambda x, i, s: [torch.scatter(x, 1, i.long(), s * 2) + x])
def _(fd):
    x, i, s = sym(fd, 2, D.BFloat16), sym(fd, 2, D.Int32), sym(fd, 2, D.BFloat16)
    y = fd.ops.scatter(x, i, fd.ops.cast(fd.ops.mul(s, 2.0), D.BFloat16), 1)
    fd.add_output(fd.ops.add(y, x))


@program("select_scalar", lambda: [r(5, 6), 2], lambda x, k: [x[:, k]])
def _(fd):
    x = sym(fd, 2)
    k = fd.define_scalar(None, dtype=D.Int)
    fd.add_output(fd.ops.select(x, k, 1))


@program("seeded_uniform_range", lambda: [], lambda: [None])
def _(fd):
    fd.add_output(fd.ops.uniform(-1.0, 1.0, [64, 8], D.Float, rng_seed=11, rng_offset=0))


@program("dropout_seeded", lambda: [r(32, 16)], lambda x: [None])
def _(fd):
    x = sym(fd, 2)
    u = fd.ops.uniform(0.0, 1.0, x.shape(), D.Float, rng_seed=7, rng_offset=1)
    fd.add_output(fd.ops.where(fd.ops.ge(u, 0.2), fd.ops.mul(x, 1.25), 0.0))


@program("matmul_2d", lambda: [r(4, 6), r(6, 5)], lambda a, b: [a @ b], 1e-5, 1e-5)
def _(fd):
    fd.add_output(fd.ops.matmul(sym(fd, 2), sym(fd, 2)))


@program("matmul_batched", lambda: [r(2, 3, 4), r(4, 5)], lambda a, b: [a @ b], 1e-5, 1e-5)
def _(fd):
    fd.add_output(fd.ops.matmul(sym(fd, 3), sym(fd, 2)))


@program("linear_bias", lambda: [r(3, 8), r(5, 8), r(5)], lambda x, w, b: [F.linear(x, w, b)], 1e-5, 1e-5)
def _(fd):
    fd.add_output(fd.ops.linear(sym(fd, 2), sym(fd, 2), sym(fd, 1)))


@program("linear_then_gelu", lambda: [r(4, 8), r(6, 8)], lambda x, w: [F.gelu(F.linear(x, w), approximate="tanh")], 1e-5, 1e-5)
def _(fd):
    y = fd.ops.linear(sym(fd, 2), sym(fd, 2))
    k = math.sqrt(2 / math.pi)
    inner = fd.ops.mul(k, fd.ops.add(y, fd.ops.mul(0.044715, fd.ops.mul(y, fd.ops.mul(y, y)))))
    fd.add_output(fd.ops.mul(fd.ops.mul(0.5, y), fd.ops.add(1.0, fd.ops.tanh(inner))))


# ---------------------------------------------------------------- composite programs (nvFuser test shapes)

@program("seed003_gelu_backward", lambda: [r(2, 3, 8), r(2, 3, 8), r(8)],
         lambda g, x, b: [None], None, None)
def _(fd):
    g, x, b = sym(fd, 3), sym(fd, 3), sym(fd, 1)
    xb = fd.ops.add(x, fd.ops.broadcast_in_dim(b, x.shape(), [2]))
    cdf = fd.ops.mul(0.5, fd.ops.add(1.0, fd.ops.erf(fd.ops.mul(xb, 0.7071067811865476))))
    pdf = fd.ops.mul(0.3989422804014327, fd.ops.exp(fd.ops.mul(-0.5, fd.ops.mul(xb, xb))))
    dx = fd.ops.mul(g, fd.ops.add(cdf, fd.ops.mul(xb, pdf)))
    fd.add_output(dx)
    fd.add_output(fd.ops.sum(dx, [0, 1]))


@program("residual_add_norm", lambda: [r(4, 16), r(4, 16)],
         lambda a, b: [(a + b) / (a + b).norm(dim=1, keepdim=True)], 1e-5, 1e-5)
def _(fd):
    a, b = sym(fd, 2), sym(fd, 2)
    s = fd.ops.add(a, b)
    fd.add_output(fd.ops.div(s, fd.ops.sqrt(fd.ops.sum(fd.ops.mul(s, s), [1], keepdim=True))))


@program("attention_scores_softmax", lambda: [r(2, 4, 8), r(2, 8, 4)],
         lambda q, k: [torch.softmax(q @ k / math.sqrt(8), -1)], 1e-5, 1e-5)
def _(fd):
    q, k = sym(fd, 3), sym(fd, 3)
    s = fd.ops.mul(fd.ops.matmul(q, k), 1 / math.sqrt(8))
    m = fd.ops.max(s, [2], keepdim=True)
    e = fd.ops.exp(fd.ops.sub(s, m))
    fd.add_output(fd.ops.div(e, fd.ops.sum(e, [2], keepdim=True)))


@program("swiglu", lambda: [r(3, 8), r(3, 8)], lambda a, b: [F.silu(a) * b], 1e-6, 1e-6)
def _(fd):
    a, b = sym(fd, 2), sym(fd, 2)
    fd.add_output(fd.ops.mul(fd.ops.silu(a), b))


@program("cross_entropy_pieces", lambda: [r(4, 6), torch.randint(0, 6, (4, 1))],
         lambda x, t: [-(torch.log_softmax(x, 1).gather(1, t)).mean()], 1e-5, 1e-5)
def _(fd):
    x, t = sym(fd, 2), sym(fd, 2, D.Int)
    m = fd.ops.max(x, [1], keepdim=True)
    s = fd.ops.sub(x, m)
    ls = fd.ops.sub(s, fd.ops.log(fd.ops.sum(fd.ops.exp(s), [1], keepdim=True)))
    picked = fd.ops.take_along_axis(ls, t, 1)
    fd.add_output(fd.ops.neg(fd.ops.div(fd.ops.sum(picked, [0, 1]), fd.ops.cast(fd.ops.size(x, 0), D.Float))))


@program("adam_step", lambda: [r(10), r(10), r(10), r(10, low=0.1, high=1)],
         lambda p, g, m, v: [p - 0.01 * (0.9 * m + 0.1 * g) / (torch.sqrt(0.999 * v + 0.001 * g * g) + 1e-8)],
         1e-5, 1e-5)
def _(fd):
    p, g, m, v = sym(fd, 1), sym(fd, 1), sym(fd, 1), sym(fd, 1)
    m2 = fd.ops.add(fd.ops.mul(m, 0.9), fd.ops.mul(g, 0.1))
    v2 = fd.ops.add(fd.ops.mul(v, 0.999), fd.ops.mul(fd.ops.mul(g, g), 0.001))
    fd.add_output(fd.ops.sub(p, fd.ops.div(fd.ops.mul(m2, 0.01), fd.ops.add(fd.ops.sqrt(v2), 1e-8))))


@program("outer_product_broadcast", lambda: [r(4), r(5)], lambda a, b: [a[:, None] * b[None, :]])
def _(fd):
    a, b = sym(fd, 1), sym(fd, 1)
    sh = [a.size(0), b.size(0)]
    fd.add_output(fd.ops.mul(fd.ops.broadcast_in_dim(a, sh, [0]), fd.ops.broadcast_in_dim(b, sh, [1])))


@program("sum_then_broadcast_back", lambda: [r(3, 4)], lambda a: [a - a.sum(0)], 1e-5, 1e-5)
def _(fd):
    a = sym(fd, 2)
    fd.add_output(fd.ops.sub(a, fd.ops.broadcast_in_dim(fd.ops.sum(a, [0]), a.shape(), [1])))


@program("two_independent_outputs", lambda: [r(3, 3), r(5)], lambda a, b: [a.exp(), b.sum()], 1e-5, 1e-5)
def _(fd):
    a, b = sym(fd, 2), sym(fd, 1)
    fd.add_output(fd.ops.exp(a))
    fd.add_output(fd.ops.sum(b, [0]))


@program("chain_of_views", lambda: [r(2, 3, 4)], lambda a: [a.permute(1, 0, 2).reshape(3, 8)[:, 2:6] * 2])
def _(fd):
    t = sym(fd, 3)
    p = fd.ops.permute(t, [1, 0, 2])
    v = fd.ops.reshape(p, [3, 8])
    fd.add_output(fd.ops.mul(fd.ops.slice(v, [0, 2], [3, 6]), 2.0))


@program("segment_set_boundary", lambda: [r(4, 4)], lambda a: [(a * 2).exp()], 1e-6, 1e-6)
def _(fd):
    fd.add_output(fd.ops.exp(fd.ops.segment_set(fd.ops.mul(sym(fd, 2), 2.0))))


@program("set_copy", lambda: [r(6)], lambda a: [a.clone()])
def _(fd):
    fd.add_output(fd.ops.set(sym(fd, 1)))


@program("validate_form", lambda: [r(3, 4)], lambda a: [a * 2 + 1])
def _(fd):
    fd.add_output(fd.ops.add(fd.ops.mul(sym(fd, 2), 2.0), 1.0))


# ---------------------------------------------------------------- attention and sorting (ATen segments)

BF16 = torch.bfloat16


def _sdpa_grads(q, k, v, g, is_causal=True, scale=None):
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
    out.backward(g)
    return [out.detach(), q.grad, k.grad, v.grad]


@program("sdpa_fwd_bwd_thunder", lambda: [r(2, 4, 16, 32, dtype=BF16), r(2, 4, 16, 32, dtype=BF16),
                                          r(2, 4, 16, 32, dtype=BF16), r(2, 4, 16, 32, dtype=BF16)],
         _sdpa_grads, 2e-2, 2e-2)
def _(fd):
    """Thunder's nvFuser executor: scalars defined once, positional arguments, scale None."""
    q, k, v, g = (fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=[True] * 4, dtype=D.BFloat16,
                                   is_cpu=False) for _ in range(4))
    s0 = fd.define_scalar(0.0, dtype=D.Double)
    s1 = fd.define_scalar(True, dtype=D.Bool)
    t4, t5, t6, t7 = fd.ops.sdpfa_fwd(q, k, v, s0, s1, None)
    t8, t9, t10 = fd.ops.sdpfa_bwd(g, q, k, v, t4, t5, s0, s1, t6, t7, None)
    for t in (t4, t8, t9, t10):
        fd.add_output(t)


def _sdpa_bwd_inputs():
    q, k, v, g = r(1, 2, 8, 16, dtype=BF16), r(1, 2, 8, 16, dtype=BF16), r(1, 2, 8, 16, dtype=BF16), \
        r(1, 2, 8, 16, dtype=BF16)
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False, scale=0.5)
    return [g, q, k, v, out, lse.contiguous(), torch.zeros(2, dtype=torch.int64),
            torch.zeros((), dtype=torch.int64), 0.5]


@program("sdpa_bwd_of_saved_forward", _sdpa_bwd_inputs,
         lambda g, q, k, v, *_: _sdpa_grads(q, k, v, g, False, 0.5)[1:], 2e-2, 2e-2)
def _(fd):
    """nvFuser's test_sdpa_bwd: the forward's results saved as inputs (the rng
    state as Int tensors), the scale a scalar input."""
    g, q, k, v, out = (sym(fd, 4, D.BFloat16) for _ in range(5))
    lse = sym(fd, 3)
    seed = fd.define_tensor(shape=[2], dtype=D.Int)
    offset = fd.define_tensor(shape=[], dtype=D.Int)
    scale = fd.define_scalar(None, dtype=D.Double)
    for t in fd.ops.sdpfa_bwd(g, q, k, v, out, lse, None, None, seed, offset, scale):
        fd.add_output(t)


def _attention_block(x, w, h=4):
    b, s, e = x.shape
    q, k, v = (t.reshape(b, s, h, e // h).permute(0, 2, 1, 3) for t in F.linear(x, w).split(e, -1))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return [out.permute(0, 2, 1, 3).reshape(b, s, e)]


@program("sdpa_attention_block", lambda: [r(2, 8, 64, dtype=BF16), r(192, 64, dtype=BF16, low=-0.3, high=0.3)],
         _attention_block, 2e-2, 2e-2)
def _(fd):
    """Thunder's transformer attention: a linear, its columns sliced into q, k, v,
    each reshaped to heads and permuted to BHSE (strided views), flash attention,
    and back to [b, s, e]."""
    x = fd.define_tensor(shape=[2, 8, 64], contiguity=[True] * 3, dtype=D.BFloat16)
    w = fd.define_tensor(shape=[192, 64], contiguity=[True] * 2, dtype=D.BFloat16)
    qkv = fd.ops.linear(x, w)
    heads = []
    for i in range(3):
        t = fd.ops.slice(qkv, start_indices=[0, 0, 64 * i], end_indices=[2, 8, 64 * (i + 1)], strides=[1, 1, 1])
        heads.append(fd.ops.permute(fd.ops.reshape(t, new_shape=[2, 8, 4, 16]), dims=[0, 2, 1, 3]))
    attn, *_ = fd.ops.sdpfa_fwd(*heads, dropout_p=0.0, is_causal=True, scale=None)
    fd.add_output(fd.ops.reshape(fd.ops.permute(attn, dims=[0, 2, 1, 3]), new_shape=[2, 8, 64]))


@program("topk_scalar_k", lambda: [r(6, 40), 5],
         lambda x, k: [torch.topk(x, k, 1).values * 2, torch.topk(x, k, 1).indices])
def _(fd):
    t0 = sym(fd, 2)
    s1 = fd.define_scalar(None, dtype=D.Int)
    t2, t3 = fd.ops.topk(t0, s1, dim=1, largest=True, sorted=True)
    fd.add_output(fd.ops.mul(t2, 2.0))
    fd.add_output(t3)


@program("topk_rows_for_scatter", lambda: [r(16, 32), r(16, 32), r(4, 32)],
         lambda x, y, s: [torch.scatter(x, 0, torch.topk(y, 4, 0).indices, s)])
def _(fd):
    """nvFuser's scatter tests pick rows with topk; here inside the fusion (sorted:
    which src row goes where follows the order)."""
    x, y, src = sym(fd, 2), sym(fd, 2), sym(fd, 2)
    _, rows = fd.ops.topk(y, 4, dim=0, sorted=True)
    fd.add_output(fd.ops.scatter(x, rows, src, 0))


@program("argsort_then_gather", lambda: [r(5, 9)], lambda x: [x.sort(1, descending=True).values])
def _(fd):
    t0 = sym(fd, 2)
    order = fd.ops.argsort(t0, dim=1, descending=True, stable=False)
    fd.add_output(fd.ops.take_along_axis(t0, order, 1))


# ---------------------------------------------------------------- complex numbers (nvFuser's
# ComplexFloat / ComplexDouble: torch.complex64 / complex128)

def rc(*shape, dtype=torch.complex64):
    """Random complex data (both parts random: never a real-only or zero tensor)."""
    part = torch.float32 if dtype == torch.complex64 else torch.float64
    return torch.complex(r(*shape, dtype=part), r(*shape, dtype=part))


for _dt, _cdt in ((D.ComplexDouble, torch.complex128), (D.ComplexFloat, torch.complex64)):
    # nvFuser's test_real_imag and test_reduction_complex_number
    @program(f"real_imag_{_dt.name}", lambda _c=_cdt: [rc(5, dtype=_c)],
             lambda a: [torch.real(a), torch.imag(a)])
    def _(fd, _dt=_dt):
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=_dt)
        fd.add_output(fd.ops.real(t0))
        fd.add_output(fd.ops.imag(t0))

    @program(f"reduction_complex_number_{_dt.name}", lambda _c=_cdt: [rc(2, 32, dtype=_c)],
             lambda a: [torch.sum(a, dim=-1)], 1e-5, 1e-5)
    def _(fd, _dt=_dt):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=_dt)
        fd.add_output(fd.ops.sum(t0, [-1], False, _dt))


@program("complex_scalar_constant_and_input", lambda: [rc(4, 6), 0.5 - 2j],
         lambda a, s: [a * (3.0 + 0.5j) + s, torch.abs(a * s)])
def _(fd):
    t0 = sym(fd, 2, D.ComplexFloat)
    c0 = fd.define_scalar(complex(3.0, 0.5))
    s1 = fd.define_scalar(None, dtype=DataType.ComplexDouble)
    fd.add_output(fd.ops.add(fd.ops.mul(t0, c0), s1))
    fd.add_output(fd.ops.abs(fd.ops.mul(t0, s1)))


def _rope_ref(x, f):
    y = x * f[:, None, :]
    return [y, torch.real(y), torch.imag(y)]


@program("rope_complex_rotation", lambda: [rc(2, 6, 3, 4), torch.polar(torch.ones(6, 4), r(6, 4))],
         _rope_ref, 1e-5, 1e-5)
def _(fd):
    # rotary embedding in complex form: x [B, T, H, D/2] times freqs_cis [T, D/2]
    x = sym(fd, 4, D.ComplexFloat)
    f = sym(fd, 2, D.ComplexFloat)
    fb = fd.ops.broadcast_in_dim(f, shape=x.shape(), broadcast_dims=[1, 3])
    y = fd.ops.mul(x, fb)
    fd.add_output(y)
    fd.add_output(fd.ops.real(y))
    fd.add_output(fd.ops.imag(y))


@program("complex_from_real_parts", lambda: [r(3, 5), r(3, 5, dtype=torch.float64)],
         lambda a, b: [a.to(torch.complex64) + b.to(torch.complex128) * 1j,
                       torch.isreal(a.to(torch.complex64) + 0j)])
def _(fd):
    a, b = sym(fd, 2), sym(fd, 2, D.Double)
    ca = fd.ops.cast(a, DataType.ComplexFloat)
    cb = fd.ops.cast(b, DataType.ComplexDouble)
    fd.add_output(fd.ops.add(ca, fd.ops.mul(cb, fd.define_scalar(1j))))
    fd.add_output(fd.ops.isreal(ca))


@program("complex_shape_ops", lambda: [rc(4, 6), rc(2, 6)],
         lambda a, b: [torch.cat([a.permute(1, 0).reshape(4, 6)[1:3], b], 0),
                       F.pad(a[:, 2:], [1, 1], value=0.0) * 2])
def _(fd):
    a, b = sym(fd, 2, D.ComplexFloat), sym(fd, 2, D.ComplexFloat)
    p = fd.ops.reshape(fd.ops.permute(a, [1, 0]), [4, 6])
    fd.add_output(fd.ops.cat([fd.ops.slice(p, [1, 0], [3, 6]), b], 0))
    s = fd.ops.slice(a, [0, 2], [4, 6])
    fd.add_output(fd.ops.mul(fd.ops.pad(s, [1, 1]), 2.0))


@program("complex_where_and_compare", lambda: [rc(5, 7, dtype=torch.complex128)],
         lambda a: [torch.where(a.abs() > 1.5, a, torch.reciprocal(a)), a == a * 1, a != -a])
def _(fd):
    a = sym(fd, 2, D.ComplexDouble)
    fd.add_output(fd.ops.where(fd.ops.gt(fd.ops.abs(a), 1.5), a, fd.ops.reciprocal(a)))
    fd.add_output(fd.ops.eq(a, fd.ops.mul(a, 1)))
    fd.add_output(fd.ops.ne(a, fd.ops.neg(a)))


@program("complex_gather_and_index_select",
         lambda: [rc(6, 200), torch.randint(0, 200, (6, 150)), torch.tensor([5, 0, 2, 2])],
         lambda x, k, i: [torch.gather(x * 2, 1, k), x[i] + 1j])
def _(fd):
    # (rows long enough for the staged-gather schedule on GPUs: complex rows in shared memory)
    x = sym(fd, 2, D.ComplexFloat)
    k, i = sym(fd, 2, D.Int), sym(fd, 1, D.Int)
    fd.add_output(fd.ops.gather(fd.ops.mul(x, 2.0), k, 1))
    fd.add_output(fd.ops.add(fd.ops.index_select(x, i, 0), 1j))


def _bn_ref(x, w, b, rm, rv):
    return [F.batch_norm(x.double(), rm.double(), rv.double(), w.double(), b.double(), False, 0.1,
                         1e-5).float(), torch.rsqrt(rv + 1e-5)]


@program("batch_norm_inference", lambda: [r(4, 3, 5, 5), r(3), r(3), r(3), r(3, low=0.5, high=2.0)],
         _bn_ref, 1e-5, 1e-5)
def _(fd):
    # nvFuser's batch_norm composite in eval mode (the running statistics normalize)
    x = sym(fd, 4)
    w, b, rm, rv = (sym(fd, 1) for _ in range(4))
    momentum = fd.define_scalar(0.1, dtype=DataType.Double)
    eps = fd.define_scalar(1e-5, dtype=DataType.Double)
    y, _, invstd = fd.ops.batch_norm(x, w, b, rm, rv, momentum, eps, False)
    fd.add_output(y)
    fd.add_output(invstd)


@program("embedding_backward_index_put",
         lambda: [r(50, 16), torch.randint(0, 50, (40,)), r(40, 16)],
         lambda acc, idx, g: [acc.index_put((idx,), g * 0.5, accumulate=True)], 1e-5, 1e-5)
def _(fd):
    # an embedding's weight gradient: token gradients summed into their rows
    acc, idx, g = sym(fd, 2), sym(fd, 1, D.Int), sym(fd, 2)
    fd.add_output(fd.ops.index_put_accumulate(acc, idx, fd.ops.mul(g, 0.5)))


def _moe_ref(x, w, offs):
    ends = [0] + offs.tolist()
    return [torch.cat([F.silu(x[s:e].double() @ w[i].double()) for i, (s, e) in
                       enumerate(zip(ends, ends[1:]))]).to(x.dtype)]


@program("moe_grouped_mm_silu",
         lambda: [r(24, 32, dtype=torch.bfloat16), r(3, 32, 16, dtype=torch.bfloat16),
                  torch.tensor([7, 7, 24], dtype=torch.int32)], _moe_ref, 2e-2, 2e-2)
def _(fd):
    # a mixture of experts' first layer: tokens sorted by expert, one matmul per expert
    x = sym(fd, 2, D.BFloat16)
    w = sym(fd, 3, D.BFloat16)
    offs = sym(fd, 1, D.Int32)
    h = fd.ops.cast(fd.ops.grouped_mm(x, w, offs), DataType.Float)
    fd.add_output(fd.ops.cast(fd.ops.silu(h), DataType.BFloat16))


@program("complex_of_parts_alpha_and_sizes", lambda: [r(3, 5), r(3, 5)],
         lambda a, b: [torch.complex(torch.add(a, b, alpha=0.5), torch.sub(a, b, alpha=2.0)) * 5,
                       torch.full((3,), 5.0)])
def _(fd):
    a, b = sym(fd, 2), sym(fd, 2)
    n = fd.ops.at(fd.ops.tensor_sizes(a), 1)
    z = fd.ops.complex(fd.ops.add_alpha(a, b, 0.5), fd.ops.sub_alpha(a, b, 2.0))
    fd.add_output(fd.ops.mul(z, n))
    fd.add_output(fd.ops.full([fd.ops.size(a, 0)], fd.ops.cast(n, DataType.Float), DataType.Float))


# ---------------------------------------------------------------- the runner

def _to(x):
    return x.to(DEV) if isinstance(x, torch.Tensor) else x


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program(name):
    build, make_inputs, reference, rtol, atol = PROGRAMS[name]
    torch.manual_seed(sum(map(ord, name)))
    inputs = make_inputs()
    with FusionDefinition() as fd:
        build(fd)
    outs = fd.execute([_to(x) for x in inputs], device=DEV)
    want = reference(*inputs)
    if name.startswith("seeded_uniform"):
        assert outs[0].min() >= -1 and outs[0].max() < 1 and outs[0].std() > 0.4
        (again,) = fd.execute([], device=DEV)
        assert torch.equal(outs[0], again)
        return
    if name == "dropout_seeded":
        x = inputs[0]
        got = outs[0].cpu()
        kept = got != 0
        torch.testing.assert_close(got[kept], x[kept] * 1.25)
        assert 0.6 < kept.float().mean() < 0.95
        return
    if name == "seed003_gelu_backward":
        g, x, b = inputs
        xb = x + b
        dx = g * (0.5 * (1 + torch.erf(xb / math.sqrt(2))) + xb * torch.exp(-0.5 * xb * xb) / math.sqrt(2 * math.pi))
        want = [dx, dx.sum((0, 1))]
        rtol, atol = 1e-5, 1e-5
    if name == "validate_form":
        fd.validate([_to(x) for x in inputs], [w.to(DEV) for w in want])
    assert len(outs) == len(want), (len(outs), len(want))
    for got, w in zip(outs, want):
        w = torch.as_tensor(w)
        assert got.dtype == w.dtype, (got.dtype, w.dtype)
        kw = {} if rtol is None else dict(rtol=rtol, atol=atol)
        torch.testing.assert_close(got.cpu(), w, equal_nan=True, **kw)


def test_there_are_at_least_100_programs():
    assert len(PROGRAMS) >= 100, len(PROGRAMS)


@pytest.mark.parametrize("declared_cpu", [True, False])
def test_zero_dim_cpu_scalar_tensor_beside_device_inputs(declared_cpu):
    """nvFuser's form: a 0-dim CPU tensor (declared is_cpu=True, or not) mixed
    with inputs on the run's device; its value is read on the host."""
    with FusionDefinition() as fd:
        s = fd.define_tensor(shape=[], contiguity=[], dtype=D.Float, is_cpu=declared_cpu)
        x = sym(fd, 2)
        fd.add_output(fd.ops.add(fd.ops.mul(x, s), s))
    x = r(4, 5).to(DEV)
    scale = torch.tensor(1.5)  # stays on the CPU
    (out,) = fd.execute([scale, x])
    assert out.device == x.device
    torch.testing.assert_close(out, x * 1.5 + 1.5)
