"""Frontend behaviour: from_pytorch, output layouts, in-place aliases, scalar
inputs, and the IR verifier."""
import pytest
import torch

import hostir
from hostir import DataType, FusionDefinition
from hostir.ir.errors import DefinitionError
from hostir.ir.fusion import Fusion, Output, TensorInputArg
from hostir.ir.verify import verify
from hostir.ir.node import Axis, AxisKind, Op, Val, const


def checked(fd):
    verify(fd._fusion)
    return fd


def layouts():
    return {
        "contiguous": torch.randn(2, 3, 4),
        "transposed": torch.randn(5, 3).t(),
        "permuted3d": torch.randn(2, 3, 4).permute(1, 2, 0),
        "channels_last": torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
        "size1": torch.randn(1, 3, 1, 4),
        "size1_channels_last": torch.randn(2, 3, 1, 1).to(memory_format=torch.channels_last),
        "sliced_inner": torch.randn(4, 6)[:, ::2],
        "sliced_outer": torch.randn(4, 6)[:, :3],
        "scalar_0d": torch.randn(()),
        "int": torch.randint(-50, 50, (3, 4)),
    }


@pytest.mark.parametrize("name", list(layouts()))
def test_from_pytorch_then_execute(name):
    t = layouts()[name]
    with FusionDefinition() as fd:
        x = fd.from_pytorch(t)
        y = fd.ops.mul(fd.ops.add(x, 3), x)
        fd.add_output(y)
    checked(fd)
    assert x.dtype is {torch.float32: DataType.Float, torch.int64: DataType.Int}[t.dtype]
    (out,) = fd.execute([t])
    torch.testing.assert_close(out, (t + 3) * t)
    # a second tensor with the same layout (other values, other sizes) runs too
    if t.ndim:
        bigger = [s if s == 1 else s + 1 for s in t.shape]
        t2 = torch.empty_strided(bigger, _strides_like(t, bigger), dtype=t.dtype)
        t2.copy_(torch.randn(bigger).to(t.dtype) * 10)
        (out2,) = fd.execute([t2])
        torch.testing.assert_close(out2, (t2 + 3) * t2)


def _strides_like(t, shape):
    """Dense strides for `shape` in the order of t's strides (outermost first)."""
    order = sorted(range(t.ndim), key=lambda d: (t.stride(d), -d), reverse=True)
    strides, step = [0] * t.ndim, 1
    for d in reversed(order):
        strides[d] = step
        step *= shape[d]
    return strides


def test_from_pytorch_declarations():
    def decl(t):
        with FusionDefinition() as fd:
            fd.add_output(fd.ops.neg(fd.from_pytorch(t)))
        return fd.fusion_ir().splitlines()[1].strip()

    assert decl(torch.randn(2, 3, 4)) == "T0 float[i0, i1, i2] contiguity=ttt"
    assert decl(torch.randn(5, 3).t()) == "T0 float[i0, i1] contiguity=tt stride_order=[0, 1]"
    cl = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    assert decl(cl) == "T0 float[i0, i1, i2, i3] contiguity=tttt stride_order=[3, 0, 2, 1]"
    # size-1 dims become broadcast dims; a contiguous tensor needs no stride_order
    assert decl(torch.randn(1, 3, 1, 4)) == "T0 float[b1, i0, b1, i1] contiguity=ntnt"
    assert decl(torch.randn(4, 6)[:, ::2]) == "T0 float[i0, i1] contiguity=tf"
    assert decl(torch.randn(4, 6)[:, :3]) == "T0 float[i0, i1] contiguity=ft"


def test_from_pytorch_rejects_wrong_layout_later():
    cl = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.exp(fd.from_pytorch(cl)))
    torch.testing.assert_close(fd.execute([cl])[0], cl.exp())
    with pytest.raises(hostir.InputError, match=r"input 0 \(T0\)"):
        fd.execute([torch.randn(2, 3, 4, 5)])


def test_from_pytorch_size1_dim_is_broadcast():
    a = torch.randn(4, 1)
    b = torch.randn(4, 6)
    with FusionDefinition() as fd:
        x = fd.from_pytorch(a)
        y = fd.from_pytorch(b)
        fd.add_output(fd.ops.sub(x, y))
    (out,) = checked(fd).execute([a, b])
    torch.testing.assert_close(out, a - b)
    with pytest.raises(hostir.InputError, match=r"T0.*dim 1.*broadcast.*extent 6"):
        fd.execute([torch.randn(4, 6), b])


