"""Segmentation and its dump (DESIGN §3 rule 6, seed 003): segments by
scheduler kind, a reason for every cut, every expression of the dump tagged
with its segment; every output compared against torch."""
from __future__ import annotations

import re

import pytest
import torch

from hostir import DataType, FusionDefinition
from hostir.ir.errors import InputError
from hostir.ir.verify import verify
from hostir.ir.reference import evaluate
from test_seed003 import nvfuser_fusion_id6

CPU = torch.device("cpu")


def define(build):
    fd = FusionDefinition()
    with fd:
        build(fd)
    verify(fd._fusion)
    return fd


def fusion_block(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index("%fusion {")
    end = lines.index("}", start)
    return lines[start + 1:end]


def check_dump(fd):
    """The dump of the last run: every expression of the %fusion block tagged
    `# seg<k> <scheduler>` matching fd.last_segments(), one entry per segment,
    and every reason naming a segment names another, existing one."""
    text = fd.last_segmented_fusion_ir()
    segs = fd.last_segments()
    assert text.startswith("Segmented fusion (IR after pre-segmentation passes):")
    block = fusion_block(text)
    ops_in_dump: dict[int, list[str]] = {}
    for ln in block:
        m = re.search(r"  # seg(\d+) (\w+)$", ln)
        assert m, f"untagged expression line: {ln!r}"
        sid, sched = int(m.group(1)), m.group(2)
        assert 0 <= sid < len(segs) and segs[sid].scheduler == sched, ln
        op = re.search(r" = (\w+)\(", ln).group(1)
        ops_in_dump.setdefault(sid, []).append(op)
    for s in segs:
        assert s.id == segs.index(s)
        assert sorted(ops_in_dump.get(s.id, [])) == sorted(s.ops), (s.id, text)
    assert sum(len(s.exprs) for s in segs) == len(block)
    seg_lines = [ln for ln in text.splitlines() if re.match(r"  seg\d+ \w+: inputs ", ln)]
    assert len(seg_lines) == len(segs)
    for s in segs:
        for r in s.reasons:
            for n in map(int, re.findall(r"segment (\d+)", r)):
                assert n != s.id and 0 <= n < len(segs), (s.id, r)
    cut_lines = [ln.strip()[len("cut: "):] for ln in text.splitlines() if ln.strip().startswith("cut: ")]
    assert cut_lines == [r for s in segs for r in s.reasons]
    return text, segs


# ---------------------------------------------------------------- seed 003


def two_output_fd():
    def build(fd):
        T4 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
        T6 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
        S7 = fd.define_scalar(0.500000, dtype=DataType.Double)
        T8 = fd.ops.mul(S7, T6)  # noqa: F841  (dead, as in the seed)
        S9 = fd.define_scalar(3.00000, dtype=DataType.Double)
        T10 = fd.ops.pow(T6, S9)
        T19 = fd.ops.sum(T4, axes=[0, 1], keepdim=False, dtype=DataType.Null)
        fd.add_output(T19)
        fd.add_output(T10)
    return define(build)


def test_seed003_two_outputs_two_segments():
    fd = two_output_fd()
    a = torch.randn(16, 8, 32)
    b = torch.randn(16, 8, 32)
    o19, o10 = fd.execute([a, b])
    torch.testing.assert_close(o19, a.double().sum((0, 1)).float())
    torch.testing.assert_close(o10, b.pow(3))
    text, segs = check_dump(fd)
    assert len(segs) == 2
    assert {s.scheduler for s in segs} == {"reduction", "pointwise"}
    by = {s.scheduler: s for s in segs}
    assert by["reduction"].ops == ["sum"] and by["pointwise"].ops == ["pow"]
    assert [v.name for v in by["reduction"].inputs] == ["T0"]
    assert [v.name for v in by["pointwise"].inputs] == ["T1"]
    # two independent kernels: the cut says why they were not fused
    reasons = [r for s in segs for r in s.reasons]
    assert reasons and any("not fused horizontally" in r for r in reasons)
    assert "cut:" in text
    lines = fusion_block(text)
    assert len(lines) == 2
    assert any("float[r(i0), r(i1), i2] = sum(T0, dims=[0, 1])  # seg" in ln
               and ln.endswith("reduction") for ln in lines)
    assert any("= pow(T1, 3.0)" in ln and ln.endswith("pointwise") for ln in lines)


def gelu_backward(fd):
    """The seed-003 definition (shared with test_seed003.py)."""
    nvfuser_fusion_id6(fd)


def gelu_backward_eager(s0, s1, s2, s3, t4, t5, t6):
    x, g = t6.double(), t5.double()
    th = torch.tanh(0.797885 * (x + 0.044715 * x ** 3))
    left = g * (1 + th) * s0
    a = g * (0.5 * x) * (1 - th * th) * s3
    right = a + a * s2 * s1 * x * x
    return t4.double().sum((0, 1)).float(), (right + left).float()


def test_seed003_gelu_backward_two_segments():
    fd = define(gelu_backward)
    scalars = [1.0, 2.0, 3.0, 4.0]
    tensors = [torch.randn(4, 8, 16) for _ in range(3)]
    out = fd.execute([*scalars, *tensors])
    ref = gelu_backward_eager(*scalars, *tensors)
    for o, r in zip(out, ref):
        torch.testing.assert_close(o, r, rtol=1e-5, atol=1e-4)
    text, segs = check_dump(fd)
    assert len(segs) == 2
    assert sorted(s.scheduler for s in segs) == ["pointwise", "reduction"]
    pw = next(s for s in segs if s.scheduler == "pointwise")
    assert pw.ops.count("tanh") == 1 and "sum" not in pw.ops
    assert {v.name for v in pw.inputs} >= {"S0", "S1", "S2", "S3", "T5", "T6"}
    # T8 = mul(0.5, T6) is used (by T21); every one of the 23
    # tensor expressions is tagged
    assert len(fusion_block(text)) == sum(len(s.exprs) for s in segs) == 23


# ---------------------------------------------------------------- kinds


def test_softmax_is_one_normalization_segment():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        m = fd.ops.max(t0, dims=[1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(t0, m))
        s = fd.ops.sum(e, dims=[1], keepdim=True)
        fd.add_output(fd.ops.div(e, s))

    fd = define(build)
    x = torch.randn(6, 33) * 4
    (out,) = fd.execute([x])
    torch.testing.assert_close(out, torch.softmax(x, dim=1))
    _, segs = check_dump(fd)
    assert [s.scheduler for s in segs] == ["normalization"]
    assert segs[0].ops.count("max") == 1 and segs[0].ops.count("sum") == 1


def test_layer_norm_like_is_normalization():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        var, mean = fd.ops.var_mean(t0, dims=[1], correction=0, keepdim=True)
        y = fd.ops.mul(fd.ops.sub(t0, mean), fd.ops.rsqrt(fd.ops.add(var, 1e-5)))
        fd.add_output(y)

    fd = define(build)
    x = torch.randn(5, 40) * 3 + 1
    (out,) = fd.execute([x])
    torch.testing.assert_close(out, torch.nn.functional.layer_norm(x, (40,), eps=1e-5),
                               rtol=1e-4, atol=1e-4)
    _, segs = check_dump(fd)
    assert [s.scheduler for s in segs] == ["normalization"]


def test_matmul_gets_its_own_segment():
    def build(fd):
        a = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        c = fd.ops.matmul(fd.ops.relu(a), b)
        fd.add_output(fd.ops.mul(c, 2.0))

    fd = define(build)
    A, B = torch.randn(5, 7), torch.randn(7, 3)
    (out,) = fd.execute([A, B])
    torch.testing.assert_close(out, (A.relu() @ B) * 2.0)
    text, segs = check_dump(fd)
    assert [s.scheduler for s in segs] == ["pointwise", "matmul", "pointwise"]
    mm = segs[1]
    assert mm.ops == ["matmul"] and len(mm.exprs) == 1
    assert any("matmul" in r for s in segs for r in s.reasons)


def test_linear_with_bias_is_matmul_segment():
    def build(fd):
        x = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=DataType.Float)
        w = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.linear(x, w, b))

    fd = define(build)
    X, W, Bb = torch.randn(2, 3, 8), torch.randn(5, 8), torch.randn(5)
    (out,) = fd.execute([X, W, Bb])
    torch.testing.assert_close(out, torch.nn.functional.linear(X, W, Bb))
    _, segs = check_dump(fd)
    assert [(s.scheduler, s.ops) for s in segs] == [("matmul", ["linear"])]


