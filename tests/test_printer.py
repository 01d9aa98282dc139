"""fd.fusion_ir(): readable, stable text; HOSTIR_DUMP=fusion_ir."""
import re

import pytest
import torch

import hostir
import hostir.config
from hostir import DataType, FusionDefinition
from hostir.ir.verify import verify

EXPR = re.compile(r"^  (?P<name>[TS]\d+) (?P<dtype>\w+)\[(?P<axes>.*)\] = (?P<op>\w+)\((?P<args>.*)\)$")


def sections(text: str):
    """Split the text into (inputs, outputs, exprs) lists of lines, checking the frame."""
    lines = text.splitlines()
    assert lines[0] == "Inputs:"
    i_out = lines.index("Outputs:")
    i_body = lines.index("%fusion {")
    assert 0 < i_out < i_body
    assert lines[-1] == "}"
    inputs, outputs, body = lines[1:i_out], lines[i_out + 1:i_body], lines[i_body + 1:-1]
    for line in inputs + outputs + body:
        assert line.startswith("  ") and not line.startswith("   "), line
        assert line == line.rstrip(), f"trailing whitespace in {line!r}"
    return inputs, outputs, body


def split_axes(axes: str) -> list[str]:
    """`float[...]` contents split at top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in axes:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + [cur.strip()] if cur.strip() else out


def exprs(text: str) -> dict:
    """name -> match of each expression line (one per line, names unique)."""
    _, _, body = sections(text)
    out = {}
    for line in body:
        m = EXPR.match(line)
        assert m, f"not an expression line: {line!r}"
        assert m["name"] not in out, f"{m['name']} defined twice"
        out[m["name"]] = m
    return out


def reduction_fusion():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        s1 = fd.define_scalar(None, dtype=DataType.Double)
        t2 = fd.ops.mul(fd.ops.tanh(t0), s1)
        t3 = fd.ops.sum(t2, dims=[1], keepdim=False, dtype=DataType.Null)
        t4 = fd.ops.max(t0, dims=[0], keepdim=True)
        fd.add_output(t2)
        fd.add_output(t3)
        fd.add_output(t4)
    return fd


REDUCTION_TEXT = """\
Inputs:
  T0 float[i0, i1] contiguity=tt
  S1 double
Outputs:
  T3 float[i0, i1]
  T4 float[i0, r(i1)]
  T5 float[b1, i1]