def test_from_pytorch_static_sizes():
    t = torch.randn(3, 5)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.neg(fd.from_pytorch(t, static_sizes=True)))
    assert "T0 float[3, 5]" in fd.fusion_ir()
    torch.testing.assert_close(fd.execute([t])[0], -t)
    with pytest.raises(hostir.InputError, match="static extent 5, got 6"):
        fd.execute([torch.randn(3, 6)])


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_output_stride_order_channels_last(layout):
    x = torch.randn(2, 3, 4, 5)
    if layout == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        fd.add_output(fd.ops.relu(fd.ops.add(t, 0.5)), stride_order=[3, 0, 2, 1])
        fd.add_output(fd.ops.mul(t, 2.0))
    (out, plain) = checked(fd).execute([x])
    ref = torch.relu(x + 0.5)
    assert out.is_contiguous(memory_format=torch.channels_last)
    assert not out.is_contiguous()
    assert out.stride() == (60, 1, 15, 3)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(plain, x * 2)


def test_output_stride_order_transposed_2d():
    x = torch.randn(3, 7)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        fd.add_output(fd.ops.neg(t), stride_order=[0, 1])
    (out,) = checked(fd).execute([x])
    assert out.stride() == (1, 3)
    torch.testing.assert_close(out, -x)


def test_alias_input_updates_in_place():
    x = torch.randn(4, 6)
    y = torch.randn(4, 6)
    x0 = x.clone()
    with FusionDefinition() as fd:
        tx = fd.from_pytorch(x)
        ty = fd.from_pytorch(y)
        s = fd.ops.mul(tx, ty)
        fd.add_output(fd.ops.add(tx, ty), alias_input=tx)
        fd.add_output(s)
    checked(fd)
    assert "(updates T0 in place)" in fd.fusion_ir()
    ptr = x.data_ptr()
    results = fd.execute([x, y])
    assert len(results) == 1  # the aliased output is not returned
    torch.testing.assert_close(results[0], x0 * y)  # computed from the old x
    torch.testing.assert_close(x, x0 + y)
    assert x.data_ptr() == ptr
    assert all(r.data_ptr() != ptr for r in results)
    # running again accumulates into x
    fd.execute([x, y])
    torch.testing.assert_close(x, x0 + 2 * y)


def test_alias_input_only_output_returns_nothing():
    x = torch.randn(5)
    x0 = x.clone()
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        fd.add_output(fd.ops.exp(t), alias_input=t)
    assert checked(fd).execute([x]) == []
    torch.testing.assert_close(x, x0.exp())


@pytest.mark.parametrize("dtype,values", [
    (DataType.Double, [torch.tensor(0.75, dtype=torch.float64), torch.tensor(-1.5, dtype=torch.float32), 2.25]),
    (DataType.Int, [torch.tensor(3), torch.tensor(-2, dtype=torch.int32), 7]),
    (DataType.Bool, [torch.tensor(True), torch.tensor(False), True]),
])
def test_scalar_inputs_as_0d_tensors(dtype, values):
    x = torch.randn(3, 4)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        s = fd.define_scalar(None, dtype=dtype)
        if dtype is DataType.Bool:
            out = fd.ops.where(s, t, fd.ops.neg(t))
        else:
            out = fd.ops.mul(t, s)
        fd.add_output(out)
    checked(fd)
    results = []
    for v in values:
        (o,) = fd.execute([x, v])
        py = v.item() if isinstance(v, torch.Tensor) else v
        ref = torch.where(torch.tensor(py), x, -x) if dtype is DataType.Bool else x * py
        torch.testing.assert_close(o, ref)
        results.append(o)
    assert not torch.equal(results[0], results[1])


def test_scalar_only_arithmetic_in_fusion():
    x = torch.randn(6)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        a = fd.define_scalar(None, dtype=DataType.Double)
        b = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(fd.ops.add(t, fd.ops.mul(a, b)))
    (out,) = checked(fd).execute([x, torch.tensor(1.5), -3.0])
    torch.testing.assert_close(out, x + 1.5 * -3.0)


