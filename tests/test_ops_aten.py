"""Ops of fd.ops that run through ATen in segments of their own: sdpfa_fwd and
sdpfa_bwd (flash attention), topk and argsort. Against torch eager on random
data (F.scaled_dot_product_attention and autograd for attention): many shapes
(size-1 batch and heads, L != S, head dims 16..128), the dtypes the CPU flash
kernels take, causal or not, custom scales, BSHE-strided and non-contiguous
inputs, pointwise ops fused before and after (generated kernels around the
ATen segment), and bad input named in the error. On CUDA (HOSTIR_TEST_DEVICE)
attention runs in Half and BFloat16 only, as ATen's flash kernels."""
import math

import pytest
import torch
import torch.nn.functional as F

from hostir import (DataType, DefinitionError, ExecutionError, FusionDefinition, InputError,
                    UnsupportedError, VerificationError)
from hostir.ir.node import OPS, Op, Val
from ops_util import TEST_DEVICE, TORCH, check, declare, rand, relayout, run

D = DataType
ON_CPU = TEST_DEVICE == "cpu"
FLASH = [D.Float, D.BFloat16, D.Half] if ON_CPU else [D.BFloat16, D.Half]
TOL = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (1.6e-2, 1e-2), torch.float16: (2e-3, 2e-3)}

# (batch dims, H, L, S, E)
SDPA_CASES = [((2,), 3, 5, 7, 16), ((1,), 1, 8, 8, 32), ((1,), 4, 1, 9, 64), ((3,), 1, 17, 5, 128),
              ((2,), 2, 16, 16, 16), ((2, 3), 2, 6, 4, 32)]


def _qkv(batch, h, l, s, e, dtype: D, layout: str = "BHSE"):
    """query, key, value, grad_output of [*batch, H, L|S, E] (not all-zero),
    laid out BHSE (contiguous) or BSHE (sequence outside heads), as `layout` says."""
    shapes = [(*batch, h, l, e), (*batch, h, s, e), (*batch, h, s, e), (*batch, h, l, e)]
    ts = [torch.randn(sh).to(TORCH[dtype]) for sh in shapes]
    return [_bshe(t) for t in ts] if layout == "BSHE" else ts


def _bshe(t: torch.Tensor) -> torch.Tensor:
    return t.transpose(-3, -2).contiguous().transpose(-3, -2)


def _sdpa(q, k, v, is_causal=False, scale=None):
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)


def _lse(q, k, is_causal, scale):
    """log-sum-exp of each row of the scaled (and masked) scores, in float64."""
    s = q.double() @ k.double().transpose(-1, -2) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if is_causal:
        keep = torch.ones(s.shape[-2:], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, -math.inf)
    return torch.logsumexp(s, -1).float()


def _grads(q, k, v, g, is_causal=False, scale=None):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = _sdpa(q, k, v, is_causal, scale)
    out.backward(g)
    return out.detach(), q.grad, k.grad, v.grad


def _refused(case, is_causal, build, inputs) -> bool:
    """A causal call with L != S is refused, naming the op and both lengths
    (ATen aligns such a mask differently on CPU and CUDA); True when it was."""
    if not is_causal or case[2] == case[3]:
        return False
    with pytest.raises(UnsupportedError, match=f"is_causal with {case[2]} query and {case[3]} key positions"):
        run(build, inputs)
    return True


def _close(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    rtol, atol = TOL[want.dtype]
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol)


def _stride_order(t: torch.Tensor) -> list:
    return sorted(range(t.ndim), key=lambda d: (-t.stride(d), d))


# ------------------------------------------------------------------ sdpfa_fwd


@pytest.mark.parametrize("dtype", FLASH, ids=lambda d: d.short)
@pytest.mark.parametrize("case", SDPA_CASES, ids=str)
@pytest.mark.parametrize("is_causal,scale", [(False, None), (True, None), (True, 0.3), (False, 0.05)])
def test_sdpfa_fwd(case, dtype, is_causal, scale):
    q, k, v, _ = _qkv(*case, dtype)

    def build(fd):
        out, lse, seed, offset = fd.ops.sdpfa_fwd(declare(fd, q), declare(fd, k), declare(fd, v),
                                                  dropout_p=0.0, is_causal=is_causal, scale=scale)
        for t in (out, lse, seed, offset):
            fd.add_output(t)
    if _refused(case, is_causal, build, [q, k, v]):
        return
    out, lse, seed, offset = run(build, [q, k, v])
    _close(out, _sdpa(q, k, v, is_causal, scale))
    torch.testing.assert_close(lse, _lse(q, k, is_causal, scale), rtol=2e-2 if dtype is not D.Float else 1e-5,
                               atol=2e-2 if dtype is not D.Float else 1e-5)
    assert lse.dtype == torch.float32 and lse.is_contiguous()
    # nvFuser's rng state since torch 2.7: [2] and [] (uint64 in ATen, Int here)
    assert seed.shape == (2,) and offset.shape == () and seed.dtype == offset.dtype == torch.int64