%fusion {
  T2 float[i0, i1] = tanh(T0)
  T3 float[i0, i1] = mul(T2, S1)
  T4 float[i0, r(i1)] = sum(T3, dims=[1])
  T6 float[r(i0), i1] = max(T0, dims=[0])
  T5 float[b1, i1] = broadcast(T6, is_broadcast_dim=[True, False])
}"""


def test_reduction_fusion_exact_text():
    fd = reduction_fusion()
    assert fd.fusion_ir() == REDUCTION_TEXT
    verify(fd._fusion)


def test_reduction_fusion_structure():
    fd = reduction_fusion()
    text = fd.fusion_ir()
    inputs, outputs, body = sections(text)
    assert inputs == ["  T0 float[i0, i1] contiguity=tt", "  S1 double"]
    assert len(outputs) == 3
    e = exprs(text)
    assert len(e) == len(body) == 5
    assert e["T4"]["op"] == "sum" and e["T4"]["axes"] == "i0, r(i1)" and e["T4"]["args"] == "T3, dims=[1]"
    assert e["T6"]["axes"] == "r(i0), i1"
    assert e["T5"]["axes"] == "b1, i1"
    assert e["T3"]["args"] == "T2, S1"
    # producers before consumers
    names = list(e)
    for name, m in e.items():
        for ref in re.findall(r"\bT\d+\b", m["args"]):
            if ref in e:
                assert names.index(ref) < names.index(name), f"{ref} used by {name} before defined"


def test_text_is_stable():
    a, b = reduction_fusion(), reduction_fusion()
    assert a.fusion_ir() == b.fusion_ir() == a.fusion_ir()
    assert repr(a) == a.fusion_ir()
    x = torch.randn(3, 4)
    a.execute([x, 0.5])
    assert a.fusion_ir() == b.fusion_ir()  # running does not change the text


def slice_pad_cat_fusion():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, 8], contiguity=[True, True], dtype=DataType.Float)
        a = fd.ops.slice(t0, [1, 2], [4, 6], [1, 2])
        b = fd.ops.pad(a, [3, 3], 0.25)
        c = fd.ops.cat([b, t1], dim=0)
        d = fd.ops.cast(c, DataType.Half)
        fd.add_output(d)
    return fd, (a, b, c, d)


def test_slice_pad_cat_text():
    fd, (a, b, c, d) = slice_pad_cat_fusion()
    text = fd.fusion_ir()
    inputs, outputs, _ = sections(text)
    assert inputs == ["  T0 float[i0, i1] contiguity=tt", "  T1 float[i2, 8] contiguity=tt"]
    assert outputs[0].startswith(f"  {d.name} half[")
    e = exprs(text)
    assert set(e) == {a.name, b.name, c.name, d.name}
    sl = e[a.name]
    assert sl["op"] == "slice"
    assert re.fullmatch(rf"T0, starts=\[.*1.*, .*2.*\], stops=\[.*4.*, .*6.*\], strides=\[1, 2\]",
                        sl["args"]), sl["args"]
    assert "i0" in sl["axes"] and "i1" in sl["axes"]
    assert "ceilDiv(" in sl["axes"]  # strided slice extent
    assert e[b.name]["args"] == f"{a.name}, widths=[(0, 0), (3, 3)], value=0.25"
    assert e[b.name]["axes"].endswith("+ 3) + 3)")
    assert e[c.name]["args"] == f"{b.name}, T1, dim=0"
    cat_axes = split_axes(e[c.name]["axes"])
    assert len(cat_axes) == 2 and cat_axes[0].endswith(" + i2)")
    assert [len(split_axes(e[n]["axes"])) for n in (a.name, b.name, d.name)] == [2, 2, 2]
    assert e[d.name]["args"] == f"{c.name}, dtype=half"
    assert e[d.name]["dtype"] == "half" and e[c.name]["dtype"] == "float"
    verify(fd._fusion)
    # the text describes what runs
    x, y = torch.randn(5, 7), torch.randn(3, 8)
    (out,) = fd.execute([x, y])
    ref = torch.cat([torch.nn.functional.pad(x[1:4, 2:6:2], [3, 3], value=0.25), y], 0).half()
    torch.testing.assert_close(out, ref)


def test_static_slice_prints_plain_numbers():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[6, 8], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.slice(t0, [1, 0], [4, 8]))
    assert exprs(fd.fusion_ir())["T1"].group(0) == (
        "  T1 float[3, 8] = slice(T0, starts=[1, 0], stops=[4, 8], strides=[1, 1])")


def test_slice_from_zero_prints_zero():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.slice(t0, [0], [4]))
    assert "starts=[0]" in exprs(fd.fusion_ir())["T1"]["args"]


def test_broadcast_expand_views_text():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, 1, -1], contiguity=[True, None, False], dtype=DataType.Float,
                              stride_order=[2, 1, 0])
        t1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False)
        s2 = fd.define_scalar(None, dtype=DataType.Int)
        e = fd.ops.expand(t0, [-1, 5, -1])
        p = fd.ops.permute(e, [2, 0, 1])
        q = fd.ops.squeeze(t0, [1])
        r = fd.ops.reshape(q, [-1])
        bid = fd.ops.broadcast_in_dim(t1, [4, -1], [1])
        x = fd.ops.expand(fd.ops.broadcast(t1, [False, True]), [-1, s2])
        fd.add_output(p, stride_order=[0, 1, 2])
        fd.add_output(r)
        fd.add_output(bid)
        fd.add_output(x)
        fd.add_output(fd.ops.neg(t0), alias_input=t0)
    text = fd.fusion_ir()
    inputs, outputs, _ = sections(text)
    assert inputs == ["  T0 float[i0, b1, i1] contiguity=tnf stride_order=[2, 1, 0]",
                      "  T1 float[i2] contiguity=t", "  S2 int64"]
    assert outputs[0] == f"  {p.name} float[i1, i0, bx(5)]  stride_order=[0, 1, 2]"
    assert outputs[-1].endswith("float[i0, b1, i1]  (updates T0 in place)")
    e = exprs(text)
    assert e[e_name(e, "expand", "T0")]["axes"] == "i0, bx(5), i1"
    assert e[e_name(e, "expand", "T0")]["args"] == "T0, shape=[i0, 5, i1]"
    assert e[p.name]["args"] == f"{e_name(e, 'expand', 'T0')}, dims=[2, 0, 1]"
    assert e[q.name]["args"] == "T0, dims=[1]" and e[q.name]["axes"] == "i0, i1"
    assert e[r.name]["args"] == f"{q.name}, shape=[(i0 * i1)]"
    assert e[bid.name]["axes"] == "bx(4), i2"
    assert e[x.name]["axes"] == "i2, bx(S2)"
    b = [m for m in e.values() if m["op"] == "broadcast"]
    assert {m["args"].split(", ", 1)[1] for m in b} == {"is_broadcast_dim=[True, False]",
                                                        "is_broadcast_dim=[False, True]"}
    verify(fd._fusion)


def e_name(e, op, first_arg):
    names = [n for n, m in e.items() if m["op"] == op and m["args"].split(",")[0] == first_arg]
    assert len(names) == 1, (op, first_arg, names)
    return names[0]


def test_var_mean_and_cast_text():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, 16], contiguity=[True, True], dtype=DataType.BFloat16)
        v, m = fd.ops.var_mean(fd.ops.cast(t0, DataType.Float), dims=[1], correction=0)
        fd.add_output(v)
        fd.add_output(m)
    e = exprs(fd.fusion_ir())
    assert e["T1"]["args"] == "T0, dtype=float" and e["T1"]["dtype"] == "float"
    assert e[v.name]["args"] == "T1, dims=[1], correction=0"
    assert e[m.name]["args"] == "T1, dims=[1]"
    assert e[v.name]["axes"] == e[m.name]["axes"] == "i0, r(16)"
    assert sections(fd.fusion_ir())[0] == ["  T0 bf16[i0, 16] contiguity=tt"]


def test_no_name_collisions_with_unnamed_intermediates():
    """keepdim reductions make an unnamed intermediate; it must not take a user's name."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        m = fd.ops.max(t0, dims=[1], keepdim=True)
        n = fd.ops.neg(m)
        fd.add_output(n)
    text = fd.fusion_ir()
    e = exprs(text)
    assert (m.name, n.name) == ("T1", "T2")
    assert e["T1"]["op"] == "broadcast" and e["T2"]["args"] == "T1"
    assert "_" not in text.replace("is_broadcast_dim", "")


