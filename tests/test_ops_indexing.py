"""Indexing ops of fd.ops (index_select, gather, take_along_axis, embedding_fwd,
scatter) against torch on random data: many shapes, size-1 and empty dims, Int
and Int32 indices (negative ones count from the end, except scatter's: torch's
range), non-contiguous inputs, the index fused with a pointwise prologue and
the result with an epilogue; out-of-range values are an ExecutionError naming
the op, the tensors and the value. The kernels run in the interpreter on CPU
(and are compiled by the NVRTC sweep)."""
import pytest
import torch

from hostir import DataType, DefinitionError, ExecutionError, FusionDefinition, UnsupportedError
from ops_util import TEST_DEVICE, TORCH, check, declare, rand, relayout, run

D = DataType
VALUES = [D.Float, D.BFloat16, D.Half, D.Double, D.Int32, D.Bool]
LAYOUTS = ["sym", "strided", "transposed"]


def _indices(shape, extent: int, dtype: D, negative: bool = True) -> torch.Tensor:
    lo = -extent if negative else 0
    return torch.randint(lo, max(extent, 1), shape, dtype=TORCH[dtype]) if extent else \
        torch.zeros(shape, dtype=TORCH[dtype])


def _pos(i: torch.Tensor, extent: int) -> torch.Tensor:
    return torch.where(i < 0, i + extent, i).long()


# (input shape, index length, dim)
SELECT_CASES = [((7, 5), 4, 0), ((7, 5), 9, 1), ((1, 6), 3, 0), ((6, 1), 2, 1), ((4, 3, 5), 6, 1),
                ((4, 3, 5), 1, -1), ((33,), 40, 0), ((5, 2, 3, 2), 3, 2), ((3, 4), 0, 0)]


@pytest.mark.parametrize("dtype", VALUES, ids=lambda d: d.short)
@pytest.mark.parametrize("case", SELECT_CASES, ids=str)
@pytest.mark.parametrize("idx_dtype", [D.Int, D.Int32], ids=lambda d: d.short)
def test_index_select(case, dtype, idx_dtype):
    shape, n, dim = case
    x = rand(shape, dtype)
    idx = _indices((n,), shape[dim], idx_dtype)

    def build(fd):
        fd.add_output(fd.ops.index_select(declare(fd, x), declare(fd, idx), dim))
    (out,) = run(build, [x, idx])
    check(out, torch.index_select(x, dim, _pos(idx, shape[dim])))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_index_select_of_non_contiguous_input_fused(layout):
    x = relayout(rand((6, 9), D.Float), layout)
    idx = _indices((11,), 6, D.Int)

    def build(fd):
        t, i = declare(fd, x, layout), declare(fd, idx)
        i2 = fd.ops.sub(i, fd.ops.mul(fd.ops.lt(i, 0), 0))       # a prologue on the index
        y = fd.ops.index_select(fd.ops.exp(t), i2, 0)            # ... and on the input
        fd.add_output(fd.ops.add(fd.ops.mul(y, 2.0), 1.0))       # an epilogue
    (out,) = run(build, [x, idx])
    check(out, torch.exp(x)[_pos(idx, 6)] * 2 + 1)


# (input shape, index shape, dim)
GATHER_CASES = [((5, 7), (5, 3), 1), ((5, 7), (2, 7), 0), ((5, 7), (4, 2), 1), ((3, 4, 5), (3, 2, 5), 1),
                ((3, 4, 5), (1, 4, 9), 2), ((6,), (10,), 0), ((1, 8), (1, 3), 1), ((4, 1), (4, 5), 1),
                ((3, 4), (3, 0), 1)]


@pytest.mark.parametrize("dtype", VALUES, ids=lambda d: d.short)
@pytest.mark.parametrize("case", GATHER_CASES, ids=str)
@pytest.mark.parametrize("idx_dtype", [D.Int, D.Int32], ids=lambda d: d.short)
def test_gather(case, dtype, idx_dtype):
    shape, ishape, dim = case
    x = rand(shape, dtype)
    idx = _indices(ishape, shape[dim], idx_dtype)

    def build(fd):
        fd.add_output(fd.ops.gather(declare(fd, x), declare(fd, idx), dim))
    (out,) = run(build, [x, idx])
    check(out, torch.gather(x, dim, _pos(idx, shape[dim])))


# (input shape, index shape, dim): the index broadcasts against the input on the other dims
TAKE_CASES = [((5, 7), (5, 3), 1), ((5, 7), (1, 3), 1), ((5, 1), (5, 4), 1), ((5, 7), (9, 7), 0),
              ((5, 7), (9, 1), 0), ((2, 3, 4), (2, 1, 6), 2), ((2, 3, 4), (1, 3, 4), 0), ((8,), (3,), 0)]


