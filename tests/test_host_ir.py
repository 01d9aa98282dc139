"""Host IR (issue 4, DESIGN §1.3 and §3 rule 3): the HostProgram builder, the
printer, the evaluator (loops re-evaluate everything that depends on their
index), lowering of segmented fusions, single-process collectives, and the
errors misuse gets.

Every numeric check compares against torch on random data."""
import re

import pytest
import torch

import hostir
from hostir import config
from hostir import (DataType, DefinitionError, ExecutionError, FusionDefinition, HostProgram,
                    InputError)


# ----------------------------------------------------------------------------- helpers
def rand_int(*shape):
    """Random non-zero int64 values with both signs."""
    mag = torch.randint(1, 1000, shape)
    sign = torch.randint(0, 2, shape) * 2 - 1
    return mag * sign


def rand_float(*shape):
    return torch.randn(*shape) * 3 + 0.5


def indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def body_lines(text: str) -> list[str]:
    """Lines of a printed program, without the header and the closing brace."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines[0].lstrip().startswith("host_program("), text
    assert lines[-1].strip() == "}", text
    return lines[1:-1]


def find(lines, pattern: str) -> list[int]:
    """Indices of the lines whose stripped text matches `pattern` (re.search)."""
    return [k for k, ln in enumerate(lines) if re.search(pattern, ln.strip())]


def one(lines, pattern: str) -> int:
    hits = find(lines, pattern)
    assert len(hits) == 1, f"expected one line matching {pattern!r}, got {hits}:\n" + "\n".join(lines)
    return hits[0]


TENSOR_DEF = re.compile(r"\b(T\d+) [a-z0-9]+\[")


def parse_launch(line: str):
    """(scheduler/target name, input tensor names, output tensor names) of a launch line."""
    s = line.strip()
    m = re.fullmatch(r"(.*) = launch (\w+)\((.*)\)", s)
    if m:
        return m.group(2), re.findall(r"\bT\d+\b", m.group(3)), TENSOR_DEF.findall(m.group(1))
    m = re.fullmatch(r"launch (\w+)\((.*)\) -> into (.*)", s)
    assert m, f"not a launch line: {line!r}"
    return m.group(1), re.findall(r"\bT\d+\b", m.group(2)), TENSOR_DEF.findall(m.group(3))


def slice_row_fusion(two_d: bool, arith: bool) -> FusionDefinition:
    """Seed 001's fusion: t0[i:i+1] with the loop index i as an Int scalar input
    (optionally t0[i:i+1] * 3 + i)."""
    with FusionDefinition() as fd:
        if two_d:
            t0 = fd.define_tensor([-1, 5], dtype=DataType.Float)
        else:
            t0 = fd.define_tensor([-1], dtype=DataType.Int)
        i = fd.define_scalar(dtype=DataType.Int)
        if two_d:
            s = fd.ops.slice(t0, [i, 0], [i + 1, 5])
        else:
            s = fd.ops.slice(t0, [i], [i + 1])
        if arith:
            s = fd.ops.add(fd.ops.mul(s, 3.0 if two_d else 3), i)
        fd.add_output(s)
    return fd


def expected_rows(x, rows, arith):
    parts = []
    for i in rows:
        r = x[i:i + 1]
        parts.append(r * 3 + i if arith else r)
    return torch.cat(parts)


def assert_equal(a, b):
    torch.testing.assert_close(a, b, rtol=0 if not b.is_floating_point() else None,
                               atol=0 if not b.is_floating_point() else None)


# ----------------------------------------------------------------------------- seed 001's loop
SEED001_CASES = [
    pytest.param(False, False, id="int[7]"),
    pytest.param(False, True, id="int[7]-t*3+i"),
    pytest.param(True, False, id="float[7,5]"),
    pytest.param(True, True, id="float[7,5]-t*3+i"),
]


def seed001_program(fd, two_d):
    hp = HostProgram()
    if two_d:
        t0 = hp.define_tensor(shape=[-1, 5], dtype=DataType.Float)
        acc = hp.allocate(shape=[7, 5], dtype=DataType.Float)
    else:
        t0 = hp.define_tensor(shape=[-1], dtype=DataType.Int)
        acc = hp.allocate(shape=[7], dtype=DataType.Int)
    with hp.for_loop(0, 7) as i:
        row = hp.slice(acc, dim=0, start=i, stop=i + 1)
        hp.launch(fd, [t0, i], outputs=[row])
    hp.add_output(acc)
    return hp


@pytest.mark.parametrize("two_d,arith", SEED001_CASES)
def test_seed001_loop_writes_every_row(two_d, arith):
    fd = slice_row_fusion(two_d, arith)
    hp = seed001_program(fd, two_d)
    assert fd.cache_info().misses == 0, "launch must compile lazily, at execute"
    x = rand_float(7, 5) if two_d else rand_int(7)
    (out,) = hp.execute([x])
    assert list(out.shape) == ([7, 5] if two_d else [7])
    assert out.dtype == x.dtype
    for i in range(7):
        assert_equal(out[i:i + 1], expected_rows(x, [i], arith))
    assert_equal(out, expected_rows(x, range(7), arith))
    # the slice bounds change every iteration: at most one specialized plan and a symbolic one
    assert 1 <= fd.cache_info().plans <= 2


@pytest.mark.parametrize("two_d,arith", SEED001_CASES)
def test_seed001_program_runs_twice_with_other_inputs(two_d, arith):
    fd = slice_row_fusion(two_d, arith)
    hp = seed001_program(fd, two_d)
    x1 = rand_float(7, 5) if two_d else rand_int(7)
    x2 = rand_float(9, 5) if two_d else rand_int(9)     # longer: only rows 0..6 are read
    (out1,) = hp.execute([x1])
    (out2,) = hp.execute([x2])
    assert_equal(out2, expected_rows(x2, range(7), arith))
    # the second run allocated its own buffer: the first result is untouched
    assert out1.data_ptr() != out2.data_ptr()
    assert_equal(out1, expected_rows(x1, range(7), arith))
    (out3,) = hp.execute([x1])
    assert_equal(out3, out1)


def test_seed001_original_fusion_iota_slice_plus_input():
    """The seed's own fusion: T1 = iota(7)[i:i+1]; T3 = T2 + T1, with T2 an input."""
    with FusionDefinition() as fd:
        t2 = fd.define_tensor([1], dtype=DataType.Int)
        i = fd.define_scalar(dtype=DataType.Int)
        t0 = fd.ops.iota(7, 0, 1, DataType.Int)
        t1 = fd.ops.slice(t0, [i], [i + 1])
        fd.add_output(fd.ops.add(t2, t1))
    hp = HostProgram()
    x = hp.define_tensor([1], dtype=DataType.Int)
    acc = hp.allocate([7], DataType.Int)
    with hp.for_loop(0, 7) as k:
        hp.launch(fd, [x, k], outputs=[hp.slice(acc, 0, k, k + 1)])
    hp.add_output(acc)
    for _ in range(2):
        a = rand_int(1)
        (out,) = hp.execute([a])
        assert_equal(out, a + torch.arange(7))


def test_loop_bound_from_input_extent_and_symbolic_allocate():
    fd = slice_row_fusion(True, True)
    hp = HostProgram()
    x = hp.define_tensor([-1, 5])
    n = x.logical[0].extent
    acc = hp.allocate([n, 5])
    with hp.for_loop(0, n) as i:
        hp.launch(fd, [x, i], outputs=[hp.slice(acc, 0, i, i + 1)])
    hp.add_output(acc)
    for rows in (3, 8, 1, 5):
        a = rand_float(rows, 5)
        (out,) = hp.execute([a])
        assert_equal(out, a * 3 + torch.arange(rows, dtype=a.dtype)[:, None])


