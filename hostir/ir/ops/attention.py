"""Scaled dot-product flash attention: nvFuser's `fd.ops.sdpfa_fwd` and
`fd.ops.sdpfa_bwd`. They run through ATen's flash attention (torch ops, no
generated kernel), as nvFuser runs them: on CUDA
`aten._scaled_dot_product_flash_attention` and its backward, on the CPU
`aten._scaled_dot_product_flash_attention_for_cpu` and its backward. Each is
one node with several results (ir/ops/results.py), so one ATen call makes all
of them, in an ATen segment of its own.

Shapes as nvFuser's: query [*B, H, L, E], key [*B, H, S, E], value [*B, H, S,
Ev], output [*B, H, L, Ev], log_sumexp [*B, H, L] (Float), where *B is one or
more batch dims (nvFuser's sharded form [D, N, H, L, E] is one more). ATen's
flash kernels need Ev == E; hostir checks it. The output keeps the stride
order of the query it is given and each gradient its input's (a BSHE-strided
query gives a BSHE-strided output; an intermediate a generated kernel made is
contiguous), log_sumexp is contiguous, as nvFuser's.

The rng state: ATen's CUDA kernel returns it as a uint64 [2] tensor and an
empty uint64 scalar (nvFuser's philox_seed and philox_offset since torch 2.7).
hostir has no uint64, so it holds them as Int (int64) tensors of [2] and []
with the same bits, and hands them back to the backward as uint64 views:
dropout's mask round-trips between forward and backward untouched. ATen's CPU
kernels have no dropout and no rng state: on CPU tensors dropout_p must be 0
(an UnsupportedError names the op otherwise) and the rng state is zeros.

A causal call needs L == S (an UnsupportedError otherwise): ATen's flash
kernels align a causal mask with L != S at the top left on CPU and the bottom
right on CUDA, and hostir does not give one program two meanings.

Sharding (`dims`): batch and head dims pass through; the sequence and
embedding dims are taken whole (a causal mask needs whole sequences).
"""
from __future__ import annotations

import math

import torch

from .. import scalar as S
from ..dtypes import DataType
from ..errors import DefinitionError, ExecutionError, UnsupportedError
from ..node import Axis, Family, Op, OpDef, ResultType, Val, const, define
from ..printer import operand_text
from .common import describe, frontend, require_tensor
from .results import results

FLASH_DTYPES = (DataType.Half, DataType.BFloat16, DataType.Float)
FWD_ROLES = ("query", "key", "value")
BWD_ROLES = ("grad_output", "query", "key", "value", "output", "log_sumexp")


# ------------------------------------------------------------------ arguments

def _real_scalar(opname: str, what: str, x, default) -> Val | None:
    """dropout_p or scale: a Python number or a real scalar, as Double (None: `default`)."""
    if x is None:
        return None if default is None else const(default, DataType.Double)
    if isinstance(x, bool) or not isinstance(x, (int, float, Val)) or (
            isinstance(x, Val) and (x.is_tensor or x.dtype.is_bool)):
        raise DefinitionError(f"{opname}: {what} must be a real scalar or None, got {x!r}")
    return S.cast_scalar(x, DataType.Double)


def _bool_scalar(opname: str, x) -> Val:
    if x is None:
        return const(False)
    if isinstance(x, bool):
        return const(x)
    if not isinstance(x, Val) or x.is_tensor or not x.dtype.is_bool:
        raise DefinitionError(f"{opname}: is_causal must be a bool, a Bool scalar or None, got {x!r}")
    return x


