"""Generated pointwise kernels: seed 000's rotation with a residual path, RoPE,
the NVRTC cubin cache. CPU tensors run the kernel-IR interpreter; `gpu`
tests run the same programs as CUDA kernels."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from hostir import DataType, FusionDefinition

CUDA = pytest.param("cuda", marks=pytest.mark.gpu)
DEVICES = ["cpu", CUDA]


def kernel_steps(fd):
    """The generated-kernel steps of the last plan `fd` ran."""
    from hostir.host.steps import KernelStep
    return [s.target for s in fd._cache.last_plan.program.body
            if isinstance(getattr(s, "target", None), KernelStep)]


def rotation_fusion():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        n = fd.ops.size(t0, 0)
        half = fd.ops.div(n, 2)
        t1 = fd.ops.slice(t0, [0], [half])
        t2 = fd.ops.slice(t0, [half], [n])
        t3 = fd.ops.cat([t2, t1], 0)
        fd.add_output(fd.ops.add(t0, t3))
    return fd


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [8, 64, 1000, 2 ** 20])
def test_seed000_rotation_with_residual(device, n):
    fd = rotation_fusion()
    x = torch.randn(n, device=device)
    (out,) = fd.execute([x])
    h = n // 2
    torch.testing.assert_close(out, x + torch.cat([x[h:], x[:h]]))
    segs = fd.last_segments()
    assert [s.scheduler for s in segs] == ["pointwise"]
    code = fd.last_cuda_code()
    assert "in0[" in code and "__global__" in code


def rope_fusion(dtype, compute=None):
    """RoPE on inputs of `dtype`, computed in `compute` (default: as promoted)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=True, dtype=dtype)
        cos = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=dtype)
        sin = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=dtype)
        if compute is not None:
            x, cos, sin = (fd.ops.cast(t, compute) for t in (x, cos, sin))
        d = fd.ops.size(x, 3)
        h = fd.ops.div(d, 2)
        b, nh, s = (fd.ops.size(x, i) for i in range(3))
        x1 = fd.ops.slice(x, [0, 0, 0, 0], [b, nh, s, h])
        x2 = fd.ops.slice(x, [0, 0, 0, h], [b, nh, s, d])
        rot = fd.ops.cat([fd.ops.neg(x2), x1], -1)
        cb = fd.ops.broadcast_in_dim(cos, [b, nh, s, d], [2, 3])
        sb = fd.ops.broadcast_in_dim(sin, [b, nh, s, d], [2, 3])
        out = fd.ops.add(fd.ops.mul(x, cb), fd.ops.mul(rot, sb))
        fd.add_output(fd.ops.cast(out, dtype))
    return fd


def rope_reference(x, cos, sin):
    h = x.shape[-1] // 2
    rot = torch.cat([-x[..., h:], x[..., :h]], -1)
    return (x.float() * cos.float() + rot.float() * sin.float()).to(x.dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(2, 3, 5, 8), (1, 4, 16, 64), (2, 1, 1, 2)])
@pytest.mark.parametrize("dtype", [DataType.BFloat16, DataType.Float, DataType.Half])
def test_rope_4d(device, shape, dtype):
    fd = rope_fusion(dtype)
    t = dtype.torch
    x = torch.randn(shape, device=device).to(t)
    cos = torch.randn(shape[2], shape[3], device=device).to(t)
    sin = torch.randn(shape[2], shape[3], device=device).to(t)
    (out,) = fd.execute([x, cos, sin])
    ref = rope_reference(x, cos, sin)
    tol = {DataType.BFloat16: 2e-2, DataType.Half: 4e-3, DataType.Float: 1e-5}[dtype]
    torch.testing.assert_close(out.float(), ref.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("device", DEVICES)
def test_pad_cat_broadcast_kernel_matches_reference(device):
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        b = fd.define_tensor(shape=[1, -1], contiguity=True, dtype=DataType.Float)
        p = fd.ops.pad(a, [1, 2, 0, 1], 0.5)
        c = fd.ops.cat([p, fd.ops.expand(b, [1, fd.ops.size(p, 1)])], 0)
        fd.add_output(fd.ops.tanh(fd.ops.permute(c, [1, 0])))
    a = torch.randn(3, 4, device=device)
    b = torch.randn(1, 7, device=device)
    (out,) = fd.execute([a, b])
    p = torch.nn.functional.pad(a, [1, 2, 0, 1], value=0.5)
    torch.testing.assert_close(out, torch.tanh(torch.cat([p, b], 0).T))


# ---------------------------------------------------------------- NVRTC cache (no GPU needed)

nvrtc = pytest.mark.nvrtc


def _nvrtc_or_skip():
    try:
        from hostir.runtime.nvrtc import nvrtc_version
        nvrtc_version()
    except Exception as e:  # pragma: no cover
        pytest.skip(f"NVRTC not available: {e}")


def _rotation_source():
    fd = rotation_fusion()
    fd.execute([torch.randn(16)])
    return fd.last_cuda_code()


@nvrtc
def test_compile_cubin_for_sm90(tmp_path, monkeypatch):
    _nvrtc_or_skip()
    from hostir import config
    from hostir.runtime import nvrtc as N
    src = _rotation_source()  # (on a GPU this compiles and launches: before the cache moves)
    N.wait_prefetches()  # background compiles must not count here
    monkeypatch.setenv("HOSTIR_CACHE_DIR", str(tmp_path))
    config.reload()
    try:
        N.clear_memory_cache()
        before = N.stats.nvrtc_calls
        cubin = N.compile_cubin(src, "sm_90", "hir_seg0_pointwise")
        assert cubin.startswith(b"\x7fELF")
        assert N.stats.nvrtc_calls == before + 1
        assert N.compile_cubin(src, "sm_90", "hir_seg0_pointwise") == cubin  # memory hit
        assert N.stats.nvrtc_calls == before + 1
        files = list((tmp_path / "kernels").glob("*.cubin"))
        assert len(files) == 1
        # a second process hits the disk cache without calling NVRTC
        script = textwrap.dedent(f"""
            import sys
            from hostir.runtime import nvrtc as N
            src = open({str(tmp_path / 'src.cu')!r}).read()
            N.compile_cubin(src, "sm_90", "hir_seg0_pointwise")
            print(N.stats.nvrtc_calls, N.stats.disk_hits)
        """)
        (tmp_path / "src.cu").write_text(src)
        env = dict(os.environ, HOSTIR_CACHE_DIR=str(tmp_path))
        res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                             check=True)
        assert res.stdout.split() == ["0", "1"], res.stdout + res.stderr
        # a corrupted entry is detected and recompiled
        files[0].write_bytes(b"garbage" * 10)
        N.clear_memory_cache()
        corrupt = N.stats.corrupt
        again = N.compile_cubin(src, "sm_90", "hir_seg0_pointwise")
        assert again == cubin and N.stats.corrupt == corrupt + 1
        assert N.stats.nvrtc_calls == before + 2
    finally:
        monkeypatch.delenv("HOSTIR_CACHE_DIR")
        config.reload()


