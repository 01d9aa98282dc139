"""Shared helpers for tests/test_ops_*.py: random data, input declaration
styles, tolerances, and a checker comparing hostir's output with torch eager.

Every expected value in those tests is computed by torch directly from the
input data, never by hostir."""
from __future__ import annotations

import os

import torch

from hostir import DataType, FusionDefinition
from hostir.ir.verify import verify

TORCH = {
    DataType.Float: torch.float32, DataType.Double: torch.float64,
    DataType.Half: torch.float16, DataType.BFloat16: torch.bfloat16,
    DataType.Int: torch.int64, DataType.Int32: torch.int32, DataType.Bool: torch.bool,
    DataType.Float8_e4m3fn: torch.float8_e4m3fn, DataType.Float8_e5m2: torch.float8_e5m2,
    DataType.ComplexFloat: torch.complex64, DataType.ComplexDouble: torch.complex128,
}
FROM_TORCH = {v: k for k, v in TORCH.items()}

FLOATS = [DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16]
INTS = [DataType.Int, DataType.Int32]
ALL = FLOATS + INTS + [DataType.Bool]
COMPLEX = [DataType.ComplexFloat, DataType.ComplexDouble]

# Shapes and how they are declared:
#   "sym"     every dim -1, contiguous (size-1 dims stay symbolic iteration dims)
#   "bcast"   size-1 dims declared 1 (broadcast), others -1
#   "static"  every dim declared with its actual extent
#   "strided" a strided view (every other element of a bigger buffer), contiguity=False
#   "transposed"  a column-major view, declared through fd.from_pytorch
#   "sliced_fp"   a sliced view, declared through fd.from_pytorch
DECLS = ["sym", "bcast", "static", "strided", "transposed", "sliced_fp"]

# (shape, decl) pairs used by the unary pointwise tests
UNARY_LAYOUTS = [
    ((3, 5), "sym"),
    ((1, 5), "sym"),
    ((1, 5), "bcast"),
    ((4, 1, 3), "bcast"),
    ((2, 3, 4), "static"),
    ((5, 3), "strided"),
    ((4, 6), "transposed"),
    ((3, 7), "sliced_fp"),
    ((), "sym"),
]


def rand(shape, dtype: DataType, low=-3.0, high=3.0, *, nonzero=False, ints=None) -> torch.Tensor:
    """Random data of `dtype`. Floats uniform in [low, high); ints uniform in
    `ints` (default [-20, 20)); bools fair coin; complex numbers with both parts
    drawn as floats (never zero: |part| >= 0.05). `nonzero` keeps |x| >= 0.5
    (floats, each complex part) or != 0 (ints)."""
    shape = tuple(shape)
    if dtype.is_complex:
        part = DataType.Float if dtype is DataType.ComplexFloat else DataType.Double
        re, im = (rand(shape, DataType.Double, low, high, nonzero=nonzero) for _ in range(2))
        re, im = (torch.where(p.abs() < 0.05, torch.copysign(p.abs() + 0.05, p), p) for p in (re, im))
        return torch.complex(re.to(TORCH[part]), im.to(TORCH[part]))
    if dtype is DataType.Bool:
        return torch.rand(shape) < 0.5
    if dtype.is_int:
        lo, hi = ints if ints is not None else (-20, 20)
        x = torch.randint(lo, hi, shape, dtype=torch.int64)
        if nonzero:
            x = torch.where(x == 0, torch.full_like(x, hi - 1 if hi - 1 != 0 else lo), x)
        return x.to(TORCH[dtype])
    x = torch.empty(shape, dtype=torch.float64).uniform_(low, high)
    if nonzero:
        x = torch.where(x.abs() < 0.5, torch.copysign(x.abs() + 0.5, x), x)
    return x.to(TORCH[dtype])


def relayout(x: torch.Tensor, decl: str) -> torch.Tensor:
    """The same values as `x`, in the memory layout `decl` asks for."""
    if decl == "strided" or (decl in ("transposed", "sliced_fp") and x.ndim < 2):
        if x.ndim == 0:
            return x.clone()
        buf = torch.zeros(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype)
        buf[..., ::2] = x
        y = buf[..., ::2]
        assert x.numel() <= 1 or not y.is_contiguous() or x.shape[-1] == 1
        return y
    if decl == "transposed":
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    if decl == "sliced_fp":
        buf = torch.zeros(*x.shape[:-2], x.shape[-2] + 2, x.shape[-1] + 3, dtype=x.dtype)
        buf[..., 1:-1, 2:-1] = x
        return buf[..., 1:-1, 2:-1]
    return x.contiguous()


