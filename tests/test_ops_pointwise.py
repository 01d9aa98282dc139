"""Pointwise ops of fd.ops (every entry of the unary and binary op tables, where,
cast, set, clamp, lerp), the Tensor/Scalar operator overloads and type
promotion, each compared with torch eager on random data."""
import cmath
import math
import warnings

import pytest
import torch

from hostir import DataType, FusionDefinition
from hostir.ir.errors import DefinitionError
from hostir.ir.node import Op
from hostir.ir.ops.pointwise import BINARY_TABLE as BINARY, UNARY_TABLE as UNARY
from ops_util import (ALL, COMPLEX, FLOATS, INTS, TORCH, UNARY_LAYOUTS, check, declare,
                      rand, relayout, run)

D = DataType
FI = FLOATS + INTS
FIB = ALL
BI = INTS + [D.Bool]
C = COMPLEX

# ------------------------------------------------------------------ unary

POS = dict(low=0.1, high=5.0, ints=(1, 30))
UNIT = dict(low=-0.95, high=0.95)
SMALL = dict(low=-2.0, high=2.0, ints=(-3, 4))
NZ = dict(nonzero=True)
ROUNDING = dict(low=-8.0, high=8.0)
SPECIAL = dict(special=True)

# op name -> (torch function, data domain, dtypes)
UNARY_TABLE = {
    "neg": (torch.neg, {}, FI + C),
    "abs": (torch.abs, {}, FI + C),
    "exp": (torch.exp, {}, FIB + C),
    "exp2": (torch.exp2, {}, FIB),
    "expm1": (torch.expm1, {}, FIB),
    "log": (torch.log, POS, FI + C),
    "log2": (torch.log2, POS, FI),
    "log10": (torch.log10, POS, FI),
    "log1p": (torch.log1p, dict(low=-0.9, high=4.0, ints=(0, 30)), FIB),
    "sqrt": (torch.sqrt, POS, FIB + C),
    "rsqrt": (torch.rsqrt, POS, FI + C),
    "reciprocal": (torch.reciprocal, NZ, FI + C),
    "tanh": (torch.tanh, {}, FIB + C),
    "sigmoid": (torch.sigmoid, {}, FIB),
    "relu": (torch.relu, {}, FI),
    "sin": (torch.sin, {}, FIB + C),
    "cos": (torch.cos, {}, FIB + C),
    "tan": (torch.tan, dict(low=-1.2, high=1.2, ints=(-1, 2)), FIB),
    "asin": (torch.asin, UNIT, FLOATS),
    "acos": (torch.acos, UNIT, FLOATS),
    "atan": (torch.atan, {}, FIB),
    "sinh": (torch.sinh, SMALL, FIB),
    "cosh": (torch.cosh, SMALL, FIB),
    "erf": (torch.erf, SMALL, FIB),
    "erfc": (torch.erfc, SMALL, FIB),
    "floor": (torch.floor, ROUNDING, FI),
    "ceil": (torch.ceil, ROUNDING, FI),
    "round": (torch.round, ROUNDING, FI),
    "trunc": (torch.trunc, ROUNDING, FI),
    "sign": (torch.sign, {}, FI),
    "isnan": (torch.isnan, SPECIAL, FIB + C),
    "isinf": (torch.isinf, SPECIAL, FIB + C),
    "isfinite": (torch.isfinite, SPECIAL, FIB + C),
    "logical_not": (torch.logical_not, SMALL, FIB + C),
    "bitwise_not": (torch.bitwise_not, {}, BI),
    "signbit": (torch.signbit, SPECIAL, FIB),
    "acosh": (torch.acosh, dict(low=1.0, high=6.0, ints=(1, 9)), FLOATS),
    "asinh": (torch.asinh, {}, FIB),
    "atanh": (torch.atanh, dict(low=-0.95, high=0.95, ints=(0, 1)), FLOATS),
    "erfinv": (torch.erfinv, dict(low=-0.95, high=0.95, ints=(0, 1)), FLOATS),
    # torch has no erfcinv: erfinv(1 - x) in float64 is accurate on [0.05, 1.95]
    "erfcinv": (lambda x: torch.special.erfinv(1 - x.double()).to(x.dtype),
                dict(low=0.05, high=1.95, ints=(0, 2)), FLOATS),
    "lgamma": (torch.lgamma, dict(low=0.1, high=8.0, ints=(1, 9)), FLOATS),
    "frac": (torch.frac, ROUNDING, FLOATS),
    "silu": (torch.nn.functional.silu, {}, FLOATS),
    "isneginf": (torch.isneginf, SPECIAL, FI),
    "isposinf": (torch.isposinf, SPECIAL, FI),
    # complex parts (fd.ops.real of a real tensor is a copy, as nvFuser's; imag takes complex only)
    "real": (torch.real, {}, FIB + C),
    "imag": (torch.imag, {}, C),
    "isreal": (torch.isreal, SPECIAL, FIB + C),
}


def data(shape, dtype, dom):
    dom = dict(dom)
    special = dom.pop("special", False)
    x = rand(shape, dtype, **dom)
    if special and (dtype.is_float or dtype.is_complex) and x.numel() >= 3:
        flat = x.view(-1)
        idx = torch.randperm(flat.numel())[:3]
        if dtype.is_complex:  # a NaN part, an infinite part, a real value
            flat[idx[0]] = complex(float("nan"), 1.5)
            flat[idx[1]] = complex(-2.0, float("inf"))
            flat[idx[2]] = complex(-0.75, 0.0)
            return x
        flat[idx[0]] = float("nan")
        flat[idx[1]] = float("inf")
        flat[idx[2]] = float("-inf")
    return x


OTHER_LAYOUTS = [((3, 5), "sym"), ((1, 5), "bcast"), ((5, 3), "strided"), ((4, 6), "transposed")]


def _unary_params():
    out = []
    for name, (_, _, dtypes) in sorted(UNARY_TABLE.items()):
        for dt in dtypes:
            for shape, decl in (UNARY_LAYOUTS if dt in (D.Float, D.ComplexFloat) else OTHER_LAYOUTS):
                out.append(pytest.param(name, dt, shape, decl,
                                        id=f"{name}-{dt.name}-{'x'.join(map(str, shape)) or 'scalar'}-{decl}"))
    return out


def test_unary_table_covers_every_unary_op():
    assert {op.value for op in UNARY} == set(UNARY_TABLE)
    for name in UNARY_TABLE:
        assert callable(getattr(FusionDefinition().ops, name))


@pytest.mark.parametrize("name,dtype,shape,decl", _unary_params())
def test_unary(name, dtype, shape, decl):
    fn, dom, _ = UNARY_TABLE[name]
    x = data(shape, dtype, dom)
    expected = fn(x)

    def build(fd):
        t = declare(fd, relayout(x, decl), decl)
        fd.add_output(getattr(fd.ops, name)(t))

    (out,) = run(build, [relayout(x, decl)])
    check(out, expected)


# ------------------------------------------------------------------ binary

def _floor_or_true_div(a, b):
    rt = torch.result_type(a, b)
    if rt.is_floating_point or rt.is_complex:
        return torch.div(a, b)
    return torch.div(a, b, rounding_mode="floor")


