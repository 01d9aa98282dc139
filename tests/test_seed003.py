"""Seed 003: the GELU-backward + bias-gradient fusion from nvFuser's issue,
exactly as written there, run on CPU and checked against torch eager."""
import math

import pytest
import torch

from hostir import DataType, FusionDefinition
from hostir.ir.verify import verify


def nvfuser_fusion_id6(fd : FusionDefinition) -> None :
    S0 = fd.define_scalar(None, dtype=DataType.Double)
    S1 = fd.define_scalar(None, dtype=DataType.Double)
    S2 = fd.define_scalar(None, dtype=DataType.Double)
    S3 = fd.define_scalar(None, dtype=DataType.Double)
    T4 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
    T5 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
    T6 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
    S7 = fd.define_scalar(0.500000, dtype=DataType.Double)
    T8 = fd.ops.mul(S7, T6)
    S9 = fd.define_scalar(3.00000, dtype=DataType.Double)
    T10 = fd.ops.pow(T6, S9)
    S11 = fd.define_scalar(0.0447150, dtype=DataType.Double)
    T12 = fd.ops.mul(S11, T10)
    T13 = fd.ops.add(T6, T12)
    S14 = fd.define_scalar(0.797885, dtype=DataType.Double)
    T15 = fd.ops.mul(S14, T13)
    T16 = fd.ops.tanh(T15)
    S17 = fd.define_scalar(1.00000, dtype=DataType.Double)
    T18 = fd.ops.add(S17, T16)
    T19 = fd.ops.sum(T4, axes=[0, 1], keepdim=False, dtype=DataType.Null)
    T20 = fd.ops.mul(T5, T18)
    T21 = fd.ops.mul(T5, T8)
    S22 = fd.define_scalar(1.00000, dtype=DataType.Double)
    T23 = fd.ops.mul(S22, T21)
    T24 = fd.ops.mul(T16, T16)
    S25 = fd.define_scalar(1.00000, dtype=DataType.Double)
    T26 = fd.ops.sub(S25, T24)
    T27 = fd.ops.mul(T23, T26)
    T28 = fd.ops.mul(T27, S3)
    S29 = fd.define_scalar(1.00000, dtype=DataType.Double)
    T30 = fd.ops.mul(S29, T28)
    T31 = fd.ops.mul(T30, S2)
    T32 = fd.ops.mul(T31, S1)
    S33 = fd.define_scalar(2.00000, dtype=DataType.Double)
    T34 = fd.ops.pow(T6, S33)
    T35 = fd.ops.mul(T32, T34)
    T36 = fd.ops.add(T30, T35)
    T37 = fd.ops.mul(T20, S0)
    T38 = fd.ops.add(T36, T37)
    fd.add_output(T19)
    fd.add_output(T38)


def eager(s0, s1, s2, s3, bias_grad_in, grad, x):
    """Written from the math, in float64: GELU(tanh) backward pieces and a bias gradient."""
    x = x.double()
    grad = grad.double()
    # 0.797885 is the seed's rounding of sqrt(2 / pi); use the constants as written
    assert abs(0.797885 - math.sqrt(2 / math.pi)) < 1e-6
    th = torch.tanh(0.797885 * (x + 0.044715 * x.pow(3)))
    left = grad * (1 + th) * s0
    sech2 = 1 - th * th
    a = grad * (0.5 * x) * sech2 * s3
    right = a + a * s2 * s1 * x * x
    bias = bias_grad_in.double().sum(dim=(0, 1))
    return bias.float(), (right + left).float()


def make_fd():
    with FusionDefinition() as fd:
        nvfuser_fusion_id6(fd)
    return fd


def rand_inputs(shape, scalars):
    return [*scalars, *(torch.randn(*shape) for _ in range(3))]


