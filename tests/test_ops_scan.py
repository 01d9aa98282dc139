"""Scans (cumsum, cumprod, cummax, cummin) of fd.ops, compared with torch eager
(floating sums and products: torch in float64, rounded to the result's dtype)
on random data; the scans run as generated scan kernels (the interpreter on
CPU, NVRTC-compiled by the session's sweep), with their pointwise prologue and
epilogue fused."""
import math

import pytest
import torch

from hostir import DataType, DefinitionError
from ops_util import TORCH, check, declare, rand, relayout, run

D = DataType
SCANS = ["cumsum", "cumprod", "cummax", "cummin"]
DTYPES = [D.Float, D.Double, D.Half, D.BFloat16, D.Int, D.Int32, D.Bool]

# (shape, decl, dim)
CASES = [
    ((9,), "sym", 0),
    ((1,), "sym", 0),
    ((5, 7), "sym", 1),
    ((5, 7), "sym", 0),
    ((5, 7), "sym", -1),
    ((5, 7), "sym", -2),
    ((3, 4, 5), "sym", 1),
    ((3, 4, 5), "static", 2),
    ((3, 4, 5), "sym", 0),
    ((2, 3, 4, 5), "sym", 2),
    ((2, 3, 4, 5), "sym", -1),
    ((2, 3, 4, 5), "sym", 0),
    ((4, 1, 6), "bcast", 1),
    ((4, 1, 6), "sym", 1),
    ((1, 33), "sym", 1),
    ((33, 1), "sym", 0),
    ((6, 13), "strided", 1),
    ((6, 13), "strided", 0),
    ((8, 12), "transposed", 1),
    ((8, 12), "transposed", 0),
    ((5, 11), "sliced_fp", 1),
    ((5, 11), "sliced_fp", 0),
    ((3, 256), "sym", 1),       # vector loads, several chunks of a tile
    ((2, 1037), "sym", 1),      # several tiles, an odd length (no vectors)
    ((2, 1040), "sym", -1),     # several tiles with vectors, the last one partial
    ((300, 3), "sym", 0),       # several column tiles
    ((0, 5), "sym", 1),
    ((5, 0), "sym", 1),
    ((3, 0), "sym", 0),
    ((0,), "sym", 0),
]


def _case_id(c):
    shape, decl, dim = c
    return f"{'x'.join(map(str, shape))}-{decl}-{dim}"


def _data(op: str, shape, dtype: DataType) -> torch.Tensor:
    if op == "cumprod":  # products of long rows stay finite and nonzero near 1
        if dtype.is_float:
            return rand(shape, dtype, low=0.6, high=1.4)
        return rand(shape, dtype, ints=(-2, 3))
    return rand(shape, dtype, low=-1.0, high=1.0)


def expected(op: str, x: torch.Tensor, dim: int, dtype=None) -> torch.Tensor:
    """torch's result (float64 accumulation, rounded, for floating sums and products)."""
    if op in ("cummax", "cummin"):
        return getattr(torch, op)(x, dim).values
    out = getattr(torch, op)(x, dim, dtype=dtype)
    if out.is_floating_point():
        return getattr(torch, op)(x.to(out.dtype).double(), dim).to(out.dtype)
    return out


def scan_check(out, ref, op: str, length: int):
    """Floating sums and products of `length` points accumulate rounding: the
    tolerance grows with the row (and float32 accumulation for half types)."""
    if not ref.is_floating_point() or op in ("cummax", "cummin"):
        check(out, ref, rtol=0, atol=0)
        return
    eps = {torch.float64: 1e-15}.get(ref.dtype, 1.2e-7)  # half types accumulate in float
    scale = max(1.0, ref.abs().max().item()) if ref.numel() else 1.0
    grow = eps * max(1, length) ** 0.5 * 8 if op == "cumsum" else eps * max(1, length) * 4
    check(out, ref, kind="reduction", atol=grow * scale + (1e-2 if ref.dtype in (
        torch.float16, torch.bfloat16) else 0), rtol=max(grow, {
            torch.float16: 4e-3, torch.bfloat16: 2e-2}.get(ref.dtype, 1e-5)))


def _last_code(fd) -> str:
    return fd.last_cuda_code()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