def declare(fd: FusionDefinition, x: torch.Tensor, decl: str = "sym"):
    """Declare an input for `x` (already in `decl`'s layout, see relayout)."""
    dtype = FROM_TORCH[x.dtype]
    n = x.ndim
    if decl == "sym":
        return fd.define_tensor(shape=[-1] * n, contiguity=[True] * n, dtype=dtype)
    if decl == "bcast":
        return fd.define_tensor(shape=[1 if s == 1 else -1 for s in x.shape],
                                contiguity=True, dtype=dtype)
    if decl == "static":
        return fd.define_tensor(shape=list(x.shape), contiguity=True, dtype=dtype)
    if decl == "strided":
        return fd.define_tensor(shape=[1 if s == 1 else -1 for s in x.shape],
                                contiguity=False, dtype=dtype)
    if decl in ("transposed", "sliced_fp"):
        return fd.from_pytorch(x)
    raise ValueError(decl)


def inputs_for(xs, decls):
    """Relayout each tensor of `xs` (python numbers pass through)."""
    return [relayout(x, d) if isinstance(x, torch.Tensor) else x for x, d in zip(xs, decls)]


TEST_DEVICE = os.environ.get("HOSTIR_TEST_DEVICE", "cpu")


def to_device_exact(x: torch.Tensor, device: str) -> torch.Tensor:
    """`x` on `device` with the same sizes, strides and storage offset."""
    n = x.untyped_storage().nbytes() // x.element_size()
    if x.ndim == 0:
        return x.to(device)
    base = torch.as_strided(x, (n,), (1,), 0).to(device) if n else torch.empty(0, dtype=x.dtype,
                                                                              device=device)
    return torch.as_strided(base, x.shape, x.stride(), x.storage_offset())


def run(build, inputs):
    """Define a fusion with `build(fd)` (which adds the outputs), verify it,
    execute it on `inputs` and return the outputs (on the CPU). With
    HOSTIR_TEST_DEVICE=cuda the inputs run on the GPU, layouts kept."""
    with FusionDefinition() as fd:
        build(fd)
    verify(fd._fusion)
    args = list(inputs)
    if TEST_DEVICE != "cpu":
        args = [to_device_exact(a, TEST_DEVICE) if isinstance(a, torch.Tensor) else a for a in args]
        return [o.cpu() for o in fd.execute(args)]
    return fd.execute(args)


def tol(dtype: torch.dtype, kind: str = "pointwise"):
    """(rtol, atol) for comparing with torch eager (pointwise) or with a
    float64 result rounded to `dtype` (reduction / matmul)."""
    if kind == "pointwise":
        return {torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2),
                torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-12, 1e-12),
                torch.complex64: (1.3e-6, 1e-5), torch.complex128: (1e-12, 1e-12)}.get(dtype, (0, 0))
    return {torch.float16: (4e-3, 4e-3), torch.bfloat16: (2e-2, 2e-2),
            torch.float32: (1e-5, 1e-5), torch.float64: (1e-10, 1e-10),
            torch.complex64: (1e-5, 1e-5), torch.complex128: (1e-10, 1e-10)}.get(dtype, (0, 0))


def check(out: torch.Tensor, expected: torch.Tensor, kind: str = "pointwise", rtol=None, atol=None):
    """Same dtype, same shape, values close (floats) or equal (ints, bools)."""
    assert isinstance(out, torch.Tensor), f"expected a tensor, got {out!r}"
    assert out.dtype == expected.dtype, f"dtype {out.dtype}, torch gives {expected.dtype}"
    assert tuple(out.shape) == tuple(expected.shape), \
        f"shape {tuple(out.shape)}, torch gives {tuple(expected.shape)}"
    r, a = tol(expected.dtype, kind)
    r = r if rtol is None else rtol
    a = a if atol is None else atol
    torch.testing.assert_close(out, expected, rtol=r, atol=a, equal_nan=True)