def _logical_right_shift(a, b):
    """a >> b shifting in zeros: through the same width unsigned (uint64 for
    int64, uint32 for int32), written independently of hostir's rule."""
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    rt = torch.result_type(a, b)
    bits = 8 * torch.empty((), dtype=rt).element_size()
    shape = torch.broadcast_shapes(a.shape, b.shape)
    out = []
    for x, s in zip(torch.broadcast_to(a.to(rt), shape).reshape(-1).tolist(),
                    torch.broadcast_to(b, shape).reshape(-1).tolist()):
        u = (x % (1 << bits)) >> s
        out.append(u - (1 << bits) if u >= 1 << (bits - 1) else u)
    return torch.tensor(out, dtype=rt).reshape(shape)


def _ceil_div(a, b):
    rt = torch.result_type(a, b)
    return torch.ceil(torch.as_tensor(a).double() / torch.as_tensor(b).double()).to(rt)


POW_BASE = dict(low=0.2, high=3.0, ints=(-5, 6))
POW_EXP = dict(low=-2.0, high=2.5, ints=(0, 4))
TIES = dict(ties=True)
SHIFT_L = dict(ints=(-100, 100))
SHIFT_R = dict(ints=(0, 8))

# op name -> (torch function, dtypes, lhs domain, rhs domain)
BINARY_TABLE = {
    "add": (torch.add, FIB + C, {}, {}),
    "sub": (torch.sub, FI + C, {}, {}),
    "mul": (torch.mul, FIB + C, {}, {}),
    "div": (_floor_or_true_div, FI + C, {}, NZ),
    "truediv": (torch.true_divide, FIB + C, {}, NZ),
    "fmod": (torch.fmod, FI, dict(low=-6.0, high=6.0), NZ),
    "remainder": (torch.remainder, FI, dict(low=-6.0, high=6.0), NZ),
    "pow": (torch.pow, FI, POW_BASE, POW_EXP),
    "atan2": (torch.atan2, FIB, {}, {}),
    "maximum": (torch.maximum, FIB, TIES, TIES),
    "minimum": (torch.minimum, FIB, TIES, TIES),
    "ceilDiv": (_ceil_div, INTS, {}, NZ),
    "lt": (torch.lt, FIB, TIES, TIES),
    "le": (torch.le, FIB, TIES, TIES),
    "gt": (torch.gt, FIB, TIES, TIES),
    "ge": (torch.ge, FIB, TIES, TIES),
    "eq": (torch.eq, FIB + C, TIES, TIES),
    "ne": (torch.ne, FIB + C, TIES, TIES),
    "logical_and": (torch.logical_and, FIB + C, TIES, TIES),
    "logical_or": (torch.logical_or, FIB + C, TIES, TIES),
    "logical_xor": (torch.logical_xor, FIB + C, TIES, TIES),
    "bitwise_and": (torch.bitwise_and, BI, {}, {}),
    "bitwise_or": (torch.bitwise_or, BI, {}, {}),
    "bitwise_xor": (torch.bitwise_xor, BI, {}, {}),
    "bitwise_left_shift": (torch.bitwise_left_shift, INTS, SHIFT_L, SHIFT_R),
    "bitwise_right_shift": (torch.bitwise_right_shift, INTS, SHIFT_L, SHIFT_R),
    "gcd": (torch.gcd, INTS, SHIFT_L, SHIFT_L),
    "logical_right_shift": (_logical_right_shift, INTS, SHIFT_L, SHIFT_R),
    "nextafter": (torch.nextafter, [D.Float, D.Double], TIES, TIES),
    "complex": (torch.complex, [D.Float, D.Double], {}, {}),
}
TENSORS_ONLY = {"complex"}  # (as torch.complex: no Python numbers, no mixed scalars)


def bdata(shape, dtype, dom):
    dom = dict(dom)
    ties = dom.pop("ties", False)
    if ties and dtype.is_complex:
        # few distinct parts so that comparisons see equal elements (and zeros)
        re, im = ((torch.randint(-1, 2, tuple(shape)) * 0.5).to(torch.float64) for _ in range(2))
        return torch.complex(re, im).to(TORCH[dtype])
    if ties and dtype is not D.Bool:
        # few distinct values so that comparisons see equal elements (and zeros)
        return (torch.randint(-3, 4, tuple(shape)).to(torch.float64) * 0.5).to(TORCH[dtype]) \
            if dtype.is_float else torch.randint(-3, 4, tuple(shape)).to(TORCH[dtype])
    return rand(shape, dtype, **dom)


def bscalar(dtype, dom):
    """A random Python number of `dtype`'s category, exactly representable in it."""
    return bdata((), dtype, dom).item()


def lift(v, other):
    """A python number as the 0-dim tensor of the dtype torch would promote it to."""
    if isinstance(v, torch.Tensor):
        return v
    return torch.tensor(v, dtype=torch.result_type(other, v))


# operand configurations: (lhs (shape, decl) or "scalar"/"scalar_input", rhs ...)
CONFIGS = {
    "same": (((3, 5), "sym"), ((3, 5), "sym")),
    "bcast_row": (((4, 5), "sym"), ((1, 5), "bcast")),
    "bcast_outer": (((4, 1), "bcast"), ((1, 5), "bcast")),
    "rank": (((2, 4, 3), "sym"), ((4, 3), "static")),
    "size1_sym": (((1, 5), "sym"), ((1, 5), "sym")),
    "noncontig": (((5, 3), "strided"), ((5, 3), "transposed")),
    "zero_dim": (((3, 4), "sym"), ((), "sym")),
    "scalar_rhs": (((3, 5), "sliced_fp"), "scalar"),
    "scalar_lhs": ("scalar", ((3, 5), "sym")),
    "scalar_input": (((3, 5), "sym"), "scalar_input"),
}
OTHER_CONFIGS = ["same", "bcast_row", "noncontig", "scalar_rhs", "scalar_lhs"]


def _binary_params():
    out = []
    for name, (_, dtypes, _, _) in sorted(BINARY_TABLE.items()):
        for dt in dtypes:
            for cfg in (CONFIGS if dt in (D.Float, D.ComplexFloat) else OTHER_CONFIGS):
                if name in TENSORS_ONLY and "scalar" in cfg:
                    continue
                out.append(pytest.param(name, dt, cfg, id=f"{name}-{dt.name}-{cfg}"))
    return out


def test_binary_table_covers_every_binary_op():
    assert {op.value for op in BINARY} == set(BINARY_TABLE)


def _operand(spec, dtype, dom):
    if spec in ("scalar", "scalar_input"):
        return bscalar(dtype, dom)
    shape, _ = spec
    return bdata(shape, dtype, dom)


def _declare_operand(fd, spec, value):
    if spec == "scalar":
        return value
    if spec == "scalar_input":
        return fd.define_scalar(None, dtype={bool: D.Bool, int: D.Int, float: D.Double,
                                             complex: D.ComplexDouble}[type(value)])
    return declare(fd, relayout(value, spec[1]), spec[1])


def _runtime(spec, value):
    if spec == "scalar":
        return None
    if spec == "scalar_input":
        return value
    return relayout(value, spec[1])