@pytest.mark.parametrize("op", SCANS)
def test_scan(op, case, dtype):
    shape, decl, dim = case
    x = _data(op, shape, dtype)
    xs = relayout(x, decl)
    fds = []

    def build(fd):
        fds.append(fd)
        fd.add_output(getattr(fd.ops, op)(declare(fd, xs, decl), dim))
    (out,) = run(build, [xs])
    scan_check(out, expected(op, x, dim), op, shape[dim] if shape else 1)
    if x.numel():
        segs = fds[0].last_segments()
        assert [s.scheduler for s in segs] == ["scan"], segs
        assert "hir_warp_scan" in _last_code(fds[0]) or "__shared__" in _last_code(fds[0])


@pytest.mark.parametrize("op", ["cumsum", "cummax"])
@pytest.mark.parametrize("shape,dim", [((70000,), 0), ((2, 70000), 1), ((70000, 2), 0),
                                       ((3, 5000, 4), 1), ((7, 4097), 1),
                                       # one row of no whole number of vectors (on a GPU:
                                       # vectors, then its last points one by one), the last
                                       # ones in a tile of their own (65536 + 3)
                                       ((70007,), 0), ((65539,), 0), ((1, 40001), 1)],
                         ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16, D.Int32], ids=lambda d: d.name)
def test_long_rows(op, shape, dim, dtype):
    x = rand(shape, dtype, low=-1.0, high=1.0)
    (out,) = run(lambda fd: fd.add_output(getattr(fd.ops, op)(declare(fd, x), dim)), [x])
    scan_check(out, expected(op, x, dim), op, shape[dim])


COMPLEX_CASES = [c for c in CASES if c[1] in ("sym", "strided", "transposed")] + [
    ((70000,), "sym", 0), ((2, 70001), "sym", 1), ((70000, 2), "sym", 0), ((3, 5000, 4), "sym", 1)]


@pytest.mark.parametrize("dtype", [D.ComplexFloat, D.ComplexDouble], ids=lambda d: d.name)
@pytest.mark.parametrize("case", COMPLEX_CASES, ids=_case_id)
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_complex_scans(op, case, dtype):
    """Complex sums and products along any dim (rows, columns, one long chained
    row: each tile's prefix published in flagged words part by part), against
    torch in complex128; a real input scans to complex with dtype=."""
    shape, decl, dim = case
    if op == "cumprod":  # products of long rows stay near the unit circle
        mag = rand(shape, D.Double, low=0.999, high=1.001)
        ang = rand(shape, D.Double, low=-0.5, high=0.5)
        x = torch.polar(mag, ang).to(TORCH[dtype])
    else:
        x = torch.complex(rand(shape, D.Double, low=-1.0, high=1.0),
                          rand(shape, D.Double, low=-1.0, high=1.0)).to(TORCH[dtype])
    xs = relayout(x, decl)
    (out,) = run(lambda fd: fd.add_output(getattr(fd.ops, op)(declare(fd, xs, decl), dim)), [xs])
    want = getattr(torch, op)(x.to(torch.complex128), dim).to(x.dtype)
    n = max(1, shape[dim]) if shape else 1
    eps = 1e-15 if dtype is D.ComplexDouble else 1.2e-7
    tol = eps * (n ** 0.5 * 8 if op == "cumsum" else n * 4) * max(1.0, want.abs().max().item() if want.numel() else 1.0)
    check(out, want, kind="reduction", atol=tol, rtol=max(tol, 1e-5 if dtype is D.ComplexFloat else 1e-12))
    if op == "cumsum" and len(shape) == 2 and decl == "sym":
        r = rand(shape, D.Float, low=-1.0, high=1.0)
        (out,) = run(lambda fd: fd.add_output(fd.ops.cumsum(declare(fd, r), dim, dtype=dtype)), [r])
        check(out, torch.cumsum(r.to(torch.complex128), dim).to(TORCH[dtype]), kind="reduction",
              atol=tol, rtol=max(tol, 1e-5))


@pytest.mark.parametrize("shape", [(300001,), (3, 70001)], ids=str)
def test_chained_scans_of_wide_values(shape):
    """Two scans of one long row in one kernel, of 8-byte values (on a GPU the
    tiles publish each value in two flagged words): every tile's prefix is
    exact for integers and cummax, and within rounding for the double sum."""
    x = rand(shape, D.Int, low=-1000, high=1000)
    y = rand(shape, D.Double, low=-1.0, high=1.0)
    fds = []

    def build(fd):
        fds.append(fd)
        a, b = declare(fd, x), declare(fd, y)
        fd.add_output(fd.ops.cumsum(a, -1))
        both = fd.ops.add(fd.ops.cumsum(b, -1), fd.ops.cummax(b, -1))  # one kernel, two scans
        fd.add_output(both)
    outs = run(build, [x, y])
    scan_check(outs[0], torch.cumsum(x, -1), "cumsum", shape[-1])
    scan_check(outs[1], torch.cumsum(y, -1) + torch.cummax(y, -1).values, "cumsum", shape[-1])
    assert [s.scheduler for s in fds[0].last_segments()] == ["scan", "scan"]


