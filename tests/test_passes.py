"""Pre-segmentation passes (DESIGN §3 rule 5, seed 004), each tested as a pure
`Fusion -> Fusion` function: IR text and op counts before and after, the
verifier around it, and the original and rewritten fusions evaluated by the
reference evaluator on the same random inputs.

End-to-end checks go through `fd.execute` and `fd.last_segments()`."""
from __future__ import annotations

import pytest
import torch

from hostir import DataType, FusionDefinition
from hostir.ir.verify import verify
from hostir.ir.printer import fusion_text
from hostir.ir.reference import evaluate
from hostir.ir.rewrite import op_counts
from hostir.passes.pipeline import PRESEG_PASSES, run_passes
from hostir.passes.simplify import (drop_trivial_ops, fold_casts, remove_bcast_squeeze,
                                    remove_empty_tensors)

CPU = torch.device("cpu")
PASSES = [remove_bcast_squeeze, fold_casts, drop_trivial_ops, remove_empty_tensors]


def body(fusion) -> list[str]:
    """The expression lines of the fusion's text (between `%fusion {` and `}`)."""
    lines = fusion_text(fusion).splitlines()
    start = lines.index("%fusion {")
    return [ln.strip() for ln in lines[start + 1:-1]]


def outputs_text(fusion) -> list[str]:
    lines = fusion_text(fusion).splitlines()
    return [ln.strip() for ln in lines[lines.index("Outputs:") + 1:lines.index("%fusion {")]]


def apply(pass_fn, fusion):
    """Run one pass as the pipeline's tests should: verifier before and after,
    and the input fusion left untouched (passes are pure)."""
    verify(fusion)
    before_text = fusion_text(fusion)
    before_counts = op_counts(fusion)
    new = pass_fn(fusion)
    verify(new)
    assert fusion_text(fusion) == before_text, "the pass modified its input fusion"
    assert op_counts(fusion) == before_counts
    return new


def same_values(f_old, f_new, inputs, exact=True):
    a = evaluate(f_old, inputs, CPU)
    b = evaluate(f_new, inputs, CPU)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        if exact:
            assert torch.equal(x, y)
        else:
            torch.testing.assert_close(x, y)
    return a


def define(build):
    fd = FusionDefinition()
    with fd:
        build(fd)
    return fd


# ---------------------------------------------------------------- remove_bcast_squeeze


def test_bcast_relu_squeeze_leaves_only_relu():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.broadcast(t0, [True, False, False])
        t2 = fd.ops.relu(t1)
        t3 = fd.ops.squeeze(t2, [0])
        fd.add_output(t3)

    fd = define(build)
    f = fd._fusion
    assert body(f) == [
        "T1 float[b1, i0, i1] = broadcast(T0, is_broadcast_dim=[True, False, False])",
        "T2 float[b1, i0, i1] = relu(T1)",
        "T3 float[i0, i1] = squeeze(T2, dims=[0])",
    ]
    g = apply(remove_bcast_squeeze, f)
    assert op_counts(f) == {"broadcast": 1, "relu": 1, "squeeze": 1}
    assert op_counts(g) == {"relu": 1}
    assert body(g) == ["T2 float[i0, i1] = relu(T0)"]
    x = torch.randn(3, 5)
    (out,) = same_values(f, g, [x])
    assert torch.equal(out, x.relu())
    # idempotent: nothing left to do, the same object comes back
    assert remove_bcast_squeeze(g) is g

    # seed 004 end to end: only the relu is left, in one pointwise segment
    (res,) = fd.execute([x])
    assert torch.equal(res, torch.relu(x))
    segs = fd.last_segments()
    assert [(s.scheduler, s.ops) for s in segs] == [("pointwise", ["relu"])]
    assert "remove_bcast_squeeze: -1 broadcast, -1 squeeze" in fd.last_segmented_fusion_ir()


def test_bcast_squeeze_direct_pair_cancels():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.broadcast(t0, [False, True, False])
        t2 = fd.ops.squeeze(t1, [1])
        fd.add_output(fd.ops.mul(t2, 3.0))

    f = define(build)._fusion
    g = apply(remove_bcast_squeeze, f)
    assert op_counts(g) == {"mul": 1}
    assert body(g) == ["T3 float[i0, i1] = mul(T0, 3.0)"]
    same_values(f, g, [torch.randn(4, 2)])