@nvrtc
def test_compile_error_reports_log_and_source(tmp_path, monkeypatch):
    _nvrtc_or_skip()
    from hostir import config
    from hostir.ir.errors import ExecutionError
    from hostir.runtime import nvrtc as N
    monkeypatch.setenv("HOSTIR_CACHE_DIR", str(tmp_path))
    config.reload()
    try:
        with pytest.raises(ExecutionError, match="NVRTC failed to compile broken") as info:
            N.compile_cubin('extern "C" __global__ void broken() { undefined_thing(); }', "sm_90",
                            "broken")
        assert "undefined_thing" in str(info.value)
        assert (tmp_path / "kernels" / "failed" / "broken.cu").exists()
    finally:
        monkeypatch.delenv("HOSTIR_CACHE_DIR")
        config.reload()


def two_kernel_fusion(scale: float):
    """a = sin(y * scale) is an output and is broadcast into [N, M] for
    exp(x + a) + 1: two kernels, the second reading the first's output."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        a = fd.ops.sin(fd.ops.mul(y, scale))
        b = fd.ops.add(x, fd.ops.broadcast_in_dim(a, x.shape(), [1]))
        fd.add_output(fd.ops.add(fd.ops.exp(b), 1.0))
        fd.add_output(a)
    return fd


@nvrtc
def test_prefetch_compiles_in_background_once(tmp_path, monkeypatch):
    """Kernels prefetched together compile on the pool; compile_cubin waits for
    the running compile instead of starting another; errors surface there."""
    _nvrtc_or_skip()
    from hostir import config
    from hostir.ir.errors import ExecutionError
    from hostir.runtime import nvrtc as N
    monkeypatch.setenv("HOSTIR_CACHE_DIR", str(tmp_path))
    config.reload()
    try:
        N.wait_prefetches()
        N.clear_memory_cache()
        srcs = [f'extern "C" __global__ void k{i}(float* a) {{ a[threadIdx.x] *= {i + 2}.0f; }}\n'
                for i in range(3)]
        calls, pre = N.stats.nvrtc_calls, N.stats.prefetched
        for i, src in enumerate(srcs):
            N.prefetch(src, "sm_90", f"k{i}")
            N.prefetch(src, "sm_90", f"k{i}")  # already in flight (or done): no second job
        cubins = [N.compile_cubin(src, "sm_90", f"k{i}") for i, src in enumerate(srcs)]
        assert all(c.startswith(b"\x7fELF") for c in cubins)
        assert N.stats.prefetched == pre + 3
        assert N.stats.nvrtc_calls == calls + 3
        N.prefetch(srcs[0], "sm_90", "k0")  # in memory now: nothing to do
        assert N.stats.prefetched == pre + 3
        bad = 'extern "C" __global__ void bad() { nope(); }'
        N.prefetch(bad, "sm_90", "bad")
        with pytest.raises(ExecutionError, match="nope"):
            N.compile_cubin(bad, "sm_90", "bad")
    finally:
        monkeypatch.delenv("HOSTIR_CACHE_DIR")
        config.reload()


@pytest.mark.gpu
def test_plan_kernels_are_prefetched_in_parallel():
    from hostir.runtime import nvrtc as N
    fd = two_kernel_fusion(3.0)  # a scale no other test uses: its kernels are new
    pre = N.stats.prefetched
    p, q = torch.randn(33, 77, device="cuda"), torch.randn(77, device="cuda")
    got, got_a = fd.execute([p, q])
    torch.testing.assert_close(got_a, torch.sin(q * 3.0))
    torch.testing.assert_close(got, torch.exp(p + torch.sin(q * 3.0)) + 1.0)
    assert len(kernel_steps(fd)) == 2
    assert N.stats.prefetched - pre == 2  # both kernels started before the first launch


@pytest.mark.parametrize("device", DEVICES)
def test_rotation_pairs_lanes_and_falls_back_for_other_extents(device):
    """Each thread computes i and i + N/2 (t0 read once) in the specialized
    plan; the symbolic plan made when N changes runs other N (odd ones too)."""
    fd = rotation_fusion()
    for k, n in enumerate((64, 96, 40, 7, 1000)):
        x = torch.randn(n, device=device)
        (out,) = fd.execute([x])
        h = n // 2
        torch.testing.assert_close(out, x + torch.cat([x[h:], x[:h]]))
        if k == 0:
            paired = kernel_steps(fd)[0].spec.paired
            assert paired.pairs == ((0, 64),)  # lanes i and i + 32
            loads = [n for n in paired.order if n.op == "load"]
            assert len(loads) == 2  # t0[i] and t0[i + N/2], each once, for two output points
    assert fd.cache_info().plans == 2


def test_rope_pairs_the_rotated_dim():
    fd = rope_fusion(DataType.BFloat16)
    t = torch.bfloat16
    x = torch.randn(2, 3, 4, 16).to(t)
    cos, sin = torch.randn(4, 16).to(t), torch.randn(4, 16).to(t)
    (out,) = fd.execute([x, cos, sin])
    torch.testing.assert_close(out.float(), rope_reference(x, cos, sin).float(), rtol=2e-2, atol=2e-2)
    assert kernel_steps(fd)[0].spec.paired.pairs == ((3, 16),)


# ---------------------------------------------------------------- paired lanes in symbolic plans

def launched_kernel(fd):
    """The kernel the last call of `fd` launched for its (first) generated-kernel step."""
    bound = next(reversed(fd._cache.bound.values()))  # the last call's bound plan
    prep, _ = bound.prepared[kernel_steps(fd)[0]]
    return prep.kernel if hasattr(prep, "kernel") else prep.variant.kernel


def _check_launches(fd, n, paired_expected):
    """The symbolic plan's spec has a guarded paired kernel, launched exactly where expected."""
    spec = kernel_steps(fd)[0].spec
    if fd._cache.last_plan.specialized:
        return
    if paired_expected:
        assert spec.paired is not None and spec.paired.guards, n
        assert [p[1] for p in spec.paired.pairs] == [None]  # no extent compiled in
    chosen = launched_kernel(fd)
    assert chosen is (spec.paired if paired_expected else spec.plain), (n, chosen.pairs)