@pytest.mark.parametrize("dtype", [D.Int, D.Int32], ids=str)
def test_chained_scan_called_again_and_on_other_streams(dtype):
    """A chained scan's counters are zeroed once, when made: each launch draws
    its tiles from a ticket counter never reset, and tags its tiles' words
    with the launch's number (hir_chain_epoch). Calls back to back, of two
    lengths in turn, and (on a GPU) on another stream (its own counters) all
    stay exact."""
    from hostir import FusionDefinition
    from ops_util import TEST_DEVICE
    dev = torch.device(TEST_DEVICE)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=True, dtype=dtype)
        fd.add_output(fd.ops.cumsum(t, 0))
    tdt = TORCH[dtype]

    def call(n):
        x = torch.randint(-1000, 1000, (n,), dtype=tdt, device=dev)
        return fd.execute([x])[0], torch.cumsum(x, 0)
    for i in range(8):
        got, want = call(300001 if i % 2 else 70007)
        assert torch.equal(got, want), i
    if dev.type == "cuda":
        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            pairs = [call(300001) for _ in range(4)]
        torch.cuda.current_stream(dev).wait_stream(side)
        for got, want in pairs:
            assert torch.equal(got, want)


@pytest.mark.parametrize("dtype,pad", [(D.Float, 4), (D.BFloat16, 8), (D.Int32, 2)], ids=str)
def test_chained_scan_of_many_tiles(dtype, pad):
    """Rows of many chained tiles, each row `pad` points into a padded row (16
    bytes: 16-byte vectors; int32: 8 bytes, 8-byte vectors of a row that
    starts past a 16-byte boundary). On a GPU each block prefetches into L2
    the tile of the block CHAIN_PREFETCH later, in a later row here, its range
    cut to whole 16-byte lines. Every prefix stays exact (integers) or within
    rounding."""
    from hostir.codegen.scan import CHAIN_PREFETCH
    n = 1 << 19
    x = rand((3, n + pad), dtype, low=-1.0, high=1.0)[:, pad:]
    assert 3 * n // (256 * 16 * 8) > CHAIN_PREFETCH  # tiles enough for blocks to prefetch
    (out,) = run(lambda fd: fd.add_output(fd.ops.cumsum(declare(fd, x, "sliced_fp"), 1)), [x])
    scan_check(out, expected("cumsum", x, 1), "cumsum", n)


@pytest.mark.parametrize("rows", [1, 2, 3, 31, 33, 257, 1000])
@pytest.mark.parametrize("length", [1, 2, 3, 4, 7, 8, 31, 64, 129])
def test_many_rows(rows, length):
    """Short rows share a warp (several rows per group of lanes); every row
    count leaves some groups of the last block without a row."""
    x = rand((rows, length), D.Float)
    for dim in (1, 0):
        (out,) = run(lambda fd: fd.add_output(fd.ops.cumsum(declare(fd, x), dim)), [x])
        scan_check(out, expected("cumsum", x, dim), "cumsum", x.shape[dim])


def test_fused_prologue_and_epilogue():
    x, y = rand((6, 50), D.Float), rand((50,), D.Float)
    fds = []

    def build(fd):
        fds.append(fd)
        a, b = declare(fd, x), declare(fd, y)
        pre = fd.ops.add(fd.ops.mul(a, fd.define_scalar(2.0)), b)   # y broadcast along rows
        s = fd.ops.cumsum(pre, 1)
        fd.add_output(fd.ops.sub(fd.ops.mul(s, b), a))
    (out,) = run(build, [x, y])
    ref = torch.cumsum((2 * x.double() + y.double()), 1) * y.double() - x.double()
    check(out, ref.float(), kind="reduction", rtol=1e-5, atol=1e-5)
    segs = fds[0].last_segments()
    assert len(segs) == 1 and segs[0].scheduler == "scan"
    assert segs[0].ops == ["mul", "add", "cumsum", "mul", "sub"]