def test_loop_with_start_and_step():
    fd = slice_row_fusion(False, True)
    hp = HostProgram()
    x = hp.define_tensor([-1], DataType.Int)
    acc = hp.allocate([7], DataType.Int)
    with hp.for_loop(1, 7, 2) as i:
        hp.launch(fd, [x, i], outputs=[hp.slice(acc, 0, i, i + 1)])
    hp.add_output(acc)
    assert one(body_lines(str(hp)), r"^for \w+ in range\(1, 7, 2\):$") >= 0
    a = rand_int(7)
    (out,) = hp.execute([a])
    for i in (1, 3, 5):
        assert_equal(out[i:i + 1], a[i:i + 1] * 3 + i)


def test_launch_without_outputs_in_loop_keeps_the_last_iteration():
    fd = slice_row_fusion(False, True)
    hp = HostProgram()
    x = hp.define_tensor([-1], DataType.Int)
    with hp.for_loop(0, 6) as i:
        (y,) = hp.launch(fd, [x, i])
    hp.add_output(y)
    a = rand_int(9)
    (out,) = hp.execute([a])
    assert_equal(out, a[5:6] * 3 + 5)


def test_nested_loop_inner_bound_depends_on_outer_index():
    """A triangular loop: the inner stop is i + 1, re-evaluated per outer iteration."""
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1])
        fd.add_output(fd.ops.add(fd.ops.mul(t, 2.0), fd.ops.size(t, 0)))
    hp = HostProgram()
    x = hp.define_tensor([-1, -1])
    n = x.logical[0].extent
    out = hp.allocate([n, x.logical[1].extent])
    with hp.for_loop(0, n) as i:
        xrow, orow = hp.select(x, 0, i), hp.select(out, 0, i)
        with hp.for_loop(0, i + 1) as j:
            hp.launch(fd, [hp.slice(xrow, 0, j, j + 1)], outputs=[hp.slice(orow, 0, j, j + 1)])
    hp.add_output(out)
    a = rand_float(5, 5)
    (res,) = hp.execute([a])
    mask = torch.ones(5, 5).tril().bool()
    assert_equal(res[mask], (a * 2 + 1)[mask])