ROTATION_SIZES = (64, 96, 40, 7, 1000, 2, 1, 3, 12, 6, 130, 1001, 0, 4)


@pytest.mark.parametrize("device", DEVICES)
def test_symbolic_rotation_keeps_paired_lanes(device):
    """Once N keeps changing the plan is symbolic (seed 001's fallback); its
    paired kernel shifts lane 1 by the launch's extent H and is launched where
    its preconditions (N even, N >= 2) hold, the plain kernel elsewhere."""
    fd = rotation_fusion()
    for n in ROTATION_SIZES:
        x = torch.randn(n, device=device)
        (out,) = fd.execute([x])
        h = n // 2
        torch.testing.assert_close(out, x + torch.cat([x[h:], x[:h]]))
        if n:
            _check_launches(fd, n, n % 2 == 0 and n >= 2)
        if n >= 4 and not fd._cache.last_plan.specialized:
            paired = kernel_steps(fd)[0].spec.paired
            assert len([m for m in paired.order if m.op == "load"]) == 2  # t0[i], t0[i + H]
            assert not paired.params  # N // 2 and the normalized bounds folded into H
    assert not fd._cache.specialize


@pytest.mark.parametrize("device", DEVICES)
def test_symbolic_pairing_reads_non_contiguous_inputs(device):
    """A rotation of each row of a transposed (non-contiguous) input, plus the
    input: paired along the rows in the symbolic plan."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[False, False], dtype=DataType.Float)
        m, n = fd.ops.size(t0, 0), fd.ops.size(t0, 1)
        h = fd.ops.div(n, 2)
        t3 = fd.ops.cat([fd.ops.slice(t0, [0, h], [m, n]), fd.ops.slice(t0, [0, 0], [m, h])], 1)
        fd.add_output(fd.ops.add(t3, t0))  # the cat's extent leads: E is an expression of N
    for n in (16, 24, 9, 40, 2, 1, 10):
        x = torch.randn(n, 3, device=device).t()
        (out,) = fd.execute([x])
        h = n // 2
        torch.testing.assert_close(out, torch.cat([x[:, h:], x[:, :h]], 1) + x)
        _check_launches(fd, n, n % 2 == 0 and n >= 2)


def rope_float_fusion():
    """benchmarks/pointwise.py's rope_case: bf16 in and out, float math."""
    return rope_fusion(DataType.BFloat16, compute=DataType.Float)


@pytest.mark.parametrize("device", DEVICES)
def test_symbolic_rope_keeps_paired_lanes(device):
    fd = rope_float_fusion()
    t = torch.bfloat16
    for d in (16, 32, 8, 6, 7, 2, 1, 4, 64, 10, 3):
        x = torch.randn(2, 3, 4, d, device=device).to(t)
        cos, sin = torch.randn(4, d, device=device).to(t), torch.randn(4, d, device=device).to(t)
        (out,) = fd.execute([x, cos, sin])
        torch.testing.assert_close(out.float(), rope_reference(x, cos, sin).float(), rtol=1e-2, atol=1e-2)
        _check_launches(fd, d, d % 2 == 0 and d >= 2)
    assert kernel_steps(fd)[0].spec.paired.pairs == ((3, None),)