def _tensors(opname: str, roles, vals) -> list[Val]:
    """The attention tensors, checked: tensors of one floating dtype that flash
    attention takes, of one rank >= 4 (log_sumexp: one less, Float)."""
    ts = [require_tensor(opname, v, role) for role, v in zip(roles, vals)]
    main = [(r, t) for r, t in zip(roles, ts) if r != "log_sumexp"]
    listing = ", ".join(f"{r} {describe(t)}" for r, t in main)
    if len({t.dtype for _, t in main}) != 1:
        raise DefinitionError(f"{opname}: {', '.join(r for r, _ in main)} must have one dtype, got {listing}")
    dtype = main[0][1].dtype
    if not dtype.is_float:
        raise DefinitionError(f"{opname}: expected floating-point tensors, got {listing}")
    if dtype not in FLASH_DTYPES:
        raise UnsupportedError(f"{opname}: flash attention takes Half, BFloat16 or Float tensors, "
                               f"got {listing}")
    n = main[0][1].ndim
    if n < 4 or any(t.ndim != n for _, t in main):
        raise DefinitionError(f"{opname}: {', '.join(r for r, _ in main)} must have one rank, 4 or "
                              f"more ([*batch, heads, sequence, embedding]), got {listing}")
    if "log_sumexp" in roles:
        lse = ts[roles.index("log_sumexp")]
        if lse.ndim != n - 1 or lse.dtype is not DataType.Float:
            raise DefinitionError(f"{opname}: log_sumexp must be a Float tensor of {n - 1} dims "
                                  f"([*batch, heads, sequence]), got {describe(lse)}")
    return ts


# ------------------------------------------------------------------ extents that must agree

def _fwd_constraints(q: Val, k: Val, v: Val) -> list:
    """((role, tensor, dim), (role, tensor, dim), what) per pair of extents that must agree."""
    n = q.ndim
    out = []
    for d in range(n - 2):
        out += [(("key", k, d), ("query", q, d), "batch and head dims"),
                (("value", v, d), ("query", q, d), "batch and head dims")]
    out += [(("key", k, n - 1), ("query", q, n - 1), "head dim E"),
            (("value", v, n - 2), ("key", k, n - 2), "key sequence length S"),
            (("value", v, n - 1), ("query", q, n - 1), "value head dim (ATen's flash attention "
                                                        "needs it equal to query's)")]
    return out


def _bwd_constraints(g: Val, q: Val, k: Val, v: Val, o: Val, lse: Val) -> list:
    n = q.ndim
    out = _fwd_constraints(q, k, v)
    out += [(("output", o, d), ("query", q, d), "output [*batch, H, L, Ev]") for d in range(n - 1)]
    out += [(("output", o, n - 1), ("value", v, n - 1), "output [*batch, H, L, Ev]")]
    out += [(("grad_output", g, d), ("output", o, d), "grad_output of output's shape") for d in range(n)]
    out += [(("log_sumexp", lse, d), ("query", q, d), "log_sumexp [*batch, H, L]") for d in range(n - 1)]
    return out


def _mismatch(opname: str, a, b, what: str, ea, eb) -> str:
    (ra, ta, da), (rb, tb, db) = a, b
    return (f"{opname}: {what}: dim {da} of {ra} {describe(ta)} has extent {ea} but dim {db} of "
            f"{rb} {describe(tb)} has extent {eb}")


def _extent(t: Val, d: int) -> Val:
    return t.logical[d].extent


def _check_static(opname: str, constraints) -> None:
    for a, b, what in constraints:
        ea, eb = _extent(a[1], a[2]), _extent(b[1], b[2])
        if S.is_const(ea) and S.is_const(eb) and ea.arg != eb.arg:
            raise DefinitionError(_mismatch(opname, a, b, what, ea.arg, eb.arg))


def _run_time_check(opname: str, constraints):
    """The OpDef.check of the constraints that symbolic extents leave open."""
    def settled(a, b) -> bool:
        ea, eb = _extent(a[1], a[2]), _extent(b[1], b[2])
        return ea is eb or (S.is_const(ea) and S.is_const(eb))
    pending = [c for c in constraints if not settled(c[0], c[1])]
    if not pending:
        return None

    def check(env):
        for a, b, what in pending:
            ea, eb = env.scalar(_extent(a[1], a[2])), env.scalar(_extent(b[1], b[2]))
            if ea != eb:
                raise ExecutionError(_mismatch(opname, a, b, what, ea, eb))
    return check