def test_reduction_of_reduction_is_cut():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=DataType.Float)
        s1 = fd.ops.sum(t0, dims=[2])
        s2 = fd.ops.max(s1, dims=[0])
        fd.add_output(s2)

    fd = define(build)
    x = torch.randn(3, 4, 5)
    (out,) = fd.execute([x])
    torch.testing.assert_close(out, x.sum(2).amax(0))
    text, segs = check_dump(fd)
    assert len(segs) == 2
    assert [s.scheduler for s in segs] == ["reduction", "reduction"]
    assert [s.ops for s in segs] == [["sum"], ["max"]]
    assert "cut:" in text
    cut = [r for s in segs for r in s.reasons]
    assert len(cut) >= 1
    # the reason sits with the producer and names its consumer's segment
    assert segs[0].reasons and "segment 1" in segs[0].reasons[0]
    assert segs[0].outputs == segs[1].inputs


def test_reduction_with_epilogue_and_prologue_is_one_segment():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        s = fd.ops.sum(fd.ops.mul(t0, t0), dims=[1])
        fd.add_output(fd.ops.sqrt(fd.ops.add(s, t1)))

    fd = define(build)
    x, y = torch.randn(6, 9), torch.rand(6) + 0.5
    (out,) = fd.execute([x, y])
    torch.testing.assert_close(out, torch.sqrt((x * x).sum(1) + y))
    _, segs = check_dump(fd)
    assert [s.scheduler for s in segs] == ["reduction"]
    assert segs[0].ops == ["mul", "sum", "add", "sqrt"]