def test_handle_operators_and_size():
    x = torch.randn(3, 4)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        n = t.size(1)
        y = (2.0 - t) * t / 3.0 + (-t) ** 2.0
        fd.add_output(fd.ops.mul(y, n))
        fd.add_output(abs(t))
    (o1, o2) = checked(fd).execute([x])
    torch.testing.assert_close(o1, ((2.0 - x) * x / 3.0 + x ** 2) * 4)
    torch.testing.assert_close(o2, x.abs())
    assert t.ndim == 2 and len(t.shape()) == 2


# ------------------------------------------------------------ verifier

def _every_fusion_in_this_file():
    """Fusions of several shapes of program; the verifier accepts them all."""
    fds = []
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, 1, 8], contiguity=[True, None, True], dtype=DataType.Half)
        s = fd.define_scalar(None, dtype=DataType.Int)
        b = fd.ops.cast(a, DataType.Float)
        c = fd.ops.expand(b, [-1, s, 8])
        d = fd.ops.sum(c, dims=[1, 2], keepdim=True)
        e = fd.ops.pad(fd.ops.slice(b, [0, 0, 2], [-1, 1, 6]), [1, 1])
        f = fd.ops.cat([e, fd.ops.full([2, 1, 6], 0.5, DataType.Float)], dim=0)
        v, m = fd.ops.var_mean(b, dims=[2])
        fd.add_output(d)
        fd.add_output(f)
        fd.add_output(v)
        fd.add_output(m)
        fd.add_output(fd.ops.reshape(fd.ops.permute(b, [2, 1, 0]), [8, -1]))
    fds.append(fd)
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[4, 8], contiguity=[True, True], dtype=DataType.Float)
        w = fd.define_tensor(shape=[3, 8], contiguity=[True, True], dtype=DataType.Float)
        bias = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.linear(a, w, bias))
        fd.add_output(fd.ops.matmul(a, fd.ops.permute(w, [1, 0])))
        fd.add_output(fd.ops.iota(5, 2, 3, DataType.Int))
    fds.append(fd)
    return fds


def test_verifier_accepts_fusions():
    for fd in _every_fusion_in_this_file():
        verify(fd._fusion)


def test_verifier_accepts_and_fusions_run():
    fd1, fd2 = _every_fusion_in_this_file()
    a = torch.randn(3, 1, 8).half()
    d, f, v, m, r = fd1.execute([a, 4])
    af = a.float()
    torch.testing.assert_close(d, af.expand(3, 4, 8).sum(dim=(1, 2), keepdim=True))
    torch.testing.assert_close(f, torch.cat([torch.nn.functional.pad(af[:-1, :, 2:6], [1, 1]),
                                             torch.full((2, 1, 6), 0.5)]))
    torch.testing.assert_close(v, af.var(dim=2))
    torch.testing.assert_close(m, af.mean(dim=2))
    torch.testing.assert_close(r, af.permute(2, 1, 0).reshape(8, -1))
    x, w, bias = torch.randn(4, 8), torch.randn(3, 8), torch.randn(3)
    lin, mm, io = fd2.execute([x, w, bias])
    torch.testing.assert_close(lin, torch.nn.functional.linear(x, w, bias))
    torch.testing.assert_close(mm, x @ w.t())
    torch.testing.assert_close(io, torch.arange(5) * 3 + 2)


def _input(index, ndim=1, name=None):
    ext = Val(Op.EXTENT, DataType.Int, arg=(index, 0), name=f"i{index}")
    axes = (Axis(ext, AxisKind.ITER),) * ndim
    return Val(Op.TENSOR_INPUT, DataType.Float, arg=TensorInputArg(index, (True,) * ndim, None, False),
               axes=axes, name=name or f"T{index}")


def test_verifier_accepts_hand_built_fusion():
    x = _input(0)
    y = Val(Op.NEG, DataType.Float, (x,), axes=x.axes, name="T1")
    verify(Fusion((x,), (Output(y),)))


def test_verifier_input_node_not_listed():
    x = _input(0)
    hidden = _input(1, name="T7")
    y = Val(Op.ADD, DataType.Float, (x, hidden), axes=x.axes, name="T2")
    with pytest.raises(hostir.VerificationError, match=r"T7.*not listed among the fusion's inputs"):
        verify(Fusion((x,), (Output(y),)))