def test_bcast_chain_of_unary_ops_and_casts_squeeze():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.broadcast(t0, [False, False, True])
        t2 = fd.ops.neg(t1)
        t3 = fd.ops.cast(t2, DataType.Double)
        t4 = fd.ops.abs(t3)
        t5 = fd.ops.squeeze(t4, [2])
        fd.add_output(t5)

    f = define(build)._fusion
    g = apply(remove_bcast_squeeze, f)
    assert op_counts(f) == {"broadcast": 1, "neg": 1, "cast": 1, "abs": 1, "squeeze": 1}
    assert op_counts(g) == {"neg": 1, "cast": 1, "abs": 1}
    text = "\n".join(body(g))
    assert "broadcast" not in text and "squeeze" not in text
    assert outputs_text(g) == [f"{body(g)[-1].split(' ')[0]} double[i0, i1]"]
    x = torch.randn(3, 4)
    (out,) = same_values(f, g, [x])
    assert torch.equal(out, x.neg().double().abs())


def test_partial_cancel_broadcast_two_squeeze_one():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.broadcast(t0, [True, False, True])
        t2 = fd.ops.squeeze(t1, [2])
        fd.add_output(fd.ops.exp(t2))

    f = define(build)._fusion
    g = apply(remove_bcast_squeeze, f)
    assert op_counts(g) == {"broadcast": 1, "exp": 1}
    assert body(g)[0].endswith("= broadcast(T0, is_broadcast_dim=[True, False])")
    x = torch.randn(6)
    (out,) = same_values(f, g, [x])
    assert out.shape == (1, 6) and torch.equal(out, x.exp()[None])


def test_squeeze_more_than_broadcast_inserted():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, 1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.broadcast(t0, [True, False, False, False])
        t2 = fd.ops.cast(t1, DataType.Double)
        t3 = fd.ops.squeeze(t2, [0, 2])
        fd.add_output(t3)

    f = define(build)._fusion
    g = apply(remove_bcast_squeeze, f)
    assert op_counts(g) == {"squeeze": 1, "cast": 1}
    assert body(g)[0].endswith("= squeeze(T0, dims=[1])")
    x = torch.randn(3, 1, 4)
    (out,) = same_values(f, g, [x])
    assert torch.equal(out, x[:, 0].double())


def test_squeeze_then_broadcast_back_cancels():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, 1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.squeeze(t0, [1])
        t2 = fd.ops.sigmoid(t1)
        t3 = fd.ops.broadcast(t2, [False, True, False])
        fd.add_output(t3)

    f = define(build)._fusion
    g = apply(remove_bcast_squeeze, f)
    assert op_counts(g) == {"sigmoid": 1}
    assert outputs_text(g)[0].endswith("float[i0, b1, i1]")
    x = torch.randn(2, 1, 5)
    (out,) = same_values(f, g, [x])
    assert torch.equal(out, torch.sigmoid(x))


def test_no_swap_when_unary_has_another_use():
    """The relu between the pair is also an output: it must stay where it is,
    with its broadcast dim."""
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.broadcast(t0, [True, False, False])
        t2 = fd.ops.relu(t1)
        t3 = fd.ops.squeeze(t2, [0])
        fd.add_output(t2)
        fd.add_output(fd.ops.neg(t3))

    f = define(build)._fusion
    g = apply(remove_bcast_squeeze, f)
    assert op_counts(g).get("relu") == 1 and op_counts(g).get("broadcast") == 1
    assert outputs_text(g)[0].endswith("float[b1, i0, i1]")
    x = torch.randn(3, 4)
    a, b = same_values(f, g, [x])
    assert torch.equal(a, x.relu()[None]) and torch.equal(b, -x.relu())