def test_sdpfa_fwd_nvfuser_defaults_and_scalar_inputs():
    """nvFuser's test_sdpa_fwd form: dropout_p, is_causal and scale left None
    (0, False, 1 / sqrt(E)) or given as scalar inputs."""
    q, k, v, _ = _qkv((2,), 4, 16, 16, 8, FLASH[0])

    def build(fd):
        attn, *_ = fd.ops.sdpfa_fwd(*(declare(fd, t) for t in (q, k, v)), dropout_p=None, is_causal=None,
                                    scale=None)
        fd.add_output(attn)
    _close(run(build, [q, k, v])[0], _sdpa(q, k, v))
    with FusionDefinition() as fd:
        qt, kt, vt = (declare(fd, t) for t in (q, k, v))
        p = fd.define_scalar(None, dtype=D.Double)
        c = fd.define_scalar(None, dtype=D.Bool)
        s = fd.define_scalar(None, dtype=D.Double)
        attn, *_ = fd.ops.sdpfa_fwd(qt, kt, vt, dropout_p=p, is_causal=c, scale=s)
        fd.add_output(attn)
    for causal, scale in ((True, 1 / 8 ** 0.5), (False, 1e-3)):
        (out,) = fd.execute([*(t.to(TEST_DEVICE) for t in (q, k, v)), 0.0, causal, scale])
        _close(out.cpu(), _sdpa(q, k, v, causal, scale))


def test_sdpfa_fwd_softmax_logsumexp():
    """nvFuser's test_softmax_logsumexp: all-ones inputs give log(S) + sqrt(E)."""
    n, h, l, s, e = 1, 1, 4, 4, 8
    ones = [torch.ones(n, h, x, e, dtype=TORCH[FLASH[0]]) for x in (l, s, s)]

    def build(fd):
        _, lse, *_ = fd.ops.sdpfa_fwd(*(declare(fd, t) for t in ones), dropout_p=None, is_causal=None,
                                      scale=None)
        fd.add_output(lse)
    (lse,) = run(build, ones)
    torch.testing.assert_close(lse, torch.full((n, h, l), math.log(s) + e ** 0.5))


@pytest.mark.parametrize("layout", ["BSHE", "strided", "from_pytorch_BSHE"])
def test_sdpfa_fwd_keeps_the_query_layout(layout):
    """A BSHE-strided query gives a BSHE-strided output (nvFuser's
    verify_stride_order); a non-contiguous one, a dense output in its order."""
    q, k, v, _ = _qkv((2,), 3, 9, 9, 32, FLASH[0], "BSHE" if "BSHE" in layout else "BHSE")
    if layout == "strided":
        q, k, v = (relayout(t, "strided") for t in (q, k, v))

    def build(fd):
        if layout == "BSHE":
            ts = [fd.define_tensor(shape=[-1] * 4, contiguity=True, dtype=FLASH[0], stride_order=[3, 1, 2, 0])
                  for _ in range(3)]
        elif layout == "strided":
            ts = [declare(fd, t, "strided") for t in (q, k, v)]
        else:
            ts = [fd.from_pytorch(t) for t in (q, k, v)]
        out, *_ = fd.ops.sdpfa_fwd(*ts, is_causal=True)
        fd.add_output(out)
    (out,) = run(build, [q, k, v])
    _close(out, _sdpa(q, k, v, True))
    order = _stride_order(q)
    assert _stride_order(out) == order and out.permute(order).is_contiguous(), out.stride()


def test_sdpfa_with_extra_batch_dims():
    """nvFuser's [D, N, H, L, E] form (and any number of batch dims): ATen runs
    on the batch dims flattened."""
    q, k, v, g = _qkv((2, 3), 2, 6, 6, 16, FLASH[0])

    def build(fd):
        qt, kt, vt, gt = (declare(fd, t) for t in (q, k, v, g))
        out, lse, seed, offset = fd.ops.sdpfa_fwd(qt, kt, vt, is_causal=True)
        for t in (out, *fd.ops.sdpfa_bwd(gt, qt, kt, vt, out, lse, None, True, seed, offset, None)):
            fd.add_output(t)
    outs = run(build, [q, k, v, g])
    for got, want in zip(outs, _grads(q, k, v, g, True)):
        _close(got, want)