def test_verifier_input_index_mismatch():
    x = _input(1)
    y = Val(Op.NEG, DataType.Float, (x,), axes=x.axes, name="T2")
    with pytest.raises(hostir.VerificationError, match=r"T1.*input index 1 but position 0"):
        verify(Fusion((x,), (Output(y),)))


def test_verifier_non_input_listed_as_input():
    x = _input(0)
    y = Val(Op.NEG, DataType.Float, (x,), axes=x.axes, name="T1")
    with pytest.raises(hostir.VerificationError, match=r"T1.*not an input node"):
        verify(Fusion((x, y), (Output(y),)))


def test_verifier_wrong_arity():
    x = _input(0)
    y = Val(Op.ADD, DataType.Float, (x,), axes=x.axes, name="T1")
    with pytest.raises(hostir.VerificationError, match=r"T1 \(add\).*1 sources, expected 2"):
        verify(Fusion((x,), (Output(y),)))


def test_verifier_reduction_axis_on_pointwise_op():
    x = _input(0)
    y = Val(Op.NEG, DataType.Float, (x,), axes=(Axis(x.axes[0].extent, AxisKind.REDUCE),), name="T1")
    with pytest.raises(hostir.VerificationError, match=r"T1.*reduction axis on a non-reduction op"):
        verify(Fusion((x,), (Output(y),)))


def test_verifier_scalar_output_and_alias():
    x = _input(0)
    s = const(2.0)
    with pytest.raises(hostir.VerificationError, match="outputs must be tensors"):
        verify(Fusion((x,), (Output(s),)))
    y = Val(Op.NEG, DataType.Float, (x,), axes=x.axes, name="T1")
    with pytest.raises(hostir.VerificationError, match=r"T1.*alias_input"):
        verify(Fusion((x,), (Output(y, alias_input=y),)))
    with pytest.raises(hostir.VerificationError, match=r"T1.*stride_order"):
        verify(Fusion((x,), (Output(y, stride_order=(0, 0)),)))
    with pytest.raises(hostir.VerificationError, match="no outputs"):
        verify(Fusion((x,), ()))


def test_verifier_cast_arg_mismatch():
    x = _input(0)
    y = Val(Op.CAST, DataType.Double, (x,), arg=DataType.Half, axes=x.axes, name="T1")
    with pytest.raises(hostir.VerificationError, match=r"T1 \(cast\).*op rule gives"):
        verify(Fusion((x,), (Output(y),)))


def test_validate_compares_with_reference_outputs():
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(x, 2.0))
        fd.add_output(fd.ops.sum(x, [1]))
    a = torch.randn(4, 6)
    fd.validate([a], [a * 2, a.sum(1)])
    with pytest.raises(AssertionError, match="output 1 .* differs from its reference"):
        fd.validate([a], [a * 2, a.sum(1) + 1])
    with pytest.raises(AssertionError, match="2 outputs, 1 reference"):
        fd.validate([a], [a * 2])
    with pytest.raises(AssertionError, match="output 0"):
        fd.validate([a], [(a * 2).double(), a.sum(1)])  # a dtype mismatch is a difference too


@pytest.mark.parametrize("make", [lambda: torch.randn(4, 6), lambda: torch.randn(6, 4).t(),
                                  lambda: torch.randn(3, 1, 8)[:, :, ::2], lambda: torch.randn(5, 1)])
@pytest.mark.parametrize("static", [False, True])
def test_define_tensor_from_sizes_and_strides(make, static):
    x = make()
    with FusionDefinition() as fd:
        t = fd.define_tensor(sizes=list(x.shape), strides=list(x.stride()), dtype=DataType.Float,
                             static_sizes=static)
        fd.add_output(fd.ops.mul(t, 2.0))
    with FusionDefinition() as ref:
        fd_ref = ref.from_pytorch(x, static_sizes=static)
        ref.add_output(ref.ops.mul(fd_ref, 2.0))
    assert fd.fusion_ir() == ref.fusion_ir()  # the same declaration as from_pytorch's
    (out,) = fd.execute([x])
    torch.testing.assert_close(out, x * 2)