@pytest.mark.parametrize("n", [70001, 65539, 40000])
@pytest.mark.parametrize("dtype", [D.Float, D.BFloat16], ids=lambda d: d.name)
def test_fused_long_row(n, dtype):
    """One long row (on a GPU: chained tiles; at an odd length the last points
    after the last whole vector are scanned one by one) with a prologue that
    reads a second input and an epilogue: every point, the last ones too."""
    x, y = rand((n,), dtype, low=-1.0, high=1.0), rand((n,), dtype, low=-1.0, high=1.0)

    def build(fd):
        a, b = declare(fd, x), declare(fd, y)
        s = fd.ops.cumsum(fd.ops.mul(fd.ops.cast(a, D.Float), fd.ops.cast(b, D.Float)), 0)
        fd.add_output(fd.ops.add(fd.ops.mul(s, fd.ops.cast(b, D.Float)), fd.ops.cast(a, D.Float)))
    (out,) = run(build, [x, y])
    xd, yd = x.double(), y.double()
    ref = torch.cumsum(xd * yd, 0) * yd + xd
    check(out, ref.float(), kind="reduction", rtol=1e-4, atol=1e-3 * math.sqrt(n))


@pytest.mark.parametrize("dim", [0, 1])
def test_two_scans_one_kernel(dim):
    """Scans of one dim read by one epilogue share a kernel; bf16 results round
    each scan at its own store."""
    x = rand((9, 40), D.BFloat16)
    fds = []

    def build(fd):
        fds.append(fd)
        a = declare(fd, x)
        fd.add_output(fd.ops.add(fd.ops.cumsum(a, dim), fd.ops.cummax(fd.ops.exp(a), dim)))
    (out,) = run(build, [x])
    ref = (torch.cumsum(x.double(), dim).bfloat16().float()
           + torch.cummax(torch.exp(x), dim).values.float()).bfloat16()
    check(out, ref, kind="reduction", rtol=2e-2, atol=3e-2)
    assert [s.scheduler for s in fds[0].last_segments()] == ["scan"]


def test_scan_outputs_and_prologue_outputs():
    """The scan and a prologue value are outputs too (stored at every point)."""
    x = rand((4, 24), D.Half)

    def build(fd):
        a = declare(fd, x)
        e = fd.ops.abs(a)
        s = fd.ops.cumsum(e, -1)
        fd.add_output(s)
        fd.add_output(e)
        fd.add_output(fd.ops.cast(s, DataType.Float))
    s, e, f = run(build, [x])
    check(e, x.abs(), rtol=0, atol=0)
    ref = torch.cumsum(x.abs().double(), -1)
    check(s, ref.half(), kind="reduction", rtol=4e-3, atol=1e-2)
    # the Float output is the half result cast (the rounding happens at the scan, as torch)
    check(f, s.float(), rtol=0, atol=0)


def test_not_fused_where_the_scan_is_read_elsewhere():
    """A scan read at another point (a permute, a reduction, another scan)
    ends its kernel; the results stay right."""
    x = rand((7, 9), D.Float)
    fds = []

    def build(fd):
        fds.append(fd)
        a = declare(fd, x)
        s = fd.ops.cumsum(a, 1)
        fd.add_output(fd.ops.permute(fd.ops.mul(s, s), [1, 0]))
        fd.add_output(fd.ops.sum(s, [0]))
        fd.add_output(fd.ops.cummin(s, 0))
        fd.add_output(fd.ops.cumsum(fd.ops.sub(a, fd.ops.max(a, [1], keepdim=True)), 1))
    p, r, m, n = run(build, [x])
    s = torch.cumsum(x.double(), 1)
    check(p, (s * s).T.float(), kind="reduction", rtol=1e-5, atol=1e-5)
    check(r, s.sum(0).float(), kind="reduction", rtol=1e-5, atol=1e-5)
    check(m, torch.cummin(s.float(), 0).values, kind="reduction", rtol=1e-5, atol=1e-5)
    check(n, torch.cumsum(x.double() - x.double().amax(1, keepdim=True), 1).float(),
          kind="reduction", rtol=1e-5, atol=1e-5)
    kinds = [s.scheduler for s in fds[0].last_segments()]
    assert kinds.count("scan") >= 3 and "reduction" in kinds, kinds
    dump = fds[0].last_segmented_fusion_ir()
    assert "feeds a scan in segment" in dump and "does not fuse into pointwise segment" in dump, dump