def test_different_dims_do_not_cancel():
    """broadcast inserts dim 0, squeeze removes the input's own size-1 dim."""
    def build(fd):
        t0 = fd.define_tensor(shape=[1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.broadcast(t0, [True, False, False])
        t2 = fd.ops.squeeze(t1, [1])
        fd.add_output(t2)

    f = define(build)._fusion
    g = remove_bcast_squeeze(f)
    verify(g)
    x = torch.randn(1, 7)
    (out,) = same_values(f, g, [x])
    assert out.shape == (1, 7) and torch.equal(out, x)


def test_bf16_bcast_cast_squeeze_cast_launches_nothing():
    """Seed 004's pattern (a trivial reduction turned squeeze between casts)."""
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=DataType.BFloat16)
        t1 = fd.ops.broadcast(t0, [True, False, True, False, False])
        t2 = fd.ops.cast(t1, DataType.Float)
        t3 = fd.ops.squeeze(t2, [0, 2])
        t4 = fd.ops.cast(t3, DataType.BFloat16)
        fd.add_output(t4)

    fd = define(build)
    f = fd._fusion
    g, notes = run_passes(f, check=True)
    assert op_counts(f) == {"broadcast": 1, "cast": 2, "squeeze": 1}
    assert op_counts(g) == {}
    assert body(g) == []
    assert g.outputs[0].val is g.inputs[0]
    assert any(n.startswith("remove_bcast_squeeze") for n in notes)
    assert any(n.startswith("fold_casts") for n in notes)

    x = torch.randn(4, 6, 8).bfloat16()
    (out,) = fd.execute([x])
    assert out.dtype == torch.bfloat16 and torch.equal(out, x)
    segs = fd.last_segments()
    assert segs and all(s.scheduler == "alias" for s in segs)
    assert not any(s.launches for s in segs)
    # reference of the original fusion agrees (bf16 -> float -> bf16 is exact)
    assert torch.equal(evaluate(f, [x], CPU)[0], x)


@pytest.mark.parametrize("bcast_first", [False, True])
def test_relu_squeeze_keeps_channels_last_output(bcast_first):
    """Seed 004: the output asks for channels-last; rewriting squeeze(relu(x))
    into relu(x) must keep the requested memory format."""
    def build(fd):
        if bcast_first:
            t0 = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=True, dtype=DataType.Float)
            t1 = fd.ops.broadcast(t0, [False, False, True, False, False])
        else:
            t1 = fd.define_tensor(shape=[-1, -1, 1, -1, -1], contiguity=True, dtype=DataType.Float)
        t2 = fd.ops.relu(t1)
        t3 = fd.ops.squeeze(t2, [2])
        fd.add_output(t3, stride_order=[3, 0, 2, 1])

    fd = define(build)
    f = fd._fusion
    g = apply(remove_bcast_squeeze, f)
    assert g.outputs[0].stride_order == (3, 0, 2, 1)
    assert "stride_order=[3, 0, 2, 1]" in outputs_text(g)[0]
    if bcast_first:
        assert op_counts(g) == {"relu": 1}
    else:
        assert op_counts(g) == {"squeeze": 1, "relu": 1}
    shape = (2, 3, 4, 5)
    x = torch.randn(*shape) if bcast_first else torch.randn(2, 3, 1, 4, 5)
    same_values(f, g, [x])
    (out,) = fd.execute([x])
    expected = torch.relu(x) if bcast_first else torch.relu(x[:, :, 0])
    assert torch.equal(out, expected)
    assert out.is_contiguous(memory_format=torch.channels_last)
    assert not out.is_contiguous()
    if bcast_first:
        assert [(s.scheduler, s.ops) for s in fd.last_segments()] == [("pointwise", ["relu"])]


def test_bcast_squeeze_to_input_with_stride_order_copies():
    """After the pair cancels, the output is the input itself; a requested
    channels-last order still holds (a copy, not a view of a contiguous input)."""
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.broadcast(t0, [True, False, False, False, False])
        t2 = fd.ops.squeeze(t1, [0])
        fd.add_output(t2, stride_order=[3, 0, 2, 1])

    fd = define(build)
    x = torch.randn(2, 3, 4, 5)
    (out,) = fd.execute([x])
    assert torch.equal(out, x)
    assert out.is_contiguous(memory_format=torch.channels_last)


# ---------------------------------------------------------------- fold_casts


def _cast_chain(src: DataType, chain: list[DataType]):
    def build(fd):
        t = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=src)
        for d in chain:
            t = fd.ops.cast(t, d)
        fd.add_output(t)
    return define(build)._fusion