@pytest.mark.parametrize("device", DEVICES)
def test_symbolic_pairing_with_a_scalar_slice_point(device):
    """A rotation by a scalar input s: the symbolic plan's paired kernel
    assumes s == N // 2 (as at the call it was made for), checked at launch;
    where the bounds do not line up with the half point the plain kernel runs."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        s = fd.define_scalar(None, dtype=DataType.Int)
        m, n = fd.ops.size(t0, 0), fd.ops.size(t0, 1)
        t3 = fd.ops.cat([fd.ops.slice(t0, [0, s], [m, n]), fd.ops.slice(t0, [0, 0], [m, s])], 1)
        fd.add_output(fd.ops.add(t0, t3))
    calls = [(64, 32), (96, 48), (40, 20), (40, 21), (40, 10), (40, -20), (7, 3), (6, 3),
             (16, 8), (1000, 500), (1000, 499), (2, 1)]
    for n, s in calls:
        x = torch.randn(3, n, device=device)
        (out,) = fd.execute([x, s])
        torch.testing.assert_close(out, x + torch.cat([x[:, s:], x[:, :s]], 1))
        _check_launches(fd, (n, s), n % 2 == 0 and s == n // 2)


def test_halves_rewrite_bounds_exactly_and_guard_what_the_call_decides():
    """Scalars as a * H + c (N = 2H): decided for every H >= 1 where the form
    allows (no guard), else as at the plan's call, with a guard saying so."""
    from hostir.codegen.halves import Halves
    from hostir.ir import scalar as S
    from hostir.ir.node import Op, Val
    from hostir.ir.ops.resize import _normalize_index
    from hostir.ir.printer import Namer, scalar_text
    n = Val(Op.SCALAR_INPUT, DataType.Int, arg=0, name="n")
    s = Val(Op.SCALAR_INPUT, DataType.Int, arg=1, name="s")
    values = {id(n): 20, id(s): 10}
    shape = {id(n): n, id(s): s}
    h = Halves(n, lambda v: values[id(v)], shape)
    namer = Namer()

    def guards():
        return [scalar_text(g, namer) for g in h.guards]
    base = ["((n % 2) == 0)", "(n >= 2)"]
    assert h.ok and guards() == base
    assert h.form(_normalize_index(S.floordiv(n, 2), n)) == (1, 0)  # Python-style bound: N // 2 is H
    assert h.form(S.sub(n, 1)) == (2, -1) and h.form(S.ceildiv(S.add(n, 3), 2)) == (1, 2)
    assert h.form(S.floordiv(n, 4)) is None and h.form(s) is None  # H // 2; s unrelated
    assert guards() == base
    assert h.form(S.smin(S.floordiv(n, 2), 8)) == (0, 8)  # at N = 20: min(10, 8)
    assert guards() == base + ["((8 - (n // 2)) < 0)"]
    related = Halves(n, lambda v: values[id(v)], shape, relate=True)
    assert related.form(S.add(s, 1)) == (1, 1)
    assert scalar_text(related.guards[-1], namer) == "(s == (n // 2))"
    assert not Halves(S.add(n, s), lambda v: values[id(v)], shape).exact  # two leaves


def test_symbolic_plans_choose_vector_width_and_index_type_at_launch():
    """The launch rule of a symbolic plan's spec picks, from the call's values:
    the paired kernel (guards), 16-byte vectors (H a multiple of 4 floats) and
    32-bit indices (every offset fits); meta tensors stand in for big inputs."""
    fd = rotation_fusion()
    for n in (64, 96):
        fd.execute([torch.randn(n)])
    spec = kernel_steps(fd)[0].spec
    assert not fd._cache.last_plan.specialized
    env = {spec.plain.extent_vals[0]: None}

    def launch(n):
        env[spec.plain.extent_vals[0]] = n
        from hostir.ir.scalar import evaluate_scalar
        held = [evaluate_scalar(g, dict(env)) for g in spec.guards]
        kernel, extents = spec.kernel_for([n], held)
        x = torch.empty(n, device="meta")
        params = [evaluate_scalar(p, dict(env)) for p in kernel.params]
        v = spec.choose(kernel, extents, [x], [torch.empty(n, device="meta")], params)
        return kernel is spec.paired, extents, v.vec, v.idx

    assert launch(96) == (True, [48], 4, "int")
    assert launch(100) == (True, [50], 1, "int")      # H = 50: no aligned 4-float groups
    assert launch(1000) == (True, [500], 4, "int")
    assert launch(1001) == (False, [1001], 1, "int")
    assert launch(2 ** 32) == (True, [2 ** 31], 4, "long long")
    assert launch(2 ** 32 + 4) == (True, [2 ** 31 + 2], 1, "long long")
    assert launch(2 ** 31 + 9) == (False, [2 ** 31 + 9], 1, "long long")
    assert launch(4 * 1001) == (True, [2002], 1, "int")
    plain = spec.plain  # the plain kernel still vectorizes its stores and aligned loads
    x = torch.empty(1024, device="meta")
    assert spec.choose(plain, [1024], [x], [x], [1024]).vec == 4