def test_define_tensor_sizes_and_shape_together_is_an_error():
    with pytest.raises(DefinitionError, match="sizes and strides, or shape"):
        with FusionDefinition() as fd:
            fd.define_tensor(shape=[-1], sizes=[3], strides=[1])
    with pytest.raises(DefinitionError, match="lists of non-negative ints of one length"):
        with FusionDefinition() as fd:
            fd.define_tensor(sizes=[3, 2], strides=[1])


def test_execute_options_nvfuser_programs_pass_are_accepted_with_one_note(capfd):
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1], dtype=DataType.Float)
        fd.add_output(fd.ops.neg(x))
    a = torch.randn(5)
    for _ in range(2):
        (out,) = fd.execute([a], _enable_options=["host_ir_lowering"], profile=False)
        torch.testing.assert_close(out, -a)
    err = capfd.readouterr().err
    assert err.count("host_ir_lowering, profile mean nothing to hostir") == 1, err


def test_slice_manual_normalization():
    a = torch.randn(6, 4)
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.slice(x, [1, 0], [5, 3], manual_normalization=True))
    torch.testing.assert_close(fd.execute([a])[0], a[1:5, 0:3])
    with pytest.raises(DefinitionError, match="manual_normalization=True takes normalized"):
        with FusionDefinition() as fd:
            x = fd.define_tensor([-1, -1], dtype=DataType.Float)
            fd.add_output(fd.ops.slice(x, [-2, 0], [5, 3], manual_normalization=True))


def test_define_vector_of_values_and_as_an_input():
    a = torch.randn(2, 3, 4)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1, -1], dtype=DataType.Float)
        shape = fd.define_vector([t.size(0) * t.size(1), t.size(2)], dtype=DataType.Int)
        fd.add_output(fd.ops.reshape(t, shape))
        b = fd.define_tensor([-1], dtype=DataType.Float)
        v = fd.define_vector([1, t.size(2)])
        fd.add_output(fd.ops.broadcast_in_dim(b, shape=v, broadcast_dims=[1]))
    bias = torch.randn(4)
    r, bb = fd.execute([a, bias])
    torch.testing.assert_close(r, a.reshape(6, 4))
    torch.testing.assert_close(bb, bias[None])

    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1, -1], dtype=DataType.Float)
        new_shape = fd.define_vector(2)
        fd.add_output(fd.ops.sum(fd.ops.reshape(t, new_shape), [1]))
    for shape in ([6, 4], (3, 8), [24, 1]):
        (out,) = fd.execute([a, shape])
        torch.testing.assert_close(out, a.reshape(*shape).sum(1))
    with pytest.raises(hostir.InputError, match="input 1 is a vector of 2 ints"):
        fd.execute([a, [24]])


def test_ops_shape_is_a_vector_of_extents():
    a, b = torch.randn(3, 5), torch.randn(5)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1], dtype=DataType.Float)
        v = fd.define_tensor([-1], dtype=DataType.Float)
        shape = fd.ops.shape(t)
        assert len(shape) == 2
        fd.add_output(fd.ops.add(t, fd.ops.broadcast_in_dim(v, shape, [1])))
        fd.add_output(fd.ops.full(fd.ops.shape(v), 2.0, DataType.Float))
    out, filled = fd.execute([a, b])
    torch.testing.assert_close(out, a + b)
    torch.testing.assert_close(filled, torch.full((5,), 2.0))


@pytest.mark.parametrize("shape", [[-1, -1], [3, 5], [-1, 5]])
def test_contiguity_none_on_a_wide_dim_reads_an_expanded_broadcast(shape):
    """nvFuser marks an expanded broadcast dim (stride 0, extent above 1) with
    contiguity None: hostir reads such a dim at any stride."""
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape, contiguity=[True, None], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(fd.ops.sum(t, [1]), 2.0))
        fd.add_output(fd.ops.exp(t))
    for x in (torch.randn(3, 1).expand(3, 5), torch.randn(1, 3).t().expand(3, 5)):
        total, e = fd.execute([x])
        torch.testing.assert_close(total, x.sum(1) * 2)
        torch.testing.assert_close(e, x.exp())
    with pytest.raises(hostir.InputError, match="dim 1 is declared an expanded broadcast .* needs stride 0"):
        fd.execute([torch.randn(3, 5)])