def test_independent_pointwise_ops_fuse_horizontally():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.exp(t0))
        fd.add_output(fd.ops.add(t0, t1))

    fd = define(build)
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    a, b = fd.execute([x, y])
    torch.testing.assert_close(a, x.exp())
    torch.testing.assert_close(b, x + y)
    _, segs = check_dump(fd)
    assert [s.scheduler for s in segs] == ["pointwise"]


@pytest.mark.parametrize("dtype", [DataType.BFloat16, DataType.Float], ids=lambda d: d.name)
def test_reductions_reading_one_value_are_one_segment(dtype):
    """var_mean of a cast input: its mean and its var read the cast, which
    joined one of them; the two reductions, alike, merge first, so one
    kernel reads the input once (before: the var's kernel stored the cast in
    fp32 for the mean's kernel to read again, 18 % of copy on an H100).
    Reductions over other dims stay apart, the value stored once."""
    def build(fd):
        t = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=dtype)
        var, mean = fd.ops.var_mean(fd.ops.cast(t, DataType.Float), [1], correction=1)
        fd.add_output(var)
        fd.add_output(mean)

    fd = define(build)
    x = torch.randn(37, 301).to(torch.bfloat16 if dtype is DataType.BFloat16 else torch.float32)
    var, mean = fd.execute([x])
    v, m = torch.var_mean(x.double(), 1, correction=1)
    torch.testing.assert_close(var, v.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(mean, m.float(), rtol=1e-5, atol=1e-5)
    _, segs = check_dump(fd)
    assert [s.scheduler for s in segs] == ["reduction"]

    def across(fd):  # sums over rows and over columns of one value: two kernels
        t = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        e = fd.ops.exp(t)
        fd.add_output(fd.ops.sum(e, [1]))
        fd.add_output(fd.ops.sum(e, [0]))

    fd = define(across)
    x = torch.randn(9, 13)
    rows, cols = fd.execute([x])
    torch.testing.assert_close(rows, x.exp().sum(1))
    torch.testing.assert_close(cols, x.exp().sum(0))
    _, segs = check_dump(fd)
    assert len(segs) == 2


def test_pointwise_with_resizes_is_one_segment():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        a = fd.ops.slice(t0, [0, 1], [t0.size(0), t0.size(1)])
        b = fd.ops.pad(a, [1, 0])
        c = fd.ops.cat([b, t0], 0)
        fd.add_output(fd.ops.mul(c, 3.0))

    fd = define(build)
    x = torch.randn(4, 6)
    (out,) = fd.execute([x])
    expected = torch.cat([torch.nn.functional.pad(x[:, 1:], [1, 0]), x], 0) * 3.0
    torch.testing.assert_close(out, expected)
    _, segs = check_dump(fd)
    assert [s.scheduler for s in segs] == ["pointwise"]
    assert segs[0].ops == ["slice", "pad", "cat", "mul"]


def test_dump_mentions_pass_notes():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.broadcast(t0, [True, False, False])
        t2 = fd.ops.squeeze(fd.ops.relu(t1), [0])
        fd.add_output(fd.ops.sum(t2, dims=[1]))

    fd = define(build)
    x = torch.randn(3, 5)
    (out,) = fd.execute([x])
    torch.testing.assert_close(out, x.relu().sum(1))
    text, segs = check_dump(fd)
    notes = text.split("Pre-segmentation passes:")[1]
    assert "(nothing removed)" not in notes
    assert "remove_bcast_squeeze: -1 broadcast, -1 squeeze" in notes
    assert [(s.scheduler, s.ops) for s in segs] == [("reduction", ["relu", "sum"])]
    assert torch.equal(evaluate(fd._fusion, [x], CPU)[0], out)


def test_segments_of_each_call():
    """Plans differ per shape class; last_segments follows the last call."""
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.reshape(t0, [-1]))

    fd = define(build)
    x = torch.randn(3, 4)
    fd.execute([x])
    assert [s.scheduler for s in fd.last_segments()] == ["alias"]
    y = torch.randn(4, 3).t()
    with pytest.raises(InputError):
        fd.execute([y])          # declared contiguous, so rejected before anything runs
    assert [s.scheduler for s in fd.last_segments()] == ["alias"]