@pytest.mark.parametrize("case", TAKE_CASES, ids=str)
@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16, D.Int32], ids=lambda d: d.short)
def test_take_along_axis(case, dtype):
    shape, ishape, dim = case
    x = rand(shape, dtype)
    idx = _indices(ishape, shape[dim], D.Int)

    def build(fd):
        fd.add_output(fd.ops.take_along_axis(declare(fd, x, "bcast"), declare(fd, idx, "bcast"), dim))
    (out,) = run(build, [x, idx])
    check(out, torch.take_along_dim(x, _pos(idx, shape[dim]), dim))


@pytest.mark.parametrize("ishape", [(5,), (3, 4), (2, 1, 3), (1,)], ids=str)
@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16], ids=lambda d: d.short)
def test_embedding_fwd(ishape, dtype):
    w = rand((10, 8), dtype)
    idx = _indices(ishape, 10, D.Int, negative=False)

    def build(fd):
        fd.add_output(fd.ops.embedding_fwd(declare(fd, idx), declare(fd, w), None, None, 2.0, False, False))
    (out,) = run(build, [idx, w])
    check(out, torch.nn.functional.embedding(idx, w))


@pytest.mark.skipif(TEST_DEVICE != "cpu", reason="GPUs check indices only with HOSTIR_DEBUG=indices "
                    "(test_a_debug_gpu_kernel_traps_on_a_bad_index)")
@pytest.mark.parametrize("op", ["index_select", "gather", "take_along_axis"])
@pytest.mark.parametrize("bad", [5, -6, 100])
def test_out_of_range_is_an_error_naming_the_value(op, bad):
    x = rand((5, 5), D.Float)
    idx = torch.tensor([0, bad, 1]) if op == "index_select" else torch.tensor([[0, bad]] * 5)

    def build(fd):
        fd.add_output(getattr(fd.ops, op)(declare(fd, x), declare(fd, idx), 0 if op == "index_select" else 1))
    with pytest.raises(ExecutionError, match=rf"{op} -> .*{bad}.* out of range.*5"):
        run(build, [x, idx])


def test_definition_errors():
    from hostir import FusionDefinition
    with pytest.raises(DefinitionError, match="index_select: index .* must be Int or Int32"):
        with FusionDefinition() as fd:
            x = fd.define_tensor([-1, -1])
            fd.ops.index_select(x, fd.define_tensor([-1]), 0)
    with pytest.raises(DefinitionError, match="must be 1-D"):
        with FusionDefinition() as fd:
            fd.ops.index_select(fd.define_tensor([-1, -1]), fd.define_tensor([-1, -1], dtype=D.Int), 0)
    with pytest.raises(DefinitionError, match="gather: index .* rank"):
        with FusionDefinition() as fd:
            fd.ops.gather(fd.define_tensor([-1, -1]), fd.define_tensor([-1], dtype=D.Int), 0)
    with pytest.raises(UnsupportedError, match="max_norm"):
        with FusionDefinition() as fd:
            fd.ops.embedding_fwd(fd.define_tensor([-1], dtype=D.Int), fd.define_tensor([-1, -1]),
                                 None, 1.0, 2.0, False, False)
    with pytest.raises(DefinitionError, match="dim"):
        with FusionDefinition() as fd:
            fd.ops.gather(fd.define_tensor([-1, -1]), fd.define_tensor([-1, -1], dtype=D.Int), 2)


def test_gather_index_larger_than_the_input_is_an_error():
    x, idx = rand((3, 4), D.Float), torch.zeros(5, 2, dtype=torch.int64)

    def build(fd):
        fd.add_output(fd.ops.gather(declare(fd, x), declare(fd, idx), 1))
    with pytest.raises(ExecutionError, match="gather .* dim 0 of index .* 5, more than"):
        run(build, [x, idx])


def test_debug_builds_check_indices_on_gpus():
    """HOSTIR_DEBUG=indices builds the gathers' device-side check (the session's
    NVRTC sweep compiles those variants; on CPU every index is checked anyway)."""
    from hostir import FusionDefinition, config
    from hostir.codegen import spec as S
    made = []
    S.observers.append(made.append)
    try:
        with config.override(debug=config.get().debug | {"indices"}):
            x, idx = rand((6, 4), D.Float), torch.tensor([5, -6, 2])
            with FusionDefinition() as fd:
                fd.add_output(fd.ops.index_select(declare(fd, x), declare(fd, idx), 0))
            (out,) = fd.execute([x, idx])
    finally:
        S.observers.remove(made.append)
    check(out, x[_pos(idx, 6)])
    sources = [v.source for sp in made for v in sp.typical_variants()]
    assert sources and all("#define HIR_CHECK_INDICES 1" in s and "__trap()" in s for s in sources)


TRAP = """
import torch
from hostir import DataType, FusionDefinition
with FusionDefinition() as fd:
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    i = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
    fd.add_output(fd.ops.index_select(x, i, 0))
x = torch.randn(5, 8, device="cuda")
(out,) = fd.execute([x, torch.tensor([1, -1, 4], device="cuda")])
assert torch.equal(out, x[[1, 4, 4]])
(out,) = fd.execute([x, torch.tensor([1, 7, 4], device="cuda")])
torch.cuda.synchronize()
print("not trapped", out[1].abs().sum().item())
"""