# ------------------------------------------------------------------ sdpfa_bwd


@pytest.mark.parametrize("dtype", FLASH, ids=lambda d: d.short)
@pytest.mark.parametrize("case", SDPA_CASES, ids=str)
@pytest.mark.parametrize("is_causal,scale", [(False, None), (True, 0.2)])
def test_sdpfa_fwd_and_bwd_thunder_style(case, dtype, is_causal, scale):
    """Forward and backward in one fusion, as Thunder's nvFuser executor emits them."""
    q, k, v, g = _qkv(*case, dtype)

    def build(fd):
        qt, kt, vt, gt = (declare(fd, t) for t in (q, k, v, g))
        p = fd.define_scalar(0.0, dtype=D.Double)
        c = fd.define_scalar(is_causal, dtype=D.Bool)
        s = fd.define_scalar(scale, dtype=D.Double) if scale is not None else None
        out, lse, seed, offset = fd.ops.sdpfa_fwd(qt, kt, vt, dropout_p=p, is_causal=c, scale=s)
        grads = fd.ops.sdpfa_bwd(gt, qt, kt, vt, out, lse, p, c, seed, offset, s)
        for t in (out, *grads):
            fd.add_output(t)
    if _refused(case, is_causal, build, [q, k, v, g]):
        return
    outs = run(build, [q, k, v, g])
    for got, want in zip(outs, _grads(q, k, v, g, is_causal, scale)):
        _close(got, want)


@pytest.mark.parametrize("layout", ["BHSE", "BSHE", "strided"])
def test_sdpfa_bwd_alone(layout):
    """nvFuser's test_sdpa_bwd form: the forward's results come in as inputs
    (the rng state as Int tensors [2] and []); the gradients keep their
    inputs' layouts (dense in their order)."""
    q, k, v, g = _qkv((2,), 4, 12, 12, 16, FLASH[0], "BSHE" if layout == "BSHE" else "BHSE")
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True)
    if layout == "strided":  # every other element of the last dim
        g, q, k, v, out = (relayout(t, "strided") for t in (g, q, k, v, out))
    seed, offset = torch.zeros(2, dtype=torch.int64), torch.zeros((), dtype=torch.int64)

    def build(fd):
        ts = [fd.from_pytorch(t) for t in (g, q, k, v, out)]
        lse_t = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=D.Float)
        seed_t = fd.define_tensor(shape=[2], dtype=D.Int)
        offset_t = fd.define_tensor(shape=[], dtype=D.Int)
        for t in fd.ops.sdpfa_bwd(*ts, lse_t, None, True, seed_t, offset_t, None):
            fd.add_output(t)
    grads = run(build, [g, q, k, v, out, lse.float().contiguous(), seed, offset])
    for got, want, inp in zip(grads, _grads(q, k, v, g, True)[1:], (q, k, v)):
        _close(got, want)
        assert _stride_order(got) == _stride_order(inp), (got.stride(), inp.stride())


# ------------------------------------------------------------------ fused neighbours


