"""Concretization and the plan cache (DESIGN §3 rule 2, seeds 000 and 001):
resize bounds specialized by default, `HOSTIR_DISABLE=concretize_resize`
keeps them symbolic, and changing bounds do not cause a recompilation storm."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hostir import DataType, FusionDefinition, config
from hostir.concretize import concretization_key, concretize, dynamic_info
from hostir.ir.errors import ExecutionError
from hostir.ir.verify import verify
from hostir.ir.node import AxisKind, Op
from hostir.ir.env import Env, bind_inputs
from hostir.ir.reference import evaluate

CPU = torch.device("cpu")


@pytest.fixture
def no_resize_specialization(monkeypatch):
    monkeypatch.setenv("HOSTIR_DISABLE", "concretize_resize")
    config.reload()
    assert config.disabled("concretize_resize")
    yield
    monkeypatch.delenv("HOSTIR_DISABLE", raising=False)
    config.reload()


@pytest.fixture(autouse=True)
def _fresh_config():
    config.reload()
    yield
    config.reload()


# ---------------------------------------------------------------- seed 001


def pad_to_broadcast_fd():
    """nvFuser's ResizePadToBroadcastDynamic: a 5-D pad whose 8 widths are Int
    scalar inputs (dim 0 implicitly unpadded), times another tensor."""
    fd = FusionDefinition()
    with fd:
        t0 = fd.define_tensor(shape=[-1] * 5, contiguity=True, dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1] * 5, contiguity=True, dtype=DataType.Float)
        widths = [fd.define_scalar(None, dtype=DataType.Int) for _ in range(8)]
        t2 = fd.ops.pad(t0, widths)
        fd.add_output(fd.ops.mul(t1, t2))
    return fd


# torch.nn.functional.pad order (last dim first). Both sets make dims 1 and 3
# size 1 (broadcast against t1's 4 and 3) from t0 of shape [2, 3, 2, 5, 6].
WIDTHS_A = [0, -1,   0, -4,   1, 1,   -1, -1]
WIDTHS_B = [-2, 1,   -4, 0,   0, 2,    0, -2]
T0_SHAPE = (2, 3, 2, 5, 6)


def _pad_inputs(widths):
    t0 = torch.randn(*T0_SHAPE)
    padded = F.pad(t0, widths)
    assert padded.shape[1] == 1 and padded.shape[3] == 1
    out_shape = list(padded.shape)
    out_shape[1], out_shape[3] = 4, 3          # t1 broadcasts the size-1 axes
    t1 = torch.randn(*out_shape)
    return [t0, t1, *widths], t1 * padded


def test_seed001_pad_to_broadcast_two_width_sets():
    fd = pad_to_broadcast_fd()
    verify(fd._fusion)
    keys = []
    for widths in (WIDTHS_A, WIDTHS_B):
        inputs, expected = _pad_inputs(widths)
        (out,) = fd.execute(inputs)
        assert out.shape == expected.shape
        torch.testing.assert_close(out, expected, rtol=0, atol=0)
        info = fd.cache_info()
        keys.append(info.keys[-1])
        # the concrete pad's size-1 axes are broadcasts
        text = fd.last_segmented_fusion_ir()
        pad_line = next(ln for ln in text.splitlines() if "= pad(" in ln)
        assert pad_line.count("b1") == 2, pad_line
    info = fd.cache_info()
    assert info.misses == 2 and info.plans == 2
    assert keys[0] != keys[1]
    assert len(set(info.keys)) == 2
    # the first plan had the widths compiled in
    first_plan_key = info.keys[0]
    flat = [w for bs in first_plan_key[0] for w in bs]
    assert sorted(flat) == sorted([0, 0] + WIDTHS_A)
    # running the first set again still gives the right answer
    inputs, expected = _pad_inputs(WIDTHS_A)
    torch.testing.assert_close(fd.execute(inputs)[0], expected, rtol=0, atol=0)


def test_seed001_specialized_plan_has_constant_widths():
    fd = pad_to_broadcast_fd()
    inputs, expected = _pad_inputs(WIDTHS_A)
    torch.testing.assert_close(fd.execute(inputs)[0], expected, rtol=0, atol=0)
    assert fd.cache_info().specialize_resize
    pad_line = next(ln for ln in fd.last_segmented_fusion_ir().splitlines() if "= pad(" in ln)
    assert "widths=[(0, 0), (-1, -1), (1, 1), (0, -4), (0, -1)]" in pad_line
    assert " S" not in pad_line.split("= pad(")[1]


def test_seed001_disabled_one_plan_serves_both(no_resize_specialization):
    fd = pad_to_broadcast_fd()
    for widths in (WIDTHS_A, WIDTHS_B, WIDTHS_A):
        inputs, expected = _pad_inputs(widths)
        (out,) = fd.execute(inputs)
        torch.testing.assert_close(out, expected, rtol=0, atol=0)
    info = fd.cache_info()
    assert not info.specialize_resize
    assert info.plans == 1 and info.misses == 1 and info.hits == 2
    # the plan's pad keeps its scalar-input widths
    pad_line = next(ln for ln in fd.last_segmented_fusion_ir().splitlines() if "= pad(" in ln)
    assert "widths=[(0, 0), (S" in pad_line


def test_disabled_still_distinguishes_broadcast_from_iteration(no_resize_specialization):
    """Without specialization the key still holds which axes are size 1."""
    fd = pad_to_broadcast_fd()
    inputs, expected = _pad_inputs(WIDTHS_A)
    torch.testing.assert_close(fd.execute(inputs)[0], expected, rtol=0, atol=0)
    widths = [0, 0, 0, 0, 0, 0, 0, 0]      # no broadcast axes at all
    t0 = torch.randn(*T0_SHAPE)
    t1 = torch.randn(*T0_SHAPE)
    torch.testing.assert_close(fd.execute([t0, t1, *widths])[0], t0 * t1, rtol=0, atol=0)
    assert fd.cache_info().plans == 2


def test_concretize_is_pure_and_key_holds_what_was_specialized():
    fd = pad_to_broadcast_fd()
    f = fd._fusion
    info = dynamic_info(f)
    inputs, expected = _pad_inputs(WIDTHS_A)
    env = bind_inputs(f.inputs, inputs, Env(CPU))
    key_spec = concretization_key(info, env, inputs, True)
    key_sym = concretization_key(info, env, inputs, False)
    assert key_spec[0] is not None and key_sym[0] is None
    assert key_spec[1] == key_sym[1]
    before = str(f)
    c = concretize(f, env, specialize=True)
    assert str(f) == before
    verify(c)
    pad = next(v for v in c.tensor_exprs() if v.op is Op.PAD)
    assert [a.kind for a in pad.logical] == [AxisKind.ITER, AxisKind.BCAST, AxisKind.ITER,
                                             AxisKind.BCAST, AxisKind.ITER]
    assert all(w.op is Op.CONST for w in pad.src[2:])
    # the original and the concrete fusion compute the same thing for these inputs
    torch.testing.assert_close(evaluate(c, inputs, CPU)[0], expected, rtol=0, atol=0)
    c2 = concretize(f, bind_inputs(f.inputs, inputs, Env(CPU)), specialize=False)
    verify(c2)
    pad2 = next(v for v in c2.tensor_exprs() if v.op is Op.PAD)
    assert [w.op for w in pad2.src[2:4]] == [Op.CONST, Op.CONST]   # dim 0: implicit (0, 0)
    assert all(w.op is Op.SCALAR_INPUT for w in pad2.src[4:])
    assert [a.kind for a in pad2.logical] == [a.kind for a in pad.logical]
    torch.testing.assert_close(evaluate(c2, inputs, CPU)[0], expected, rtol=0, atol=0)


# ---------------------------------------------------------------- recompilation storms


def sliding_window_fd(width=4):
    fd = FusionDefinition()
    with fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        off = fd.define_scalar(None, dtype=DataType.Int)
        t1 = fd.ops.slice(t0, [off, 0], [off + width, t0.size(1)])
        fd.add_output(fd.ops.mul(fd.ops.exp(t1), 2.0))
    return fd


def test_thousand_offsets_make_at_most_two_plans(capsys):
    fd = sliding_window_fd()
    x = torch.randn(1010, 3)
    gen = torch.Generator().manual_seed(1)
    offsets = torch.randperm(1000, generator=gen).tolist()
    sample = set(offsets[::37]) | {offsets[0], offsets[1], offsets[-1]}
    checked = 0
    for off in offsets:
        (out,) = fd.execute([x, off])
        assert out.shape == (4, 3)
        if off in sample:
            torch.testing.assert_close(out, torch.exp(x[off:off + 4]) * 2.0)
            checked += 1
    assert checked == len(sample)
    info = fd.cache_info()
    assert info.plans <= 2, info
    assert info.hits + info.misses == 1000
    assert info.misses == info.plans
    assert not info.specialize_resize
    # the switch to symbolic bounds is logged, once
    err = capsys.readouterr().err
    assert err.count("switching to symbolic bounds") == 1


def test_every_offset_correct_after_switch():
    fd = sliding_window_fd(width=3)
    x = torch.randn(50, 2)
    for off in list(range(0, 47)) + [5, 0, 46]:
        (out,) = fd.execute([x, off])
        torch.testing.assert_close(out, torch.exp(x[off:off + 3]) * 2.0)
    assert fd.cache_info().plans <= 2


def test_repeated_bounds_hit_the_specialized_plan():
    fd = sliding_window_fd()
    x = torch.randn(20, 3)
    for _ in range(5):
        (out,) = fd.execute([x, 7])
        torch.testing.assert_close(out, torch.exp(x[7:11]) * 2.0)
    info = fd.cache_info()
    assert info.plans == 1 and info.hits == 4 and info.specialize_resize


def test_symbolic_slice_segment_lists_its_scalar_input(no_resize_specialization):
    """With symbolic bounds, the segment that slices reads the offset scalar."""
    fd = sliding_window_fd()
    x = torch.randn(12, 3)
    (out,) = fd.execute([x, 2])
    torch.testing.assert_close(out, torch.exp(x[2:6]) * 2.0)
    seg = next(s for s in fd.last_segments() if "slice" in s.ops)
    names = [v.name for v in seg.inputs]
    assert "S1" in names, names


def test_slice_to_size_one_becomes_broadcast():
    """A slice of extent 1 at run time is a broadcast in the concrete fusion, so
    it broadcasts against the other operand (seed 001 for slices)."""
    fd = FusionDefinition()
    with fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        lo = fd.define_scalar(None, dtype=DataType.Int)
        hi = fd.define_scalar(None, dtype=DataType.Int)
        s = fd.ops.slice(t0, [lo, 0], [hi, t0.size(1)])
        fd.add_output(fd.ops.add(s, t1))
    x = torch.randn(6, 5)
    y = torch.randn(4, 5)
    (out,) = fd.execute([x, y, 2, 3])
    torch.testing.assert_close(out, x[2:3] + y)
    y2 = torch.randn(3, 5)
    (out,) = fd.execute([x, y2, 1, 4])
    torch.testing.assert_close(out, x[1:4] + y2)


# ---------------------------------------------------------------- seed 000


@pytest.mark.parametrize("n", [8, 64, 1000, 9, 1001])
def test_rotation_from_size_halves(n):
    """t3 = cat(t0[N/2:], t0[:N/2]); t4 = t0 + t3: t0 is read at three
    different indices; the bounds come from t0.size(0)."""
    fd = FusionDefinition()
    with fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        size = t0.size(0)
        half = size / 2
        t1 = fd.ops.slice(t0, [half], [size])
        t2 = fd.ops.slice(t0, [0], [half])
        t3 = fd.ops.cat([t1, t2], 0)
        fd.add_output(fd.ops.add(t0, t3))
    x = torch.randn(n)
    (out,) = fd.execute([x])
    expected = x + torch.cat([x[n // 2:], x[:n // 2]])
    assert torch.equal(out, expected)
    assert torch.equal(evaluate(fd._fusion, [x], CPU)[0], expected)


def test_rotation_one_fusion_many_sizes():
    fd = FusionDefinition()
    with fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        size = t0.size(1)
        half = size / 2
        t1 = fd.ops.slice(t0, [0, half], [t0.size(0), size])
        t2 = fd.ops.slice(t0, [0, 0], [t0.size(0), half])
        t3 = fd.ops.cat([fd.ops.neg(t1), t2], 1)
        fd.add_output(fd.ops.add(fd.ops.mul(t0, 0.5), t3))
    for n in (8, 9, 64, 1000, 1001, 8, 10):
        x = torch.randn(3, n)
        (out,) = fd.execute([x])
        h = n // 2
        expected = x * 0.5 + torch.cat([-x[:, h:], x[:, :h]], 1)
        torch.testing.assert_close(out, expected)
    assert fd.cache_info().plans <= 2


def test_rotation_static_odd_size():
    fd = FusionDefinition()
    with fd:
        t0 = fd.define_tensor(shape=[9], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.slice(t0, [4], [9])
        t2 = fd.ops.slice(t0, [0], [4])
        fd.add_output(fd.ops.add(t0, fd.ops.cat([t1, t2], 0)))
    x = torch.randn(9)
    (out,) = fd.execute([x])
    assert torch.equal(out, x + torch.cat([x[4:], x[:4]]))


@pytest.mark.parametrize("disable", [False, True])
def test_pad_cropping_below_zero_is_an_execution_error(disable, monkeypatch):
    """Negative widths that crop an axis below zero (for this input) are a
    hostir error naming the pad, on a plan hit too, never a raw torch error."""
    if disable:
        monkeypatch.setenv("HOSTIR_DISABLE", "concretize_resize")
        config.reload()
    fd = FusionDefinition()
    with fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.exp(fd.ops.pad(t0, [-1, -1])))
    x = torch.randn(5)
    torch.testing.assert_close(fd.execute([x])[0], torch.exp(x[1:4]))
    with pytest.raises(ExecutionError, match=r"pad -> .*extent -1"):
        fd.execute([torch.randn(1)])
    with pytest.raises(ExecutionError):
        evaluate(fd._fusion, [torch.randn(1)], CPU)
    torch.testing.assert_close(fd.execute([torch.randn(2)])[0], torch.empty(0))


def test_reshape_infer_next_to_empty_slice_is_an_execution_error():
    fd = FusionDefinition()
    with fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.slice(t0, [0, 1], [t0.size(0), 2])
        fd.add_output(fd.ops.reshape(t1, [2, -1, t1.size(1)]))
    x = torch.randn(4, 3)
    torch.testing.assert_close(fd.execute([x])[0], x[:, 1:2].reshape(2, -1, 1))
    # with one column the slice is empty; torch refuses to infer -1 for 0 elements
    with pytest.raises(ExecutionError):
        fd.execute([torch.randn(4, 1)])