@pytest.mark.parametrize("name,dtype,cfg", _binary_params())
def test_binary(name, dtype, cfg):
    fn, _, dom_a, dom_b = BINARY_TABLE[name]
    spec_a, spec_b = CONFIGS[cfg]
    a = _operand(spec_a, dtype, dom_a)
    b = _operand(spec_b, dtype, dom_b)
    expected = fn(lift(a, b), lift(b, a))

    def build(fd):
        ha = _declare_operand(fd, spec_a, a)
        hb = _declare_operand(fd, spec_b, b)
        fd.add_output(getattr(fd.ops, name)(ha, hb))

    inputs = [v for v in (_runtime(spec_a, a), _runtime(spec_b, b)) if v is not None]
    (out,) = run(build, inputs)
    check(out, expected)


def test_div_integer_is_floor_division_and_float_is_true_division():
    a = torch.tensor([7, -7, 7, -7, 9, -1], dtype=torch.int32)
    b = torch.tensor([2, 2, -2, -2, 3, 4], dtype=torch.int32)
    (out,) = run(lambda fd: fd.add_output(fd.ops.div(declare(fd, a), declare(fd, b))), [a, b])
    check(out, torch.div(a, b, rounding_mode="floor"))
    assert out.tolist() == [3, -4, -4, 3, 3, -1]
    af, bf = a.float() + 0.25, b.float()
    (out,) = run(lambda fd: fd.add_output(fd.ops.div(declare(fd, af), declare(fd, bf))), [af, bf])
    check(out, af / bf)
    (out,) = run(lambda fd: fd.add_output(fd.ops.truediv(declare(fd, a), declare(fd, b))), [a, b])
    check(out, torch.true_divide(a, b))


# ------------------------------------------------------------------ half / bf16 rounding per op

@pytest.mark.parametrize("dtype", [D.Half, D.BFloat16])
def test_reduced_precision_rounds_after_every_op(dtype):
    x, y, z = (rand((64, 32), dtype) for _ in range(3))
    expected = ((x + y) * z - x) / (y + 4.0)          # torch eager rounds every op
    fused = ((x.float() + y.float()) * z.float() - x.float()) / (y.float() + 4.0)
    assert not torch.equal(expected, fused.to(TORCH[dtype])), "data too tame to tell the two apart"

    def build(fd):
        tx, ty, tz = (declare(fd, v) for v in (x, y, z))
        fd.add_output(fd.ops.div(fd.ops.sub(fd.ops.mul(fd.ops.add(tx, ty), tz), tx),
                                 fd.ops.add(ty, 4.0)))

    (out,) = run(build, [x, y, z])
    check(out, expected, rtol=0, atol=0)


# ------------------------------------------------------------------ type promotion

def _t(dtype, shape=(4,)):
    return rand(shape, dtype, low=0.5, high=3.0, ints=(1, 9))


PROMOTION = [
    # (op, lhs, rhs): lhs/rhs a DataType (tensor [4]), ("0d", DataType) (0-dim tensor), or a number
    ("mul", D.Int, 0.5),
    ("mul", D.Int32, 2),
    ("mul", D.BFloat16, 0.5),
    ("mul", D.Half, 3),
    ("add", D.Half, D.Float),
    ("add", D.Int32, D.Int),
    ("add", D.Bool, D.Int32),
    ("add", D.Bool, 3),
    ("mul", D.Bool, 0.5),
    ("add", D.Int32, D.Half),
    ("add", D.BFloat16, D.Half),
    ("add", D.Double, D.Float),
    ("sub", 1.5, D.Int32),
    ("lt", D.Half, 0.5),
    ("eq", D.Int32, D.Float),
    ("truediv", D.Int32, D.Int32),
    ("truediv", D.Half, 2),
    ("atan2", D.Int32, D.Int),
    ("pow", D.Int32, 2.0),
    ("maximum", D.Int32, D.BFloat16),
    ("bitwise_and", D.Int32, D.Bool),
    ("bitwise_or", D.Bool, 3),
    # 0-dim tensors rank below dimensioned tensors, above Python numbers (torch, nvFuser)
    ("add", D.Half, ("0d", D.Float)),
    ("add", D.Int32, ("0d", D.Int)),
    ("add", D.Int32, ("0d", D.Double)),
    ("mul", D.Bool, ("0d", D.Int32)),
    ("add", ("0d", D.Float), D.BFloat16),
    ("add", ("0d", D.Half), ("0d", D.Float)),
    ("mul", ("0d", D.Half), 2.5),
    ("mul", ("0d", D.Int32), 2.5),
    ("add", ("0d", D.Bool), ("0d", D.Int32)),
    ("add", ("0d", D.Int), D.Int32),
    # complex (torch's rules, which nvFuser follows): a float tensor keeps its precision
    ("mul", D.ComplexFloat, 2.5),
    ("mul", D.ComplexFloat, ("0d", D.Double)),
    ("add", D.ComplexFloat, D.Double),
    ("add", D.Float, D.ComplexDouble),
    ("add", D.ComplexFloat, D.Half),
    ("mul", D.Float, 1.5j),
    ("mul", D.Double, 1.5j),
    ("add", D.Int32, 2j),
    ("sub", 1.5j, D.BFloat16),
    ("add", D.Float, ("0d", D.ComplexDouble)),
    ("add", D.Int, ("0d", D.ComplexDouble)),
    ("add", ("0d", D.ComplexDouble), ("0d", D.Float)),
    ("eq", D.ComplexDouble, D.Float),
    ("truediv", D.Int32, D.ComplexFloat),
]


def _promo_value(spec):
    if isinstance(spec, DataType):
        return _t(spec)
    if isinstance(spec, tuple):
        return _t(spec[1], ())
    return spec


@pytest.mark.parametrize("name,lhs,rhs", PROMOTION,
                         ids=[f"{n}-{l}-{r}" for n, l, r in PROMOTION])
def test_type_promotion_matches_torch(name, lhs, rhs):
    fn = BINARY_TABLE[name][0]
    a, b = _promo_value(lhs), _promo_value(rhs)
    expected = fn(lift(a, b), lift(b, a))

    def build(fd):
        ha = declare(fd, a) if isinstance(a, torch.Tensor) else a
        hb = declare(fd, b) if isinstance(b, torch.Tensor) else b
        fd.add_output(getattr(fd.ops, name)(ha, hb))

    (out,) = run(build, [v for v in (a, b) if isinstance(v, torch.Tensor)])
    check(out, expected)


def test_zero_dim_double_operand_is_cast_to_the_result_type_first():
    x = rand((4096,), D.Float)
    y = torch.tensor(0.1234567890123, dtype=torch.float64)

    def build(fd):
        fd.add_output(fd.ops.add(declare(fd, x), declare(fd, y)))

    (out,) = run(build, [x, y])
    check(out, x + y, rtol=0, atol=0)   # torch: float32 result, y rounded to float32


@pytest.mark.parametrize("tdtype,sdtype,value", [
    (D.Int, D.Double, 0.75), (D.Half, D.Double, 0.75), (D.BFloat16, D.Int, 3),
    (D.Int32, D.Int, 5), (D.Bool, D.Double, 1.25), (D.Float, D.Bool, True),
])
def test_type_promotion_with_scalar_inputs(tdtype, sdtype, value):
    x = _t(tdtype)

    def build(fd):
        fd.add_output(fd.ops.mul(declare(fd, x), fd.define_scalar(None, dtype=sdtype)))

    (out,) = run(build, [x, value])
    check(out, torch.mul(x, value))


