"""Float8_e4m3fn and Float8_e5m2 (nvFuser's DataType names): tensors of them
as inputs and outputs, fd.ops.cast to and from them with torch's bits, data
movement that keeps them, and arithmetic that computes in (and gives) Float.
The conversions in kernels/hostir.cuh are also compiled for the host and
checked against torch's on millions of inputs."""
import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from hostir import DataType, FusionDefinition
from hostir.ir.errors import DefinitionError
from ops_util import TORCH, check, declare, rand, relayout, run

D = DataType
F8 = [D.Float8_e4m3fn, D.Float8_e5m2]
WIDE = [D.Double, D.Float, D.Half, D.BFloat16, D.Int, D.Int32, D.Bool]
HEADER = Path(__file__).resolve().parents[1] / "kernels" / "hostir.cuh"


def bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bit patterns (NaN's included), as integers of its width."""
    if not t.dtype.is_floating_point:
        return t
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(width)


def special_values(dtype: torch.dtype) -> torch.Tensor:
    """Values where float8 conversions differ: NaN and infinities, the formats'
    maxima and what lies beyond them (e4m3fn saturates, e5m2 overflows to inf),
    ties between neighbours (to even), subnormals and what rounds to zero."""
    v = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 447.0, 448.0, 449.0, 464.0,
         465.0, 480.0, 1e6, -1e6, 57344.0, 61439.0, 61440.0, 65536.0, 1.0625, 1.1875, 1.125,
         2.0 ** -9, 1.5 * 2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -11, 2.0 ** -16, 1.5 * 2.0 ** -16,
         2.0 ** -17, 1e-30, -2.0 ** -7, 3.0, -0.1,
         1.0625 + 2.0 ** -40]  # a double just above a tie: rounds to float first, as torch
    x = torch.tensor(v, dtype=torch.float64)
    return x.to(dtype) if dtype.is_floating_point else x.nan_to_num(0, 2 ** 20, -2 ** 20).to(dtype)


# ------------------------------------------------------------------ the header's bits

@pytest.fixture(scope="module")
def host_conversions(tmp_path_factory):
    """kernels/hostir.cuh's float8 block compiled as host C++ (skips without a
    compiler), under each Float8_e4m3fn overflow rule: {overflow is NaN: lib}."""
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    text = HEADER.read_text()
    block = text.split("// HIR_FP8_BEGIN")[1].split("// HIR_FP8_END")[0]
    libs = {}
    for nan in (False, True):
        src = tmp_path_factory.mktemp("fp8") / "fp8.cpp"
        src.write_text(("#define HIR_FP8_E4M3_OVERFLOW_NAN 1\n" if nan else "") + block + "".join(
            f'extern "C" void {n}(const {a}* x, {b}* y, long n) {{ for (long i = 0; i < n; ++i) y[i] = {f}(x[i]); }}\n'
            for n, a, b, f in [("to_e4m3", "float", "unsigned char", "hir_f_to_e4m3"),
                               ("to_e5m2", "float", "unsigned char", "hir_f_to_e5m2"),
                               ("from_e4m3", "unsigned char", "float", "hir_e4m3_to_f"),
                               ("from_e5m2", "unsigned char", "float", "hir_e5m2_to_f")]))
        lib = src.with_suffix(".so")
        subprocess.run([cxx, "-O2", "-shared", "-fPIC", "-Wall", "-Werror", "-o", str(lib), str(src)],
                       check=True, capture_output=True)
        libs[nan] = ctypes.CDLL(str(lib))
    return libs


def _call(lib, name, x: torch.Tensor, out_dtype) -> torch.Tensor:
    out = torch.empty(x.numel(), dtype=out_dtype)
    getattr(lib, name)(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(out.data_ptr()),
                       ctypes.c_long(x.numel()))
    return out