# ------------------------------------------------------------------ forward

@frontend("sdpfa_fwd")
def sdpfa_fwd(query, key, value, dropout_p=None, is_causal=None, scale=None) -> tuple[Val, ...]:
    """nvFuser's sdpfa_fwd: (output, log_sumexp, philox_seed, philox_offset).
    dropout_p defaults to 0, is_causal to False, scale to 1 / sqrt(E). Runs
    through ATen's flash attention (torch), not a generated kernel."""
    node = sdpfa_fwd_node(query, key, value, _real_scalar("sdpfa_fwd", "dropout_p", dropout_p, 0.0),
                          _bool_scalar("sdpfa_fwd", is_causal),
                          _real_scalar("sdpfa_fwd", "scale", scale, None))
    return results(node)


def sdpfa_fwd_node(query, key, value, dropout_p: Val, is_causal: Val, scale: Val | None) -> Val:
    q, k, v = _tensors("sdpfa_fwd", FWD_ROLES, (query, key, value))
    _check_static("sdpfa_fwd", _fwd_constraints(q, k, v))
    src = (q, k, v, dropout_p, is_causal) + ((scale,) if scale is not None else ())
    return Val(Op.SDPFA_FWD, q.dtype, src, axes=q.logical[:-1] + (v.logical[-1],))


def _fwd_results(node: Val) -> tuple[ResultType, ...]:
    q = node.src[0]
    n = q.ndim
    return (ResultType(node.dtype, node.axes, tuple(range(n))),
            ResultType(DataType.Float, node.axes[:-1], tuple(range(n - 1)) + (None,)),
            ResultType(DataType.Int, (Axis(const(2)),), (None,) * n),
            ResultType(DataType.Int, (), (None,) * n))


def _fwd_reference(v: Val, args, env):
    q, k, val, dropout_p, is_causal = args[:5]
    scale = args[5] if len(args) > 5 else None
    out, lse, seed, offset = flash_fwd(*(_flat(t, 3) for t in (q, k, val)), dropout_p, is_causal,
                                       scale)
    batch = q.shape[:-3]
    out = _like(out.reshape(*batch, *out.shape[1:]), q)
    return out, lse.reshape(*batch, *lse.shape[1:]).contiguous(), seed, offset


def flash_fwd(q, k, v, dropout_p: float, is_causal: bool, scale):
    """ATen's flash attention on [N, H, L, E] tensors: (output, log_sumexp as
    float, seed and offset as int64)."""
    _causal_lengths("sdpfa_fwd", q, k, is_causal)
    if q.device.type == "cpu":
        _no_dropout("sdpfa_fwd", dropout_p)
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, is_causal, scale=scale)
        state = torch.zeros(2, dtype=torch.int64, device=q.device)
        return out, lse.float(), state, torch.zeros((), dtype=torch.int64, device=q.device)
    _cuda_dtype("sdpfa_fwd", q)
    out, lse, _, _, _, _, rng, unused, _ = torch.ops.aten._scaled_dot_product_flash_attention(
        q, k, v, dropout_p, is_causal, False, scale=scale)
    return out, lse, rng.view(torch.int64), unused.view(torch.int64)


# ------------------------------------------------------------------ backward

@frontend("sdpfa_bwd")
def sdpfa_bwd(grad_output, query, key, value, output, log_sumexp, dropout_p, is_causal,
              philox_seed, philox_offset, scale) -> tuple[Val, ...]:
    """nvFuser's sdpfa_bwd: (grad_query, grad_key, grad_value). dropout_p,
    is_causal and scale may be None (0, False, 1 / sqrt(E)); philox_seed and
    philox_offset are sdpfa_fwd's (Int tensors here: see the module's note).
    Runs through ATen's flash attention backward (torch)."""
    node = sdpfa_bwd_node(grad_output, query, key, value, output, log_sumexp,
                          _real_scalar("sdpfa_bwd", "dropout_p", dropout_p, 0.0),
                          _bool_scalar("sdpfa_bwd", is_causal), philox_seed, philox_offset,
                          _real_scalar("sdpfa_bwd", "scale", scale, None))
    return results(node)