@pytest.mark.gpu
@pytest.mark.parametrize("debug", [True, False])
def test_a_debug_gpu_kernel_traps_on_a_bad_index(debug, tmp_path):
    """With HOSTIR_DEBUG=indices the kernel prints the op and the value and
    traps (the process fails); without it the read is predicated off (zeros)."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]),
               HOSTIR_DEBUG="indices" if debug else "")
    proc = subprocess.run([sys.executable, "-c", TRAP], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp_path)
    if debug:
        assert proc.returncode != 0, proc.stdout
        assert "hostir: index_select" in proc.stdout + proc.stderr and "index 7" in proc.stdout + proc.stderr
    else:
        assert proc.returncode == 0 and "not trapped 0.0" in proc.stdout, proc.stderr[-2000:]


@pytest.mark.parametrize("shape,dim,index", [((5, 7), 0, 3), ((5, 7), 1, -1), ((4, 3, 2), 1, 0),
                                             ((4, 3, 2), -1, 1), ((6,), 0, 5)], ids=str)
def test_select_with_a_scalar_index(shape, dim, index):
    x = rand(shape, D.Float)

    def build(fd):
        t = declare(fd, x)
        s = fd.define_scalar(None, dtype=D.Int)
        fd.add_output(fd.ops.mul(fd.ops.select(t, s, dim), 2.0))
    (out,) = run(build, [x, index])
    check(out, x.select(dim, index) * 2)


@pytest.mark.skipif(TEST_DEVICE != "cpu", reason="GPUs check indices only with HOSTIR_DEBUG=indices")
def test_select_out_of_range():
    x = rand((5, 7), D.Float)

    def build(fd):
        t = declare(fd, x)
        fd.add_output(fd.ops.select(t, fd.define_scalar(None, dtype=D.Int), 1))
    with pytest.raises(ExecutionError, match="index 7 is out of range for extent 7"):
        run(build, [x, 7])


@pytest.mark.parametrize("op,dim,red", [("index_select", 0, 1), ("index_select", 1, 1), ("gather", 1, 1),
                                        ("gather", 0, 1), ("take_along_axis", 1, 0)])
@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16], ids=lambda d: d.short)
def test_indexing_feeding_a_reduction(op, dim, red, dtype):
    """A gather's result reduced in the same kernel (the reduction's vector loads
    may sit at addresses read from the index)."""
    x = rand((6, 64), dtype)
    if op == "index_select":
        idx = _indices((5 if dim == 0 else 40,), x.shape[dim], D.Int)
    else:
        idx = _indices((6, 32) if dim == 1 else (4, 64), x.shape[dim], D.Int)

    def build(fd):
        y = getattr(fd.ops, op)(declare(fd, x), declare(fd, idx), dim)
        fd.add_output(fd.ops.sum(fd.ops.mul(y, 2.0), [red]))
    (out,) = run(build, [x, idx])
    i = _pos(idx, x.shape[dim])
    ref = {"index_select": lambda: torch.index_select(x, dim, i), "gather": lambda: torch.gather(x, dim, i),
           "take_along_axis": lambda: torch.take_along_dim(x, i, dim)}[op]()
    check(out, (ref.double() * 2).sum(red).to(x.dtype), kind="reduction")


@pytest.mark.parametrize("op,dim", [("index_select", 0), ("gather", 1)])
def test_indexing_inside_a_normalization(op, dim):
    """Rows gathered then normalized (a softmax): the persistent kernel keeps the
    gathered row in registers across its passes."""
    x = rand((5, 256), D.Float)
    idx = _indices((7,), 5, D.Int) if op == "index_select" else _indices((5, 256), 256, D.Int)

    def build(fd):
        y = getattr(fd.ops, op)(declare(fd, x), declare(fd, idx), dim)
        e = fd.ops.exp(fd.ops.sub(y, fd.ops.max(y, [1], keepdim=True)))
        fd.add_output(fd.ops.div(e, fd.ops.sum(e, [1], keepdim=True)))
    (out,) = run(build, [x, idx])
    i = _pos(idx, x.shape[dim])
    ref = torch.index_select(x, 0, i) if op == "index_select" else torch.gather(x, 1, i)
    check(out, torch.softmax(ref.double(), 1).float(), kind="reduction")


@pytest.mark.parametrize("op,xshape,ishape", [("gather", (6, 300), (6, 200)), ("gather", (3, 4, 700), (3, 4, 129)),
                                              ("take_along_axis", (5, 256), (1, 300)),
                                              ("take_along_axis", (1, 513), (7, 130))], ids=str)
@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16], ids=lambda d: d.short)
def test_gather_of_long_rows(op, xshape, ishape, dtype):
    """Rows long enough for the GPU's staged schedule (the input row in shared
    memory, a block per output row), fused with an epilogue."""
    x = rand(xshape, dtype)
    idx = _indices(ishape, xshape[-1], D.Int32)

    def build(fd):
        y = getattr(fd.ops, op)(declare(fd, x, "bcast"), declare(fd, idx, "bcast"), -1)
        fd.add_output(fd.ops.add(fd.ops.mul(y, 2.0), 1.0))
    (out,) = run(build, [x, idx])
    i = _pos(idx, xshape[-1])
    ref = torch.gather(x, -1, i) if op == "gather" else torch.take_along_dim(x, i, -1)
    check(out, (ref.float() * 2 + 1).to(x.dtype))


@pytest.mark.parametrize("layout", ["offset", "strided", "contiguous"])
@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16, D.Int], ids=lambda d: d.short)
def test_gather_of_long_rows_in_any_layout(layout, dtype):
    """The staged schedule copies a row in 16-byte vectors only where the row
    is contiguous and 16-byte aligned (rows of a sliced input start anywhere:
    each row takes its own path), and prefetches the index of a thread's first
    points only (rows longer than that loop on); negative indices wrap."""
    cols, outs = (2600, 9000) if dtype is not D.Int else (2600, 4100)
    full = rand((4, cols + 3), dtype)
    if layout == "offset":      # rows of 2600 at offset 1, row stride 2603: misaligned rows
        x = full[:, 1:cols + 1]
    elif layout == "strided":   # every other element: no vectors
        x = rand((4, 2 * cols), dtype)[:, ::2]
    else:
        x = full[:, :cols].contiguous()
    idx = torch.randint(-cols, cols, (4, outs), dtype=torch.int64)

    def build(fd):
        y = fd.ops.gather(fd.from_pytorch(x), declare(fd, idx), 1)
        fd.add_output(fd.ops.add(y, y))
    (out,) = run(build, [x, idx])
    ref = torch.gather(x, 1, idx % cols)
    check(out, ref + ref)


# ---------------------------------------------------------------- scatter

def _unique(ishape, extent: int, dim: int, dtype: D = D.Int) -> torch.Tensor:
    """Index values in [0, extent), distinct along `dim` at each point of the
    other dims (torch leaves repeated ones unspecified): the first entries of
    random permutations."""
    full = list(ishape)
    full[dim] = extent
    return torch.rand(full).argsort(dim).narrow(dim, 0, ishape[dim]).contiguous().to(TORCH[dtype])


# (input shape, index shape, src shape, dim): the index no larger than src on
# every dim, nor than the input off dim
SCATTER_CASES = [((5, 7), (3, 7), (3, 7), 0), ((5, 7), (3, 4), (4, 6), 0), ((5, 7), (5, 7), (5, 7), 1),
                 ((5, 7), (2, 3), (3, 5), 1), ((5, 7), (4, 5), (4, 5), -1), ((1, 6), (1, 4), (2, 4), 1),
                 ((6, 1), (4, 1), (4, 1), 0), ((3, 4, 5), (2, 3, 5), (2, 4, 5), 0),
                 ((3, 4, 5), (3, 2, 4), (3, 3, 4), 1), ((3, 4, 5), (1, 4, 3), (2, 4, 3), 2),
                 ((3, 4, 5), (3, 1, 5), (3, 1, 5), -1), ((9,), (9,), (9,), 0), ((33,), (5,), (7,), 0),
                 ((4, 6), (0, 6), (2, 6), 0)]


@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16, D.Int32, D.Int], ids=lambda d: d.short)
@pytest.mark.parametrize("case", SCATTER_CASES, ids=str)
@pytest.mark.parametrize("idx_dtype", [D.Int, D.Int32], ids=lambda d: d.short)
def test_scatter(case, dtype, idx_dtype):
    shape, ishape, sshape, dim = case
    x, src = rand(shape, dtype), rand(sshape, dtype)
    idx = _unique(ishape, shape[dim], dim, idx_dtype)

    def build(fd):
        fd.add_output(fd.ops.scatter(declare(fd, x), declare(fd, idx), declare(fd, src), dim))
    (out,) = run(build, [x, idx, src])
    check(out, torch.scatter(x, dim, idx.long(), src))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_of_non_contiguous_operands(layout, dim):
    x, src = relayout(rand((6, 8), D.Float), layout), relayout(rand((5, 7), D.Float), layout)
    idx = relayout(_unique((4, 6), x.shape[dim], dim), layout)

    def build(fd):
        t, i, s = (declare(fd, v, layout) for v in (x, idx, src))
        fd.add_output(fd.ops.scatter(t, i, s, dim))
    (out,) = run(build, [x, idx, src])
    check(out, torch.scatter(x, dim, idx, src))


@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_with_broadcast_dims(dim):
    """Size-1 dims declared as broadcasts, and an input expanded from one."""
    x, row = rand((1, 6), D.Float), rand((5, 1), D.Float)
    idx = _unique((3, 1) if dim == 0 else (1, 4), 5 if dim == 0 else 6, dim)
    src = rand((4, 1) if dim == 0 else (1, 6), D.Float)

    def build(fd):
        t, r = declare(fd, x, "bcast"), declare(fd, row, "bcast")
        wide = fd.ops.add(fd.ops.expand(t, [5, 6]), r)
        fd.add_output(fd.ops.scatter(fd.ops.expand(t, [5, 6]), declare(fd, idx, "bcast"),
                                     declare(fd, src, "bcast"), dim))
        fd.add_output(fd.ops.scatter(wide, declare(fd, idx, "bcast"), declare(fd, src, "bcast"), dim))
    out, out2 = run(build, [x, row, idx, src, idx, src])
    check(out, torch.scatter(x.expand(5, 6), dim, idx, src))
    check(out2, torch.scatter(x + row, dim, idx, src))


@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16, D.Int32], ids=lambda d: d.short)
def test_scatter_of_a_scalar(dtype):
    """nvFuser's scalar src (an input scalar, or a number): written wherever
    the index says, in the input's dtype."""
    x = rand((6, 5), dtype)
    rows, cols = _unique((3, 5), 6, 0), _unique((6, 2), 5, 1)

    def build(fd):
        t, i, j = declare(fd, x), declare(fd, rows), declare(fd, cols)
        s = fd.define_scalar(None, dtype=D.Double)
        fd.add_output(fd.ops.scatter(t, i, s, 0))
        fd.add_output(fd.ops.scatter(t, j, 7, 1))
    out, out2 = run(build, [x, rows, cols, 2.5])
    check(out, torch.scatter(x, 0, rows, 2.5))
    check(out2, torch.scatter(x, 1, cols, 7))