# ----------------------------------------------------------------------------- chunk loops
def chunk_fusion(kind: str) -> FusionDefinition:
    """pointwise: x*2 + sin(x) + len(chunk) (the last, shorter chunk sees its own length);
    reduction: sum over dim 1, times 2."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 6])
        if kind == "pointwise":
            y = fd.ops.add(fd.ops.add(fd.ops.mul(x, 2.0), fd.ops.sin(x)), fd.ops.size(x, 0))
        else:
            y = fd.ops.mul(fd.ops.sum(x, [1]), 2.0)
        fd.add_output(y)
    return fd


def chunk_expected(kind, a, c):
    parts = []
    for ch in a.split(c):
        parts.append(ch * 2 + ch.sin() + ch.shape[0] if kind == "pointwise" else ch.sum(1) * 2)
    return torch.cat(parts)


def chunk_program(fd, kind, mode, c):
    """mode: static (chunk c built in), scalar (chunk size a program input),
    step (the loop steps by c over element offsets)."""
    hp = HostProgram()
    x = hp.define_tensor([-1, 6])
    n = x.logical[0].extent
    csz = hp.define_scalar(DataType.Int) if mode == "scalar" else c
    out = hp.allocate([n, 6] if kind == "pointwise" else [n])
    if mode == "step":
        loop = hp.for_loop(0, n, c)
    else:
        loop = hp.for_loop(0, (n + csz - 1) // csz)
    with loop as k:
        with hp.stream(k % 2 if mode != "step" else (k // c) % 2):
            lo = k if mode == "step" else k * csz
            hi = hostir.min(lo + csz, n)
            hp.launch(fd, [hp.slice(x, 0, lo, hi)], outputs=[hp.slice(out, 0, lo, hi)])
    hp.add_output(out)
    return hp


def test_result_of_a_stream_block_used_on_the_main_stream_waits_for_it():
    fd = chunk_fusion("pointwise")
    hp = HostProgram()
    x = hp.define_tensor([-1, 6])
    out = hp.allocate([x.logical[0].extent, 6])
    with hp.for_loop(0, 2) as k:
        with hp.stream(k + 1):
            (y,) = hp.launch(fd, [hp.chunk(x, 0, k, 2)])
        hp.launch(fd, [y], outputs=[hp.chunk(out, 0, k, 2)])  # on the main stream
    hp.add_output(out)
    text = str(hp)
    lines = body_lines(text)
    back = one(lines, r"^set_current_stream\(0\)")
    use = one(lines, r"^launch fusion0\(T\d+\) -> into")
    # the main stream waits for stream k + 1 before it reads y, inside the iteration
    assert any(re.match(r"synchronize\(stream=\(\w+ \+ 1\)\)", ln.strip())
               for ln in lines[back:use]), text
    for rows in (4, 5, 1):
        a = rand_float(rows, 6)
        (got,) = hp.execute([a])
        h = (rows + 1) // 2
        want = torch.cat([chunk_expected("pointwise", chunk_expected("pointwise", p, h), h)
                          for p in a.split(h)])
        torch.testing.assert_close(got, want, msg=lambda m: f"rows {rows}: {m}")


@pytest.mark.parametrize("kind", ["pointwise", "reduction"])
@pytest.mark.parametrize("mode", ["static", "scalar", "step"])
@pytest.mark.parametrize("c", [3, 4])
def test_chunk_loop_with_shorter_last_chunk(kind, mode, c):
    fd = chunk_fusion(kind)
    hp = chunk_program(fd, kind, mode, c)
    text = str(hp)
    lines = body_lines(text)
    loop, join = find(lines, r"^for \w+ in range\(")
    index = re.match(r"for (\w+) in", lines[loop].strip()).group(1)
    sets = find(lines, r"^set_current_stream\(")
    assert sets and all(loop < s < join and indent(lines[s]) > indent(lines[loop]) for s in sets), text
    # the body runs on pool stream (index % 2), an expression of the loop index
    assert any(re.search(rf"\b{index}\b.*% 2", lines[s]) for s in sets), text
    # ... and the main stream waits for those streams after the loop, not in each
    # iteration (that would serialize the iterations on the GPU)
    assert lines[join].strip() == lines[loop].strip(), text
    assert all(ln.strip().startswith("synchronize(") for ln in lines[join + 1:-1]), text
    assert not any("synchronize(" in ln and index in ln for ln in lines[loop:join]), text
    assert any("min(" in ln for ln in find_lines(lines, r"= slice\(")), text
    for size in (10, 7, 1, 12):
        a = rand_float(size, 6)
        args = [a, c] if mode == "scalar" else [a]
        (out,) = hp.execute(args)
        torch.testing.assert_close(out, chunk_expected(kind, a, c),
                                   msg=lambda m: f"size {size}, chunk {c}: {m}")


def find_lines(lines, pattern):
    return [lines[k] for k in find(lines, pattern)]


# ----------------------------------------------------------------------------- views
@pytest.mark.parametrize("size,num", [(10, 3), (10, 4), (7, 7), (12, 4), (13, 5), (5, 4), (1, 3)])
def test_shard_by_stream_views_cover_the_tensor(size, num):
    hp = HostProgram()
    x = hp.define_tensor([-1, 3])
    for k in range(num):
        hp.add_output(hp.shard_by_stream(x, 0, k, num))
    a = rand_float(size, 3)
    shards = hp.execute([a])
    chunk = -(-size // num)
    sizes = [s.shape[0] for s in shards]
    assert sizes == [max(0, min(chunk, size - k * chunk)) for k in range(num)]
    assert sum(sizes) == size
    assert all(s == chunk for s in sizes[:size // chunk])
    if size % chunk:
        assert 0 < sizes[size // chunk] < chunk     # the last non-empty shard is shorter
    assert_equal(torch.cat(shards), a)
    for s in shards:
        if s.numel():
            assert s.untyped_storage().data_ptr() == a.untyped_storage().data_ptr(), "a view, no copy"


def _shard_loop_program(num):
    """A loop over `num` stream shards; shard k of the output gets x*2 + k."""
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1])
        k = fd.define_scalar(dtype=DataType.Int)
        fd.add_output(fd.ops.add(fd.ops.mul(t, 2.0), k))
    hp = HostProgram()
    x = hp.define_tensor([-1, -1])
    out = hp.allocate([x.logical[0].extent, x.logical[1].extent])
    with hp.for_loop(0, num) as k:
        with hp.stream(k):
            hp.launch(fd, [hp.shard_by_stream(x, 0, k, num), k],
                      outputs=[hp.shard_by_stream(out, 0, k, num)])
    hp.add_output(out)
    return hp


@pytest.mark.parametrize("size,num", [(10, 3), (10, 4), (12, 4), (5, 4), (9, 2)])
def test_shard_by_stream_loop_with_symbolic_stream_index(size, num):
    """Each shard k gets x*2 + k: shows every element lands in the right shard."""
    hp = _shard_loop_program(num)
    text = str(hp)
    assert re.search(r"chunk\(T\d+, dim=0, index=\w+, of=" + str(num) + r"\)", text), text
    a = rand_float(size, 4)
    (res,) = hp.execute([a])
    chunk = -(-size // num)
    owner = (torch.arange(size) // chunk).to(a.dtype)[:, None]
    assert_equal(res, a * 2 + owner)


def test_shard_by_stream_on_inner_dim():
    hp = HostProgram()
    x = hp.define_tensor([-1, -1])
    k = hp.define_scalar()
    hp.add_output(hp.shard_by_stream(x, 1, k, 3))
    a = rand_float(4, 8)            # chunks of 3, 3, 2
    for kk, (lo, hi) in enumerate([(0, 3), (3, 6), (6, 8)]):
        (s,) = hp.execute([a, kk])
        assert_equal(s, a[:, lo:hi])


def test_select_views():
    hp = HostProgram()
    x = hp.define_tensor([-1, -1])
    s = hp.define_scalar()
    hp.add_output(hp.select(x, 0, 2))
    hp.add_output(hp.select(x, 1, s))
    hp.add_output(hp.select(x, -1, s + 1))
    text = str(hp)
    assert len(find(body_lines(text), r"= select\(T\d+, dim=[01], index=")) == 3, text
    a = rand_float(4, 6)
    for idx in (0, 3, 4):
        r0, r1, r2 = hp.execute([a, idx])
        assert_equal(r0, a[2])
        assert_equal(r1, a[:, idx])
        assert_equal(r2, a[:, idx + 1])
        for r in (r0, r1, r2):
            assert r.untyped_storage().data_ptr() == a.untyped_storage().data_ptr(), "a view, no copy"


@pytest.mark.parametrize("dim", [0, 1])
def test_select_in_loop_rows_and_columns(dim):
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1])
        fd.add_output(fd.ops.add(fd.ops.mul(t, 2.0), fd.ops.exp(t)))
    hp = HostProgram()
    x = hp.define_tensor([-1, -1])
    out = hp.allocate([x.logical[0].extent, x.logical[1].extent])
    with hp.for_loop(0, x.logical[dim].extent) as i:
        hp.launch(fd, [hp.select(x, dim, i)], outputs=[hp.select(out, dim, i)])
    hp.add_output(out)
    for shape in ((4, 6), (7, 3)):
        a = rand_float(*shape)
        (res,) = hp.execute([a])
        torch.testing.assert_close(res, a * 2 + a.exp())


# ----------------------------------------------------------------------------- lowering
def fusion_reduction_matmul_pointwise():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor([-1, -1, -1])
        t1 = fd.define_tensor([-1, -1])
        r = fd.ops.sum(t0, [0])
        m = fd.ops.matmul(r, t1)
        fd.add_output(fd.ops.mul(fd.ops.relu(m), 2.0))
    a, b = rand_float(3, 4, 5), rand_float(5, 6)
    return fd, [a, b], torch.relu(a.sum(0) @ b) * 2, ["reduction", "matmul", "pointwise"]


def fusion_reduction_of_reduction_pointwise():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor([-1, -1, -1])
        t1 = fd.define_tensor([-1, -1])
        r = fd.ops.sum(t0, [2])
        r2 = fd.ops.max(r, [1])
        fd.add_output(fd.ops.add(fd.ops.broadcast(fd.ops.exp(r2), [False, True]), t1))
    a, b = rand_float(3, 4, 5) * 0.1, rand_float(3, 6)
    return fd, [a, b], a.sum(2).amax(1).exp()[:, None] + b, ["reduction", "reduction", "pointwise"]


def fusion_reduction_used_by_matmul_and_pointwise():
    """The reduction's result is used by two later segments: freed after the second."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor([-1, -1, -1])
        t1 = fd.define_tensor([-1, -1])
        r = fd.ops.sum(t0, [0])
        m = fd.ops.matmul(r, t1)
        fd.add_output(fd.ops.add(fd.ops.mul(fd.ops.relu(m), 2.0), r))
    a, b = rand_float(3, 4, 5), rand_float(5, 5)
    r = a.sum(0)
    return fd, [a, b], torch.relu(r @ b) * 2 + r, ["reduction", "matmul", "pointwise"]


@pytest.mark.parametrize("make", [fusion_reduction_matmul_pointwise,
                                  fusion_reduction_of_reduction_pointwise,
                                  fusion_reduction_used_by_matmul_and_pointwise])