def test_float_bf16_float_does_not_fold():
    f = _cast_chain(DataType.Float, [DataType.BFloat16, DataType.Float])
    g = fold_casts(f)
    verify(g)
    assert g is f
    assert op_counts(g) == {"cast": 2}
    x = torch.randn(64, 33)
    (out,) = evaluate(g, [x], CPU)
    assert torch.equal(out, x.bfloat16().float())
    assert not torch.equal(out, x), "random floats should lose bits through bf16"
    # and the whole pipeline keeps the rounding
    fd = FusionDefinition()
    with fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.cast(fd.ops.cast(t, DataType.BFloat16), DataType.Float))
    (res,) = fd.execute([x])
    assert torch.equal(res, x.bfloat16().float())


def test_bf16_float_bf16_folds():
    f = _cast_chain(DataType.BFloat16, [DataType.Float, DataType.BFloat16])
    g = apply(fold_casts, f)
    assert op_counts(f) == {"cast": 2}
    assert op_counts(g) == {}
    assert g.outputs[0].val is g.inputs[0]
    x = torch.randn(5, 7).bfloat16()
    (out,) = same_values(f, g, [x])
    assert torch.equal(out, x)


def test_int32_int64_int32_folds():
    f = _cast_chain(DataType.Int32, [DataType.Int, DataType.Int32])
    g = apply(fold_casts, f)
    assert op_counts(g) == {}
    x = torch.randint(-2**31, 2**31 - 1, (6, 5), dtype=torch.int32)
    (out,) = same_values(f, g, [x])
    assert torch.equal(out, x)


def test_int64_int32_int64_does_not_fold():
    f = _cast_chain(DataType.Int, [DataType.Int32, DataType.Int])
    assert fold_casts(f) is f


def test_exact_middle_step_folds_into_one_cast():
    """float -> double -> half is float -> half (the middle step is exact)."""
    f = _cast_chain(DataType.Float, [DataType.Double, DataType.Half])
    g = apply(fold_casts, f)
    assert op_counts(g) == {"cast": 1}
    assert body(g) == [body(g)[0]] and "= cast(T0, dtype=" in body(g)[0]
    x = torch.randn(9, 4) * 100
    (out,) = same_values(f, g, [x])
    assert torch.equal(out, x.half())


def test_cast_to_same_dtype_is_dropped():
    f = _cast_chain(DataType.Float, [DataType.Float])
    g = apply(fold_casts, f)
    assert op_counts(f) == {"cast": 1} and op_counts(g) == {}
    same_values(f, g, [torch.randn(2, 3)])


def test_fold_keeps_shared_middle_cast():
    """The middle cast has another consumer: it stays for that one."""
    def build(fd):
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.BFloat16)
        t1 = fd.ops.cast(t0, DataType.Float)
        t2 = fd.ops.cast(t1, DataType.BFloat16)
        fd.add_output(t2)
        fd.add_output(fd.ops.exp(t1))

    f = define(build)._fusion
    g = apply(fold_casts, f)
    assert op_counts(g) == {"cast": 1, "exp": 1}
    x = torch.randn(10).bfloat16()
    a, b = same_values(f, g, [x])
    assert torch.equal(a, x)


# ---------------------------------------------------------------- drop_trivial_ops


def test_drop_trivial_resizes_and_reshapes():
    def build(fd):
        t0 = fd.define_tensor(shape=[4, 5], contiguity=True, dtype=DataType.Float)
        a = fd.ops.pad(t0, [0, 0, 0, 0])
        b = fd.ops.slice(a, [0, 0], [4, 5])
        c = fd.ops.cat([b], 1)
        d = fd.ops.permute(c, [0, 1])
        e = fd.ops.reshape(d, [4, 5])
        fd.add_output(fd.ops.tanh(e))

    f = define(build)._fusion
    g = apply(drop_trivial_ops, f)
    assert op_counts(f) == {"pad": 1, "slice": 1, "cat": 1, "permute": 1, "reshape": 1, "tanh": 1}
    assert op_counts(g) == {"tanh": 1}
    assert body(g) == ["T6 float[4, 5] = tanh(T0)"]
    x = torch.randn(4, 5)
    (out,) = same_values(f, g, [x])
    assert torch.equal(out, x.tanh())