@pytest.mark.parametrize("device", DEVICES)
def test_repeated_calls_reuse_prepared_launches(device):
    """Calls with the signature of an earlier one take the prepared fast path:
    new data and new (non-shape) scalar values must still be used."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        s = fd.define_scalar(None, dtype=DataType.Double)
        k = fd.define_scalar(None, dtype=DataType.Int)
        y = fd.ops.mul(fd.ops.add(x, s), k)
        fd.add_output(fd.ops.cat([fd.ops.slice(y, [0, 2], [3, 8]), fd.ops.slice(y, [0, 0], [3, 2])], 1))
    for i in range(4):
        a = torch.randn(3, 8, device=device)
        sv, kv = float(torch.randn(())), i + 2
        (out,) = fd.execute([a, sv, kv])
        y = (a + sv) * kv
        torch.testing.assert_close(out, torch.cat([y[:, 2:], y[:, :2]], 1))
    assert fd.cache_info().plans == 1
    rot = rotation_fusion()
    for _ in range(3):
        a = torch.randn(4096, device=device)
        (out,) = rot.execute([a])
        torch.testing.assert_close(out, a + torch.cat([a[2048:], a[:2048]]))


def test_dump_kernels_and_host_ir(monkeypatch, capsys):
    from hostir import config
    monkeypatch.setenv("HOSTIR_DUMP", "kernels,host_ir,segments")
    config.reload()
    try:
        fd = rotation_fusion()
        fd.execute([torch.randn(16)])
    finally:
        monkeypatch.delenv("HOSTIR_DUMP")
        config.reload()
    out = capsys.readouterr().out
    assert "===== hostir kernels =====" in out and "__global__" in out
    assert "===== hostir host_ir =====" in out and "launch seg0_pointwise" in out
    assert "===== hostir segments =====" in out and "# seg0 pointwise" in out


def test_pdl_kernels_wait_before_touching_memory():
    """Launched with programmatic dependent launch, a kernel may start while the
    previous one drains: griddepcontrol.wait must come before any load or store."""
    from hostir.codegen import KernelOptions
    pdl = KernelOptions.from_config().pdl
    fd = rotation_fusion()
    fd.execute([torch.randn(64)])
    for variant in kernel_steps(fd)[0].spec.typical_variants():
        src = variant.source
        assert variant.options.pdl == pdl
        if not pdl:
            assert "griddepcontrol" not in src
            continue
        body = src[src.index(") {"):]  # past the parameter list
        wait = body.index("griddepcontrol.wait")
        accesses = [body.find(tok) for tok in ("in0[", "in0 +", "out0[", "out0 +")]
        assert any(a >= 0 for a in accesses)
        assert all(a < 0 or wait < a for a in accesses)
        assert body.index("griddepcontrol.launch_dependents") > wait


@pytest.mark.parametrize("device", DEVICES)
def test_dependent_launch_chain_reads_finished_results(device):
    """Each launch reads the previous launch's output (large enough that their
    blocks would overlap without the wait)."""
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(fd.ops.mul(t, 0.5), 1.0))
    n = (1 << 22) + 3 if device == "cuda" else 1000
    x = torch.randn(n, device=device)
    ref = x.clone()
    for k in range(40):
        (x,) = fd.execute([x])
        ref = ref * 0.5 + 1.0
        if k % 3 == 0:  # a torch kernel between ours: reads our result, we read its
            x = x.flip(0) - 0.25
            ref = ref.flip(0) - 0.25
    torch.testing.assert_close(x, ref)


@pytest.mark.gpu
def test_direct_path_runs_new_data_scalars_and_empty_tensors():
    """From a signature's second call on, a single-kernel plan runs through the
    direct runner: each call must use its own inputs, scalar values and fresh outputs."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.BFloat16)
        s = fd.define_scalar(None, dtype=DataType.Double)
        b = fd.ops.broadcast_in_dim(fd.ops.cast(y, DataType.Float), x.shape(), [1])
        fd.add_output(fd.ops.add(fd.ops.mul(x, s), b))
        fd.add_output(fd.ops.neg(x))
    outs = []
    for shape in [(5, 7), (5, 7), (5, 7), (0, 7), (0, 7), (1, 1), (1, 1), (64, 256), (64, 256)]:
        for _ in range(2):
            a = torch.randn(shape, device="cuda")
            c = torch.randn(shape[1], device="cuda").bfloat16()
            sv = float(torch.randn(()))
            got = fd.execute([a, c, sv])
            torch.testing.assert_close(got[0], a * sv + c.float())
            torch.testing.assert_close(got[1], -a)
            outs.append(got)
    hits = [h for h in fd._cache.bound.values() if h.direct is not None]
    assert len(hits) >= 3
    # outputs are fresh tensors each call (no buffer shared between calls)
    ptrs = [o[0].data_ptr() for o in outs if o[0].numel()]
    assert len(set(ptrs)) == len(ptrs)


@pytest.mark.gpu
def test_direct_path_runs_two_kernels_in_order():
    """A plan of two generated kernels (the second reads the first's output)
    runs through the direct runner from the signature's second call on."""
    fd = two_kernel_fusion(2.0)
    for _ in range(4):
        p = torch.randn(300, 1000, device="cuda")
        q = torch.randn(1000, device="cuda")
        got, got_a = fd.execute([p, q])
        a_ref = torch.sin(q * 2.0)
        torch.testing.assert_close(got_a, a_ref)
        torch.testing.assert_close(got, torch.exp(p + a_ref) + 1.0)
    assert len(kernel_steps(fd)) == 2
    assert all(h.direct is not None for h in fd._cache.bound.values())