def test_unary_float_ops_promote_integers_to_float32():
    for dt in (D.Int, D.Int32, D.Bool):
        x = _t(dt)
        for name in ("exp", "sqrt", "sigmoid", "log1p"):
            (out,) = run(lambda fd: fd.add_output(getattr(fd.ops, name)(declare(fd, x))), [x])
            check(out, getattr(torch, name)(x))
            assert out.dtype == torch.float32


# ------------------------------------------------------------------ where

WHERE_CASES = [
    # (cond shape/decl, a, b) with a/b: (shape, decl, dtype) or a number
    (((3, 5), "sym"), ((3, 5), "sym", D.Float), ((3, 5), "sym", D.Float)),
    (((3, 5), "strided"), ((3, 5), "transposed", D.Half), ((3, 5), "sym", D.Half)),
    (((4, 1), "bcast"), ((1, 5), "bcast", D.Float), ((4, 5), "sym", D.Float)),
    (((1, 5), "bcast"), ((4, 5), "sym", D.Int32), 0.5),
    (((3, 5), "sym"), ((3, 5), "sym", D.Half), ((3, 5), "sym", D.Float)),
    (((3, 5), "sym"), ((3, 5), "sym", D.Int32), ((3, 5), "sym", D.Int)),
    (((3, 5), "sym"), ((3, 5), "sym", D.BFloat16), -2.5),
    (((3, 5), "sym"), 3, ((3, 5), "sym", D.Int32)),
    (((3, 5), "sym"), ((3, 5), "sym", D.Bool), ((3, 5), "sym", D.Bool)),
    (((2, 3, 4), "sym"), ((3, 4), "sym", D.Double), ((4,), "sym", D.Double)),
    (((3, 5), "sym"), ((3, 5), "sym", D.Half), ((), "sym", D.Float)),
    (((3, 5), "sym"), 1.5, -2.5),
    (((3, 5), "sym"), 1, 2),
    (((3, 5), "sym"), True, False),
    (((3, 5), "sym"), ((3, 5), "sym", D.ComplexFloat), ((3, 5), "strided", D.ComplexFloat)),
    (((4, 1), "bcast"), ((1, 5), "bcast", D.ComplexDouble), 2.5),
    (((3, 5), "sym"), ((3, 5), "transposed", D.Float), 1.5j),
    (((3, 5), "sym"), ((3, 5), "sym", D.ComplexFloat), ((3, 5), "sym", D.Double)),
    (((3, 5), "sym"), 1.5j, -2j),
]


@pytest.mark.parametrize("cond,a,b", WHERE_CASES, ids=[str(i) for i in range(len(WHERE_CASES))])
def test_where(cond, a, b):
    c = rand(cond[0], D.Bool)
    vals = [rand(v[0], v[2]) if isinstance(v, tuple) else v for v in (a, b)]
    expected = torch.where(c, *vals)

    def build(fd):
        hs = [declare(fd, relayout(c, cond[1]), cond[1])]
        for spec, v in zip((a, b), vals):
            hs.append(declare(fd, relayout(v, spec[1]), spec[1]) if isinstance(spec, tuple) else v)
        fd.add_output(fd.ops.where(*hs))

    inputs = [relayout(c, cond[1])] + [relayout(v, s[1]) for s, v in zip((a, b), vals)
                                        if isinstance(s, tuple)]
    (out,) = run(build, inputs)
    check(out, expected)


def test_where_with_scalar_condition():
    x, y = rand((3, 4), D.Float), rand((3, 4), D.Float)
    for flag in (True, False):
        def build(fd):
            s = fd.define_scalar(None, dtype=D.Bool)
            fd.add_output(fd.ops.where(s, declare(fd, x), declare(fd, y)))
        (out,) = run(build, [flag, x, y])
        check(out, torch.where(torch.tensor(flag), x, y))


# ------------------------------------------------------------------ cast, set

@pytest.mark.parametrize("src", ALL + COMPLEX, ids=lambda d: d.name)
@pytest.mark.parametrize("dst", ALL + COMPLEX, ids=lambda d: d.name)
def test_cast(src, dst):
    """Casts as torch's: a real value becomes a complex one's real part; a
    complex value cast to a real type keeps its real part (to Bool: nonzero)."""
    x = rand((4, 6), src, low=-100.0, high=100.0, ints=(-1000, 1000))
    if dst is D.Bool and src.is_inexact:
        x[0, :3] = 0  # some exact zeros so that the cast sees both values
        if src.is_complex:
            x[0, 3] = 2j  # nonzero with a zero real part: True
    xs = relayout(x, "transposed")

    def build(fd):
        fd.add_output(fd.ops.cast(declare(fd, xs, "transposed"), dst))

    (out,) = run(build, [xs])
    with warnings.catch_warnings():  # torch warns that complex to real drops the imaginary part
        warnings.simplefilter("ignore")
        expected = x.to(TORCH[dst])
    check(out, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ALL + COMPLEX, ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["set", "segment_set"])
def test_set(op, dtype):
    x = rand((3, 5), dtype)
    xs = relayout(x, "strided")
    (out,) = run(lambda fd: fd.add_output(getattr(fd.ops, op)(declare(fd, xs, "strided"))), [xs])
    check(out, x, rtol=0, atol=0)


def test_cast_chain_matches_torch():
    x = rand((5, 7), D.Float)
    (out,) = run(lambda fd: fd.add_output(
        fd.ops.cast(fd.ops.mul(fd.ops.cast(declare(fd, x), D.BFloat16), 3.0), D.Half)), [x])
    check(out, (x.to(torch.bfloat16) * 3.0).to(torch.float16), rtol=0, atol=0)


# ------------------------------------------------------------------ clamp, lerp

@pytest.mark.parametrize("dtype", FI, ids=lambda d: d.name)
@pytest.mark.parametrize("bounds", [(-1, 1), (None, 0.5), (-0.5, None)], ids=str)
def test_clamp(dtype, bounds):
    x = rand((4, 6), dtype, low=-3, high=3, ints=(-5, 5))
    lo, hi = bounds
    if dtype.is_int:
        lo = None if lo is None else int(lo - 1)
        hi = None if hi is None else int(hi + 2)
    (out,) = run(lambda fd: fd.add_output(fd.ops.clamp(declare(fd, x), lo, hi)), [x])
    check(out, torch.clamp(x, lo, hi))


@pytest.mark.parametrize("dtype", [D.Float, D.Double], ids=lambda d: d.name)
@pytest.mark.parametrize("weight", ["scalar", "tensor"])
def test_lerp(dtype, weight):
    a, b = rand((4, 6), dtype), rand((4, 6), dtype)
    w = rand((1, 6), dtype, low=0.0, high=1.0) if weight == "tensor" else 0.375

    def build(fd):
        ha, hb = declare(fd, a), declare(fd, b)
        hw = declare(fd, w, "bcast") if weight == "tensor" else w
        fd.add_output(fd.ops.lerp(ha, hb, hw))

    (out,) = run(build, [a, b] + ([w] if weight == "tensor" else []))
    check(out, torch.lerp(a, b, w), rtol=1e-5 if dtype is D.Float else 1e-12)