def check(out, ref):
    assert len(out) == 2
    for o, r in zip(out, ref):
        assert o.dtype == torch.float32 and o.shape == r.shape
        torch.testing.assert_close(o, r, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape", [(2, 3, 4), (16, 8, 32), (1, 5, 1)])
def test_seed003_matches_eager(shape):
    fd = make_fd()
    verify(fd._fusion)
    scalars = (1.0, 2.0, 3.0, 4.0)
    inputs = rand_inputs(shape, scalars)
    out = fd.execute(inputs)
    assert out[0].shape == (shape[2],) and out[1].shape == shape
    check(out, eager(*inputs))
    # the seed runs it in a loop: same result every time
    for _ in range(2):
        again = fd.execute(inputs)
        assert all(torch.equal(a, b) for a, b in zip(out, again))


@pytest.mark.parametrize("shape", [(2, 3, 4), (16, 8, 32)])
def test_seed003_new_scalars_change_result(shape):
    fd = make_fd()
    tensors = [torch.randn(*shape) for _ in range(3)]
    first_scalars = (1.0, 2.0, 3.0, 4.0)
    second_scalars = (-0.75, 1.5, 0.25, 2.5)
    first = fd.execute([*first_scalars, *tensors])
    second = fd.execute([*second_scalars, *tensors])
    check(first, eager(*first_scalars, *tensors))
    check(second, eager(*second_scalars, *tensors))
    # T19 (the bias gradient) does not depend on the scalars, T38 does
    torch.testing.assert_close(first[0], second[0])
    assert not torch.allclose(first[1], second[1], rtol=1e-3, atol=1e-3)
    # each scalar matters on its own
    for k in range(4):
        s = list(first_scalars)
        s[k] = s[k] + 1.0
        out = fd.execute([*s, *tensors])
        check(out, eager(*s, *tensors))
        assert not torch.allclose(out[1], first[1], rtol=1e-3, atol=1e-3), f"S{k} had no effect"


def test_seed003_scalars_as_0d_tensors_and_ints():
    fd = make_fd()
    tensors = [torch.randn(3, 4, 5) for _ in range(3)]
    scalars = (0.5, -1.25, 2.0, 3.0)
    ref = eager(*scalars, *tensors)
    as_tensors = [torch.tensor(s, dtype=torch.float64) for s in scalars]
    check(fd.execute([*as_tensors, *tensors]), ref)
    ints = (1, 2, 3, 4)
    check(fd.execute([*ints, *tensors]), eager(*map(float, ints), *tensors))


def test_seed003_fusion_ir_names_match_the_script():
    text = make_fd().fusion_ir()
    assert "  S0 double\n  S1 double\n  S2 double\n  S3 double\n" in text
    assert "  T4 float[i0, i1, i2] contiguity=ttt\n" in text
    assert "  T19 float[r(i0), r(i1), i2]\n  T38 float[i3, i4, i5]\n" in text
    assert "  T19 float[r(i0), r(i1), i2] = sum(T4, dims=[0, 1])" in text
    assert "  T10 float[i6, i7, i8] = pow(T6, 3.0)" in text


class GeluBackward(FusionDefinition):
    def definition(self):
        nvfuser_fusion_id6(self)


class GeluBackwardInline(FusionDefinition):
    def definition(self):
        S0 = self.define_scalar(None, dtype=DataType.Double)
        S1 = self.define_scalar(None, dtype=DataType.Double)
        S2 = self.define_scalar(None, dtype=DataType.Double)
        S3 = self.define_scalar(None, dtype=DataType.Double)
        T4 = self.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float)
        T5 = self.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float)
        T6 = self.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float)
        T16 = self.ops.tanh(self.ops.mul(0.797885, self.ops.add(T6, self.ops.mul(0.044715, self.ops.pow(T6, 3.0)))))
        T19 = self.ops.sum(T4, axes=[0, 1], keepdim=False, dtype=DataType.Null)
        T28 = self.ops.mul(self.ops.mul(self.ops.mul(T5, self.ops.mul(0.5, T6)), self.ops.sub(1.0, self.ops.mul(T16, T16))), S3)
        T35 = self.ops.mul(self.ops.mul(self.ops.mul(T28, S2), S1), self.ops.pow(T6, 2.0))
        T38 = self.ops.add(self.ops.add(T28, T35), self.ops.mul(self.ops.mul(T5, self.ops.add(1.0, T16)), S0))
        self.add_output(T19)
        self.add_output(T38)


@pytest.mark.parametrize("cls", [GeluBackward, GeluBackwardInline])
@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 5, 1)])
def test_seed003_class_style(cls, shape):
    fd = cls()
    scalars = (1.0, 2.0, 3.0, 4.0)
    inputs = rand_inputs(shape, scalars)
    check(fd.execute(inputs), eager(*inputs))
    verify(fd._fusion)
    other = (0.3, -2.0, 1.7, 0.9)
    inputs2 = [*other, *inputs[4:]]
    check(fd.execute(inputs2), eager(*inputs2))
    # the class-style and with-style definitions print the same program
    if cls is GeluBackward:
        assert fd.fusion_ir() == make_fd().fusion_ir()