@pytest.mark.parametrize("dtype", [DataType.BFloat16, DataType.Half, DataType.Float])
def test_exact_cast_round_trips_fold_in_kernels(dtype):
    """x -> wider -> x is the identity and costs no conversion in the kernel;
    narrowing round trips (float -> bf16 -> float) still round."""
    from hostir.ir.dtypes import exact_cast
    from hostir.ir.node import Op
    wide = DataType.Double if dtype is DataType.Float else DataType.Float
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=dtype)
        f = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        same = fd.ops.cast(fd.ops.cast(x, wide), dtype)
        rounded = fd.ops.cast(fd.ops.cast(f, DataType.BFloat16), DataType.Float)
        fd.add_output(fd.ops.add(same, fd.ops.cast(rounded, dtype)))
    a = (torch.randn(5, 9) * 3).to(dtype.torch)
    b = torch.randn(5, 9) * 3
    (out,) = fd.execute([a, b])
    ref = (a.to(torch.float64 if dtype is DataType.Float else torch.float32)
           + b.bfloat16().float().to(dtype.torch)).to(dtype.torch)
    torch.testing.assert_close(out, ref)
    for n in kernel_steps(fd)[0].spec.plain.order:
        if n.op is Op.CAST and n.src[0].op is Op.CAST and n.src[0].src[0].dtype is n.dtype:
            assert not exact_cast(n.dtype, n.src[0].dtype), n


@pytest.mark.gpu
def test_dependent_launch_across_streams_waits_for_events():
    """A kernel launched early behind its own stream's previous kernel still
    waits for what that stream waits on (an event of another stream)."""
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(fd.ops.mul(t, 0.5), 1.0))
    x = torch.randn((1 << 22) + 5, device="cuda")
    ref = x.clone()
    keep = []  # nothing is freed while another stream may still read it
    side, other = torch.cuda.Stream(), torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    other.wait_stream(torch.cuda.current_stream())
    for _ in range(5):
        with torch.cuda.stream(side):
            for _ in range(4):
                (x,) = fd.execute([x])
                ref = ref * 0.5 + 1.0
                keep += [x, ref]
            done = side.record_event()
        with torch.cuda.stream(other):
            keep += fd.execute([torch.ones(1 << 20, device="cuda")])  # a kernel ahead in `other`
            other.wait_event(done)
            (x,) = fd.execute([x])
            ref = ref * 0.5 + 1.0
            keep += [x, ref]
        side.wait_stream(other)
    torch.cuda.synchronize()
    torch.testing.assert_close(x, ref)


@nvrtc
@pytest.mark.parametrize("shared", ["constant", "parameter", "index constant"])
def test_int32_index_math_narrows_shared_64_bit_operands(shared):
    """A constant or scalar parameter used both in a load's index math and
    elsewhere stays 64-bit; in the 32-bit-index variant a call such as
    hir_min must still see one operand type (a fuzzer found `hir_min(1LL, v)`,
    and `hir_min(5, v)`: a constant named as an int index in 64-bit data math)."""
    _nvrtc_or_skip()
    from hostir.codegen.cuda import kernel_source
    from hostir.codegen.kir import K, Builder, Kernel, TensorParam
    from hostir.ir.node import Op, Val
    from hostir.runtime.nvrtc import compile_cubin
    t = Val(Op.TENSOR_INPUT, DataType.Float, arg=None)
    b = Builder()
    i0, i1 = (b.mk(K.INDEX, DataType.Int, arg=d) for d in range(2))
    one, p0 = b.i(1), b.mk(K.PARAM, DataType.Int, arg=0)
    row = b.mk(Op.ADD, DataType.Int, (b.mk(Op.MINIMUM, DataType.Int, (one, p0)), i0))
    val = b.mk(K.LOAD, DataType.Float, (b.const(True, DataType.Bool), row, i1), arg=0)
    if shared == "index constant":  # min(5, p0) in index math and in data: the 5 is index-only
        lo = b.mk(Op.MINIMUM, DataType.Int, (b.i(5), p0))
        val = b.mk(K.LOAD, DataType.Float, (b.const(True, DataType.Bool), b.add(lo, i0), i1), arg=0)
        data = b.mk(Op.CAST, DataType.Float, (b.mk(Op.MUL, DataType.Int, (lo, p0)),), arg=DataType.Float)
        stores = [(0, b.mk(Op.ADD, DataType.Float, (val, data)), (i0, i1))]
    elif shared == "constant":  # the constant in a store offset too
        stores = [(0, val, (i0, i1)), (0, val, (i0, b.add(i1, one)))]
    else:  # the parameter in data too
        data = b.mk(Op.CAST, DataType.Float, (b.mk(Op.MUL, DataType.Int, (p0, i1)),),
                    arg=DataType.Float)
        stores = [(0, b.mk(Op.ADD, DataType.Float, (val, data)), (i0, i1))]
    kern = Kernel(f"k_shared_{shared.replace(' ', '_')}", inputs=[TensorParam(t, 2, DataType.Float)],
                  outputs=[TensorParam(t, 2, DataType.Float)], params=[t], extent_vals=[t, t],
                  stores=stores, order=list(b.order))
    for idx in ("int", "long long"):
        src = kernel_source(kern, 1, idx)
        assert "hir_min(" in src
        assert compile_cubin(src, "sm_90", kern.name).startswith(b"\x7fELF"), src


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [1, -(2 ** 40) + 1, 2 ** 33 + 1, -2])
def test_symbolic_slice_bounds_beyond_32_bits(device, k, monkeypatch):
    """Slice bounds are kernel parameters in a symbolic plan; values outside
    int32 must not be truncated by the 32-bit-index variant."""
    from hostir import config
    monkeypatch.setenv("HOSTIR_DISABLE", "concretize_resize")
    config.reload()
    try:
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
            s = fd.define_scalar(None, dtype=DataType.Int)
            y = fd.ops.slice(x, [s, 0], [fd.ops.size(x, 0), 1])
            fd.add_output(fd.ops.cat([y, fd.ops.neg(y)], 1))
        a = torch.randn(6, 3, device=device)
        (out,) = fd.execute([a, k])
        start = min(max(k + 6 if k < 0 else k, 0), 6)
        ref = torch.cat([a[start:, :1], -a[start:, :1]], 1)
        torch.testing.assert_close(out, ref)
    finally:
        monkeypatch.delenv("HOSTIR_DISABLE")
        config.reload()


