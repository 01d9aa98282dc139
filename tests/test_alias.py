"""Alias analysis (DESIGN §3 rule 4, seed 002): outputs that are views of
inputs are torch views and launch nothing; layouts that a view cannot express
(channels-last to 1-D, stride-0 expanded axes, non-contiguous inputs) are
copied and still correct; `alias_input` updates an input in place."""
from __future__ import annotations

import pytest
import torch

from hostir import DataType, FusionDefinition
from hostir.ir.verify import verify
from hostir.ir.reference import evaluate

CPU = torch.device("cpu")


def define(build):
    fd = FusionDefinition()
    with fd:
        build(fd)
    verify(fd._fusion)
    return fd


def schedulers(fd):
    return [s.scheduler for s in fd.last_segments()]


def only_alias(fd):
    segs = fd.last_segments()
    return bool(segs) and all(s.scheduler == "alias" and not s.launches for s in segs)


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


# ---------------------------------------------------------------- views


@pytest.mark.parametrize("static", [True, False])
def test_reshape_chain_is_a_view(static):
    def build(fd):
        shape = [2, 3, 4] if static else [-1, -1, -1]
        t0 = fd.define_tensor(shape=shape, contiguity=True, dtype=DataType.Float)
        if static:
            t1 = fd.ops.reshape(t0, [2, 12])
            t2 = fd.ops.reshape(t1, [24])
        else:
            t1 = fd.ops.reshape(t0, [t0.size(0), t0.size(1) * t0.size(2)])
            t2 = fd.ops.reshape(t1, [-1])
        fd.add_output(t2)

    fd = define(build)
    x = torch.randn(2, 3, 4)
    (out,) = fd.execute([x])
    assert torch.equal(out, x.reshape(24))
    assert out.data_ptr() == x.data_ptr()
    assert only_alias(fd)
    assert fd.last_segments()[0].ops == ["reshape", "reshape"]
    assert "(no kernel)" in fd.last_segmented_fusion_ir()
    # a view: writes to the input show through
    x[1, 2, 3] = 123.0
    assert out[23] == 123.0


def test_channels_last_input_to_1d_is_a_copy():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=True, dtype=DataType.Float,
                              stride_order=[3, 0, 2, 1])
        fd.add_output(fd.ops.reshape(t0, [-1]))

    fd = define(build)
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    (out,) = fd.execute([x])
    assert out.shape == (120,)
    assert torch.equal(out, x.reshape(-1))
    assert not shares_storage(out, x)
    assert any(s.launches for s in fd.last_segments())
    assert torch.equal(evaluate(fd._fusion, [x], CPU)[0], x.reshape(-1))


def test_channels_last_permute_to_nhwc_then_flatten_is_a_view():
    """Permuting to the allocation order first makes the flatten expressible."""
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=True, dtype=DataType.Float,
                              stride_order=[3, 0, 2, 1])
        t1 = fd.ops.permute(t0, [0, 2, 3, 1])
        fd.add_output(fd.ops.reshape(t1, [-1]))

    fd = define(build)
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    (out,) = fd.execute([x])
    assert torch.equal(out, x.permute(0, 2, 3, 1).reshape(-1))
    assert out.data_ptr() == x.data_ptr() and only_alias(fd)


def test_broadcast_then_reshape_splitting_expanded_axis():
    """[4,5] -> [4,5,6] (stride 0) -> [40,3]: the expanded axis is split and
    merged with real ones; this needs a copy and must be correct."""
    def build(fd):
        t0 = fd.define_tensor(shape=[4, 5], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.broadcast_in_dim(t0, [4, 5, 6], [0, 1])
        fd.add_output(fd.ops.reshape(t1, [40, 3]))

    fd = define(build)
    x = torch.randn(4, 5)
    (out,) = fd.execute([x])
    expected = x[:, :, None].expand(4, 5, 6).reshape(40, 3)
    assert torch.equal(out, expected)
    assert not shares_storage(out, x)
    assert "pointwise" in schedulers(fd)


def test_broadcast_expand_is_a_view():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.broadcast_in_dim(t0, [t0.size(0), 7, t0.size(1)], [0, 2]))

    fd = define(build)
    x = torch.randn(3, 5)
    (out,) = fd.execute([x])
    assert torch.equal(out, x[:, None, :].expand(3, 7, 5))
    assert out.data_ptr() == x.data_ptr() and out.stride(1) == 0
    assert only_alias(fd)


def test_row_slice_is_a_view():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.slice(t0, [1, 0], [t0.size(0), t0.size(1)]))

    fd = define(build)
    x = torch.randn(5, 6)
    (out,) = fd.execute([x])
    assert torch.equal(out, x[1:])
    assert out.data_ptr() == x[1:].data_ptr()
    assert only_alias(fd)
    # a second call with another shape is still right
    y = torch.randn(3, 2)
    (out2,) = fd.execute([y])
    assert torch.equal(out2, y[1:]) and out2.data_ptr() == y[1:].data_ptr()