# ------------------------------------------------------------------ scalar-only ops

def _torch0(v):
    return torch.tensor(v, dtype={bool: torch.bool, int: torch.int64, float: torch.float64}[type(v)])


SCALAR_UNARY_VALUES = {
    "log": 2.75, "log2": 2.75, "log10": 2.75, "log1p": 0.375, "sqrt": 2.75, "rsqrt": 2.75,
    "asin": 0.3125, "acos": -0.3125, "reciprocal": -1.25,
}


@pytest.mark.parametrize("name", sorted(n for n, (_, _, dts) in UNARY_TABLE.items() if D.Double in dts))
def test_scalar_unary(name):
    v = SCALAR_UNARY_VALUES.get(name, float(torch.empty(()).uniform_(-2.5, 2.5)))
    fn = UNARY_TABLE[name][0]
    expected = fn(torch.tensor(v, dtype=torch.float64))

    def build(fd):
        r = getattr(fd.ops, name)(fd.define_scalar(None, dtype=D.Double))
        fd.add_output(fd.ops.full([2], r, dtype=r.dtype))

    (out,) = run(build, [v])
    check(out, expected.expand(2))


@pytest.mark.parametrize("value", [True, False])
def test_scalar_bitwise_not_of_bool(value):
    def build(fd):
        r = fd.ops.bitwise_not(fd.define_scalar(None, dtype=D.Bool))
        assert r.dtype is D.Bool
        fd.add_output(fd.ops.full([2], r, dtype=D.Bool))

    (out,) = run(build, [value])
    check(out, torch.bitwise_not(torch.tensor(value)).expand(2))


@pytest.mark.parametrize("value", [-7, 6, 0])
def test_scalar_integer_unary(value):
    for name in ("neg", "abs", "sign", "bitwise_not", "relu"):
        def build(fd):
            r = getattr(fd.ops, name)(fd.define_scalar(None, dtype=D.Int))
            fd.add_output(fd.ops.full([1], r, dtype=r.dtype))
        (out,) = run(build, [value])
        check(out, getattr(torch, name)(torch.tensor([value])))


SCALAR_BINARY = [
    # (name, a, b); ints use floor division for div, as the tensor op does
    ("add", 2.5, -1.25), ("sub", 2.5, 4.0), ("mul", -1.5, 2.25), ("div", 7.0, -2.0),
    ("div", 7, -2), ("div", -7, 2), ("div", 9, 3), ("truediv", 7, 2), ("fmod", -7, 3),
    ("fmod", 7.5, -2.0), ("remainder", -7, 3), ("remainder", 7.5, -2.0), ("pow", 3, 4),
    ("pow", 2.5, -1.5), ("atan2", -1.0, 2.0), ("maximum", 3, -4), ("minimum", 2.5, -0.5),
    ("ceilDiv", 7, 2), ("ceilDiv", -7, 2), ("lt", 2, 3), ("ge", 2.5, 2.5), ("eq", 3, 3),
    ("ne", 1.0, 2.0), ("le", 4, 3), ("gt", -1.5, -2.5), ("logical_and", True, False),
    ("logical_or", 0, 3), ("logical_xor", True, True), ("bitwise_and", 12, 10),
    ("bitwise_or", 12, 3), ("bitwise_xor", True, False), ("bitwise_left_shift", 3, 4),
    ("bitwise_right_shift", -64, 3), ("add", 3, 0.5), ("mul", True, 4), ("div", 7, 2.0),
]


@pytest.mark.parametrize("name,a,b", SCALAR_BINARY, ids=[f"{n}-{a}-{b}" for n, a, b in SCALAR_BINARY])
def test_scalar_binary(name, a, b):
    fn = BINARY_TABLE[name][0]
    ta, tb = _torch0(a), _torch0(b)
    # scalar arithmetic runs in Double (any float operand, or a float-valued op), else Int
    if BINARY[Op(name)][0].value == "float" or any(isinstance(v, float) for v in (a, b)):
        ta, tb = ta.double(), tb.double()
    elif any(type(v) is int for v in (a, b)):
        ta, tb = ta.long(), tb.long()
    expected = fn(ta, tb)

    def build(fd):
        dt = {bool: D.Bool, int: D.Int, float: D.Double}
        sa = fd.define_scalar(None, dtype=dt[type(a)])
        sb = fd.define_scalar(None, dtype=dt[type(b)])
        r = getattr(fd.ops, name)(sa, sb)
        fd.add_output(fd.ops.full([3], r, dtype=r.dtype))

    (out,) = run(build, [a, b])
    check(out, expected.expand(3))