@pytest.mark.parametrize("nan", [False, True], ids=["saturating", "overflow-nan"])
@pytest.mark.parametrize("f8", F8, ids=lambda d: d.name)
def test_header_conversions_have_torch_bits(host_conversions, f8, nan):
    """Every float32 whose low 12 bits are one of 8 patterns (every exponent,
    sign and leading mantissa; the rounding cuts of both formats with ties and
    their neighbours), and every float8 byte back to float32 (NaN's bits too).
    (Checked once on all 2^32 float32s when written.) Float8_e4m3fn under
    both overflow rules: torch's where it is this torch's (the kernels' too,
    options.defines), else torch's bits with |x| past 464 (inf too) as the other
    rule gives them (torch before 2.12: NaN; after: 448)."""
    from hostir.codegen.options import e4m3_overflow_is_nan
    short = "e4m3" if f8 is D.Float8_e4m3fn else "e5m2"
    hi = torch.arange(1 << 20, dtype=torch.int64) << 12
    lows = torch.tensor([0, 1, 0x7FF, 0x800, 0x801, 0xFFF, 0x123, 0xABC], dtype=torch.int64)
    u = (hi[:, None] | lows[None, :]).reshape(-1)
    x = (u - ((u >= 2 ** 31).long() << 32)).to(torch.int32).view(torch.float32)
    got = _call(host_conversions[nan], f"to_{short}", x, torch.uint8)
    want = x.to(TORCH[f8]).view(torch.uint8).clone()
    if f8 is D.Float8_e4m3fn and nan != e4m3_overflow_is_nan():
        past = (x.abs() > 464) & ~x.isnan()
        want[past] = (want[past] & 0x80) | (0x7F if nan else 0x7E)
    bad = (got != want).nonzero().flatten()
    assert bad.numel() == 0, [(hex(int(u[i])), int(got[i]), int(want[i])) for i in bad[:8]]
    b = torch.arange(256, dtype=torch.uint8)
    back = _call(host_conversions[nan], f"from_{short}", b, torch.float32)
    assert torch.equal(back.view(torch.int32), b.view(TORCH[f8]).float().view(torch.int32))


# ------------------------------------------------------------------ casts in fusions

LAYOUTS = [((4, 9), "sym"), ((33, 5), "transposed"), ((3, 7), "strided"), ((1, 31), "bcast"),
           ((2, 64), "static")]


@pytest.mark.parametrize("f8", F8, ids=lambda d: d.name)
@pytest.mark.parametrize("src", WIDE + F8, ids=lambda d: d.name)
@pytest.mark.parametrize("shape,decl", LAYOUTS, ids=lambda v: str(v))
def test_cast_to_float8_has_torch_bits(src, f8, shape, decl):
    x = rand(shape, src, low=-600.0, high=600.0, ints=(-1000, 1000))
    if src.is_float:
        flat = x.view(-1)
        sv = special_values(TORCH[src])[: flat.numel()]
        flat[: sv.numel()] = sv
    xs = relayout(x, decl)
    (out,) = run(lambda fd: fd.add_output(fd.ops.cast(declare(fd, xs, decl), f8)), [xs])
    assert out.dtype == TORCH[f8] and out.shape == x.shape
    assert torch.equal(bits(out), bits(x.to(TORCH[f8])))


@pytest.mark.parametrize("f8", F8, ids=lambda d: d.name)
@pytest.mark.parametrize("dst", WIDE + F8, ids=lambda d: d.name)
@pytest.mark.parametrize("decl", ["sym", "transposed", "strided"])
def test_cast_from_float8_of_every_byte(f8, dst, decl):
    x = torch.arange(256, dtype=torch.uint8).view(TORCH[f8]).reshape(16, 16)
    want = x.to(TORCH[dst])
    if not dst.is_float:  # NaN and inf have no integer value (undefined in C and torch)
        keep = x.float().isfinite()
        x = torch.where(keep, x.float(), 0.0).to(TORCH[f8])
        want = x.to(TORCH[dst])
    xs = relayout(x, decl)
    (out,) = run(lambda fd: fd.add_output(fd.ops.cast(declare(fd, xs, decl), dst)), [xs])
    assert out.dtype == want.dtype
    if dst.is_float8 or dst in (D.Float, D.Double):
        assert torch.equal(bits(out).view(-1), bits(want).view(-1))  # NaN's bits too
    else:
        check(out, want, rtol=0, atol=0)