def test_every_user_tensor_keeps_its_name():
    names = []
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.Float)
        names.append(t.name)
        for k in range(4):
            t = fd.ops.sum(t, dims=[2], keepdim=True) if k % 2 == 0 else fd.ops.add(t, t)
            names.append(t.name)
        fd.add_output(t)
    e = exprs(fd.fusion_ir())
    for name in names[1:]:
        assert name in e
    assert e[names[1]]["op"] == "broadcast" and e[names[2]]["args"] == f"{names[1]}, {names[1]}"


# ------------------------------------------------------------ HOSTIR_DUMP

@pytest.fixture
def dump_fusion_ir(monkeypatch):
    monkeypatch.setenv("HOSTIR_DUMP", "fusion_ir")
    hostir.config.reload()
    yield
    monkeypatch.undo()
    hostir.config.reload()
    assert not hostir.config.dumping("fusion_ir")


def test_dump_fusion_ir_on_first_execute(dump_fusion_ir, capsys):
    assert hostir.config.dumping("fusion_ir")
    fd = reduction_fusion()
    capsys.readouterr()
    x = torch.randn(3, 4)
    fd.execute([x, 1.5])
    out = capsys.readouterr().out
    assert "===== hostir fusion_ir =====" in out
    assert REDUCTION_TEXT in out
    fd.execute([x, 1.5])
    assert capsys.readouterr().out == ""


def test_no_dump_by_default(monkeypatch, capsys):
    monkeypatch.delenv("HOSTIR_DUMP", raising=False)
    hostir.config.reload()
    try:
        fd = reduction_fusion()
        fd.execute([torch.randn(3, 4), 1.5])
        assert "hostir fusion_ir" not in capsys.readouterr().out
    finally:
        monkeypatch.undo()
        hostir.config.reload()
