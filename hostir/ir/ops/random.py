"""Random numbers: nvFuser's `fd.ops.uniform(minval, maxval, shape, dtype=,
rng_seed=, rng_offset=)`, `normal(mean, std, shape, ...)` and the `rand_like` /
`randn_like` forms. Values come from Philox-4x32-10 computed in the kernel
(hostir/ir/philox.py on CPU, the same bits in kernels/hostir.cuh): a value
depends on the seed, the offset, the op's stream number and the element's
row-major index only, so results are the same on CPU and GPU (uniform ones bit
for bit; normal ones within an ulp or two of the log and cos) and independent
of how a launch is laid out. Without rng_seed and rng_offset the fusion supplies
them itself (FusionDefinition draws a seed from torch's generator on its first
call, so torch.manual_seed makes runs repeatable, and advances the offset every
call); each such op has its own stream, so two of them differ. Float, Double,
Half and BFloat16 (drawn in Float, rounded)."""
from __future__ import annotations

import torch

from .. import philox
from .. import scalar as S
from ..dtypes import DataType, compute_dtype
from ..errors import DefinitionError
from ..node import Family, Op, OpDef, Val, define
from ..printer import scalar_text
from .common import iter_axis, shape_arg

FLOATS = (DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16)


def random(op: Op, a, b, shape, dtype: DataType, seed, offset, stream: int = 0) -> Val:
    name = op.value
    if dtype in (None, DataType.Null):
        dtype = DataType.Float
    if dtype not in FLOATS:
        raise DefinitionError(f"{name}: dtype must be a floating type (Float, Double, Half, "
                              f"BFloat16), got {dtype!r}")
    shape = shape_arg(name, shape)
    for e in shape:
        if S.is_const(e) and e.arg < 0:
            raise DefinitionError(f"{name}: negative extent {e.arg} in shape")
    if (seed is None) != (offset is None):
        raise DefinitionError(f"{name}: give both rng_seed and rng_offset, or neither")
    c = compute_dtype(dtype)
    vals = []
    for what, x in (("first", a), ("second", b)):
        x = S.as_val(x)
        if x.is_tensor:
            raise DefinitionError(f"{name}: the {what} parameter must be a scalar, got a tensor")
        vals.append(S.cast_scalar(x, c))
    state = []
    for what, x in (("rng_seed", seed), ("rng_offset", offset)):
        x = S.as_val(x)
        if x.is_tensor or not x.dtype.is_int:
            raise DefinitionError(f"{name}: {what} must be an Int scalar, got {x!r}")
        state.append(x)
    return Val(op, dtype, (*vals, *state, *shape), arg=stream, axes=tuple(iter_axis(e) for e in shape))


def _reference(v: Val, args, env):
    a, b, seed, offset = args[:4]
    shape = env.extents(v.logical)
    n = 1
    for e in shape:
        n *= e
    index = torch.arange(n, dtype=torch.int64)
    double = compute_dtype(v.dtype) is DataType.Double
    draw = philox.uniform if v.op is Op.UNIFORM else philox.normal
    x = draw(int(seed), int(offset), v.arg, index, double)
    x = a + (b - a) * x if v.op is Op.UNIFORM else a + b * x
    return x.reshape(shape).to(v.dtype.torch).to(env.device)


def _kernel(v: Val, ix, pred, L):
    """The element's row-major index, its Philox draw (a K.RNG node) and the
    affine map to [low, high) or to mean + std * z."""
    from ...codegen.kir import K  # (the kernel IR's op for a draw)
    b = L.b
    c = compute_dtype(v.dtype)
    lin = b.i(0)
    for d, ax in enumerate(v.logical):
        lin = b.add(b.mul(lin, L.scalar(ax.extent)), ix[d])
    seed, offset = (L.cast(L.scalar(x), DataType.Int) for x in v.src[2:4])
    kind = "uniform" if v.op is Op.UNIFORM else "normal"
    x = b.mk(K.RNG, c, (seed, offset, lin), arg=(kind, v.arg))
    lo, hi = (L.cast(L.scalar(s), c) for s in v.src[:2])
    if v.op is Op.UNIFORM:
        out = b.mk(Op.ADD, c, (lo, b.mk(Op.MUL, c, (b.mk(Op.SUB, c, (hi, lo)), x))))
    else:
        out = b.mk(Op.ADD, c, (lo, b.mk(Op.MUL, c, (hi, x))))
    return L.rounded(out, v.dtype)


def _text(v: Val, n) -> str:
    a, b, seed, offset, *shape = (scalar_text(s, n) for s in v.src)
    return (f"{v.op.value}({a}, {b}, shape=[{', '.join(shape)}], rng_seed={seed}, rng_offset={offset}"
            f"{f', stream={v.arg}' if v.arg else ''})")


for _op in (Op.UNIFORM, Op.NORMAL):
    define(OpDef(_op, Family.FACTORY, (4, None),
                 rebuild=lambda v, src: random(v.op, src[0], src[1], list(src[4:]), v.dtype, src[2],
                                               src[3], v.arg),
                 reference=_reference, text=_text, kernel=_kernel, dims=lambda v, k: ()))

__all__ = ["FLOATS", "random"]