def test_square_permute_of_a_scan_is_not_its_epilogue():
    """A permute of a square scan has the scan's shape but reads it at another
    point: the scan ends its kernel (the cut says why)."""
    x = rand((7, 7), D.Float)
    fds = []

    def build(fd):
        fds.append(fd)
        s = fd.ops.cumsum(declare(fd, x, "static"), 1)
        fd.add_output(fd.ops.add(fd.ops.permute(fd.ops.mul(s, s), [1, 0]), s))
    (out,) = run(build, [x])
    s = torch.cumsum(x.double(), 1)
    check(out, ((s * s).T + s).float(), kind="reduction", rtol=1e-5, atol=1e-5)
    dump = fds[0].last_segmented_fusion_ir()
    assert "reads the scan other than pointwise at its own point" in dump, dump


@pytest.mark.parametrize("src,dtype,want", [
    (D.Int32, None, torch.int64), (D.Bool, None, torch.int64), (D.Int32, D.Int32, torch.int32),
    (D.Int32, D.Float, torch.float32), (D.Half, D.Float, torch.float32),
    (D.Float, D.Double, torch.float64)])
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_dtype(op, src, dtype, want):
    x = _data(op, (5, 6), src)
    (out,) = run(lambda fd: fd.add_output(getattr(fd.ops, op)(declare(fd, x), 1, dtype=dtype)), [x])
    ref = expected(op, x, 1, dtype=None if dtype is None else TORCH[dtype])
    assert ref.dtype == want
    scan_check(out, ref, op, 6)


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype", [D.Int32, D.Bool, D.Half], ids=lambda d: d.name)
def test_max_min_keep_dtype(op, dtype):
    x = rand((4, 37), dtype)
    (out,) = run(lambda fd: fd.add_output(getattr(fd.ops, op)(declare(fd, x), 1)), [x])
    assert out.dtype == x.dtype
    check(out, expected(op, x, 1), rtol=0, atol=0)


def test_nan_propagates():
    x = rand((3, 40), D.Float)
    x[1, 5] = float("nan")
    for op in ("cumsum", "cummax", "cummin"):
        (out,) = run(lambda fd: fd.add_output(getattr(fd.ops, op)(declare(fd, x), 1)), [x])
        ref = expected(op, x, 1)
        assert torch.isnan(out[1, 5:]).all() and not torch.isnan(out[1, :5]).any()
        check(out, ref, kind="reduction", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [40000, 1 << 16])
def test_every_call_of_a_long_row(n):
    """A long row's scan (on a GPU: tiles chained through flags that must start
    at zero) is right on every call of one fusion: the first (planning), the
    second and later (the direct runner), and a replayed graph."""
    from hostir import FusionDefinition
    from ops_util import TEST_DEVICE
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.cumsum(t, 1))
    calls = 5 if TEST_DEVICE != "cpu" else 2
    same = torch.randn(1, n).to(TEST_DEVICE)  # one tensor called again: replayed once captured
    for x in [torch.randn(1, n).to(TEST_DEVICE) for _ in range(calls)] + [same] * calls:
        (out,) = fd.execute([x])
        check(out.cpu(), torch.cumsum(x.cpu().double(), 1).float(), kind="reduction",
              rtol=1e-4, atol=1e-3)


def test_deterministic():
    x = rand((3, 5000), D.Float)
    with_fd = []

    def build(fd):
        with_fd.append(fd)
        fd.add_output(fd.ops.cumsum(declare(fd, x), 1))
    (a,) = run(build, [x])  # (returned on the CPU)
    from ops_util import TEST_DEVICE, to_device_exact
    xd = to_device_exact(x, TEST_DEVICE)  # the same device: a GPU run against GPU runs
    for _ in range(3):
        (b,) = with_fd[0].execute([xd])
        assert torch.equal(a, b.cpu())