def sdpfa_bwd_node(grad_output, query, key, value, output, log_sumexp, dropout_p: Val,
                   is_causal: Val, philox_seed, philox_offset, scale: Val | None) -> Val:
    g, q, k, v, o, lse = _tensors("sdpfa_bwd", BWD_ROLES,
                                  (grad_output, query, key, value, output, log_sumexp))
    for what, t in (("philox_seed", philox_seed), ("philox_offset", philox_offset)):
        t = require_tensor("sdpfa_bwd", t, what)
        if t.dtype is not DataType.Int or t.ndim > 1:
            raise DefinitionError(f"sdpfa_bwd: {what} must be an Int tensor of 0 or 1 dims (sdpfa_fwd's; "
                                  f"hostir holds ATen's uint64 rng state as int64), got {describe(t)}")
    _check_static("sdpfa_bwd", _bwd_constraints(g, q, k, v, o, lse))
    src = (g, q, k, v, o, lse, dropout_p, is_causal, philox_seed, philox_offset)
    return Val(Op.SDPFA_BWD, q.dtype, src + ((scale,) if scale is not None else ()), axes=q.logical)


def _bwd_results(node: Val) -> tuple[ResultType, ...]:
    _, q, k, v = node.src[:4]
    n = q.ndim
    kept = tuple(range(n - 2)) + (None, None)  # batch and heads; grads of k, v have S for L
    return (ResultType(q.dtype, q.logical, tuple(range(n))), ResultType(k.dtype, k.logical, kept),
            ResultType(v.dtype, v.logical, kept))


def _bwd_reference(v: Val, args, env):
    g, q, k, val, o, lse, dropout_p, is_causal, seed, offset = args[:10]
    scale = args[10] if len(args) > 10 else None
    flat = [_flat(t, 3) for t in (g, q, k, val, o)] + [_flat(lse, 2)]
    grads = flash_bwd(*flat, dropout_p, is_causal, seed, offset, scale)
    batch = q.shape[:-3]
    return tuple(_like(d.reshape(*batch, *d.shape[1:]), t) for d, t in zip(grads, (q, k, val)))


def flash_bwd(g, q, k, v, out, lse, dropout_p: float, is_causal: bool, seed, offset, scale):
    """ATen's flash attention backward on [N, H, L, E] tensors: (grad_q, grad_k, grad_v)."""
    _causal_lengths("sdpfa_bwd", q, k, is_causal)
    if q.device.type == "cpu":
        _no_dropout("sdpfa_bwd", dropout_p)
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            g, q, k, v, out, lse, 0.0, is_causal, scale=scale)
    _cuda_dtype("sdpfa_bwd", q)
    # cum_seq_q / cum_seq_k are for nested tensors only (None); max_q, max_k the lengths
    return torch.ops.aten._scaled_dot_product_flash_attention_backward(
        g, q, k, v, out, lse, None, None, q.shape[2], k.shape[2], dropout_p, is_causal,
        seed.view(torch.uint64), offset.view(torch.uint64), scale=scale)


# ------------------------------------------------------------------ layouts and devices

def _flat(t: torch.Tensor, inner: int) -> torch.Tensor:
    """[*B, ...inner dims] as [prod(B), ...] with a unit stride in the last dim:
    ATen's flash ops take one batch dim, and read the last dim as dense (the
    CPU kernels misread another stride silently, the CUDA ones refuse it)."""
    t = t.reshape(math.prod(t.shape[:-inner]), *t.shape[-inner:])
    return t if t.stride(-1) == 1 else t.contiguous()