def test_scatter_fuses_its_prologue_and_cuts_before_its_readers():
    """Pointwise producers of the input, index and src run in the scatter's two
    kernels (the fill kernel copies the input, the write kernel stores src at
    the index values); its readers are a later segment, with the cut's reason.
    Later calls of one signature (the direct runner) read new index values."""
    from hostir import FusionDefinition
    x, src = rand((6, 9), D.Float), rand((4, 9), D.Float)
    with FusionDefinition() as fd:
        t, i, s = declare(fd, x), declare(fd, _unique((4, 9), 6, 0)), declare(fd, src)
        y = fd.ops.scatter(fd.ops.exp(t), fd.ops.sub(i, fd.ops.mul(fd.ops.lt(i, 0), 0)),
                           fd.ops.mul(s, 2.0), 0)
        fd.add_output(fd.ops.add(y, 1.0))
    for _ in range(3):
        idx = _unique((4, 9), 6, 0)
        (out,) = fd.execute([x, idx, src])
        check(out, torch.scatter(torch.exp(x), 0, idx, src * 2) + 1)
    assert [(s.scheduler, s.ops) for s in fd.last_segments()] == [
        ("scatter", ["exp", "lt", "mul", "sub", "mul", "scatter"]), ("pointwise", ["add"])]
    assert "writes at positions read from its index" in fd.last_segmented_fusion_ir()
    host = fd.last_host_ir()
    assert "launch seg0_scatter_fill(" in host and "launch seg0_scatter_write(" in host and "-> into" in host
    code = fd.last_cuda_code()
    assert code.count("__global__") == 3 and "if (" in code