def test_sdpfa_between_generated_kernels():
    """A cast and a scaling of q before sdpfa and a cast of the output after:
    generated kernels around the ATen segment, which holds the call and its results."""
    q, k, v, _ = _qkv((2,), 2, 8, 8, 32, D.Float)
    low = D.BFloat16

    def build(fd):
        qt, kt, vt = (declare(fd, t) for t in (q, k, v))
        q2 = fd.ops.cast(fd.ops.mul(qt, 0.5), low)
        out, lse, *_ = fd.ops.sdpfa_fwd(q2, fd.ops.cast(kt, low), fd.ops.cast(vt, low), is_causal=True)
        fd.add_output(fd.ops.mul(fd.ops.cast(out, D.Float), 2.0))
        fd.add_output(fd.ops.exp(lse))
    with FusionDefinition() as fd:
        build(fd)
    args = [t.to(TEST_DEVICE) for t in (q, k, v)]
    out, lse_exp = (o.cpu() for o in fd.execute(args))
    lq, lk, lv = ((q * 0.5).to(TORCH[low]), k.to(TORCH[low]), v.to(TORCH[low]))
    want = _sdpa(lq, lk, lv, True).float() * 2
    torch.testing.assert_close(out, want, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(lse_exp, _lse(lq, lk, True, None).exp(), rtol=2e-2, atol=2e-2)
    segs = fd.last_segments()
    aten = [s for s in segs if s.scheduler == "aten"]
    assert len(aten) == 1 and aten[0].ops == ["sdpfa_fwd", "result", "result"], aten
    assert {s.scheduler for s in segs} == {"pointwise", "aten"}
    assert sum(s.scheduler == "pointwise" for s in segs) >= 2


def test_one_aten_call_makes_every_result(monkeypatch):
    """The four results of sdpfa_fwd and the three of sdpfa_bwd come from one call each."""
    if not ON_CPU:
        pytest.skip("counts the CPU kernels' calls")
    calls = []
    aten = torch.ops.aten
    for name in ("_scaled_dot_product_flash_attention_for_cpu",
                 "_scaled_dot_product_flash_attention_for_cpu_backward"):
        real = getattr(aten, name)
        monkeypatch.setattr(aten, name, lambda *a, _real=real, _n=name, **kw: calls.append(_n) or _real(*a, **kw))
    q, k, v, g = _qkv((1,), 2, 4, 4, 16, D.Float)

    def build(fd):
        qt, kt, vt, gt = (declare(fd, t) for t in (q, k, v, g))
        out, lse, seed, offset = fd.ops.sdpfa_fwd(qt, kt, vt)
        for t in (out, lse, seed, offset, *fd.ops.sdpfa_bwd(gt, qt, kt, vt, out, lse, None, None, seed,
                                                              offset, None)):
            fd.add_output(t)
    run(build, [q, k, v, g])
    assert sorted(calls) == ["_scaled_dot_product_flash_attention_for_cpu",
                             "_scaled_dot_product_flash_attention_for_cpu_backward"], calls


def test_cuda_path_signatures_on_meta_tensors():
    """The CUDA branch's ATen calls (untestable without a GPU) run on meta
    tensors: the ops exist with these arguments, the rng state round-trips as
    int64 views of ATen's uint64."""
    from hostir.ir.ops.attention import flash_bwd, flash_fwd
    meta = dict(dtype=torch.bfloat16, device="meta")
    q, k, v = torch.empty(2, 3, 5, 16, **meta), torch.empty(2, 3, 7, 16, **meta), torch.empty(2, 3, 7, 16, **meta)
    out, lse, seed, offset = flash_fwd(q, k, v, 0.1, False, None)
    assert (out.shape, lse.shape, lse.dtype) == (q.shape, (2, 3, 5), torch.float32)
    assert (seed.shape, seed.dtype, offset.shape, offset.dtype) == ((2,), torch.int64, (), torch.int64)
    grads = flash_bwd(torch.empty_like(out), q, k, v, out, lse, 0.1, False, seed, offset, 0.25)
    assert [t.shape for t in grads] == [q.shape, k.shape, v.shape]
    with pytest.raises(UnsupportedError, match="sdpfa_fwd: ATen's CUDA flash attention takes Half or BFloat16"):
        flash_fwd(q.float(), k.float(), v.float(), 0.0, False, None)


# ------------------------------------------------------------------ bad input


def _define(shapes, dtypes=None, **kw):
    dtypes = dtypes or [D.BFloat16] * len(shapes)
    with FusionDefinition() as fd:
        ts = [fd.define_tensor(shape=list(sh), contiguity=True, dtype=dt) for sh, dt in zip(shapes, dtypes)]
        out, *_ = fd.ops.sdpfa_fwd(*ts, **kw)
        fd.add_output(out)
    return fd


@pytest.mark.parametrize("shapes,dtypes,match", [
    ([(2, 3, 5, 16), (2, 3, 7), (2, 3, 7, 16)], None, r"sdpfa_fwd: query, key, value must have one rank.*key T1"),
    ([(3, 5, 16)] * 3, None, r"sdpfa_fwd: .*one rank, 4 or more"),
    ([(2, 3, 5, 16), (2, 3, 7, 32), (2, 3, 7, 16)], None, r"sdpfa_fwd: head dim E: dim 3 of key T1 .* 32 but "
                                                          r"dim 3 of query T0 .* 16"),
    ([(2, 3, 5, 16), (2, 3, 7, 16), (2, 3, 6, 16)], None, r"sequence length S: dim 2 of value T2"),
    ([(2, 3, 5, 16), (2, 4, 7, 16), (2, 3, 7, 16)], None, r"batch and head dims: dim 1 of key T1"),
    ([(2, 3, 5, 16), (2, 3, 7, 16), (2, 3, 7, 32)], None, r"value head dim .*flash attention"),
    ([(2, 3, 5, 16)] * 3, [D.BFloat16, D.Float, D.BFloat16], r"sdpfa_fwd: query, key, value must have one dtype"
                                                             r".*key T1 \(float"),
    ([(2, 3, 5, 16)] * 3, [D.Int] * 3, r"sdpfa_fwd: expected floating-point tensors"),
])
def test_sdpfa_fwd_bad_definitions(shapes, dtypes, match):
    with pytest.raises(DefinitionError, match=match):
        _define(shapes, dtypes)


def test_sdpfa_fwd_bad_arguments():
    sh = [(2, 3, 5, 16)] * 3
    with pytest.raises(UnsupportedError, match="sdpfa_fwd: flash attention takes Half, BFloat16 or Float"):
        _define(sh, [D.Double] * 3)
    with pytest.raises(DefinitionError, match="sdpfa_fwd: is_causal must be a bool"):
        _define(sh, is_causal=1.0)
    with pytest.raises(DefinitionError, match="sdpfa_fwd: dropout_p must be a real scalar"):
        _define(sh, dropout_p=True)
    fd = FusionDefinition()
    with pytest.raises(DefinitionError, match="sdpfa_fwd: query must be a tensor"):
        with fd:
            fd.ops.sdpfa_fwd(fd.define_scalar(1.0), *(fd.define_tensor([-1] * 4) for _ in range(2)))


def test_sdpfa_symbolic_extents_that_disagree_are_an_execution_error():
    fd = _define([(-1,) * 4] * 3)
    q, k, v, _ = _qkv((2,), 3, 5, 7, 16, D.BFloat16)
    with pytest.raises(ExecutionError, match=r"sdpfa_fwd: head dim E: dim 3 of key T1 .* has extent 32 but "
                                             r"dim 3 of query T0 .* has extent 16"):
        fd.execute([q, torch.randn(2, 3, 7, 32).bfloat16(), v])


def test_sdpfa_dropout_on_cpu_is_unsupported_naming_the_op():
    if not ON_CPU:
        pytest.skip("CPU kernels")
    fd = _define([(-1,) * 4] * 3, dropout_p=0.2)
    q, k, v, _ = _qkv((2,), 3, 5, 7, 16, D.BFloat16)
    with pytest.raises(UnsupportedError, match=r"sdpfa_fwd: dropout_p=0.2 on CPU tensors.*CUDA only"):
        fd.execute([q, k, v])


def test_sdpfa_bwd_bad_definitions():
    with FusionDefinition() as fd:
        g, q, k, v, o = (fd.define_tensor([-1] * 4, dtype=D.BFloat16) for _ in range(5))
        lse_bf16 = fd.define_tensor([-1] * 3, dtype=D.BFloat16)
        lse = fd.define_tensor([-1] * 3, dtype=D.Float)
        seed, offset = fd.define_tensor([2], dtype=D.Int), fd.define_tensor([], dtype=D.Int)
        fseed = fd.define_tensor([2], dtype=D.Float)
        with pytest.raises(DefinitionError, match=r"sdpfa_bwd: log_sumexp must be a Float tensor of 3 dims"):
            fd.ops.sdpfa_bwd(g, q, k, v, o, lse_bf16, None, None, seed, offset, None)
        with pytest.raises(DefinitionError, match=r"sdpfa_bwd: philox_seed must be an Int tensor"):
            fd.ops.sdpfa_bwd(g, q, k, v, o, lse, None, None, fseed, offset, None)
        with pytest.raises(DefinitionError, match=r"sdpfa_bwd: grad_output, query, key, value, output must "
                                                  r"have one dtype"):
            fd.ops.sdpfa_bwd(fd.define_tensor([-1] * 4), q, k, v, o, lse, None, None, seed, offset, None)
        fd.add_output(g)


# ------------------------------------------------------------------ several results: the IR


def test_a_tuple_of_results_prints_its_types_and_is_read_by_result_nodes_only():
    with FusionDefinition() as fd:
        ts = [fd.define_tensor([2, 3, 5, 16], dtype=D.BFloat16) for _ in range(3)]
        out, lse, *_ = fd.ops.sdpfa_fwd(*ts, is_causal=True)
        fd.add_output(out)
        fd.add_output(lse)
    text = fd.fusion_ir()
    assert "(bf16[2, 3, 5, 16], float[2, 3, 5], int64[2], int64[]) = sdpfa_fwd(T0, T1, T2, " \
           "dropout_p=0.0, is_causal=True)" in text, text
    assert f"{out.val.name} bf16[2, 3, 5, 16] = " in text and "[1]" in text
    node = out.val.src[0]
    from hostir.ir.fusion import Fusion, Output
    bad = Val(Op.NEG, D.BFloat16, (node,), axes=node.axes, name="T9")
    with pytest.raises(VerificationError, match=r"T9 \(neg\).*a tuple of results"):
        from hostir.ir.verify import verify
        verify(Fusion(fd._fusion.inputs, (Output(bad),)))


def test_attention_and_sorting_say_where_operand_dims_go():
    """OpDef.dims: batch and head dims pass through attention (sequence and
    embedding dims are whole); sorting keeps every dim but the sorted one; each
    result maps its call's dims to its own."""
    with FusionDefinition() as fd:
        q = fd.define_tensor([2, 3, 5, 16], dtype=D.BFloat16)
        k, v = (fd.define_tensor([2, 3, 7, 16], dtype=D.BFloat16) for _ in range(2))
        out, lse, seed, offset = fd.ops.sdpfa_fwd(q, k, v)
        grads = fd.ops.sdpfa_bwd(out, q, k, v, out, lse, None, None, seed, offset, None)
        x = fd.define_tensor([4, 9, 6])
        for t in (out, lse, seed, offset, *grads, *fd.ops.topk(x, 3, 1), fd.ops.argsort(x, 2)):
            fd.add_output(t)
    seen = set()
    for v_ in fd.ir().exprs():
        if v_.is_scalar:
            continue
        for i, s in enumerate(v_.src):
            if not s.is_tensor:
                continue
            for sd, od in enumerate(OPS[v_.op].dims(v_, i)):
                if od is not None:
                    assert s.logical[sd].extent.arg == v_.logical[od].extent.arg, (v_.op, i, sd, od)
        seen.add(v_.op)
    assert {Op.SDPFA_FWD, Op.SDPFA_BWD, Op.TOPK, Op.ARGSORT, Op.RESULT} <= seen
    fwd = out.val.src[0]
    assert OPS[Op.SDPFA_FWD].dims(fwd, 0) == (0, 1, None, None)
    assert OPS[Op.SDPFA_FWD].dims(fwd, 1) == (0, 1, None, None)
    assert OPS[Op.RESULT].dims(lse.val, 0) == (0, 1, 2, None)


# ------------------------------------------------------------------ topk

SORT_DTYPES = [D.Float, D.BFloat16, D.Half, D.Double, D.Int, D.Int32]
# (shape, dim, k)
TOPK_CASES = [((9,), 0, 4), ((4, 9), 1, 3), ((4, 9), 0, 4), ((4, 9), -1, 9), ((3, 1, 7), 2, 1),
              ((1, 6), 1, 0), ((5, 4, 6), 1, 2), ((2, 33), 1, 17)]


def _distinct(shape, dtype):
    """Random values without ties (a permutation of small integers, exact in
    every dtype), so the indices are determined."""
    n = math.prod(shape)
    return (torch.randperm(n).reshape(shape) - n // 2).to(TORCH[dtype])


@pytest.mark.parametrize("dtype", SORT_DTYPES, ids=lambda d: d.short)
@pytest.mark.parametrize("case", TOPK_CASES, ids=str)
@pytest.mark.parametrize("largest,sorted_", [(True, True), (False, True), (True, False)])
def test_topk(case, dtype, largest, sorted_):
    shape, dim, k = case
    x = _distinct(shape, dtype)

    def build(fd):
        values, indices = fd.ops.topk(declare(fd, x), k, dim=dim, largest=largest, sorted=sorted_)
        fd.add_output(values)
        fd.add_output(indices)
    values, indices = run(build, [x])
    want_v, want_i = torch.topk(x, k, dim, largest=largest, sorted=True)
    assert indices.dtype == torch.int64 and values.dtype == x.dtype
    if not sorted_:  # any order: compare in sorted order
        order = values.argsort(dim, descending=largest)
        values, indices = values.gather(dim, order), indices.gather(dim, order)
    check(values, want_v)
    check(indices, want_i)


def test_topk_nvfuser_defaults_and_a_scalar_k_that_changes():
    """nvFuser's defaults (dim=-1, largest=True, sorted=False), and k a scalar
    input: each call's k gives the result's extent."""
    x = rand((5, 12), D.Float)
    with FusionDefinition() as fd:
        t = declare(fd, x)
        k = fd.define_scalar(None, dtype=D.Int)
        values, indices = fd.ops.topk(t, k)
        fd.add_output(fd.ops.mul(values, 2.0))
        fd.add_output(indices)
    for kk in (3, 12, 1, 0):
        values, indices = (o.cpu() for o in fd.execute([x.to(TEST_DEVICE), kk]))
        assert values.shape == (5, kk)
        check(values.sort(1, descending=True).values, torch.topk(x, kk).values * 2)
        check(x.gather(1, indices) * 2, values)
    with pytest.raises(InputError, match=r"topk: k=13 is out of range for dim 1 of arg T0 .* extent 12"):
        fd.execute([x, 13])
    with pytest.raises(InputError, match=r"topk: k=-1 is out of range"):
        fd.execute([x, -1])


@pytest.mark.parametrize("layout", ["strided", "transposed"])
def test_topk_of_non_contiguous_input_between_generated_kernels(layout):
    x = relayout(rand((6, 10), D.Float), layout)

    def build(fd):
        values, indices = fd.ops.topk(fd.ops.neg(declare(fd, x, layout)), 4, 1, True, True)
        fd.add_output(fd.ops.add(values, 1.0))
        fd.add_output(fd.ops.mul(indices, 2))
    values, indices = run(build, [x])
    want = torch.topk(-x, 4, 1)
    check(values, want.values + 1)
    check(indices, want.indices * 2)


def test_topk_bad_input():
    with FusionDefinition() as fd:
        t = fd.define_tensor([4, 9])
        with pytest.raises(DefinitionError, match=r"topk: k=10 is out of range for dim 1 of arg T0 "
                                                  r"\(float\[4, 9\]\) with extent 9"):
            fd.ops.topk(t, 10, 1)
        with pytest.raises(DefinitionError, match=r"topk: k=-2 is out of range"):
            fd.ops.topk(t, -2)
        with pytest.raises(DefinitionError, match="topk: k must be an int or an Int scalar"):
            fd.ops.topk(t, 2.0)
        with pytest.raises(DefinitionError, match="topk: dim 2 is out of range"):
            fd.ops.topk(t, 2, 2)
        with pytest.raises(DefinitionError, match="topk: largest must be a bool"):
            fd.ops.topk(t, 2, 1, 1)
        with pytest.raises(UnsupportedError, match="topk: Bool tensors are not supported"):
            fd.ops.topk(fd.define_tensor([4], dtype=D.Bool), 2)
        with pytest.raises(DefinitionError, match="topk: arg must have at least 1 dim"):
            fd.ops.topk(fd.define_tensor([]), 1)
        fd.add_output(t)


# ------------------------------------------------------------------ argsort

ARGSORT_CASES = [((9,), 0), ((4, 9), 1), ((4, 9), 0), ((3, 1, 7), -1), ((1, 6), 0), ((5, 4, 6), 1), ((0, 3), 1)]


@pytest.mark.parametrize("dtype", SORT_DTYPES + [D.Bool], ids=lambda d: d.short)
@pytest.mark.parametrize("case", ARGSORT_CASES, ids=str)
@pytest.mark.parametrize("descending", [False, True])
def test_argsort_stable(case, dtype, descending):
    """Stable: exactly torch's order, ties (small ints, bools) included."""
    shape, dim = case
    x = rand(shape, dtype, ints=(-3, 3))

    def build(fd):
        fd.add_output(fd.ops.argsort(declare(fd, x), dim, descending=descending, stable=True))
    (out,) = run(build, [x])
    check(out, torch.argsort(x, dim=dim, descending=descending, stable=True))


@pytest.mark.parametrize("dtype", [D.Float, D.Int32], ids=lambda d: d.short)
@pytest.mark.parametrize("case", ARGSORT_CASES, ids=str)
def test_argsort_unstable_sorts(case, dtype):
    """Not stable (nvFuser's default): ties in any order, so check that the
    indices are a permutation that sorts."""
    shape, dim = case
    x = rand(shape, dtype, ints=(-3, 3))

    def build(fd):
        fd.add_output(fd.ops.argsort(fd.ops.abs(declare(fd, x)), dim))
    (out,) = run(build, [x])
    assert out.dtype == torch.int64
    dim = dim % len(shape)
    positions = torch.arange(shape[dim]).view([-1 if d == dim else 1 for d in range(len(shape))])
    check(out.sort(dim).values, positions.expand(shape))
    check(x.abs().gather(dim, out), x.abs().sort(dim).values)


def test_argsort_bad_input():
    with FusionDefinition() as fd:
        t = fd.define_tensor([4, 9])
        with pytest.raises(DefinitionError, match="argsort: dim -3 is out of range"):
            fd.ops.argsort(t, -3)
        with pytest.raises(DefinitionError, match="argsort: stable must be a bool"):
            fd.ops.argsort(t, 0, False, None)
        with pytest.raises(DefinitionError, match="argsort: arg must be a tensor"):
            fd.ops.argsort(fd.define_scalar(1.0), 0)
        fd.add_output(t)


# ------------------------------------------------------------------ grouped_mm

GMM_DTYPES = [D.BFloat16, D.Float] if ON_CPU else [D.BFloat16]
# (form, M, K, N, group sizes): the grouped extent split by offsets, an empty group included
GMM_CASES = [("2d3d", 24, 16, 8, (5, 0, 11, 8)), ("2d3d", 8, 32, 16, (8,)), ("3d2d", 8, 16, 24, (8, 16)),
             ("2d2d", 16, 48, 8, (16, 32, 0)), ("3d2d", 16, 32, 40, (8, 8, 24))]


def _grouped_operands(form, m, k, n, sizes, dtype):
    g = len(sizes)
    offs = torch.tensor(sizes, dtype=torch.int64).cumsum(0).to(torch.int32)
    if form == "2d3d":
        return rand((m, k), dtype, -1, 1), rand((g, k, n), dtype, -1, 1), offs
    if form == "3d2d":
        return rand((g, m, k), dtype, -1, 1), rand((k, n), dtype, -1, 1), offs
    return rand((m, k), dtype, -1, 1), rand((k, n), dtype, -1, 1), offs


def _grouped_expected(form, a, b, offs):
    """Each group's matmul in float64, one by one."""
    a, b, ends = a.double(), b.double(), [0] + offs.tolist()
    parts = [(ends[i], ends[i + 1]) for i in range(len(ends) - 1)]
    if form == "2d3d":
        return torch.cat([a[s:e] @ b[i] for i, (s, e) in enumerate(parts)])
    if form == "3d2d":
        return torch.cat([a[i] @ b[:, s:e] for i, (s, e) in enumerate(parts)], dim=1)
    return torch.stack([a[:, s:e] @ b[s:e] for s, e in parts])


@pytest.mark.parametrize("dtype", GMM_DTYPES, ids=lambda d: d.short)
@pytest.mark.parametrize("case", GMM_CASES, ids=str)
def test_grouped_mm(case, dtype):
    """nvFuser's grouped_mm (torch._grouped_mm) in its three offset forms, each
    group checked against its own matmul; a generated kernel before and after."""
    form, m, k, n, sizes = case
    a, b, offs = _grouped_operands(form, m, k, n, sizes, dtype)

    def build(fd):
        ta, tb, to = declare(fd, a), declare(fd, b), declare(fd, offs)
        fd.add_output(fd.ops.mul(fd.ops.grouped_mm(fd.ops.neg(ta), tb, to), 0.5))

    (out,) = run(build, [a, b, offs])
    expected = (_grouped_expected(form, -a, b, offs) * 0.5).to(TORCH[dtype])
    check(out, expected, "reduction", *((3e-2, 3e-2) if dtype is D.BFloat16 else (1e-4, 1e-4)))


def test_grouped_mm_bad_definitions_and_offsets():
    with FusionDefinition() as fd:
        a, b3 = fd.define_tensor([-1, 16], dtype=D.BFloat16), fd.define_tensor([3, 16, -1], dtype=D.BFloat16)
        b8, f = fd.define_tensor([3, 8, -1], dtype=D.BFloat16), fd.define_tensor([-1, 16], dtype=D.Float)
        offs, offs64 = fd.define_tensor([-1], dtype=D.Int32), fd.define_tensor([-1], dtype=D.Int)
        offs2 = fd.define_tensor([2], dtype=D.Int32)
        with pytest.raises(DefinitionError, match="grouped_mm: offsets T5 .* must be a 1-D Int32"):
            fd.ops.grouped_mm(a, b3, offs64)
        with pytest.raises(DefinitionError, match="grouped_mm: incompatible shapes: dim 1 of T0"):
            fd.ops.grouped_mm(a, b8, offs)
        with pytest.raises(DefinitionError, match="grouped_mm: operands must have the same dtype"):
            fd.ops.grouped_mm(f, b3, offs)
        with pytest.raises(DefinitionError, match="dim 0 of T1 .* has extent 3 but dim 0 of T6"):
            fd.ops.grouped_mm(a, b3, offs2)
        with pytest.raises(UnsupportedError, match="grouped_mm: the scaled form"):
            fd.ops.grouped_mm(a, b3, offs, offs, offs)
        fd.add_output(fd.ops.grouped_mm(a, b3, offs))
    args = [rand((10, 16), D.BFloat16), rand((3, 16, 8), D.BFloat16), None, rand((10, 16), D.Float), None,
            torch.zeros(3, dtype=torch.long), torch.zeros(2, dtype=torch.int32)]
    args[2], args[4] = rand((3, 8, 8), D.BFloat16), torch.tensor([3, 12, 10], dtype=torch.int32)
    with pytest.raises(ExecutionError, match=r"offsets T4\[1\] = 12 is out of order or past the grouped "
                                             r"extent 10"):
        fd.execute(args)
    args[4] = torch.tensor([3, 7, 10], dtype=torch.int32)
    (out,) = fd.execute(args)
    check(out, _grouped_expected("2d3d", args[0], args[1], args[4]).bfloat16(), "reduction", 3e-2, 3e-2)
