"""Indexing ops of fd.ops (index_select, gather, take_along_axis, embedding_fwd)
against torch on random data: many shapes, size-1 and empty dims, Int and Int32
indices (negative ones count from the end), non-contiguous inputs, the index
fused with a pointwise prologue and the result with an epilogue; out-of-range
values are an ExecutionError naming the op, the tensors and the value. The
kernels run in the interpreter on CPU (and are compiled by the NVRTC sweep)."""
import pytest
import torch

from hostir import DataType, DefinitionError, ExecutionError, UnsupportedError
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