@pytest.mark.parametrize("f8", F8, ids=lambda d: d.name)
def test_scaled_quantize_round_trip(f8):
    """x / scale clamped to the format's range, cast to float8 and back times the scale
    (the pattern of nvFuser's fp8 tests and of float8 training recipes)."""
    x = rand((8, 48), D.BFloat16)
    amax = float(torch.finfo(TORCH[f8]).max)
    scale = float(x.float().abs().amax()) / amax

    def build(fd):
        t = declare(fd, x)
        s = fd.define_scalar(None, dtype=D.Float)
        q = fd.ops.cast(fd.ops.clamp(fd.ops.div(t, s), -amax, amax), f8)
        fd.add_output(q)
        fd.add_output(fd.ops.cast(fd.ops.mul(q, s), D.BFloat16))
    q, back = run(build, [x, scale])
    want_q = (x / scale).clamp(-amax, amax).to(TORCH[f8])  # (bfloat16 / float: bfloat16, as torch)
    assert torch.equal(bits(q), bits(want_q))
    check(back, (want_q.float() * scale).to(torch.bfloat16), rtol=0, atol=0)


# ------------------------------------------------------------------ what keeps float8, what upcasts

@pytest.mark.parametrize("f8", F8, ids=lambda d: d.name)
def test_data_movement_keeps_float8(f8):
    x = rand((4, 6), D.Float).to(TORCH[f8])
    xs = relayout(x, "transposed")

    def build(fd):
        t = declare(fd, xs, "transposed")
        fd.add_output(fd.ops.set(t))
        fd.add_output(fd.ops.permute(t, [1, 0]))
        fd.add_output(fd.ops.reshape(fd.ops.set(t), [24]))
        fd.add_output(fd.ops.slice(t, [1, 2], [3, 6]))
        fd.add_output(fd.ops.cat([t, t], 1))
        fd.add_output(fd.ops.pad(t, [1, 1]))
        fd.add_output(fd.ops.broadcast_in_dim(t, [2, 4, 6], [1, 2]))
    outs = run(build, [xs])
    wants = [x, x.t(), x.reshape(24), x[1:3, 2:6], torch.cat([x, x], 1),
             torch.nn.functional.pad(x.float(), [1, 1]).to(TORCH[f8]), x.expand(2, 4, 6)]
    for got, want in zip(outs, wants):
        assert got.dtype == TORCH[f8]
        assert torch.equal(bits(got), bits(want))


@pytest.mark.parametrize("f8", F8, ids=lambda d: d.name)
@pytest.mark.parametrize("other", [None, D.BFloat16, D.Half, D.Double, D.Int32, D.Float8_e5m2],
                         ids=lambda d: getattr(d, "name", "scalar"))
def test_arithmetic_on_float8_computes_in_float(f8, other):
    """Pointwise ops take float8 operands as Float (torch refuses to promote
    float8): the result is what torch gives for the operands upcast to Float."""
    x = rand((5, 7), D.Float, low=-4.0, high=4.0).to(TORCH[f8])
    y = rand((5, 7), other, low=-4.0, high=4.0, ints=(-3, 4)) if other else 1.5
    yf = y.float() if other and other.is_float8 else y

    def build(fd):
        t = declare(fd, x)
        u = declare(fd, y) if other else y
        fd.add_output(fd.ops.add(t, u))
        fd.add_output(fd.ops.mul(fd.ops.neg(t), u))
        fd.add_output(fd.ops.exp(t))
        fd.add_output(fd.ops.lt(t, u))
        fd.add_output(fd.ops.where(fd.ops.gt(t, 0.0), t, u))
    outs = run(build, [x, y] if other else [x])
    xf = x.float()
    wants = [xf + yf, -xf * yf, xf.exp(), xf < yf, torch.where(xf > 0, xf, yf)]
    for got, want in zip(outs, wants):
        check(got, want)