def test_validate_without_reference_outputs_evaluates_the_fusion():
    """fd.validate(inputs): the reference evaluator's outputs (random numbers
    drawn for the same seed and offset); in-place updates not compared, made once."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        acc = fd.define_tensor([-1], dtype=DataType.Float)
        y = fd.ops.add(fd.ops.exp(x), fd.ops.rand_like(x))
        fd.add_output(y)
        fd.add_output(fd.ops.sum(y, [0]))
        fd.add_output(fd.ops.add(acc, 1.0), alias_input=acc)
    a, c = torch.randn(4, 6), torch.zeros(6)
    fd.validate([a, c])
    fd.validate([a, c])  # a new offset for each call: reference and run draw alike
    torch.testing.assert_close(c, torch.full((6,), 2.0))
    with pytest.raises(AssertionError, match="output 0 .* differs"):  # (without the random numbers)
        fd.validate([a, c], [torch.exp(a), torch.exp(a).sum(0)])


def test_plans_for_inputs_without_running_them():
    """cuda_code_for and scheduled_fusion_ir_for make the plan a call would
    run, without running it (the inputs are not written, nothing is returned);
    last_cuda_code(intrinsic_code=True) puts kernels/hostir.cuh first."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(fd.ops.tanh(x), [1]))
        fd.add_output(fd.ops.add(x, 1.0), alias_input=x)
    a = torch.randn(8, 33)
    before = a.clone()
    code = fd.cuda_code_for([a])
    assert "__global__" in code and "hir_tanh" in code
    assert "sum(" in fd.scheduled_fusion_ir_for([a])
    assert torch.equal(a, before)
    with pytest.raises(hostir.InputError, match="input 0"):
        fd.cuda_code_for([torch.randn(3)])
    fd.execute([a])
    assert fd.last_cuda_code() == code
    assert fd.last_cuda_code(intrinsic_code=True).startswith(
        (hostir.runtime.nvrtc.HEADER_DIR / "hostir.cuh").read_text())
    assert fd.last_scheduled_fusion_ir(tensor_transforms=True) == fd.scheduled_fusion_ir_for([a])


def test_repro_scripts_run_the_fusion_again():
    """repro_script_for(inputs) and last_repro_script() (after
    execute(save_repro_inputs=True)) define the fusion again and run it."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 3], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(fd.ops.sum(x, [1]), 2.0))
    with pytest.raises(DefinitionError, match="no inputs were saved"):
        fd.last_repro_script()
    a = torch.randn(4, 3)
    fd.execute([a], save_repro_inputs=True)
    for text in (fd.last_repro_script(), fd.repro_script_for([a])):
        scope: dict = {}
        exec(compile(text, "<repro>", "exec"), scope)
        torch.testing.assert_close(scope["fd"].execute(scope["inputs"])[0], a.sum(1) * 2)
    assert "fd.execute" not in fd.repro_script_for()


def test_nvfuser_members_hostir_lacks_say_so_and_what_to_use():
    """FusionDefinition members of nvFuser's that hostir does not provide raise
    an UnsupportedError naming the member and the alternative (an
    AttributeError too, so hasattr answers False); other names are plain
    AttributeErrors."""
    from hostir import FusionDefinition, UnsupportedError
    from hostir.fd_debug import NOT_PROVIDED
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.neg(fd.define_tensor([-1])))
    for name in NOT_PROVIDED:
        assert not hasattr(fd, name)
        with pytest.raises(UnsupportedError, match=rf"FusionDefinition\.{name} \(nvFuser's\) is not provided"):
            getattr(fd, name)
    with pytest.raises(AttributeError, match="no attribute 'no_such_member'") as info:
        fd.no_such_member
    assert not isinstance(info.value, UnsupportedError)


def test_a_class_style_schedule_is_noted_once_as_not_called(capfd):
    class Scheduled(FusionDefinition):
        def definition(self):
            self.x = self.define_tensor([-1], dtype=DataType.Float)
            self.add_output(self.ops.exp(self.x))

        def schedule(self):
            raise AssertionError("hostir does not call nvFuser's schedule()")

    a = torch.randn(7)
    for _ in range(2):
        (out,) = Scheduled().execute([a])
        torch.testing.assert_close(out, torch.exp(a))
    err = capfd.readouterr().err
    assert err.count("Scheduled.schedule() is not called") == 1, err