def run_fd(fd, args):
    """fd.execute on the test device (outputs back on the CPU)."""
    from ops_util import to_device_exact
    if TEST_DEVICE != "cpu":
        args = [to_device_exact(a, TEST_DEVICE) for a in args]
    return [o.cpu() for o in fd.execute(args)]


@pytest.mark.parametrize("shape,k", [((6, 9), 5), ((3, 4, 33), 20), ((2, 1, 7), 7), ((5, 1), 1),
                                     ((4, 16), 10), ((3, 2, 24), 24)], ids=str)
def test_scatter_along_rows_runs_one_kernel_on_gpus(shape, k):
    """A scatter along the innermost dim whose result rows fit in shared
    memory: on GPUs one kernel a row (fill, write, store the row once, in
    vectors where rows are aligned: codegen/scatter.py RowScatterSpec), on CPU the fill and write kernels; the
    index may have fewer rows than the input. Later calls of the signature (the
    direct runner) launch the one kernel and skip the write."""
    from hostir import FusionDefinition
    from hostir.codegen import spec as S
    made = []
    S.observers.append(made.append)
    try:
        x = rand(shape, D.Float)
        ishape = (max(1, shape[0] - 1), *shape[1:-1], k)
        src = rand(ishape, D.Float)
        with FusionDefinition() as fd:
            t, i, sv = declare(fd, x), declare(fd, _unique(ishape, shape[-1], len(shape) - 1)), declare(fd, src)
            fd.add_output(fd.ops.scatter(fd.ops.mul(t, 3.0), i, fd.ops.neg(sv), len(shape) - 1))
        for _ in range(3):
            idx = _unique(ishape, shape[-1], len(shape) - 1)
            (out,) = run_fd(fd, [x, idx, src])
            check(out, torch.scatter(x * 3, len(shape) - 1, idx, -src))
    finally:
        S.observers.remove(made.append)
    rows = [sp for sp in made if sp.name.endswith("_rows")]
    assert len(rows) == 1 and rows[0].fits([*shape, *ishape])
    assert "srow[" in rows[0].typical_variants()[0].source
    # rows stored in 16-byte vectors where their length allows (new contiguous results)
    var = rows[0].choose(rows[0].plain, [*shape, *ishape], [x, idx, src], None, [])
    assert var.vec == (4 if shape[-1] % 4 == 0 else 1)