def test_three_segment_host_ir_structure(make):
    fd, args, expected, schedulers = make()
    (out,) = fd.execute(args)
    torch.testing.assert_close(out, expected)
    assert len(fd.last_segments()) == 3
    text = fd.last_host_ir()
    all_lines = [ln for ln in text.splitlines() if ln.strip()]
    header = all_lines[0]
    inputs = TENSOR_DEF.findall(header)
    assert len(inputs) == 2, header
    lines = body_lines(text)
    # statements are indented under the header
    assert all(indent(ln) > indent(header) for ln in lines), text
    launches = find(lines, r"\blaunch\b")
    assert len(launches) == 3, text
    parsed = [parse_launch(lines[k]) for k in launches]
    names = [p[0] for p in parsed]
    assert [re.sub(r"^seg\d+_", "", n) for n in names] == schedulers, text
    # dependency order: every launch input is a program input or made by an earlier launch
    defined = set(inputs)
    produced_at = {}
    for pos, (_, ins, outs) in zip(launches, parsed):
        assert ins, text
        for t in ins:
            assert t in defined, f"{t} used before it is defined:\n{text}"
        for t in outs:
            produced_at[t] = pos
        defined.update(outs)
    # the chain: each launch consumes the previous one's output
    for (_, _, prev_outs), (_, ins, _) in zip(parsed, parsed[1:]):
        assert set(prev_outs) & set(ins), text
    ret = lines[-1].strip()
    assert ret.startswith("return "), text
    returned = re.findall(r"\bT\d+\b", ret)
    assert returned == parsed[-1][2], text
    # intermediates: deallocated once, after their last use, and never used again
    intermediates = [t for t in produced_at if t not in returned]
    assert len(intermediates) == 2, text
    deallocs = {re.fullmatch(r"deallocate (T\d+)", lines[k].strip()).group(1): k
                for k in find(lines, r"^deallocate ")}
    assert set(deallocs) == set(intermediates), text
    for t in intermediates:
        uses = [pos for pos, (_, ins, _) in zip(launches, parsed) if t in ins]
        assert uses, text
        assert deallocs[t] > max(uses), f"{t} freed before its last use:\n{text}"
        assert deallocs[t] > produced_at[t]
        later = [ln for ln in lines[deallocs[t] + 1:] if re.search(rf"\b{t}\b", ln)]
        assert not later, f"{t} used after deallocate:\n{text}"
        # freed right after its last use (before the next launch)
        next_launch = [pos for pos in launches if pos > max(uses)]
        if next_launch:
            assert deallocs[t] < next_launch[0], text
    assert not set(inputs) & set(deallocs)
    # tensor types carry dtypes and extents
    for pos in launches:
        assert re.search(r"\bT\d+ float\[[^\]]+\]", lines[pos]), lines[pos]


def test_lowered_program_runs_again_with_other_shapes():
    fd, args, expected, _ = fusion_reduction_matmul_pointwise()
    fd.execute(args)
    a, b = rand_float(2, 7, 3), rand_float(3, 4)
    (out,) = fd.execute([a, b])
    torch.testing.assert_close(out, torch.relu(a.sum(0) @ b) * 2)
    assert "launch" in fd.last_host_ir()


# ----------------------------------------------------------------------------- printing
def test_host_program_printing():
    with FusionDefinition() as fd_row:
        t0 = fd_row.define_tensor([-1], dtype=DataType.Int)
        i = fd_row.define_scalar(dtype=DataType.Int)
        fd_row.add_output(fd_row.ops.slice(t0, [i], [i + 1]))
    with FusionDefinition() as fd_pw:
        t = fd_pw.define_tensor([-1, 5])
        fd_pw.add_output(fd_pw.ops.mul(t, 2.0))
    hp = HostProgram()
    x = hp.define_tensor([-1, 5])
    y = hp.define_tensor([-1], dtype=DataType.Int)
    s = hp.define_scalar()
    acc = hp.allocate([7], DataType.Int)
    buf = hp.allocate([x.logical[0].extent, 5])
    with hp.for_loop(0, 7) as i:
        hp.launch(fd_row, [y, i], outputs=[hp.slice(acc, 0, i, i + 1)])
        with hp.for_loop(1, 9, 2) as j:
            (r,) = hp.launch(fd_pw, [x])
    with hp.for_loop(0, s):
        pass
    hp.add_output(acc)
    hp.add_output(buf)
    hp.add_output(r)
    text = str(hp)
    lines = text.splitlines()
    header = lines[0]
    assert header.startswith("host_program(") and header.rstrip().endswith("{"), text
    assert re.search(rf"\b{x.name} float\[\w+, 5\]", header), header
    assert re.search(rf"\b{y.name} int64\[\w+\]", header), header
    assert re.search(rf"\b{s.name} int64\b", header), header
    body = body_lines(text)
    a = one(body, rf"^{acc.name} int64\[7\] = allocate\(\)$")
    b = one(body, rf"^{buf.name} float\[\w+, 5\] = allocate\(\)$")
    outer = one(body, rf"^for {i.name} in range\(0, 7\):$")
    inner = one(body, rf"^for {j.name} in range\(1, 9, 2\):$")
    empty = one(body, rf"^for \w+ in range\(0, {s.name}\):$")
    assert indent(body[a]) == indent(body[b]) == indent(body[outer]) == indent(body[empty])
    into = one(body, rf"^launch \w+\({y.name}, {i.name}\) -> into T\d+ int64\[")
    ret_pw = one(body, rf"^{r.name} float\[\w+, 5\] = launch \w+\({x.name}\)$")
    sl = one(body, rf"= slice\({acc.name}, dim=0, start={i.name}, stop=\({i.name} \+ 1\)\)$")
    assert outer < sl < into < inner < ret_pw < empty
    assert indent(body[sl]) == indent(body[into]) == indent(body[inner]) > indent(body[outer])
    assert indent(body[ret_pw]) > indent(body[inner])
    assert body[empty + 1].strip() == "pass" and indent(body[empty + 1]) > indent(body[empty])
    # the slice target named on the launch line is the slice's result
    target = re.search(r"-> into (T\d+)", body[into]).group(1)
    assert body[sl].strip().startswith(target + " ")
    assert body[-1].strip() == f"return {acc.name}, {buf.name}, {r.name}"
    # the two launched fusions have distinct names
    n1, n2 = parse_launch(body[into])[0], parse_launch(body[ret_pw])[0]
    assert n1 != n2


# ----------------------------------------------------------------------------- collectives
def scale_fusion():
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1])
        fd.add_output(fd.ops.add(fd.ops.mul(t, 2.0), 1.0))
    return fd


COLLECTIVES = ["allgather", "allreduce", "broadcast", "reduce_scatter", "all_to_all"]


@pytest.mark.parametrize("kind", COLLECTIVES)
def test_collective_world_size_one_waits_before_first_use(kind):
    fd = scale_fusion()
    hp = HostProgram()
    x = hp.define_tensor([-1, 4])
    y = getattr(hp, kind)(x)
    (z,) = hp.launch(fd, [y])
    hp.add_output(z)
    text = str(hp)
    body = body_lines(text)
    start = one(body, rf"^{y.name} float\[.*\] = start {kind}\({x.name}\b")
    wait = one(body, rf"^wait {kind}\b")
    use = one(body, r"= launch ")
    assert start < wait < use, text
    assert y.name in body[wait]
    a = rand_float(6, 4)
    (out,) = hp.execute([a])
    torch.testing.assert_close(out, a * 2 + 1)


@pytest.mark.parametrize("kind", COLLECTIVES)
def test_collective_output_as_program_output(kind):
    hp = HostProgram()
    x = hp.define_tensor([-1, 4])
    y = getattr(hp, kind)(x)
    hp.add_output(y)
    text = str(hp)
    body = body_lines(text)
    assert one(body, rf"^wait {kind}\b") < len(body) - 1 and body[-1].strip() == f"return {y.name}"
    a = rand_float(6, 4)
    (out,) = hp.execute([a])
    assert_equal(out, a)
    assert out.data_ptr() != a.data_ptr(), "a collective's output is its own buffer"


def test_collective_explicit_wait_and_unused_output():
    fd = scale_fusion()
    hp = HostProgram()
    x = hp.define_tensor([-1, 4])
    y = hp.allreduce(x)
    hp.wait(y)
    (z,) = hp.launch(fd, [y])
    unused = hp.allgather(x)
    hp.add_output(z)
    with pytest.raises(DefinitionError, match=y.name):
        hp.wait(y)                               # already waited
    text = str(hp)
    body = body_lines(text)
    assert len(find(body, r"^wait allreduce\b")) == 1, text
    assert one(body, r"^wait allreduce\b") < one(body, r"= launch ")
    # an output nobody used is still waited for, before the program returns
    assert one(body, rf"^wait allgather -> {unused.name}$") > one(body, r"= start allgather")
    a = rand_float(3, 4)
    (out,) = hp.execute([a])
    torch.testing.assert_close(out, a * 2 + 1)