def _like(t: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """`t` in `ref`'s stride order (nvFuser's sdpa results keep their inputs'
    layouts; ATen's CPU backward, for one, returns BSHE-strided gradients)."""
    order = sorted(range(ref.ndim), key=lambda d: (-(ref.stride(d) or math.inf), d))
    if t.permute(order).is_contiguous():
        return t
    inverse = sorted(range(ref.ndim), key=order.__getitem__)
    return t.permute(order).contiguous().permute(inverse)


def _causal_lengths(opname: str, q: torch.Tensor, k: torch.Tensor, is_causal: bool) -> None:
    """A causal mask needs as many query as key positions: ATen's flash
    kernels align it at the top left on CPU and at the bottom right on CUDA
    where L != S, so such a call would mean one thing on each device."""
    if is_causal and q.shape[-2] != k.shape[-2]:
        raise UnsupportedError(
            f"{opname}: is_causal with {q.shape[-2]} query and {k.shape[-2]} key positions: ATen's "
            f"flash attention aligns the causal mask at the top left on CPU and at the bottom right "
            f"on CUDA when they differ; hostir takes causal attention with L == S only")


def _no_dropout(opname: str, dropout_p: float) -> None:
    if dropout_p:
        raise UnsupportedError(
            f"{opname}: dropout_p={dropout_p} on CPU tensors: ATen's CPU flash attention has no "
            f"dropout (nor an rng state for the backward); dropout runs on CUDA only")


def _cuda_dtype(opname: str, q: torch.Tensor) -> None:
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise UnsupportedError(f"{opname}: ATen's CUDA flash attention takes Half or BFloat16 "
                               f"tensors, got {q.dtype}")


# ------------------------------------------------------------------ records

def _text(positional: int, keywords: tuple):
    """`op(T0, T1, T2, dropout_p=0.0, ...)`: tensors first, the rest by keyword."""
    def text(v: Val, n) -> str:
        args = [operand_text(s, n) for s in v.src]
        kw = [f"{k}={a}" for k, a in zip(keywords, args[positional:])]
        return f"{v.op.value}({', '.join(args[:positional] + kw)})"
    return text


def _lead_dims(t: Val, kept: int) -> tuple:
    """Batch and head dims pass through (the first `kept` dims); others are whole."""
    return tuple(d if d < kept else None for d in range(t.ndim))


def _fwd_dims(v: Val, k: int) -> tuple:
    s = v.src[k]
    return _lead_dims(s, v.ndim - 2) if s.is_tensor else ()


def _bwd_dims(v: Val, k: int) -> tuple:
    s = v.src[k]
    if not s.is_tensor:
        return ()
    return (None,) * s.ndim if k in (8, 9) else _lead_dims(s, v.ndim - 2)


def _fwd_check(v: Val):
    return _run_time_check("sdpfa_fwd", _fwd_constraints(*v.src[:3]))


def _bwd_check(v: Val):
    return _run_time_check("sdpfa_bwd", _bwd_constraints(*v.src[:6]))


define(OpDef(Op.SDPFA_FWD, Family.ATEN, (5, 6),
             rebuild=lambda v, src: sdpfa_fwd_node(*src[:5], src[5] if len(src) > 5 else None),
             reference=_fwd_reference, text=_text(3, ("dropout_p", "is_causal", "scale")),
             dims=_fwd_dims, check=_fwd_check, results=_fwd_results))
define(OpDef(Op.SDPFA_BWD, Family.ATEN, (10, 11),
             rebuild=lambda v, src: sdpfa_bwd_node(*src[:10], src[10] if len(src) > 10 else None),
             reference=_bwd_reference,
             text=_text(6, ("dropout_p", "is_causal", "philox_seed", "philox_offset", "scale")),
             dims=_bwd_dims, check=_bwd_check, results=_bwd_results))