def test_scalar_constant_folding_matches_runtime():
    # the same expression with constants (folded at definition) and with inputs
    def build(fd, x, y):
        r = fd.ops.add(fd.ops.mul(x, y), fd.ops.div(y, x))
        fd.add_output(fd.ops.full([1], r, dtype=D.Int))

    def build_const(fd):
        build(fd, fd.define_scalar(-7), fd.define_scalar(3))

    def build_input(fd):
        build(fd, fd.define_scalar(None, dtype=D.Int), fd.define_scalar(None, dtype=D.Int))

    expected = torch.tensor([-7 * 3 + (3 // -7)])
    check(run(build_const, [])[0], expected)
    check(run(build_input, [-7, 3])[0], expected)


@pytest.mark.parametrize("value", [2.75, -2.75, 0.5])
def test_scalar_cast_to_int_truncates(value):
    def build(fd):
        r = fd.ops.cast(fd.define_scalar(None, dtype=D.Double), D.Int)
        fd.add_output(fd.ops.full([1], r, dtype=D.Int))

    (out,) = run(build, [value])
    check(out, torch.tensor([value], dtype=torch.float64).to(torch.int64))


def test_tensor_times_scalar_expression():
    x = rand((3, 4), D.Float)
    s0, s1 = 1.75, -0.5

    def build(fd):
        t = declare(fd, x)
        a, b = fd.define_scalar(None, dtype=D.Double), fd.define_scalar(None, dtype=D.Double)
        fd.add_output(fd.ops.mul(t, fd.ops.sqrt(fd.ops.add(fd.ops.mul(a, a), b))))

    (out,) = run(build, [x, s0, s1])
    check(out, x * math.sqrt(s0 * s0 + s1))


# ------------------------------------------------------------------ operator overloads

OVERLOADS = [
    # (expression on (a, b) shared by torch and hostir handles, dtypes, b kind)
    ("a + b", FIB, "tensor"), ("a - b", FI, "tensor"), ("a * b", FIB, "tensor"),
    ("a ** b", FLOATS, "tensor"), ("-a", FI, "tensor"), ("abs(a)", FI, "tensor"),
    ("a + 2", FI, "number"), ("3 + a", FI, "number"), ("a - 2", FI, "number"),
    ("3 - a", FI, "number"), ("a * 3", FI, "number"), ("2 * a", FI, "number"),
    ("a ** 2", FI, "number"), ("a + 1.5", FI, "number"), ("2.5 * a", FI, "number"),
    ("(a + b) * (a - b)", FLOATS, "tensor"), ("a / b", FLOATS, "tensor"),
    ("a / 4.0", FLOATS, "number"), ("2.0 / a", FLOATS, "number"),
]


def _ov_params():
    return [pytest.param(e, dt, k, id=f"{e}-{dt.name}") for e, dts, k in OVERLOADS for dt in dts]


@pytest.mark.parametrize("expr,dtype,kind", _ov_params())
def test_operator_overloads(expr, dtype, kind):
    pos = "**" in expr or "/" in expr
    a = rand((3, 5), dtype, low=0.5 if pos else -3.0, high=3.0, ints=(0, 4) if pos else (-20, 20))
    b = rand((1, 5), dtype, low=0.5 if pos else -3.0, high=2.0, ints=(0, 3) if pos else (-20, 20))
    expected = eval(expr, {"a": a, "b": b, "abs": abs})

    def build(fd):
        ha, hb = declare(fd, a), declare(fd, b, "bcast")
        fd.add_output(eval(expr, {"a": ha, "b": hb, "abs": abs}))

    (out,) = run(build, [a, b])
    check(out, expected)


def test_operator_truediv_on_integers_is_div():
    # hostir maps `/` to fd.ops.div as nvFuser does; on integers div floors
    a = rand((3, 5), D.Int32)
    b = rand((3, 5), D.Int32, nonzero=True)
    (out,) = run(lambda fd: fd.add_output(declare(fd, a) / declare(fd, b)), [a, b])
    check(out, torch.div(a, b, rounding_mode="floor"))


def test_operator_overloads_on_scalars():
    x = rand((2, 3), D.Float)

    def build(fd):
        t = declare(fd, x)
        s, u = fd.define_scalar(None, dtype=D.Double), fd.define_scalar(None, dtype=D.Int)
        e = (s + u) * 2 - s / 4.0 + (-u) + abs(s) ** 2
        fd.add_output(t * e)

    s, u = -1.25, 3
    (out,) = run(build, [x, s, u])
    check(out, x * ((s + u) * 2 - s / 4.0 + (-u) + abs(s) ** 2))


NVFUSER_OVERLOADS = [
    # nvFuser's Tensor also has these; (expression, dtypes)
    ("a % b", [D.Int32, D.Float]), ("a < b", [D.Int32, D.Half]), ("a <= b", [D.Int32, D.Float]),
    ("a > b", [D.Int, D.Float]), ("a >= b", [D.Int32, D.BFloat16]), ("a == b", [D.Int32, D.Float]),
    ("a != b", [D.Int32, D.Float]), ("a & b", [D.Int32, D.Bool]), ("a | b", [D.Int, D.Bool]),
    ("a ^ b", [D.Int32, D.Bool]), ("a << b", [D.Int32]), ("a >> b", [D.Int]),
    ("2 ** a", [D.Int32, D.Float]), ("~a", [D.Int32, D.Bool]), ("a < 2", [D.Float]),
    ("a == 3", [D.Int32]),
]


@pytest.mark.parametrize("expr,dtype", [pytest.param(e, dt, id=f"{e}-{dt.name}")
                                        for e, dts in NVFUSER_OVERLOADS for dt in dts])
def test_nvfuser_operator_overloads(expr, dtype):
    # few distinct positive values: ties for comparisons, valid shifts and powers
    a = rand((3, 5), dtype, low=0.5, high=4.0, ints=(1, 6))
    b = rand((3, 5), dtype, low=0.5, high=4.0, ints=(1, 4))
    if dtype.is_float:
        a, b = a.round(), b.round()
    expected = eval(expr, {"a": a, "b": b})

    def build(fd):
        fd.add_output(eval(expr, {"a": declare(fd, a), "b": declare(fd, b)}))

    (out,) = run(build, [a, b])
    check(out, expected)


def test_ops_reject_float_operands_for_integral_ops():
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1], dtype=D.Float)
        with pytest.raises(DefinitionError):
            fd.ops.bitwise_and(t, t)
        fd.add_output(t)


# nvFuser ops added for parity (issue 12): gcd, nextafter, addcmul, triu.
@pytest.mark.parametrize("shape", [(3, 4), (1, 7), (0, 5), (2, 3, 4)])
def test_gcd_nextafter_addcmul(shape):
    a, b = (torch.randint(-60, 60, shape) for _ in range(2))
    x, y = rand(shape, D.Float), rand(shape, D.Float)
    x.view(-1)[:1] = 0.0  # nextafter from zero: the smallest subnormal

    def build(fd):
        ta, tb = declare(fd, a), declare(fd, b)
        tx, ty = declare(fd, x), declare(fd, y)
        fd.add_output(fd.ops.gcd(ta, tb))
        fd.add_output(fd.ops.nextafter(tx, ty))
        fd.add_output(fd.ops.addcmul(tx, ty, tx, value=0.5))
    g, nxt, acm = run(build, [a, b, x, y])
    assert torch.equal(g.cpu(), torch.gcd(a, b))
    assert torch.equal(nxt.cpu(), torch.nextafter(x, y))
    check(acm, torch.addcmul(x.double(), y.double(), x.double(), value=0.5).float())


def test_nextafter_of_bfloat16_is_refused():
    x = rand((3,), D.BFloat16)
    with pytest.raises(DefinitionError, match="nextafter: operands must be float or double"):
        run(lambda fd: fd.add_output(fd.ops.nextafter(declare(fd, x), declare(fd, x))), [x])


@pytest.mark.parametrize("offset", [0, 1, -2, 9])
@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16, D.Int, D.Bool], ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 6), (1, 1), (5, 0)])
def test_triu(shape, dtype, offset):
    x = rand(shape, dtype)
    if dtype.is_float and x.numel() > 2:
        x.view(-1)[0], x.view(-1)[-1] = float("inf"), float("nan")
    (out,) = run(lambda fd: fd.add_output(fd.ops.triu(declare(fd, x), offset)), [x])
    assert out.dtype == x.dtype
    torch.testing.assert_close(out.cpu(), torch.triu(x, offset), equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16, D.Int32], ids=lambda d: d.short)
def test_threshold(dtype):
    x = rand((6, 9), dtype)

    def build(fd):
        fd.add_output(fd.ops.threshold(declare(fd, x), 0.5, -2.0 if dtype.is_float else -2))
    (out,) = run(build, [x])
    check(out, torch.nn.functional.threshold(x, 0.5, -2.0 if dtype.is_float else -2))


@pytest.mark.parametrize("dtype", [D.Float, D.Int, D.Int32], ids=lambda d: d.short)
def test_mod_is_cpp_remainder(dtype):
    """nvFuser's mod: the sign of the dividend (C++ %, torch.fmod)."""
    a, b = rand((5, 7), dtype, nonzero=True), rand((5, 7), dtype, nonzero=True)

    def build(fd):
        fd.add_output(fd.ops.mod(declare(fd, a), declare(fd, b)))
    (out,) = run(build, [a, b])
    check(out, torch.fmod(a, b))