@pytest.mark.parametrize("f8", F8, ids=lambda d: d.name)
@pytest.mark.parametrize("shape,dim", [((6, 40), 1), ((300, 3), 0), ((5, 1), 1)], ids=str)
def test_reductions_of_float8_compute_in_float(f8, shape, dim):
    x = rand(shape, D.Float, low=-8.0, high=8.0).to(TORCH[f8])

    def build(fd):
        t = declare(fd, x)
        fd.add_output(fd.ops.sum(t, [dim]))
        fd.add_output(fd.ops.max(t, [dim]))
        fd.add_output(fd.ops.argmax(t, dim))
        var, mean = fd.ops.var_mean(t, [dim])
        fd.add_output(mean)
        fd.add_output(fd.ops.cumsum(t, dim))
    s, m, a, mean, cs = run(build, [x])
    xd = x.double()
    check(s, xd.sum(dim).float(), kind="reduction")
    check(m, x.float().amax(dim), rtol=0, atol=0)
    check(a, x.float().argmax(dim))
    check(mean, xd.mean(dim).float(), kind="reduction")
    check(cs, xd.cumsum(dim).float(), kind="reduction")


# ------------------------------------------------------------------ kernels

def _kernel_steps(fd):
    from hostir.host.steps import KernelStep
    return [s.target for s in fd._cache.last_plan.program.body
            if isinstance(getattr(s, "target", None), KernelStep)]


@pytest.mark.parametrize("dst,vec", [(D.Float8_e4m3fn, 16), (D.Float, 4), (D.BFloat16, 8)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_one_byte_elements_vectorize_to_16_byte_accesses(dst, vec):
    """A float8 element is one byte: a kernel reading float8 moves 16 of them a
    vector where its widest tensor allows."""
    x = rand((4, 256), D.Float).to(torch.float8_e4m3fn)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=D.Float8_e4m3fn)
        fd.add_output(fd.ops.cast(fd.ops.mul(t, 2.0), dst))
    (out,) = fd.execute([x])
    want = (x.float() * 2).to(TORCH[dst])
    assert torch.equal(bits(out), bits(want))
    (step,) = _kernel_steps(fd)
    names = [v.name for v in step.spec.typical_variants()]
    assert any(f"_v{vec}_" in n for n in names), names
    src = next(v.source for v in step.spec.typical_variants() if f"_v{vec}_" in v.name)
    assert "hir_e4m3_to_f" in src and ("uint4" in src if vec == 16 else True)
    assert "cuda_fp8" not in src


def test_float8_definition_errors_name_op_and_tensor():
    with pytest.raises(DefinitionError, match=r"matmul: float8 operand .*T0"):
        with FusionDefinition() as fd:
            a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=D.Float8_e4m3fn)
            fd.ops.matmul(a, a)
    with pytest.raises(DefinitionError, match=r"uniform: dtype must be a floating type"):
        with FusionDefinition() as fd:
            fd.ops.uniform(0.0, 1.0, [2, 3], dtype=D.Float8_e5m2)


def test_from_pytorch_and_scalar_inputs_of_float8():
    x = rand((3, 5), D.Float).to(torch.float8_e5m2)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        s = fd.define_scalar(None, dtype=D.Float8_e4m3fn)  # travels as a float, rounded on use
        fd.add_output(fd.ops.cast(fd.ops.add(t, s), D.Float8_e5m2))
    (out,) = fd.execute([x, 0.3])
    s8 = torch.tensor(0.3).to(torch.float8_e4m3fn).float()
    assert torch.equal(bits(out), bits((x.float() + s8).to(torch.float8_e5m2)))
