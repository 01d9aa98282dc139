"""Misuse of the frontend: each case checks the exception class and that the
message names the culprit (tensor name, op name) and says expected vs given."""
import re
from contextlib import contextmanager

import pytest
import torch

import hostir
from hostir import DataType, FusionDefinition


@contextmanager
def raises(cls, *fragments):
    """Like pytest.raises, and every fragment must occur in the message."""
    with pytest.raises(cls) as info:
        yield info
    msg = str(info.value)
    assert type(info.value) is cls, f"expected exactly {cls.__name__}, got {type(info.value).__name__}"
    missing = [f for f in fragments if f not in msg]
    assert not missing, f"message {msg!r} does not mention {missing}"


def word(msg: str, w: str) -> bool:
    """`w` occurs as a whole word (so 'T1' does not match 'T10')."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(w)}(?![A-Za-z0-9_])", msg) is not None


def sym(fd, ndim, dtype=DataType.Float):
    return fd.define_tensor(shape=[-1] * ndim, contiguity=[True] * ndim, dtype=dtype)


def static(fd, shape, dtype=DataType.Float):
    return fd.define_tensor(shape=list(shape), contiguity=[None if s == 1 else True for s in shape],
                            dtype=dtype)


# ============================================================ execute-time

@pytest.fixture
def add_mul():
    """T0 + T1, times the Int scalar S2."""
    with FusionDefinition() as fd:
        t0 = sym(fd, 2)
        t1 = sym(fd, 2)
        s2 = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.mul(fd.ops.add(t0, t1), s2))
    assert (t0.name, t1.name, s2.name) == ("T0", "T1", "S2")
    return fd


def test_sanity_add_mul_runs(add_mul):
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    (out,) = add_mul.execute([x, y, 3])
    torch.testing.assert_close(out, (x + y) * 3)


def test_wrong_input_count(add_mul):
    with raises(hostir.InputError, "expected 3 inputs", "T0", "T1", "S2", "got 2"):
        add_mul.execute([torch.randn(2, 3), torch.randn(2, 3)])


def test_inputs_not_a_list(add_mul):
    with raises(hostir.InputError, "list", "Tensor"):
        add_mul.execute(torch.randn(2, 3))


def test_wrong_rank(add_mul):
    with raises(hostir.InputError, "input 1 (T1)", "expected 2 dims", "[2, 3, 4]"):
        add_mul.execute([torch.randn(2, 3), torch.randn(2, 3, 4), 2])


def test_wrong_dtype(add_mul):
    with raises(hostir.InputError, "input 1 (T1)", "float", "torch.float64"):
        add_mul.execute([torch.randn(2, 3), torch.randn(2, 3, dtype=torch.float64), 2])


def test_unsupported_torch_dtype(add_mul):
    with raises(hostir.InputError, "input 0 (T0)", "float", "uint8"):
        add_mul.execute([torch.randint(0, 9, (2, 3), dtype=torch.uint8), torch.randn(2, 3), 2])


def test_number_where_tensor_expected(add_mul):
    with raises(hostir.InputError, "input 0 (T0)", "expected a tensor", "float"):
        add_mul.execute([1.5, torch.randn(2, 3), 2])


def test_non_number_for_scalar(add_mul):
    with raises(hostir.InputError, "input 2 (S2)", "int64", "str"):
        add_mul.execute([torch.randn(2, 3), torch.randn(2, 3), "3"])


def test_float_for_int_scalar(add_mul):
    with raises(hostir.InputError, "input 2 (S2)", "integer", "int64", "2.5"):
        add_mul.execute([torch.randn(2, 3), torch.randn(2, 3), 2.5])


def test_float_0d_tensor_for_int_scalar(add_mul):
    with raises(hostir.InputError, "input 2 (S2)", "int64", "2.5"):
        add_mul.execute([torch.randn(2, 3), torch.randn(2, 3), torch.tensor(2.5)])


def test_tensor_with_dims_for_scalar(add_mul):
    with raises(hostir.InputError, "input 2 (S2)", "scalar", "[3]"):
        add_mul.execute([torch.randn(2, 3), torch.randn(2, 3), torch.randint(1, 5, (3,))])


def test_static_extent_mismatch():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, 4], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.neg(t0))
    with raises(hostir.InputError, "input 0 (T0)", "dim 1", "static extent 4", "got 5"):
        fd.execute([torch.randn(3, 5)])


def test_broadcast_dim_given_size_5():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, 1, -1], contiguity=[True, None, True], dtype=DataType.Float)
        fd.add_output(fd.ops.neg(t0))
    with raises(hostir.InputError, "input 0 (T0)", "dim 1", "broadcast", "extent 5"):
        fd.execute([torch.randn(2, 5, 4)])


def test_contiguity_violated_by_transposed_tensor(add_mul):
    x = torch.randn(3, 2).t()
    with raises(hostir.InputError, "input 0 (T0)", "contiguous", "[True, True]", "needs stride 1",
                "[1, 2]", "[2, 3]"):
        add_mul.execute([x, torch.randn(2, 3), 2])


def test_declared_stride_order_violated_non_contiguous():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[False, False], dtype=DataType.Float,
                              stride_order=[0, 1])
        fd.add_output(fd.ops.neg(t0))
    x = torch.randn(4, 3).t()  # column-major: matches stride_order [0, 1]
    torch.testing.assert_close(fd.execute([x])[0], -x)
    with raises(hostir.InputError, "input 0 (T0)", "stride_order [0, 1]", "[4, 1]"):
        fd.execute([torch.randn(3, 4)])


def test_declared_stride_order_violated_contiguous():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.Float,
                              stride_order=[2, 0, 1])
        fd.add_output(fd.ops.neg(t0))
    ok = torch.randn(2, 4, 3).permute(0, 2, 1)
    torch.testing.assert_close(fd.execute([ok])[0], -ok)
    with raises(hostir.InputError, "input 0 (T0)", "stride_order=[2, 0, 1]", "[12, 4, 1]"):
        fd.execute([torch.randn(2, 3, 4)])


def test_tensors_on_different_devices(add_mul):
    meta = torch.empty(2, 3, device="meta")
    with raises(hostir.InputError, "input 1 (T1)", "meta", "input 0 (T0)", "cpu"):
        add_mul.execute([torch.randn(2, 3), meta, 2])


def test_is_cpu_input_needs_0d_tensor():
    with FusionDefinition() as fd:
        t0 = sym(fd, 1)
        t1 = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float, is_cpu=True)
        fd.add_output(fd.ops.mul(t0, t1))
    x, s = torch.randn(3), torch.randn(())
    torch.testing.assert_close(fd.execute([x, s])[0], x * s)
    with raises(hostir.InputError, "input 1 (T1)", "0 dims", "[2]"):
        fd.execute([x, torch.randn(2)])


def test_runtime_extent_mismatch_binary_op(add_mul):
    with raises(hostir.ExecutionError, "add", "T1", "4", "3") as info:
        add_mul.execute([torch.randn(2, 3), torch.randn(2, 4), 2])
    assert "dim 1" in str(info.value)


@pytest.mark.parametrize("shapes", [((2, 1), (2, 5)), ((2, 5), (2, 1))], ids=["lhs1", "rhs1"])
def test_runtime_size1_on_iteration_axis_is_an_error(add_mul, shapes):
    a, b = (torch.randn(*s) for s in shapes)
    with raises(hostir.ExecutionError, "add", "dim 1", "1", "5") as info:
        add_mul.execute([a, b, 2])
    assert word(str(info.value), "1") and word(str(info.value), "5")


def test_runtime_size1_message_names_both_operands(add_mul):
    with pytest.raises(hostir.ExecutionError) as info:
        add_mul.execute([torch.randn(2, 1), torch.randn(2, 5), 2])
    msg = str(info.value)
    assert word(msg, "T0") and word(msg, "T1"), msg


def test_runtime_extent_mismatch_where():
    with FusionDefinition() as fd:
        t0 = sym(fd, 1)
        t1 = sym(fd, 1)
        fd.add_output(fd.ops.where(fd.ops.gt(t0, 0.0), t1, 1.0))
    with raises(hostir.ExecutionError, "where", "T1", "4", "3"):
        fd.execute([torch.randn(3), torch.randn(4)])


def test_runtime_reshape_element_count():
    with FusionDefinition() as fd:
        t0 = sym(fd, 2)
        fd.add_output(fd.ops.reshape(t0, [5, 2]))
    with raises(hostir.ExecutionError, "reshape", "[5, 2]", "12"):
        fd.execute([torch.randn(3, 4)])


def test_execute_inside_with_block():
    with pytest.raises(hostir.DefinitionError, match="inside the `with` block"):
        with FusionDefinition() as fd:
            t0 = sym(fd, 1)
            fd.add_output(fd.ops.neg(t0))
            fd.execute([torch.randn(3)])


# ============================================================ definition-time

def define(build):
    """Run `build(fd)` inside a fresh definition."""
    with FusionDefinition() as fd:
        build(fd)
    return fd


def test_incompatible_static_shapes_binary_op():
    with raises(hostir.DefinitionError, "add", "T0", "T1", "float[2, 3]", "float[2, 4]",
                "extent 3", "extent 4"):
        define(lambda fd: fd.ops.add(static(fd, [2, 3]), static(fd, [2, 4])))


@pytest.mark.parametrize("opname,call", [
    ("sum", lambda fd, t: fd.ops.sum(t, dims=[2])),
    ("max", lambda fd, t: fd.ops.max(t, dims=[-3])),
    ("permute", lambda fd, t: fd.ops.permute(t, dims=[0, 2])),
    ("cat", lambda fd, t: fd.ops.cat([t, t], dim=2)),
    ("squeeze", lambda fd, t: fd.ops.squeeze(t, dims=[3])),
])
def test_dim_out_of_range(opname, call):
    bad = {"sum": "dim 2", "max": "dim -3", "permute": "dim 2", "cat": "dim 2", "squeeze": "dim 3"}
    with raises(hostir.DefinitionError, f"{opname}:", bad[opname], "T0", "2 dims", "-2 <= dim < 2"):
        define(lambda fd: call(fd, fd.define_tensor(shape=[-1, 1], contiguity=[True, None],
                                                    dtype=DataType.Float)))


@pytest.mark.parametrize("widths", [[1, 2, 3], [1, 2, 3, 4, 5, 6]])
def test_wrong_pad_width_count(widths):
    with raises(hostir.DefinitionError, "pad", "T0", "4", f"got {len(widths)}"):
        define(lambda fd: fd.ops.pad(sym(fd, 2), widths))


def test_pad_static_negative_extent():
    with raises(hostir.DefinitionError, "pad", "dim 0", "T0", "-1", "(-2, -2)"):
        define(lambda fd: fd.ops.pad(static(fd, [3]), [-2, -2]))


def test_cat_rank_mismatch():
    with raises(hostir.DefinitionError, "cat", "T0", "T1", "has 2", "has 3"):
        define(lambda fd: fd.ops.cat([sym(fd, 2), sym(fd, 3)], dim=0))


def test_cat_static_extent_mismatch():
    with raises(hostir.DefinitionError, "cat", "T0", "T1", "dim 1", "extent 3", "extent 5"):
        define(lambda fd: fd.ops.cat([static(fd, [4, 3]), static(fd, [4, 5])], dim=0))


def test_reshape_element_count():
    with raises(hostir.DefinitionError, "reshape", "T0", "12 elements", "[5, 2]", "10"):
        define(lambda fd: fd.ops.reshape(static(fd, [4, 3]), [5, 2]))


def test_reshape_cannot_infer():
    with raises(hostir.DefinitionError, "reshape", "T0", "[5, -1]", "12 elements"):
        define(lambda fd: fd.ops.reshape(static(fd, [4, 3]), [5, -1]))


def test_squeeze_non_broadcast_dim():
    with raises(hostir.DefinitionError, "squeeze", "dim 1", "T0", "not a broadcast", "extent 4"):
        define(lambda fd: fd.ops.squeeze(fd.define_tensor(shape=[-1, 4], contiguity=[True, True],
                                                          dtype=DataType.Float), dims=[1]))


def test_squeeze_symbolic_dim():
    with raises(hostir.DefinitionError, "squeeze", "dim 0", "T0", "not a broadcast", "i0"):
        define(lambda fd: fd.ops.squeeze(sym(fd, 2), dims=[0]))


def test_squeeze_expanded_dim_needs_flag():
    def build(fd):
        t = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.Float)
        e = fd.ops.expand(t, [-1, 5])
        assert e.name == "T1"
        fd.ops.squeeze(e, dims=[1])
    with raises(hostir.DefinitionError, "squeeze", "dim 1", "T1", "expanded to 5", "squeeze_expanded"):
        define(build)


def test_expand_non_broadcast_static_dim():
    with raises(hostir.DefinitionError, "expand", "dim 1", "T0", "extent 4", "expanded to 6"):
        define(lambda fd: fd.ops.expand(fd.define_tensor(shape=[-1, 4], contiguity=[True, True],
                                                         dtype=DataType.Float), [3, 6]))


def test_expand_wrong_shape_length():
    with raises(hostir.DefinitionError, "expand", "T0", "3 entries", "2 dims"):
        define(lambda fd: fd.ops.expand(sym(fd, 2), [-1, -1, 4]))


def test_expand_symbolic_dim_to_other_extent_is_checked():
    with FusionDefinition() as fd:
        t0 = sym(fd, 2)
        fd.add_output(fd.ops.expand(t0, [-1, 6]))
    with pytest.raises((hostir.ExecutionError, hostir.InputError), match="expand"):
        fd.execute([torch.randn(3, 4)])


def test_broadcast_in_dim_symbolic_dim_mismatch_is_checked():
    with FusionDefinition() as fd:
        t0 = sym(fd, 2)
        fd.add_output(fd.ops.broadcast_in_dim(t0, [3, 6], [0, 1]))
    with pytest.raises((hostir.ExecutionError, hostir.InputError), match="broadcast_in_dim"):
        fd.execute([torch.randn(3, 4)])


@pytest.mark.parametrize("dims,fragment", [([0, 0, 1], "repeated dims [0, 0, 1]"),
                                            ([0, 1], "not a permutation"),
                                            ([2, 0, 1, 3], "out of range")])
def test_bad_permutation(dims, fragment):
    with raises(hostir.DefinitionError, "permute", "T0", fragment):
        define(lambda fd: fd.ops.permute(sym(fd, 3), dims))


def test_broadcast_in_dim_wrong_dims_length():
    with raises(hostir.DefinitionError, "broadcast_in_dim", "[1]", "1 entries", "T0", "2 dims"):
        define(lambda fd: fd.ops.broadcast_in_dim(sym(fd, 2), [3, 5, 4], [1]))


def test_broadcast_in_dim_static_mismatch():
    with raises(hostir.DefinitionError, "broadcast_in_dim", "T0", "extent 4", "extent 7"):
        define(lambda fd: fd.ops.broadcast_in_dim(static(fd, [3, 4]), [3, 7], [0, 1]))


def test_define_tensor_bad_contiguity_length():
    with raises(hostir.DefinitionError, "define_tensor", "contiguity has 1 entries", "[-1, -1]",
                "2 dims"):
        define(lambda fd: fd.define_tensor(shape=[-1, -1], contiguity=[True], dtype=DataType.Float))


@pytest.mark.parametrize("order", [[0, 2], [0, 0], [1]])
def test_define_tensor_bad_stride_order(order):
    with raises(hostir.DefinitionError, "define_tensor", f"stride_order {order}", "0..1"):
        define(lambda fd: fd.define_tensor(shape=[-1, -1], contiguity=[True, True],
                                           dtype=DataType.Float, stride_order=order))


def test_define_tensor_bad_shape_entry():
    with raises(hostir.DefinitionError, "define_tensor", "[-1, -2]"):
        define(lambda fd: fd.define_tensor(shape=[-1, -2], contiguity=[True, True],
                                           dtype=DataType.Float))


def test_define_scalar_non_integer_for_int():
    with raises(hostir.DefinitionError, "define_scalar", "2.5", "DataType.Int"):
        define(lambda fd: fd.define_scalar(2.5, dtype=DataType.Int))


def test_define_scalar_complex_for_a_real_dtype():
    with raises(hostir.DefinitionError, "define_scalar", "(1+2j)", "DataType.Float"):
        define(lambda fd: fd.define_scalar(1 + 2j, dtype=DataType.Float))


def test_complex_number_for_a_real_scalar_input():
    with FusionDefinition() as fd:
        t = sym(fd, 1)
        fd.add_output(fd.ops.mul(t, fd.define_scalar(None, dtype=DataType.Double)))
    with raises(hostir.InputError, "input 1 (S1)", "double", "complex number", "(1+2j)"):
        fd.execute([torch.randn(3), 1 + 2j])


def test_complex_tensor_for_a_float_input_and_back():
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.abs(sym(fd, 1, DataType.ComplexFloat)))
    with raises(hostir.InputError, "input 0 (T0)", "cfloat", "torch.float32"):
        fd.execute([torch.randn(3)])
    z = torch.randn(3, dtype=torch.complex64)
    torch.testing.assert_close(fd.execute([z])[0], z.abs())


def test_fusion_without_outputs():
    with raises(hostir.DefinitionError, "no outputs", "add_output"):
        define(lambda fd: fd.ops.neg(sym(fd, 1)))


def test_scalar_output():
    with raises(hostir.DefinitionError, "add_output", "Tensor", "S0"):
        define(lambda fd: fd.add_output(fd.define_scalar(1.5)))


def test_ops_outside_with_block():
    with FusionDefinition() as fd:
        t0 = sym(fd, 1)
        fd.add_output(fd.ops.neg(t0))
    with raises(hostir.DefinitionError, "fd.ops.exp", "not being defined"):
        fd.ops.exp(t0)
    with raises(hostir.DefinitionError, "add_output", "not being defined"):
        fd.add_output(t0)
    with raises(hostir.DefinitionError, "define_tensor", "not being defined"):
        sym(fd, 1)


def test_redefining_a_defined_fusion():
    fd = define(lambda fd: fd.add_output(fd.ops.neg(sym(fd, 1))))
    with raises(hostir.DefinitionError, "already defined"):
        with fd:
            pass


def test_tensor_from_another_fusion_definition():
    with FusionDefinition() as other:
        other.define_scalar(None, dtype=DataType.Double)
        foreign = sym(other, 1)
        other.add_output(foreign)
    assert foreign.name == "T1"
    with raises(hostir.DefinitionError, "add", "T1", "another FusionDefinition"):
        define(lambda fd: fd.ops.add(fd.define_tensor(shape=[-1], contiguity=[True],
                                                      dtype=DataType.Float), foreign))


def test_torch_tensor_passed_to_op():
    with raises(hostir.DefinitionError, "mul", "torch.Tensor", "define_tensor"):
        define(lambda fd: fd.ops.mul(sym(fd, 1), torch.randn(3)))


def test_alias_input_with_different_dtype():
    def build(fd):
        a = sym(fd, 1)
        fd.add_output(fd.ops.cast(a, DataType.Double), alias_input=a)
    with raises(hostir.DefinitionError, "add_output", "T1", "double[i0]", "T0", "float[i0]",
                "same dtype"):
        define(build)


def test_alias_input_not_an_input():
    def build(fd):
        a = sym(fd, 1)
        b = fd.ops.neg(a)
        fd.add_output(fd.ops.exp(a), alias_input=b)
    with raises(hostir.DefinitionError, "add_output", "alias_input", "T1"):
        define(build)


def test_add_output_bad_stride_order():
    def build(fd):
        fd.add_output(fd.ops.neg(sym(fd, 2)), stride_order=[0, 0])
    with raises(hostir.DefinitionError, "add_output", "stride_order [0, 0]", "T1", "0..1"):
        define(build)


def test_where_with_non_bool_condition():
    with raises(hostir.DefinitionError, "where", "condition", "Bool", "T0", "float"):
        define(lambda fd: fd.ops.where(sym(fd, 1), sym(fd, 1), sym(fd, 1)))


def test_matmul_mismatched_k():
    with raises(hostir.DefinitionError, "matmul", "T0", "float[3, 4]", "T1", "float[5, 6]",
                "extent 4", "extent 5"):
        define(lambda fd: fd.ops.matmul(static(fd, [3, 4]), static(fd, [5, 6])))


def test_matmul_mismatched_k_at_run_time():
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.matmul(sym(fd, 2), sym(fd, 2)))
    with raises(hostir.ExecutionError, "matmul", "3x4", "5x6"):
        fd.execute([torch.randn(3, 4), torch.randn(5, 6)])


def test_linear_mismatched_in_features():
    with raises(hostir.DefinitionError, "linear", "T0", "T1", "extent 4", "extent 6"):
        define(lambda fd: fd.ops.linear(static(fd, [3, 4]), static(fd, [5, 6])))


def test_slice_wrong_index_count():
    with raises(hostir.DefinitionError, "slice", "T0", "2 dims", "1 start indices", "1 end indices"):
        define(lambda fd: fd.ops.slice(sym(fd, 2), [0], [1]))


def test_sum_empty_dims():
    with raises(hostir.DefinitionError, "sum", "dims is empty", "T0"):
        define(lambda fd: fd.ops.sum(sym(fd, 2), dims=[]))


def test_bitwise_op_on_float():
    with raises(hostir.DefinitionError, "bitwise_and", "T0", "float"):
        define(lambda fd: fd.ops.bitwise_and(sym(fd, 1), sym(fd, 1)))


def test_cast_to_null():
    with raises(hostir.DefinitionError, "cast", "DataType.Null"):
        define(lambda fd: fd.ops.cast(sym(fd, 1), DataType.Null))


# ============================================================ unsupported

def test_matmul_of_integers_is_unsupported():
    with raises(hostir.UnsupportedError, "matmul", "floating point", "T0", "int64"):
        define(lambda fd: fd.ops.matmul(sym(fd, 2, DataType.Int), sym(fd, 2, DataType.Int)))


def test_negative_slice_stride_is_unsupported():
    with raises(hostir.UnsupportedError, "slice", "strides", "[-1]"):
        define(lambda fd: fd.ops.slice(sym(fd, 1), [0], [3], [-1]))


def test_error_classes_are_distinct_and_catchable_as_base():
    errs = [hostir.DefinitionError, hostir.InputError, hostir.ExecutionError,
            hostir.UnsupportedError, hostir.VerificationError]
    assert len(set(errs)) == len(errs)
    for e in errs:
        assert issubclass(e, hostir.HostirError)
    for a in errs:
        for b in errs:
            assert (a is b) or not issubclass(a, b)