# erfcinv where erfinv(1 - x) cannot check it (tiny x: 1 - x rounds to 1), the
# expected values from mpmath at 60 digits; the edges of its domain; out of it NaN
ERFCINV_KNOWN = [(0.25, 0.8134198475976185416903), (0.5, 0.4769362762044698733814),
                 (1.5, -0.4769362762044698733814), (1.75, -0.8134198475976185416903),
                 (2.0 ** -20, 3.465505025803330717256), (2.0 ** -100, 8.16304891921745198872),
                 (0.0, math.inf), (1.0, 0.0), (2.0, -math.inf), (-0.5, math.nan), (2.5, math.nan),
                 (math.nan, math.nan)]


@pytest.mark.parametrize("dtype", [D.Double, D.Float, D.BFloat16], ids=lambda d: d.name)
def test_erfcinv_known_values(dtype):
    known = ERFCINV_KNOWN + ([(2.0 ** -1000, 26.25464242249640974712)] if dtype is D.Double else [])
    x = torch.tensor([k for k, _ in known], dtype=TORCH[dtype])
    want = torch.tensor([v for _, v in known], dtype=torch.float64).to(TORCH[dtype])
    (out,) = run(lambda fd: fd.add_output(fd.ops.erfcinv(declare(fd, x))), [x])
    rtol = {D.Double: 1e-14, D.Float: 2e-6}.get(dtype, 8e-3)
    check(out, want, rtol=rtol, atol=0)


def test_erfcinv_of_a_scalar_folds_to_the_same_value():
    with FusionDefinition() as fd:
        s = fd.ops.erfcinv(fd.define_scalar(0.5))
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=D.Double)
        fd.add_output(fd.ops.add(t, s))
    x = rand((3,), D.Double)
    (out,) = fd.execute([x])
    check(out, x + 0.4769362762044698733814)


# ------------------------------------------------------------------ complex

COMPLEX_LAYOUTS = [((7,), "sym"), ((0,), "sym"), ((3, 0, 5), "sym"), ((1, 1), "bcast"),
                   ((5, 1, 3), "bcast"), ((13, 17), "strided"), ((9, 11), "transposed"),
                   ((6, 5), "sliced_fp"), ((2, 3, 5, 7), "static"), ((1, 9), "sym"), ((), "sym")]


@pytest.mark.parametrize("dtype", COMPLEX, ids=lambda d: d.name)
@pytest.mark.parametrize("shape,decl", COMPLEX_LAYOUTS,
                         ids=[f"{'x'.join(map(str, s)) or 'scalar'}-{d}" for s, d in COMPLEX_LAYOUTS])
def test_complex_expression(dtype, shape, decl):
    """A fused complex expression (odd, size-1 and empty extents, strided views)."""
    a, b = rand(shape, dtype), rand(shape, dtype)
    r = rand(shape[-1:], D.Float)
    expected = [torch.exp(a) * b - torch.sqrt(a) / (b + 1j) + a.abs() * torch.tanh(b),
                torch.reciprocal(torch.sin(a) + torch.cos(b)) * r, (a * r).real, (a - b).imag]

    def build(fd):
        ta, tb = declare(fd, relayout(a, decl), decl), declare(fd, relayout(b, decl), decl)
        tr = declare(fd, r)
        o = fd.ops
        fd.add_output(o.add(o.sub(o.mul(o.exp(ta), tb), o.div(o.sqrt(ta), o.add(tb, 1j))),
                            o.mul(o.abs(ta), o.tanh(tb))))
        fd.add_output(o.mul(o.reciprocal(o.add(o.sin(ta), o.cos(tb))), tr))
        fd.add_output(o.real(o.mul(ta, tr)))
        fd.add_output(o.imag(o.sub(ta, tb)))

    outs = run(build, [relayout(a, decl), relayout(b, decl), r])
    for out, e in zip(outs, expected):
        check(out, e)


@pytest.mark.parametrize("value", [1.5 - 0.25j, -2j, 3 + 0j])
def test_complex_scalars(value):
    """Complex scalar inputs and constants (define_scalar(complex)): their
    arithmetic runs in complex128, a complex64 tensor times one stays complex64."""
    x = rand((3, 4), D.ComplexFloat)
    e = value * (0.5 + 2j) + cmath.exp(value)

    def build(fd):
        s = fd.define_scalar(None, dtype=D.ComplexDouble)
        c = fd.define_scalar(0.5 + 2j)
        assert c.dtype is D.ComplexDouble
        k = fd.ops.mul(fd.define_scalar(1 + 2j), fd.define_scalar(3j, dtype=D.ComplexFloat))
        assert k.dtype is D.ComplexDouble
        es = fd.ops.add(fd.ops.mul(s, c), fd.ops.exp(s))
        fd.add_output(fd.ops.mul(declare(fd, x), es))
        fd.add_output(fd.ops.full([2], fd.ops.abs(s), dtype=D.Double))
        fd.add_output(fd.ops.full([2], k, dtype=D.ComplexDouble))
        fd.add_output(fd.ops.full([2], fd.ops.imag(es), dtype=D.Float))

    out, ab, k, im = run(build, [value, x])
    check(out, x * e)
    check(ab, torch.full((2,), abs(value), dtype=torch.float64))
    check(k, torch.full((2,), (1 + 2j) * 3j, dtype=torch.complex128))
    check(im, torch.full((2,), e.imag, dtype=torch.float32))


def test_real_of_a_real_tensor_is_a_copy_and_imag_needs_complex():
    """nvFuser's real and imag: real of a real tensor is set (a new tensor);
    imag of one is refused."""
    x = rand((3, 4), D.Float)
    (out,) = run(lambda fd: fd.add_output(fd.ops.real(declare(fd, x))), [x])
    check(out, x, rtol=0, atol=0)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1], dtype=D.Float)
        with pytest.raises(DefinitionError, match=r"imag: T0 \(float.*not complex"):
            fd.ops.imag(t)
        fd.add_output(t)


# ops torch does not define on complex values (or hostir does not build for them):
# (op name, the call on a complex tensor t, words of the message)
COMPLEX_REFUSED = [
    ("lt", lambda o, t: o.lt(t, t), "no order"),
    ("ge", lambda o, t: o.ge(t, 0.5), "no order"),
    ("maximum", lambda o, t: o.maximum(t, t), "no order"),
    ("maximum", lambda o, t: o.clamp(t, 0.0, 1.0), "no order"),
    ("floor", lambda o, t: o.floor(t), "floor is not defined for complex values"),
    ("sign", lambda o, t: o.sign(t), "not defined for complex"),
    ("relu", lambda o, t: o.relu(t), "not defined for complex"),
    ("erf", lambda o, t: o.erf(t), "not defined for complex"),
    ("pow", lambda o, t: o.pow(t, 2.0), "not defined for complex"),
    ("atan2", lambda o, t: o.atan2(t, t), "not defined for complex"),
    ("fmod", lambda o, t: o.fmod(t, 2.0), "not defined for complex"),
    ("bitwise_and", lambda o, t: o.bitwise_and(t, t), "not defined for complex"),
    ("isposinf", lambda o, t: o.isposinf(t), "not defined for complex"),
]


@pytest.mark.parametrize("name,call,words", COMPLEX_REFUSED,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(COMPLEX_REFUSED)])
def test_ops_not_defined_on_complex_are_refused(name, call, words):
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1], dtype=D.ComplexFloat)
        with pytest.raises(DefinitionError) as err:
            call(fd.ops, t)
        msg = str(err.value)
        assert msg.startswith(f"{name}: T0 (cfloat[") and "is complex" in msg and words in msg, msg
        fd.add_output(t)