def test_drop_trivial_keeps_real_resizes():
    def build(fd):
        t0 = fd.define_tensor(shape=[4, 5], contiguity=True, dtype=DataType.Float)
        a = fd.ops.pad(t0, [1, 0, 0, 0])
        b = fd.ops.slice(a, [1, 0], [4, 6])
        c = fd.ops.permute(b, [1, 0])
        d = fd.ops.reshape(c, [3, 6])
        fd.add_output(d)

    f = define(build)._fusion
    g = drop_trivial_ops(f)
    assert g is f
    x = torch.randn(4, 5)
    (out,) = evaluate(g, [x], CPU)
    assert torch.equal(out, torch.nn.functional.pad(x, [1, 0])[1:4].permute(1, 0).reshape(3, 6))


def test_drop_trivial_expand():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.expand(t0, [t0.size(0), t0.size(1)])
        fd.add_output(fd.ops.add(t1, t1))

    f = define(build)._fusion
    g = apply(drop_trivial_ops, f)
    assert op_counts(g) == {"add": 1}
    same_values(f, g, [torch.randn(3, 2)])


# ---------------------------------------------------------------- remove_empty_tensors


def test_remove_empty_tensors():
    def build(fd):
        t0 = fd.define_tensor(shape=[0, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, 0], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.relu(t0))
        fd.add_output(fd.ops.sum(t1, dims=[1]))
        fd.add_output(fd.ops.exp(fd.ops.sum(t1, dims=[0])))

    fd = define(build)
    f = fd._fusion
    g = apply(remove_empty_tensors, f)
    assert op_counts(f) == {"relu": 1, "sum": 2, "exp": 1}
    assert op_counts(g) == {"full": 3}
    assert all("= full(shape=" in ln for ln in body(g))
    a, b = torch.randn(0, 3), torch.randn(4, 0)
    o1, o2, o3 = same_values(f, g, [a, b])
    assert o1.shape == (0, 3) and torch.equal(o2, torch.zeros(4)) and o3.shape == (0,)
    r1, r2, r3 = fd.execute([a, b])
    assert r1.shape == (0, 3) and torch.equal(r2, a.new_zeros(4)) and r3.shape == (0,)


def test_non_empty_is_untouched():
    def build(fd):
        t0 = fd.define_tensor(shape=[2, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.sum(t0, dims=[0]))

    f = define(build)._fusion
    assert remove_empty_tensors(f) is f


# ---------------------------------------------------------------- all passes


@pytest.mark.parametrize("pass_fn", PASSES, ids=lambda p: p.__name__)
def test_every_pass_is_listed_and_pure(pass_fn):
    assert pass_fn in PRESEG_PASSES

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.BFloat16)
        t1 = fd.ops.broadcast(t0, [True, False, False])
        t2 = fd.ops.cast(t1, DataType.Float)
        t3 = fd.ops.squeeze(t2, [0])
        t4 = fd.ops.pad(t3, [0, 0])
        t5 = fd.ops.cast(t4, DataType.BFloat16)
        fd.add_output(fd.ops.cast(fd.ops.mul(t5, t5), DataType.Float))

    f = define(build)._fusion
    g = apply(pass_fn, f)
    x = torch.randn(3, 8).bfloat16()
    same_values(f, g, [x])


def test_pipeline_reaches_fixpoint_with_notes():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.BFloat16)
        t1 = fd.ops.broadcast(t0, [True, False, False])
        t2 = fd.ops.cast(t1, DataType.Float)
        t3 = fd.ops.relu(t2)
        t4 = fd.ops.squeeze(t3, [0])
        t5 = fd.ops.pad(t4, [0, 0, 0, 0])
        fd.add_output(fd.ops.cast(t5, DataType.BFloat16))

    f = define(build)._fusion
    g, notes = run_passes(f, check=True)
    assert op_counts(g) == {"cast": 2, "relu": 1}
    assert any("-1 pad" in n for n in notes)
    assert any("-1 broadcast" in n and "-1 squeeze" in n for n in notes)
    g2, notes2 = run_passes(g, check=True)
    assert g2 is g and notes2 == []
    x = torch.randn(4, 9).bfloat16()
    (out,) = same_values(f, g, [x])
    assert torch.equal(out, x.float().relu().bfloat16())