def test_view_output_sharing_a_producer_with_a_kernel():
    """t1 = t0[0:1] feeds a cat (computed) and a broadcast that is a view output.
    The view is rebuilt from the input by the alias segment, so t1 is not an
    output of the pointwise kernel (whose iteration space is the cat's [2])."""
    def build(fd):
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        t1 = fd.ops.slice(t0, [0], [1])
        t2 = fd.ops.cat([t1, fd.ops.neg(t1)], 0)
        t3 = fd.ops.broadcast_in_dim(t1, [1, t1.size(0)], [1])
        fd.add_output(t3)
        fd.add_output(t2)

    fd = define(build)
    for n in (1, 4):
        x = torch.randn(n)
        a, b = fd.execute([x])
        assert torch.equal(a, x[None, 0:1])
        assert torch.equal(b, torch.cat([x[0:1], -x[0:1]]))
        _, segs = check_dump(fd)
        assert sorted(s.scheduler for s in segs) == ["alias", "pointwise"]
        pw = next(s for s in segs if s.scheduler == "pointwise")
        assert [v.ndim for v in pw.outputs] == [1] and pw.ops == ["slice", "neg", "cat"]
        assert len(pw.outputs) == 1


def test_dump_env_prints_the_stages(monkeypatch, capsys):
    """HOSTIR_DUMP=preseg,concretized,segments prints each stage once per plan."""
    from hostir import config
    monkeypatch.setenv("HOSTIR_DUMP", "concretized,preseg,segments")
    config.reload()
    try:
        fd = two_output_fd()
        a, b = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
        o19, o10 = fd.execute([a, b])
        torch.testing.assert_close(o19, a.sum((0, 1)))
        torch.testing.assert_close(o10, b ** 3)
        out = capsys.readouterr().out
        for stage in ("concretized", "preseg", "segments"):
            assert out.count(f"===== hostir {stage} =====") == 1, stage
        assert fd.last_segmented_fusion_ir() in out
        fd.execute([a, b])                      # a cache hit builds and prints nothing
        assert "===== hostir" not in capsys.readouterr().out
    finally:
        monkeypatch.delenv("HOSTIR_DUMP")
        config.reload()


def test_scatter_is_a_segment_with_its_prologue():
    """A scatter's segment computes the pointwise ops only it reads; a producer
    also read elsewhere, one that needs its own kernel (a reduction) and the
    scatter's readers are other segments, each cut with its reason."""
    def build(fd):
        x, s = fd.define_tensor([-1, -1]), fd.define_tensor([-1, -1])
        i = fd.define_tensor([-1, -1], dtype=DataType.Int)
        e = fd.ops.exp(x)
        m = fd.ops.sum(s, [0], keepdim=True)
        y = fd.ops.scatter(fd.ops.neg(e), i, fd.ops.mul(s, m), 0)
        fd.add_output(e)
        fd.add_output(fd.ops.add(y, 1.0))

    fd = define(build)
    x, s = torch.randn(5, 4), torch.randn(3, 4)
    i = torch.rand(5, 4).argsort(0)[:3]
    e, out = fd.execute([x, s, i])
    torch.testing.assert_close(e, x.exp())
    torch.testing.assert_close(out, torch.scatter(-x.exp(), 0, i, s * s.sum(0, keepdim=True)) + 1)
    text, segs = check_dump(fd)
    scatter = next(g for g in segs if g.scheduler == "scatter")
    assert sorted(scatter.ops) == ["broadcast", "mul", "neg", "scatter"]  # (keepdim: a broadcast)
    assert sorted(g.scheduler for g in segs) == ["pointwise", "pointwise", "reduction", "scatter"]
    reasons = " | ".join(r for g in segs for r in g.reasons)
    assert f"feeds the scatter of segment {scatter.id} and is used outside it" in reasons
    assert f"feeds the scatter of segment {scatter.id}; it needs its own kernel" in reasons
    assert "(scatter) writes at positions read from its index: segment" in reasons