def test_collective_in_loop_waits_inside_the_loop():
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1])
        fd.add_output(fd.ops.mul(t, 3.0))
    hp = HostProgram()
    x = hp.define_tensor([-1, -1])
    out = hp.allocate([x.logical[0].extent, x.logical[1].extent])
    with hp.for_loop(0, x.logical[0].extent) as i:
        r = hp.allreduce(hp.select(x, 0, i))
        hp.launch(fd, [r], outputs=[hp.select(out, 0, i)])
    hp.add_output(out)
    body = body_lines(str(hp))
    loop = one(body, r"^for ")
    wait = one(body, r"^wait allreduce\b")
    assert indent(body[wait]) > indent(body[loop])
    a = rand_float(5, 3)
    (res,) = hp.execute([a])
    torch.testing.assert_close(res, a * 3)


def test_send_without_peer_raises():
    hp = HostProgram()
    x = hp.define_tensor([-1])
    hp.send(x, peer=1)
    hp.add_output(x)
    assert "start send_recv(send [T0 to 1], recv [])" in str(hp)
    with pytest.raises(ExecutionError, match=r"send: peer 1 is not a rank of this job of 1"):
        hp.execute([rand_float(4)])


def test_recv_without_peer_raises():
    hp = HostProgram()
    x = hp.define_tensor([-1])
    y = hp.recv([4], DataType.Float, peer=1)
    hp.add_output(x)
    hp.add_output(y)
    assert "start send_recv(send [], recv [T1 float[4] from 1])" in str(hp)
    with pytest.raises(ExecutionError, match=r"recv: peer 1 is not a rank of this job of 1"):
        hp.execute([rand_float(4)])


def test_send_recv_to_self_is_a_local_copy():
    hp = HostProgram()
    x = hp.define_tensor([-1])
    (y,) = hp.send_recv(sends=[(x, hp.rank)], recvs=[([x.logical[0].extent], DataType.Float, 0)])
    hp.add_output(hp_neg(hp, y))
    a = rand_float(6)
    (out,) = hp.execute([a])
    torch.testing.assert_close(out, -a)


def hp_neg(hp, t):
    with FusionDefinition() as fd:
        u = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.neg(u))
    return hp.launch(fd, [t])[0]


# ----------------------------------------------------------------------------- blocks on ranks
# (this process is rank 0 of a job of 1: blocks on other ranks are skipped)
def test_on_ranks_blocks_print_continue_and_skip_other_ranks():
    fd = scale_fusion()
    hp = HostProgram()
    x = hp.define_tensor([-1, -1])
    held = hp.define_tensor([-1, 3], ranks=[2, 1])
    with hp.on_ranks([0]):
        (y,) = hp.launch(fd, [x])
    with hp.on_ranks([0]):  # continues the block before
        (z,) = hp.launch(fd, [y])
    with hp.on_ranks([1, 2]):
        (w,) = hp.launch(fd, [held])
        with hp.on_ranks([2, 5]):  # within its enclosing block: rank 2
            (v,) = hp.launch(fd, [w])
    for t in (z, w, v):
        hp.add_output(t)
    text = str(hp)
    assert text.count("on ranks [0]:") == 1 and "  on ranks [1, 2]:" in text, text
    assert "    on ranks [2, 5]:" in text and f"{held.name} float[n1_0, 3] on ranks [1, 2]" in text, text
    assert f"return {z.name} on ranks [0], {w.name} on ranks [1, 2], {v.name} on ranks [2]" in text, text
    a = rand_float(3, 4)
    got = hp.execute([a, torch.empty(0)])  # (a placeholder for the input rank 0 does not hold)
    torch.testing.assert_close(got[0], (a * 2 + 1) * 2 + 1)
    assert [t.shape for t in got[1:]] == [(0, 0), (0, 0)] and got[1].dtype == torch.float32


def test_a_value_is_used_only_on_ranks_it_exists_on():
    fd = scale_fusion()
    hp = HostProgram()
    x = hp.define_tensor([-1, -1])
    with hp.on_ranks([1]):
        (y,) = hp.launch(fd, [x])
    (z,) = hp.launch(fd, [y])
    hp.add_output(z)
    with pytest.raises(DefinitionError, match=r"T\d+ exists only on ranks \[1\] but is used on every "
                                              r"rank \(move it by communication\)"):
        hp.execute([rand_float(2, 2)])
    hp = HostProgram()
    x = hp.define_tensor([-1, -1], ranks=[1])
    with hp.on_ranks([0, 1]):
        hp.add_output(hp.launch(fd, [x])[0])
    with pytest.raises(DefinitionError, match=r"exists only on ranks \[1\] but is used on ranks \[0, 1\]"):
        hp.execute([rand_float(2, 2)])
    with pytest.raises(DefinitionError, match="expected a non-empty list of ranks"):
        with HostProgram().on_ranks([]):
            pass
    hp = HostProgram()
    with hp.on_ranks([1]):
        with pytest.raises(DefinitionError, match=r"inside a block on ranks \[1\]: no rank would run it"):
            with hp.on_ranks([0]):
                pass


def test_communication_waits_stay_in_the_block_of_ranks_that_started_it():
    fd = scale_fusion()
    hp = HostProgram()
    x = hp.define_tensor([-1, -1])
    r = hp.allreduce(x)
    with hp.on_ranks([0]):
        (y,) = hp.launch(fd, [r])  # r's wait goes before the block, where the allreduce started
        g = hp.allgather(y)
    hp.add_output(g)
    body = body_lines(str(hp))
    assert body.index("  wait allreduce -> T1") < body.index("  on ranks [0]:") < \
        body.index("    wait allgather -> T3"), body
    a = rand_float(2, 3)
    torch.testing.assert_close(hp.execute([a])[0], a * 2 + 1)
    # hand-made programs that break the rule are named
    from hostir.host import ir as H
    from hostir.host.verify import verify_program
    from hostir.ir.errors import VerificationError
    prog = hp.ir()
    start, wait, block = prog.body[0], prog.body[1], prog.body[2]
    moved = H.HostIR(prog.inputs, (start, H.OnRanks((0,), (wait, *block.body))), prog.outputs,
                     prog.input_ranks, prog.output_ranks)
    with pytest.raises(VerificationError, match="the allreduce started on every rank: wait for it there"):
        verify_program(moved, (hp.rank, hp.world_size))
    unwaited = H.HostIR(prog.inputs, (start, wait, H.OnRanks((0,), block.body[:-1])), (),
                        prog.input_ranks, ())
    with pytest.raises(VerificationError, match="allgather started inside is not waited for inside it"):
        verify_program(unwaited, (hp.rank, hp.world_size))