@pytest.mark.parametrize("op", SCANS)
def test_errors(op):
    x = rand((3, 4), D.Float)

    def define(fn):
        from hostir import FusionDefinition
        with FusionDefinition() as fd:
            fn(fd, declare(fd, x))
    with pytest.raises(DefinitionError, match=rf"{op}: dim 2 is out of range .* 2 dims"):
        define(lambda fd, t: getattr(fd.ops, op)(t, 2))
    with pytest.raises(DefinitionError, match=rf"{op}: dim -3 is out of range"):
        define(lambda fd, t: getattr(fd.ops, op)(t, -3))
    with pytest.raises(DefinitionError, match=rf"{op}: dim must be an int, got 'x'"):
        define(lambda fd, t: getattr(fd.ops, op)(t, "x"))
    with pytest.raises(DefinitionError, match=rf"{op}: input must be a tensor"):
        define(lambda fd, t: getattr(fd.ops, op)(fd.define_scalar(1.0), 0))
    with pytest.raises(DefinitionError, match=rf"{op}: dim is required"):
        define(lambda fd, t: getattr(fd.ops, op)(t))
    with pytest.raises(DefinitionError, match=rf"{op}: dim 0 of .* is an expanded broadcast"):
        define(lambda fd, t: getattr(fd.ops, op)(
            fd.ops.broadcast_in_dim(fd.ops.sum(t, [0]), [5, 4], [1]), 0))
    with pytest.raises(DefinitionError, match=rf"{op}: input .* is a 0-dim tensor"):
        define(lambda fd, t: getattr(fd.ops, op)(fd.ops.sum(t, None), 0))
    if op in ("cummax", "cummin"):
        with pytest.raises(DefinitionError, match=rf"{op}: no dtype argument"):
            define(lambda fd, t: getattr(fd.ops, op)(t, 0, dtype=DataType.Double))


def test_scan_kernel_sources():
    """The printed schedules: a row scan uses warp-shuffle scans and vector
    loads, a column scan shared-memory totals; both carry a prefix across tiles."""
    from hostir.codegen import spec as S
    made = []
    S.observers.append(made.append)
    try:
        x = rand((4, 64), D.Float)
        for dim in (1, 0):
            run(lambda fd: fd.add_output(fd.ops.cumsum(declare(fd, x), dim)), [x])
    finally:
        S.observers.remove(made.append)
    rows, cols = made
    src = {v.name: v.source for v in rows.typical_variants()}
    vec = next(s for n, s in src.items() if "_v4_" in n and "_t32_" in n)
    assert "hir_warp_scan<32>" in vec and "uint4" in vec and "t0 += 512" in vec
    outer = cols.typical_variants()[0].source
    assert "__shared__ float" in outer and "__syncthreads" in outer and "hir_warp_scan" not in outer
    assert math.prod(x.shape) and rows.plain.scanned == 1 and cols.plain.scanned == 0


def test_launch_rule_picks_the_schedule():
    """Many rows: a warp (or less) per row; few long rows (a 1-D tensor): a
    block per tile chained by look-back, with its workspace; an outer dim: columns."""
    from hostir.codegen import spec as S
    from hostir.codegen.scan import CHAIN_CHUNKS
    made = []
    S.observers.append(made.append)
    try:
        x = rand((3, 64), D.Float)
        for dim in (1, 0):
            run(lambda fd: fd.add_output(fd.ops.cumsum(declare(fd, x), dim)), [x])
    finally:
        S.observers.remove(made.append)
    rows, cols = made
    k = rows.plain

    def pick(shape):
        t = torch.empty(shape)
        return rows.choose(k, list(shape), [t], [torch.empty(shape)], [])
    many, short, one = pick((8192, 8192)), pick((100000, 8)), pick((1, 1 << 26))
    assert (many.threads, many.vec, many.chained) == (32, 4, False)
    assert (short.threads, short.vec) == (1, 4)      # a row of two vectors: one thread
    assert one.chained and one.vec == 4
    assert rows.split(one, [1, 1 << 26], 132) == (1 << 26) // (256 * CHAIN_CHUNKS * 4)
    assert rows.grid(one, 1, 132, rows.split(one, [1, 1 << 26], 132)) == (1 << 26) // (256 * CHAIN_CHUNKS * 4)
    # the counter and a pad, then a 64-bit word per tile for its total and its prefix
    assert rows.scratch_size(one, 1, 16384) == (0, 2 + 4 * 16384)
    assert "hir_chain_put<1>(inc0" in one.source and "hir_chain_epoch(sem" in one.source
    assert "__stcs(" in one.source and "L1::no_allocate" in one.source  # tiles stream past the caches
    assert "hir_prefetch_l2(in0 + " in one.source     # a later block's tile, into L2
    odd = pick((2, 100003))                          # no vectors: scalar loads, still chained
    assert odd.chained and odd.vec == 1 and "hir_prefetch_l2" not in odd.source
    one_odd = pick((1, 100003))                      # one row: vectors, the last 3 points alone
    assert one_odd.chained and one_odd.vec == 4 and "if (tail)" in one_odd.source
    assert cols.choose(cols.plain, [8192, 8192], [torch.empty(8192, 8192)], None, []).outer