def test_scatter_along_a_leading_dim_keeps_two_kernels():
    from hostir.codegen import spec as S
    made = []
    S.observers.append(made.append)
    try:
        x, src, idx = rand((6, 9), D.Float), rand((4, 9), D.Float), _unique((4, 9), 6, 0)
        from hostir import FusionDefinition
        with FusionDefinition() as fd:
            fd.add_output(fd.ops.scatter(declare(fd, x), declare(fd, idx), declare(fd, src), 0))
        (out,) = run_fd(fd, [x, idx, src])
    finally:
        S.observers.remove(made.append)
    check(out, torch.scatter(x, 0, idx, src))
    assert not [sp for sp in made if sp.name.endswith("_rows")]


def test_scatter_chains_and_reductions():
    """A scatter of a scatter (each a segment), reduced afterwards."""
    x, a, b = rand((5, 8), D.Float), rand((5, 3), D.Float), rand((2, 8), D.Float)
    i, j = _unique((5, 3), 8, 1), _unique((2, 8), 5, 0)

    def build(fd):
        t = fd.ops.scatter(declare(fd, x), declare(fd, i), declare(fd, a), 1)
        u = fd.ops.scatter(t, declare(fd, j), declare(fd, b), 0)
        fd.add_output(fd.ops.sum(u, [1]))
        fd.add_output(t)
    out, mid = run(build, [x, i, a, j, b])
    t = torch.scatter(x, 1, i, a)
    check(mid, t)
    check(out, torch.scatter(t, 0, j, b).double().sum(1).float(), kind="reduction")


def test_scatter_in_place_of_its_input():
    """add_output(..., alias_input=input): an index_put-like update of the input."""
    from hostir import FusionDefinition
    x, src = rand((6, 4), D.Float), rand((3, 4), D.Float)
    idx = _unique((3, 4), 6, 0)
    with FusionDefinition() as fd:
        t = declare(fd, x)
        fd.add_output(fd.ops.scatter(t, declare(fd, idx), declare(fd, src), 0), alias_input=t)
    expected = torch.scatter(x, 0, idx, src)
    fd.execute([x, idx, src])
    check(x, expected)


def test_scatter_with_repeated_indices_writes_one_of_the_values():
    """Which of several values for one position lands is unspecified (as in
    torch); it is one of them, and the other positions are the input's."""
    x, src = rand((4, 6), D.Float), rand((3, 6), D.Float)
    idx = torch.tensor([[1] * 6, [1] * 6, [3] * 6])

    def build(fd):
        fd.add_output(fd.ops.scatter(declare(fd, x), declare(fd, idx), declare(fd, src), 0))
    (out,) = run(build, [x, idx, src])
    check(out[[0, 2]], x[[0, 2]])
    check(out[3], src[2])
    assert bool(((out[1] == src[0]) | (out[1] == src[1])).all())


@pytest.mark.skipif(TEST_DEVICE != "cpu", reason="GPUs check indices only with HOSTIR_DEBUG=indices")
@pytest.mark.parametrize("bad", [5, -1, 100])
def test_scatter_out_of_range_is_an_error_naming_the_value(bad):
    """As torch: index values in [0, extent); a negative one does not count
    from the end (unlike the gathers')."""
    x, src = rand((5, 5), D.Float), rand((2, 5), D.Float)
    idx = torch.tensor([[0, 1, 2, 3, 4], [4, bad, 0, 1, 2]])

    def build(fd):
        fd.add_output(fd.ops.scatter(declare(fd, x), declare(fd, idx), declare(fd, src), 0))
    with pytest.raises(ExecutionError, match=rf"scatter -> .*T1 addressing dim 0 of T0.*index {bad} "
                                             rf"is out of range for extent 5"):
        run(build, [x, idx, src])