def test_shapes_travel_with_a_send_recv_and_a_broadcast():
    hp = HostProgram()
    x = hp.define_tensor([-1, 5])
    with hp.on_ranks([0]):
        (y,) = hp.send_recv(sends=[(x, 0)], recvs=[([None, 5], DataType.Float, 0)])
        z = hp.broadcast(y, root=0, team=[0], with_shape=True)
    hp.add_output(z)
    text = str(hp)
    assert f"recv [{y.name} float[{y.name}_n0, 5] from 0], with shapes)" in text, text
    assert f"{z.name} float[{z.name}_n0, 5] = start broadcast({y.name}, root=0, " \
           f"team=DeviceMesh([0])[dim 0], with shape)" in text, text
    for n in (3, 6):
        a = rand_float(n, 5)
        torch.testing.assert_close(hp.execute([a])[0], a)


# ----------------------------------------------------------------------------- misuse
@pytest.fixture
def row_setup():
    fd = slice_row_fusion(False, False)
    hp = HostProgram()
    t = hp.define_tensor(shape=[-1], dtype=DataType.Int)
    return fd, hp, t


def test_launch_with_wrong_number_of_inputs(row_setup):
    fd, hp, t = row_setup
    with pytest.raises(DefinitionError, match=r"launch fusion0.*takes 2 inputs, got 1"):
        hp.launch(fd, [t])
    with pytest.raises(DefinitionError, match=r"launch fusion0.*takes 2 inputs, got 3"):
        hp.launch(fd, [t, 1, 2])


def test_launch_with_wrong_input_kind_or_dtype(row_setup):
    fd, hp, t = row_setup
    f = hp.define_tensor([-1], DataType.Float)
    with pytest.raises(DefinitionError, match=rf"launch fusion0.*input 0.*{f.name}"):
        hp.launch(fd, [f, 0])
    with pytest.raises(DefinitionError, match=rf"launch fusion0 input 1.*scalar.*{t.name}"):
        hp.launch(fd, [t, t])


def test_launch_into_wrong_dtype_buffer(row_setup):
    fd, hp, t = row_setup
    buf = hp.allocate([7], DataType.Float)
    with pytest.raises(DefinitionError, match=rf"launch fusion0.*{buf.name}.*float.*int64"):
        hp.launch(fd, [t, 0], outputs=[buf])


def test_launch_into_wrong_rank_buffer(row_setup):
    fd, hp, t = row_setup
    buf = hp.allocate([7, 1], DataType.Int)
    with pytest.raises(DefinitionError, match=rf"launch fusion0.*{buf.name}.*2 dims.*1 dims"):
        hp.launch(fd, [t, 0], outputs=[buf])


def test_launch_into_wrong_number_of_buffers(row_setup):
    fd, hp, t = row_setup
    buf = hp.allocate([7], DataType.Int)
    with pytest.raises(DefinitionError, match=r"launch fusion0.*1 outputs, got 2"):
        hp.launch(fd, [t, 0], outputs=[buf, buf])


def test_result_shape_does_not_fit_output_buffer_at_run_time(row_setup):
    fd, hp, t = row_setup
    acc = hp.allocate([8], DataType.Int)
    with hp.for_loop(0, 7) as i:
        row = hp.slice(acc, 0, i, i + 2)             # two rows, the fusion makes one
        hp.launch(fd, [t, i], outputs=[row])
    hp.add_output(acc)
    with pytest.raises(ExecutionError, match=rf"launch fusion0.*\[1\].*{row.name}.*\[2\]"):
        hp.execute([rand_int(7)])


def test_slice_out_of_range_at_run_time():
    hp = HostProgram()
    x = hp.define_tensor([-1])
    lo = hp.define_scalar()
    hp.add_output(hp.slice(x, 0, lo, lo + 3))
    a = rand_float(5)
    (ok,) = hp.execute([a, 2])
    assert_equal(ok, a[2:5])
    with pytest.raises(ExecutionError, match=rf"slice of {x.name}.*\[3, 6\).*extent 5"):
        hp.execute([a, 3])
    with pytest.raises(ExecutionError, match=rf"slice of {x.name}.*\[-1, 2\)"):
        hp.execute([a, -1])


def test_select_out_of_range_at_run_time():
    hp = HostProgram()
    x = hp.define_tensor([-1, -1])
    k = hp.define_scalar()
    hp.add_output(hp.select(x, 1, k))
    a = rand_float(3, 4)
    with pytest.raises(ExecutionError, match=rf"select of {x.name}.*index 7.*extent 4"):
        hp.execute([a, 7])


def test_view_dim_out_of_range_at_definition():
    hp = HostProgram()
    x = hp.define_tensor([-1])
    for fn in (lambda: hp.slice(x, 1, 0, 1), lambda: hp.select(x, 2, 0),
               lambda: hp.shard_by_stream(x, -2, 0, 2)):
        with pytest.raises(DefinitionError, match=rf"dim .*out of range.*{x.name}"):
            fn()


def test_execute_with_wrong_input_count_or_dtype(row_setup):
    fd, hp, t = row_setup
    s = hp.define_scalar()
    acc = hp.allocate([7], DataType.Int)
    with hp.for_loop(0, 7) as i:
        hp.launch(fd, [t, i], outputs=[hp.slice(acc, 0, i, i + 1)])
    hp.add_output(acc)
    a = rand_int(7)
    with pytest.raises(InputError, match=r"expected 2 inputs, got 1"):
        hp.execute([a])
    with pytest.raises(InputError, match=r"expected 2 inputs, got 3"):
        hp.execute([a, 1, 2])
    with pytest.raises(InputError, match=rf"{t.name}.*int64"):
        hp.execute([a.double(), 1])
    with pytest.raises(InputError, match=rf"{t.name}.*1 dims"):
        hp.execute([a[None], 1])
    with pytest.raises(InputError, match=rf"{t.name}"):
        hp.execute([3, 1])
    with pytest.raises(InputError, match=rf"{s.name}.*int"):
        hp.execute([a, 2.5])
    with pytest.raises(InputError, match=rf"{s.name}"):
        hp.execute([a, "abc"])
    with pytest.raises(InputError, match=rf"{s.name}"):
        hp.execute([a, None])
    # after all that, it still runs
    (out,) = hp.execute([a, 1])
    assert_equal(out, a)


def test_execute_static_extent_mismatch():
    hp = HostProgram()
    x = hp.define_tensor([4, -1])
    hp.add_output(x)
    with pytest.raises(InputError, match=rf"{x.name}.*dim 0.*4.*got 5"):
        hp.execute([rand_float(5, 3)])


def test_adding_statements_after_execute(row_setup):
    fd, hp, t = row_setup
    acc = hp.allocate([7], DataType.Int)
    with hp.for_loop(0, 7) as i:
        hp.launch(fd, [t, i], outputs=[hp.slice(acc, 0, i, i + 1)])
    hp.add_output(acc)
    a = rand_int(7)
    (before,) = hp.execute([a])
    text = str(hp)
    attempts = {
        "allocate": lambda: hp.allocate([3], DataType.Int),
        "slice": lambda: hp.slice(acc, 0, 0, 1),
        "launch": lambda: hp.launch(fd, [t, 0]),
        "allreduce": lambda: hp.allreduce(t),
        "synchronize": lambda: hp.synchronize(1),
        "add_output": lambda: hp.add_output(t),
        "define_tensor": lambda: hp.define_tensor([-1]),
        "define_scalar": lambda: hp.define_scalar(),
    }
    for what, fn in attempts.items():
        with pytest.raises(DefinitionError, match=r"has run already"):
            fn()
    with pytest.raises(DefinitionError, match=r"has run already"):
        with hp.for_loop(0, 3):
            pass
    with pytest.raises(DefinitionError, match=r"has run already"):
        with hp.stream(1):
            pass
    # the program is unchanged and still runs with one input and one output
    assert str(hp) == text
    results = hp.execute([a])
    assert len(results) == 1
    assert_equal(results[0], before)