def test_permute_is_a_view():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.permute(t0, [2, 0, 1]))

    fd = define(build)
    x = torch.randn(3, 4, 5)
    (out,) = fd.execute([x])
    assert torch.equal(out, x.permute(2, 0, 1))
    assert out.data_ptr() == x.data_ptr() and out.stride() == x.permute(2, 0, 1).stride()
    assert only_alias(fd)
    assert fd.last_segments()[0].ops == ["permute"]


def test_squeeze_of_input_is_a_view():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, 1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.squeeze(t0, [1]))

    fd = define(build)
    x = torch.randn(4, 1, 3)
    (out,) = fd.execute([x])
    assert torch.equal(out, x[:, 0]) and out.data_ptr() == x.data_ptr()
    assert only_alias(fd)


def test_non_contiguous_input_reshaped_to_1d():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=False, dtype=DataType.Float)
        fd.add_output(fd.ops.reshape(t0, [-1]))

    fd = define(build)
    x = torch.randn(5, 6).t()
    assert not x.is_contiguous()
    (out,) = fd.execute([x])
    assert torch.equal(out, x.reshape(-1))
    assert not shares_storage(out, x)
    # then a contiguous input through the same fusion: may be a view, must be right
    y = torch.randn(6, 5)
    (out2,) = fd.execute([y])
    assert torch.equal(out2, y.reshape(-1))
    # and the transposed one again (the plan for it must not be the view plan)
    x2 = torch.randn(4, 7).t()
    (out3,) = fd.execute([x2])
    assert torch.equal(out3, x2.reshape(-1))


def test_strided_input_reshaped():
    """Every other column of a bigger buffer: no 1-D view exists."""
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=False, dtype=DataType.Float)
        t1 = fd.ops.reshape(t0, [-1])
        fd.add_output(t1)
        fd.add_output(fd.ops.mul(t1, 2.0))

    fd = define(build)
    base = torch.randn(4, 10)
    x = base[:, ::2]
    a, b = fd.execute([x])
    assert torch.equal(a, x.reshape(-1)) and torch.equal(b, x.reshape(-1) * 2.0)


def test_view_output_with_requested_layout():
    """A permute output that asks for the default (row-major) order cannot be a
    view of a contiguous input."""
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.permute(t0, [1, 0]), stride_order=[1, 0])

    fd = define(build)
    x = torch.randn(3, 4)
    (out,) = fd.execute([x])
    assert torch.equal(out, x.t()) and out.is_contiguous()


def test_reshape_output_with_requested_column_major_layout():
    """Seed 002: the frontend asks for a non-default stride order on a reshape
    output; the reshape must copy into that layout rather than alias."""
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.reshape(t0, [t0.size(0) * t0.size(1), t0.size(2)])
        fd.add_output(t1, stride_order=[0, 1])

    fd = define(build)
    x = torch.randn(2, 3, 4)
    (out,) = fd.execute([x])
    assert torch.equal(out, x.reshape(6, 4))
    assert out.stride() == (1, 6)
    assert not shares_storage(out, x)


def test_view_and_computed_output_together():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.reshape(t0, [-1])
        fd.add_output(t1)
        fd.add_output(fd.ops.exp(t1))

    fd = define(build)
    x = torch.randn(3, 4)
    a, b = fd.execute([x])
    assert torch.equal(a, x.reshape(-1)) and a.data_ptr() == x.data_ptr()
    torch.testing.assert_close(b, x.reshape(-1).exp())
    scheds = schedulers(fd)
    assert "alias" in scheds and "pointwise" in scheds


# ---------------------------------------------------------------- in place


def test_alias_input_updates_in_place():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t2 = fd.ops.add(t0, fd.ops.mul(t1, 0.5))
        fd.add_output(t2, alias_input=t0)
        fd.add_output(fd.ops.neg(t2))

    fd = define(build)
    x = torch.randn(5, 6)
    y = torch.randn(5, 6)
    x0 = x.clone()
    ptr = x.data_ptr()
    outs = fd.execute([x, y])
    assert len(outs) == 1               # the in-place output is not returned
    expected = x0 + y * 0.5
    torch.testing.assert_close(x, expected)
    assert x.data_ptr() == ptr
    torch.testing.assert_close(outs[0], -expected)
    # a second step accumulates on the updated buffer
    fd.execute([x, y])
    torch.testing.assert_close(x, x0 + y)


def test_alias_input_on_strided_buffer():
    """In-place update of a non-contiguous input writes through its strides."""
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=False, dtype=DataType.Float)
        fd.add_output(fd.ops.mul(t0, 3.0), alias_input=t0)

    fd = define(build)
    base = torch.randn(4, 8)
    keep = base.clone()
    view = base[:, 1::2]
    fd.execute([view])
    torch.testing.assert_close(base[:, 1::2], keep[:, 1::2] * 3.0)
    assert torch.equal(base[:, 0::2], keep[:, 0::2])