@pytest.mark.parametrize("device", DEVICES)
def test_many_signatures_evict_the_least_recent_bound_plans(device):
    """More input signatures than the cache holds bound plans for: the least
    recently used make room, recent ones keep hitting, every result is right,
    and the prepared launches go with their bound plan."""
    from hostir.host.cache import MAX_SIGNATURES
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        s = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(fd.ops.mul(fd.ops.sin(x), s))
    sizes = list(range(1, MAX_SIGNATURES + 40))
    for n in sizes + sizes[-10:] * 2 + sizes[:3]:
        a = torch.randn(n, device=device)
        sv = float(n) / 7
        (out,) = fd.execute([a, sv])
        torch.testing.assert_close(out, torch.sin(a) * sv)
    cache = fd._cache
    assert len(cache.bound) == MAX_SIGNATURES
    recent = {cache._signature([torch.empty(n, device=device), 1.0]) for n in sizes[:3]}
    assert recent <= set(cache.bound)  # the last ones used are kept
    assert all(len(b.prepared) == 1 for b in cache.bound.values())


def test_fast_math_is_opt_in_and_marks_the_source():
    """HOSTIR_ENABLE=fast_math: kernels define HIR_FAST_MATH (the NVRTC sweep
    compiles them); the CPU interpreter's results are unchanged."""
    from hostir import config
    x = torch.randn(7, 300)

    def make():
        with FusionDefinition() as fd:
            t = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
            m = fd.ops.broadcast_in_dim(fd.ops.max(t, [1]), t.shape(), [0])
            e = fd.ops.exp(fd.ops.sub(t, m))
            s = fd.ops.broadcast_in_dim(fd.ops.sum(e, [1]), t.shape(), [0])
            fd.add_output(fd.ops.div(e, s))
        return fd
    plain = make()
    (a,) = plain.execute([x])
    assert "HIR_FAST_MATH" not in plain.last_cuda_code()
    with config.override(enable=config.get().enable | {"fast_math"}):
        fast = make()
        (b,) = fast.execute([x])
    assert "#define HIR_FAST_MATH 1" in fast.last_cuda_code()
    torch.testing.assert_close(b, torch.softmax(x, 1))
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_narrow_math_marks_kernels_whose_outputs_are_all_narrow():
    """A kernel whose every output is a narrow float defines HIR_NARROW_MATH
    (approximate exp and division, a few ulp of float); a float output keeps
    the correctly rounded forms; HOSTIR_DISABLE=narrow_math turns it off."""
    from hostir import config

    def make(out_dtypes):
        with FusionDefinition() as fd:
            t = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.BFloat16)
            e = fd.ops.exp(fd.ops.cast(t, DataType.Float))
            for dt in out_dtypes:
                fd.add_output(fd.ops.cast(fd.ops.div(e, 3.0), dt))
        return fd
    x = torch.randn(4, 64, dtype=torch.bfloat16)
    for outs, want in [((DataType.BFloat16,), True), ((DataType.Half, DataType.BFloat16), True),
                       ((DataType.BFloat16, DataType.Float), False), ((DataType.Float,), False)]:
        fd = make(outs)
        fd.execute([x])
        assert ("#define HIR_NARROW_MATH 1" in fd.last_cuda_code()) is want, outs
    with config.override(disable=config.get().disable | {"narrow_math"}):
        fd = make((DataType.BFloat16,))
        fd.execute([x])
    assert "HIR_NARROW_MATH" not in fd.last_cuda_code()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [DataType.BFloat16, DataType.Half])