def test_wait_on_a_non_pending_tensor(row_setup):
    fd, hp, t = row_setup
    with pytest.raises(DefinitionError, match=rf"wait: {t.name} is not the output of a pending"):
        hp.wait(t)
    (y,) = hp.launch(fd, [t, 0])
    with pytest.raises(DefinitionError, match=rf"wait: {y.name}"):
        hp.wait(y)


def test_launch_of_something_else():
    hp = HostProgram()
    x = hp.define_tensor([-1])
    with pytest.raises(DefinitionError, match=r"launch: expected a FusionDefinition, got Tensor"):
        hp.launch(torch.randn(3), [x])


def test_unclosed_loop_cannot_be_printed_or_run():
    hp = HostProgram()
    x = hp.define_tensor([-1])
    loop = hp.for_loop(0, 3)
    loop.__enter__()
    with pytest.raises(DefinitionError, match=r"for_loop"):
        str(hp)
    with pytest.raises(DefinitionError, match=r"for_loop"):
        hp.execute([rand_float(3)])
    loop.__exit__(None, None, None)
    hp.add_output(x)
    a = rand_float(3)
    assert_equal(hp.execute([a])[0], a)


def test_loop_index_used_after_its_loop():
    hp = HostProgram()
    x = hp.define_tensor([-1])
    with hp.for_loop(0, 3) as i:
        pass
    hp.add_output(hp.slice(x, 0, i, i + 1))
    with pytest.raises((DefinitionError, ExecutionError), match=i.name):
        hp.execute([rand_float(5)])


# ----------------------------------------------------------------------------- on a GPU
@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["pointwise", "reduction"])
@pytest.mark.parametrize("mode", ["static", "scalar"])
@pytest.mark.parametrize("c", [3, 4])
def test_chunk_loop_on_cuda_streams(kind, mode, c):
    """Same chunk loop on CUDA, where stream(k % 2) really alternates two streams."""
    fd = chunk_fusion(kind)
    hp = chunk_program(fd, kind, mode, c)
    for size in (10, 7, 1, 12, 1000):
        a = rand_float(size, 6).cuda()
        (out,) = hp.execute([a, c] if mode == "scalar" else [a])
        torch.cuda.synchronize()
        assert out.is_cuda
        torch.testing.assert_close(out.cpu(), chunk_expected(kind, a.cpu(), c),
                                   msg=lambda m: f"size {size}, chunk {c}: {m}")


@pytest.mark.gpu
@pytest.mark.parametrize("two_d,arith", SEED001_CASES)
def test_seed001_loop_on_cuda(two_d, arith):
    fd = slice_row_fusion(two_d, arith)
    hp = seed001_program(fd, two_d)
    x = (rand_float(7, 5) if two_d else rand_int(7)).cuda()
    (out,) = hp.execute([x])
    torch.cuda.synchronize()
    assert out.is_cuda
    assert_equal(out.cpu(), expected_rows(x.cpu(), range(7), arith))