def test_scatter_index_larger_than_its_operands_is_an_error():
    from hostir import FusionDefinition
    with FusionDefinition() as fd:
        t, i, s = fd.define_tensor([-1, -1]), fd.define_tensor([-1, -1], dtype=D.Int), fd.define_tensor([-1, -1])
        fd.add_output(fd.ops.scatter(t, i, s, 0))
    x, zeros = rand((3, 4), D.Float), torch.zeros
    with pytest.raises(ExecutionError, match=r"scatter .* dim 1 of index T1 has extent 5, more than the input"):
        fd.execute([x, zeros(2, 5, dtype=torch.int64), rand((2, 5), D.Float)])
    with pytest.raises(ExecutionError, match=r"scatter .* dim 0 of index T1 has extent 2, more than the src"):
        fd.execute([x, zeros(2, 4, dtype=torch.int64), rand((1, 4), D.Float)])
    with pytest.raises(DefinitionError, match=r"scatter: dim 1 of index .* extent 5, more than the input"):
        with FusionDefinition() as fd:
            fd.ops.scatter(fd.define_tensor([3, 4]), fd.define_tensor([2, 5], dtype=D.Int),
                           fd.define_tensor([2, 5]), 0)


def test_scatter_definition_errors():
    from hostir import FusionDefinition

    def define(ishape, idtype=D.Int, sshape=(-1, -1), sdtype=D.Float, dim=0, xshape=(-1, -1)):
        with FusionDefinition() as fd:
            fd.ops.scatter(fd.define_tensor(list(xshape)), fd.define_tensor(list(ishape), dtype=idtype),
                           fd.define_tensor(list(sshape), dtype=sdtype), dim)
    with pytest.raises(DefinitionError, match=r"scatter: index T1 \(float.*must be Int or Int32, got float"):
        define((-1, -1), idtype=D.Float)
    with pytest.raises(DefinitionError, match=r"scatter: index T1 .* rank of the input T0 .*\(2\), has 1"):
        define((-1,))
    with pytest.raises(DefinitionError, match=r"scatter: src T2 .* rank of the input T0 .*\(2\), has 3"):
        define((-1, -1), sshape=(-1, -1, -1))
    with pytest.raises(DefinitionError, match=r"scatter: src T2 \(double.* dtype of the input T0 .*float"):
        define((-1, -1), sdtype=D.Double)
    with pytest.raises(DefinitionError, match=r"scatter: dim 2 is out of range"):
        define((-1, -1), dim=2)
    with pytest.raises(DefinitionError, match=r"scatter: input T0 .* at least one dim"):
        define((), sshape=(), xshape=())


def test_scatter_debug_builds_check_indices_on_gpus():
    """HOSTIR_DEBUG=indices builds the write kernel's device-side check (the
    session's NVRTC sweep compiles it)."""
    from hostir import FusionDefinition, config
    from hostir.codegen import spec as S
    made = []
    S.observers.append(made.append)
    try:
        with config.override(debug=config.get().debug | {"indices"}):
            x, idx, src = rand((6, 4), D.Float), _unique((2, 4), 6, 0, D.Int32), rand((2, 4), D.Float)
            with FusionDefinition() as fd:
                fd.add_output(fd.ops.scatter(declare(fd, x), declare(fd, idx), declare(fd, src), 0))
            (out,) = fd.execute([x, idx, src])
    finally:
        S.observers.remove(made.append)
    check(out, torch.scatter(x, 0, idx.long(), src))
    writes = [v.source for sp in made if sp.name.endswith("_write") for v in sp.typical_variants()]
    assert writes and all("#define HIR_CHECK_INDICES 1" in s and "__trap()" in s for s in writes)


SCATTER_TRAP = """
import torch
from hostir import DataType, FusionDefinition
with FusionDefinition() as fd:
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    i = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int)
    s = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    fd.add_output(fd.ops.scatter(x, i, s, 0))
x, s = torch.randn(5, 3, device="cuda"), torch.randn(1, 3, device="cuda")
(out,) = fd.execute([x, torch.tensor([[1, 4, 0]], device="cuda"), s])
assert torch.equal(out, torch.scatter(x, 0, torch.tensor([[1, 4, 0]], device="cuda"), s))
(out,) = fd.execute([x, torch.tensor([[1, 7, 0]], device="cuda"), s])
torch.cuda.synchronize()
print("not trapped", bool(torch.equal(out[:, 1], x[:, 1])))
"""