def test_narrow_math_edges(device, dtype):
    """exp and division into narrow outputs at the edges of float's range
    (subnormal and huge quotients, infinite and NaN operands, exp underflow to
    subnormals and overflow): within a unit of the output's rounding of torch
    eager (on a GPU the kernel takes HIR_NARROW_MATH)."""
    tdt = torch.bfloat16 if dtype is DataType.BFloat16 else torch.float16
    tiny, huge = torch.finfo(torch.float32).tiny, torch.finfo(torch.float32).max
    a = torch.tensor([1.0, -3.0, 1e30, tiny, 1e-30, huge, 0.0, float("inf"), float("nan"), 2.5,
                      -80.0, -87.5, -95.0, -103.0, 88.0, 89.0, 0.0, -float("inf")] * 3, device=device)
    b = torch.tensor([3.0, 7.0, 3e38, 0.5, 2e38, 1e-3, 5.0, 2.0, 1.0, float("inf"),
                      1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0] * 3, device=device)
    b = b * (1 + torch.rand(b.shape, device=device))  # random data around the edges
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.cast(fd.ops.div(x, y), dtype))
        fd.add_output(fd.ops.cast(fd.ops.exp(x), dtype))
        fd.add_output(fd.ops.cast(fd.ops.div(fd.ops.exp(fd.ops.mul(x, 0.25)), y), dtype))
    got = fd.execute([a, b])
    wants = [(a / b).to(tdt), torch.exp(a).to(tdt), (torch.exp(a * 0.25) / b).to(tdt)]
    for g, w in zip(got, wants):
        assert g.dtype == tdt
        ulp = torch.finfo(tdt).eps * w.float().abs() + torch.finfo(tdt).smallest_normal * torch.finfo(tdt).eps
        ok = (g.float() - w.float()).abs() <= ulp
        ok |= g.isnan() & w.isnan()
        ok |= (g == w)  # infinities
        assert ok.all(), (a[~ok], b[~ok], g[~ok], w[~ok])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(3, 64), (5, 3000), (2, 49152), (2, 131072), (4, 1000)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kind", ["softmax", "log_softmax"])
def test_shifted_exps_of_a_softmax(device, shape, kind):
    """A bf16 softmax's sum of exp(x - max) prints its exps as hir_exp_scale
    (subnormals flushed under narrow math) and its output's exps as
    hir_exp_shifted (subnormals kept; cuda_combine.shifted_exps);
    rows whose terms fall deep into float's subnormals (x - max down to -110)
    still match torch within a unit of bf16's rounding, subnormal outputs
    included (rows past what a block holds take the online pair, whose
    scales are hir_exp_scale too)."""
    x = torch.rand(shape, device=device) * -110.0
    x[:, 0] = 0.0
    x[1 % shape[0], 1] = 0.5
    x = x.to(torch.bfloat16)
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.BFloat16)
        t = fd.ops.cast(t0, DataType.Float)
        s = fd.ops.sub(t, fd.ops.max(t, [1], keepdim=True))
        if kind == "softmax":
            e = fd.ops.exp(s)
            y = fd.ops.div(e, fd.ops.sum(e, [1], keepdim=True))
        else:
            y = fd.ops.sub(s, fd.ops.log(fd.ops.sum(fd.ops.exp(s), [1], keepdim=True)))
        fd.add_output(fd.ops.cast(y, DataType.BFloat16))
    (got,) = fd.execute([x])
    want = (torch.softmax if kind == "softmax" else torch.log_softmax)(x.double(), 1).to(torch.bfloat16)
    fin = torch.finfo(torch.bfloat16)
    ulp = fin.eps * want.float().abs() + fin.smallest_normal * fin.eps
    assert ((got.float() - want.float()).abs() <= ulp).all()
    if kind == "softmax":
        assert (want.float().abs() < fin.smallest_normal).any() and (want != 0).any()
    from hostir.host.steps import KernelStep
    steps = [st.target for st in fd._cache.last_plan.program.body
             if isinstance(getattr(st, "target", None), KernelStep)]
    spec = steps[0].spec
    k = spec.kernel_for(list(shape))[0]
    vec = spec._vec[id(k)]
    src = spec.variant(k, vec, "int", *spec._row_schedule(k, shape[1] // vec)).source
    assert "hir_exp_scale(" in src or "hir_online(" in src
    assert ("hir_exp_shifted(" in src) == (kind == "softmax") and "= hir_exp(" not in src


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,vec", [(DataType.ComplexFloat, 2), (DataType.ComplexDouble, 1)],
                         ids=["cfloat", "cdouble"])
def test_complex_elements_vectorize_by_their_width(device, dtype, vec):
    """A complex64 element is 8 bytes (two to a 16-byte vector load), a
    complex128 one 16 (one); the vector loads move whole elements."""
    from hostir.codegen.cuda import vector_width
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=dtype)
        fd.add_output(fd.ops.mul(fd.ops.exp(a), fd.ops.add(a, 1j)))
    x = torch.complex(torch.randn(4, 8, device=device), torch.randn(4, 8, device=device)).to(dtype.torch)
    (out,) = fd.execute([x])
    torch.testing.assert_close(out, torch.exp(x) * (x + 1j))
    (step,) = kernel_steps(fd)
    kern = step.spec.plain
    assert vector_width(kern) == vec
    src = step.spec.variant(kern, vec, "int").source
    ctype = {DataType.ComplexFloat: "hir_cfloat", DataType.ComplexDouble: "hir_cdouble"}[dtype]
    if vec > 1:  # two elements a 16-byte vector
        assert f"alignas(16) {ctype} " in src and f"[{vec}];" in src
        assert "reinterpret_cast<const uint4*>(in0" in src
    else:  # each element one 16-byte access (hir_cdouble is aligned to 16)
        assert "reinterpret_cast" not in src and f"const {ctype} v1 = (true ? in0[" in src