def test_complex_scalar_operand_is_named_when_refused():
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1], dtype=D.Float)
        with pytest.raises(DefinitionError, match=r"lt: 1j \(cdouble\) is complex; complex numbers "
                                                  r"have no order"):
            fd.ops.lt(t, 1j)
        fd.add_output(t)


@pytest.mark.parametrize("dtype", [D.Half, D.BFloat16], ids=lambda d: d.name)
def test_complex_promotion_torch_lacks_a_type_for_is_refused(dtype):
    """torch makes complex32 of a Half tensor and a complex scalar; hostir (as
    nvFuser) has no complex32. (torch gives complex64 for BFloat16.)"""
    x = rand((3,), dtype)
    if dtype is D.Half:
        with FusionDefinition() as fd:
            t = declare(fd, x)
            with pytest.raises(DefinitionError, match="mul: type promotion .* half tensor .*complex32"):
                fd.ops.mul(t, 1j)
            fd.add_output(t)
        return
    (out,) = run(lambda fd: fd.add_output(fd.ops.mul(declare(fd, x), 1j)), [x])
    check(out, x * 1j)


# ------------------------------------------------------------------ complex, add_alpha, sub_alpha

@pytest.mark.parametrize("dtype", [D.Float, D.Double], ids=lambda d: d.name)
@pytest.mark.parametrize("shape,decl", [((13, 17), "strided"), ((9, 11), "transposed"), ((1, 5), "bcast"),
                                        ((0, 3), "sym"), ((2, 3, 4), "static")], ids=str)
def test_complex_of_parts_keeps_each_part_in_place(dtype, shape, decl):
    """fd.ops.complex (torch.complex): infinite and NaN parts stay where they
    are (re + im * 1j would turn 0 * inf into a NaN real part); the result
    feeds complex arithmetic in the same kernel."""
    re, im = rand(shape, dtype), rand(shape, dtype)
    if re.numel() >= 4:
        re.view(-1)[0], im.view(-1)[1] = float("nan"), float("inf")
        re.view(-1)[2], im.view(-1)[3] = float("-inf"), float("nan")

    def build(fd):
        tr, ti = declare(fd, relayout(re, decl), decl), declare(fd, relayout(im, decl), decl)
        z = fd.ops.complex(tr, ti)
        fd.add_output(z)
        fd.add_output(fd.ops.mul(fd.ops.add(z, 1.0), z))
        fd.add_output(fd.ops.imag(z))

    z, w, back = run(build, [relayout(re, decl), relayout(im, decl)])
    ref = torch.complex(re, im)
    assert z.dtype == ref.dtype
    assert torch.equal(torch.view_as_real(z).isnan(), torch.view_as_real(ref).isnan())
    check(z, ref, rtol=0, atol=0)
    check(w, (ref + 1.0) * ref)
    check(back, im, rtol=0, atol=0)


def test_complex_scalars_and_refusals():
    """Complex scalars from two Double scalars; torch.complex's rules refuse
    mixed dtypes, non-float parts, a tensor with a scalar and complex parts."""
    x = rand((3, 4), D.ComplexDouble)

    def build(fd):
        s = fd.ops.complex(fd.define_scalar(None, dtype=D.Double), fd.define_scalar(-0.5))
        assert s.dtype is D.ComplexDouble
        fd.add_output(fd.ops.mul(declare(fd, x), s))

    (out,) = run(build, [2.0, x])
    check(out, x * complex(2.0, -0.5))
    with FusionDefinition() as fd:
        f, d = fd.define_tensor([-1], dtype=D.Float), fd.define_tensor([-1], dtype=D.Double)
        i, c = fd.define_tensor([-1], dtype=D.Int), fd.define_tensor([-1], dtype=D.ComplexFloat)
        h = fd.define_tensor([-1], dtype=D.Half)
        with pytest.raises(DefinitionError, match="complex: parts must have the same dtype, got float and double"):
            fd.ops.complex(f, d)
        with pytest.raises(DefinitionError, match=r"complex: real part T2 \(int64.*expected float or double"):
            fd.ops.complex(i, i)
        with pytest.raises(DefinitionError, match="complex: imag part .* is cfloat"):
            fd.ops.complex(f, c)
        with pytest.raises(DefinitionError, match="complex: real part .* is half"):
            fd.ops.complex(h, h)
        with pytest.raises(DefinitionError, match="both tensors or both scalars"):
            fd.ops.complex(d, 1.5)
        fd.add_output(f)


ALPHA_CASES = [  # (dtype, alpha, operand layouts)
    (D.Float, 0.3, ("sym", "sym")), (D.Float, -2, ("strided", "transposed")), (D.Double, 1.5, ("sym", "bcast")),
    (D.Half, 0.7, ("sym", "sym")), (D.BFloat16, -1.25, ("transposed", "sym")), (D.Int, 3, ("sym", "strided")),
    (D.Int32, -2, ("sym", "sym")), (D.ComplexFloat, 0.5 - 1j, ("sym", "sym")),
]


@pytest.mark.parametrize("op", ["add_alpha", "sub_alpha"])
@pytest.mark.parametrize("dtype,alpha,decls", ALPHA_CASES, ids=str)
@pytest.mark.parametrize("alpha_kind", ["number", "scalar_input"])
def test_add_sub_alpha(op, dtype, alpha, decls, alpha_kind):
    """nvFuser's add_alpha / sub_alpha against torch.add / torch.sub(alpha=):
    the operands' promoted type, alpha a number or a scalar input."""
    shape_b = (1, 7) if decls[1] == "bcast" else (5, 7)
    a, b = rand((5, 7), dtype), rand(shape_b, dtype)
    fn = torch.add if op == "add_alpha" else torch.sub
    expected = fn(a, b, alpha=alpha)

    def build(fd):
        ta, tb = declare(fd, relayout(a, decls[0]), decls[0]), declare(fd, relayout(b, decls[1]), decls[1])
        k = alpha if alpha_kind == "number" else fd.define_scalar(
            None, dtype={int: D.Int, float: D.Double, complex: D.ComplexDouble}[type(alpha)])
        fd.add_output(getattr(fd.ops, op)(ta, tb, k))

    inputs = [relayout(a, decls[0]), relayout(b, decls[1])] + ([alpha] if alpha_kind == "scalar_input" else [])
    (out,) = run(build, inputs)
    check(out, expected)


def test_alpha_of_an_integral_result_must_be_integral():
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1], dtype=D.Int32)
        with pytest.raises(DefinitionError, match=r"add_alpha: alpha .* integral result takes an integral alpha"):
            fd.ops.add_alpha(t, t, 0.5)
        with pytest.raises(DefinitionError, match="sub_alpha: alpha must be a number or a scalar"):
            fd.ops.sub_alpha(t, t, t)
        f = fd.define_tensor([-1], dtype=D.BFloat16)
        with pytest.raises(DefinitionError, match=r"add_alpha: alpha .* is cdouble.*a real result takes a real alpha"):
            fd.ops.add_alpha(f, f, 1j)  # (torch refuses it too: the imaginary part would be dropped)
        fd.add_output(t)