@pytest.mark.gpu
@pytest.mark.parametrize("debug", [True, False])
def test_a_debug_gpu_scatter_traps_on_a_bad_index(debug, tmp_path):
    """With HOSTIR_DEBUG=indices the write kernel prints the op and the value
    and traps; without it the write out of range is skipped."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]),
               HOSTIR_DEBUG="indices" if debug else "")
    proc = subprocess.run([sys.executable, "-c", SCATTER_TRAP], capture_output=True, text=True,
                          env=env, timeout=300, cwd=tmp_path)
    if debug:
        assert proc.returncode != 0, proc.stdout
        assert "hostir: scatter" in proc.stdout + proc.stderr and "index 7" in proc.stdout + proc.stderr
    else:
        assert proc.returncode == 0 and "not trapped True" in proc.stdout, proc.stderr[-2000:]


# ------------------------------------------------------------------ index_put_accumulate

# (acc shape, index length): rows listed twice and more (duplicates add up), size-1 and
# empty dims, an empty index
PUT_CASES = [((7, 5), 12), ((1, 4), 3), ((6, 1), 9), ((5, 3, 4), 8), ((9,), 20), ((4, 6), 0), ((0, 3), 0)]


@pytest.mark.parametrize("case", PUT_CASES, ids=str)
@pytest.mark.parametrize("dtype", [D.Float, D.Double, D.Int32, D.BFloat16], ids=lambda d: d.short)
@pytest.mark.parametrize("idx_dtype", [D.Int, D.Int32], ids=lambda d: d.short)
def test_index_put_accumulate(case, dtype, idx_dtype):
    """nvFuser's index_put_accumulate against torch.index_put(accumulate=True),
    negative indices counting from the end, fused between generated kernels."""
    shape, n = case
    acc, value = rand(shape, dtype), rand((n,) + shape[1:], dtype)
    idx = _indices((n,), shape[0], idx_dtype)

    def build(fd):
        ta, ti, tv = declare(fd, acc), declare(fd, idx), declare(fd, value)
        fd.add_output(fd.ops.index_put_accumulate(ta, ti, fd.ops.mul(tv, 2)))

    (out,) = run(build, [acc, idx, value])
    expected = acc.index_put((_pos(idx, shape[0]),), value * 2, accumulate=True)
    check(out, expected, "reduction" if dtype.is_float else "pointwise")


@pytest.mark.parametrize("layout", ["strided", "transposed"])
def test_index_put_accumulate_of_non_contiguous_operands(layout):
    acc, value = rand((6, 5), D.Float), rand((10, 5), D.Float)
    idx = _indices((10,), 6, D.Int)

    def build(fd):
        ta, ti = declare(fd, relayout(acc, layout), layout), declare(fd, idx)
        tv = declare(fd, relayout(value, layout), layout)
        fd.add_output(fd.ops.exp(fd.ops.index_put_accumulate(ta, ti, tv)))

    (out,) = run(build, [relayout(acc, layout), idx, relayout(value, layout)])
    check(out, torch.exp(acc.index_put((_pos(idx, 6),), value, accumulate=True)), "reduction")


@pytest.mark.parametrize("bad", [6, -7, 100])
def test_index_put_accumulate_out_of_range_names_the_value(bad):
    """Always checked on CPU; on a GPU with HOSTIR_DEBUG=indices (without it
    ATen's own device-side assert ends the process's CUDA context)."""
    from hostir import config
    acc, value = rand((6, 4), D.Float), rand((3, 4), D.Float)
    idx = torch.tensor([0, bad, 2])

    def build(fd):
        fd.add_output(fd.ops.index_put_accumulate(declare(fd, acc), declare(fd, idx), declare(fd, value)))

    debug = config.get().debug | ({"indices"} if TEST_DEVICE != "cpu" else set())
    with config.override(debug=debug), \
            pytest.raises(ExecutionError, match=rf"index_put_accumulate -> .*: index {bad} in T1 is out of "
                                                rf"range for dim 0 of T0, which has extent 6"):
        run(build, [acc, idx, value])


def test_index_put_accumulate_definition_and_shape_errors():
    with FusionDefinition() as fd:
        acc = fd.define_tensor([-1, 4], dtype=D.Float)
        i1, i2 = fd.define_tensor([-1], dtype=D.Int), fd.define_tensor([-1, -1], dtype=D.Int)
        fi = fd.define_tensor([-1], dtype=D.Float)
        v, vh = fd.define_tensor([-1, 4], dtype=D.Float), fd.define_tensor([-1, 4], dtype=D.Half)
        v5 = fd.define_tensor([-1, 5], dtype=D.Float)
        with pytest.raises(DefinitionError, match="index_put_accumulate: index T2 .* must be 1-D"):
            fd.ops.index_put_accumulate(acc, i2, v)
        with pytest.raises(DefinitionError, match="index_put_accumulate: index T3 .* must be Int or Int32"):
            fd.ops.index_put_accumulate(acc, fi, v)
        with pytest.raises(DefinitionError, match=r"value T5 .* must have acc's rank \(2\) and dtype \(float\)"):
            fd.ops.index_put_accumulate(acc, i1, vh)
        with pytest.raises(DefinitionError, match=r"index_put_accumulate: incompatible shapes: dim 1 of T0 "
                                                  r".* has extent 4 but dim 1 of T6 .* has extent 5"):
            fd.ops.index_put_accumulate(acc, i1, v5)
        fd.add_output(fd.ops.index_put_accumulate(acc, i1, v))
    with pytest.raises(ExecutionError, match=r"value T4 has shape \[2, 4\], expected \[3\] \+ \[4\]"):
        fd.execute([torch.zeros(5, 4), torch.zeros(3, dtype=torch.long), torch.zeros(3, 3, dtype=torch.long),
                    torch.zeros(3), torch.zeros(2, 4), torch.zeros(2, 4, dtype=torch.half),
                    torch.zeros(2, 5)])