@pytest.mark.gpu
@pytest.mark.parametrize("size,num", [(10, 3), (12, 4), (5, 4), (4099, 3)])
def test_shard_by_stream_loop_on_cuda(size, num):
    hp = _shard_loop_program(num)
    a = rand_float(size, 4).cuda()
    (res,) = hp.execute([a])
    torch.cuda.synchronize()
    chunk = -(-size // num)
    owner = (torch.arange(size) // chunk).to(torch.float32)[:, None]
    assert_equal(res.cpu(), a.cpu() * 2 + owner)


def _rotation():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        n = fd.ops.size(t0, 0)
        h = fd.ops.div(n, 2)
        rot = fd.ops.cat([fd.ops.slice(t0, [h], [n]), fd.ops.slice(t0, [0], [h])], 0)
        fd.add_output(fd.ops.mul(fd.ops.add(t0, rot), 3.0))
    return fd


def test_launch_writes_results_straight_into_output_buffers():
    """A kernel's result lands in the caller's buffer (views included) with no copy."""
    fd = _rotation()
    x = torch.randn(12)
    buf = torch.full((3, 12), float("nan"))
    view = buf[1]                       # a strided row of a bigger buffer
    for _ in range(2):                  # the second call takes the prepared path
        (res,) = fd.execute([x], out=[view])
        assert res is view
    torch.testing.assert_close(buf[1], (x + torch.cat([x[6:], x[:6]])) * 3.0)
    assert torch.isnan(buf[0]).all() and torch.isnan(buf[2]).all()


def test_output_buffer_overlapping_an_input_is_not_written_in_place():
    fd = _rotation()
    x = torch.randn(10)
    expected = (x + torch.cat([x[5:], x[:5]])) * 3.0
    hp = HostProgram()
    t = hp.define_tensor(shape=[-1], dtype=DataType.Float)
    hp.launch(fd, [t], outputs=[t])     # in-place update of the program input
    hp.add_output(t)
    (out,) = hp.execute([x.clone()])
    torch.testing.assert_close(out, expected)


def test_chunk_loop_writes_chunks_in_place():
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.exp(a))
    hp = HostProgram()
    t = hp.define_tensor(shape=[-1, 4], dtype=DataType.Float)
    n = t.axes[0].extent
    out = hp.allocate([n, 4], DataType.Float)
    with hp.for_loop(0, (n + 2) // 3) as k:
        lo, hi = k * 3, hostir.min(k * 3 + 3, n)
        hp.launch(fd, [hp.slice(t, 0, lo, hi)], outputs=[hp.slice(out, 0, lo, hi)])
    hp.add_output(out)
    copies = []
    orig = torch.Tensor.copy_

    def counting(self, *a, **k):
        copies.append(1)
        return orig(self, *a, **k)
    torch.Tensor.copy_ = counting
    try:
        x = torch.randn(10, 4)
        (res,) = hp.execute([x])
    finally:
        torch.Tensor.copy_ = orig
    torch.testing.assert_close(res, x.exp())
    assert not copies


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["pointwise", "reduction"])
def test_repeated_calls_replay_a_cuda_graph(kind):
    """The third call with the same inputs is captured, later ones replay it;
    each reads the inputs' current contents. Every output is kept here, so each
    replay needs a graph whose outputs nobody holds: calls 3-5 capture one each
    (ROTATION), call 6 runs eagerly, and no result is overwritten."""
    cases = [(seed001_program(slice_row_fusion(True, True), True), lambda: [rand_float(7, 5)],
              lambda x: expected_rows(x, range(7), True)),
             (chunk_program(chunk_fusion(kind), kind, "scalar", 3),
              lambda: [rand_float(10, 6), 3], lambda x: chunk_expected(kind, x, 3)),
             (_shard_loop_program(3), lambda: [rand_float(10, 4)], None)]
    for hp, make, expect in cases:
        args = [a.cuda() if isinstance(a, torch.Tensor) else a for a in make()]
        kept = []
        for call in range(6):
            fresh = make()[0]
            args[0].copy_(fresh.cuda())  # same memory, new contents
            (out,) = hp.execute(args)
            kept.append((out, fresh))
        torch.cuda.synchronize()
        assert hp._graphs.error is None, hp._graphs.error
        assert hp._graphs.replays == 3 and hp._graphs.count == 3
        for out, fresh in kept:  # earlier results are not overwritten by later replays
            if expect is not None:
                torch.testing.assert_close(out.cpu(), expect(fresh))
            else:
                chunk = -(-10 // 3)
                owner = (torch.arange(10) // chunk).to(torch.float32)[:, None]
                assert_equal(out.cpu(), fresh * 2 + owner)
        assert len({o.data_ptr() for o, _ in kept}) == len(kept)


@pytest.mark.gpu
def test_graph_replay_hands_out_its_pool_once_the_caller_lets_go():
    """Outputs a replay returns live on the graph's pool, not copied out: a
    loop that drops each result replays one graph into the same memory; one
    that holds the last result (`out = f(x)` holds it during the next call)
    alternates between two graphs; a view kept of an old result keeps that
    graph from being replayed, and the held values stay intact."""
    hp = seed001_program(slice_row_fusion(True, True), True)
    x = rand_float(7, 5).cuda()
    ptrs = []
    for _ in range(6):
        fresh = rand_float(7, 5)
        x.copy_(fresh.cuda())
        ptrs.append(hp.execute([x])[0].data_ptr())  # dropped at once
    assert hp._graphs.replays == 4 and hp._graphs.count == 1, (hp._graphs.replays, hp._graphs.count)
    assert len(set(ptrs[2:])) == 1  # one pool buffer, never copied out
    hp = seed001_program(slice_row_fusion(True, True), True)
    out = None
    seen, held = [], []
    for i in range(8):
        fresh = rand_float(7, 5)
        x.copy_(fresh.cuda())
        (out,) = hp.execute([x])
        seen.append(out.data_ptr())
        if i == 3:
            held.append((out[1:], fresh))  # a view of call 4's result, kept
    torch.cuda.synchronize()
    assert hp._graphs.error is None
    assert hp._graphs.count == 3  # A, B, then C while B's result is viewed
    assert len(set(seen[2:])) == 3
    assert_equal(out.cpu(), expected_rows(fresh, range(7), True))
    for view, f in held:
        assert_equal(view.cpu(), expected_rows(f, range(7), True)[1:])


@pytest.mark.gpu
def test_single_collective_programs_replay_on_nccl():
    """A one-rank NCCL group in a process of its own (tests/mpi/nccl_one_rank_graphs.py):
    programs of one collective are captured and replayed, held outputs stay intact."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    proc = subprocess.run([sys.executable, str(root / "tests" / "mpi" / "nccl_one_rank_graphs.py")],
                          capture_output=True, text=True, timeout=300, env=env, cwd=root)
    assert proc.returncode == 0 and "all one-rank NCCL graph programs ok" in proc.stdout, \
        (proc.stdout + proc.stderr)[-3000:]


@pytest.mark.gpu
def test_graph_replay_returns_inputs_and_views_of_inputs(monkeypatch):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(fd.ops.add(t, 1.0), 2.0))
    hp = HostProgram()
    x = hp.define_tensor(shape=[-1], dtype=DataType.Float)
    with hp.for_loop(0, 5):
        hp.launch(fd, [x])
    hp.add_output(x)
    hp.add_output(hp.slice(x, 0, 1, 3))
    a = torch.randn(8, device="cuda")
    for _ in range(5):
        got_x, got_view = hp.execute([a])
        assert got_x is a
        assert got_view.data_ptr() == a[1:3].data_ptr() and got_view.shape == (2,)
    assert hp._graphs.replays == 3  # calls 3 (captured, then replayed), 4 and 5
    monkeypatch.setenv("HOSTIR_DISABLE", "cuda_graphs")
    config.reload()
    try:
        hp2 = HostProgram()
        y = hp2.define_tensor(shape=[-1], dtype=DataType.Float)
        (r,) = hp2.launch(fd, [y])
        hp2.add_output(r)
        for _ in range(4):
            (out,) = hp2.execute([a])
            torch.testing.assert_close(out, (a + 1) * 2)
        assert hp2._graphs is None
    finally:
        monkeypatch.delenv("HOSTIR_DISABLE")
        config.reload()


def _nvtx_recorder(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: calls.append(("push", name)))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: calls.append(("pop",)))
    return calls


def test_nvtx_ranges_are_balanced_and_named(monkeypatch):
    """HOSTIR_ENABLE=nvtx wraps launches, collective starts and waits in NVTX
    ranges on CUDA (a failing statement still closes its range); CPU programs
    push none."""
    from types import SimpleNamespace

    from hostir.host import evaluator as E
    calls = _nvtx_recorder(monkeypatch)
    cuda_env = SimpleNamespace(device=torch.device("cuda"))

    def boom(env):
        raise ExecutionError("boom")
    E._nvtx_range("hostir: launch k", lambda env: None)(cuda_env)
    with pytest.raises(ExecutionError):
        E._nvtx_range("hostir: launch bad", boom)(cuda_env)
    assert calls == [("push", "hostir: launch k"), ("pop",), ("push", "hostir: launch bad"), ("pop",)]
    calls.clear()
    monkeypatch.setenv("HOSTIR_ENABLE", "nvtx")
    config.reload()
    try:
        hp = seed001_program(slice_row_fusion(True, True), True)
        x = rand_float(7, 5)
        (out,) = hp.execute([x])
        assert_equal(out, expected_rows(x, range(7), True))
        assert calls == []  # a CPU program
        assert E.Compiler().nvtx
    finally:
        monkeypatch.delenv("HOSTIR_ENABLE")
        config.reload()


@pytest.mark.gpu
def test_nvtx_ranges_on_cuda(monkeypatch):
    calls = _nvtx_recorder(monkeypatch)
    monkeypatch.setenv("HOSTIR_ENABLE", "nvtx")
    config.reload()
    try:
        hp = seed001_program(slice_row_fusion(True, True), True)
        x = rand_float(7, 5).cuda()
        for _ in range(4):  # eager, eager, captured, replayed
            (out,) = hp.execute([x])
        assert_equal(out.cpu(), expected_rows(x.cpu(), range(7), True))
    finally:
        monkeypatch.delenv("HOSTIR_ENABLE")
        config.reload()
    pushes = [c[1] for c in calls if c[0] == "push"]
    assert len(pushes) == sum(1 for c in calls if c[0] == "pop")
    assert sum(1 for p in pushes if p.startswith("hostir: launch")) >= 14  # 7 rows, 2 eager calls
    assert "hostir: graph replay" in pushes


@pytest.mark.gpu
def test_graph_capture_leaves_other_threads_alone():
    """While a program is captured, another thread keeps allocating, computing
    and synchronizing on its own stream: both must go on unharmed. (Not CUDA
    random numbers: torch refuses those in other threads during any capture.)"""
    import threading
    stop, errors, rounds = threading.Event(), [], [0]

    def worker():
        try:
            with torch.cuda.stream(torch.cuda.Stream()):
                while not stop.is_set():
                    t = torch.arange(4096, device="cuda", dtype=torch.float32)
                    assert (t * 2).sum().item() == 2 * t.sum().item()
                    rounds[0] += 1
        except Exception as e:  # reported below
            errors.append(e)
    th = threading.Thread(target=worker)
    th.start()
    try:
        hp = seed001_program(slice_row_fusion(True, True), True)
        x = rand_float(7, 5).cuda()
        for _ in range(5):
            (out,) = hp.execute([x])
            assert_equal(out.cpu(), expected_rows(x.cpu(), range(7), True))
    finally:
        stop.set()
        th.join()
    assert not errors, errors
    assert rounds[0] > 0
    assert hp._graphs.error is None and hp._graphs.replays == 3, hp._graphs.error
