"""Helpers shared by the op definitions: argument checks that name the op and
its operands, rank broadcasting, and the generic record pieces."""
from __future__ import annotations

from .. import scalar as S
from ..errors import DefinitionError, ExecutionError
from ..node import ONE, Axis, AxisKind, Val, const
from ..printer import scalar_text, type_text

FRONTEND: dict = {}
"""fd.ops name -> constructor on Vals (the frontend wraps each one)."""


def frontend(name: str):
    """Register a constructor under `fd.ops.<name>`."""
    def register(fn):
        if name in FRONTEND:
            raise AssertionError(f"fd.ops.{name} is defined twice")
        FRONTEND[name] = fn
        return fn
    return register


def describe(v: Val) -> str:
    """`T3 (float[i0, 8])`-style text for error messages."""
    return f"{v!r} ({type_text(v)})"


def extent_text(e: Val) -> str:
    return scalar_text(e)


def iter_axis(extent: Val) -> Axis:
    extent = S.as_val(extent)
    return Axis(extent, AxisKind.BCAST if S.is_const(extent, 1) else AxisKind.ITER)


def norm_dim(opname: str, t: Val, dim: int, ndim: int | None = None) -> int:
    ndim = t.ndim if ndim is None else ndim
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise DefinitionError(f"{opname}: dim must be an int, got {dim!r}")
    if not -ndim <= dim < max(ndim, 1):
        raise DefinitionError(
            f"{opname}: dim {dim} is out of range for {describe(t)} with {ndim} dims "
            f"(expected -{ndim} <= dim < {ndim})")
    return dim % ndim if ndim else 0


def norm_dims(opname: str, t: Val, dims, ndim: int | None = None) -> tuple[int, ...]:
    if isinstance(dims, int):
        dims = [dims]
    out = tuple(norm_dim(opname, t, d, ndim) for d in dims)
    if len(set(out)) != len(out):
        raise DefinitionError(f"{opname}: repeated dims {list(dims)} for {describe(t)}")
    return out


def require_tensor(opname: str, v, what: str = "input") -> Val:
    if not isinstance(v, Val) or not v.is_tensor:
        raise DefinitionError(f"{opname}: {what} must be a tensor, got {v!r}")
    return v


def refuse_complex(opname: str, vals, why: str) -> None:
    """A DefinitionError naming the op and its first complex operand, if any."""
    for v in vals:
        if isinstance(v, Val) and v.dtype.is_complex:
            what = describe(v) if v.is_tensor else f"{v!r} ({v.dtype.short})"
            raise DefinitionError(f"{opname}: {what} is complex; {why}")


def shape_arg(opname: str, shape) -> list[Val]:
    if isinstance(shape, Val):
        raise DefinitionError(f"{opname}: shape must be a list of ints or scalars, got {shape!r}")
    out = []
    for s in shape:
        if isinstance(s, Val):
            if s.is_tensor or not s.dtype.is_int:
                raise DefinitionError(
                    f"{opname}: shape entries must be integers, got "
                    f"{describe(s) if s.is_tensor else repr(s)} of type {s.dtype.short}")
            out.append(s)
        elif isinstance(s, int) and not isinstance(s, bool):
            out.append(const(s))
        else:
            raise DefinitionError(f"{opname}: shape entries must be ints or Int scalars, got {s!r}")
    return out


def bound_arg(opname: str, v) -> Val:
    """A slice/pad/iota bound: an Int scalar or a Python int."""
    if isinstance(v, Val):
        if v.is_tensor or not v.dtype.is_int:
            raise DefinitionError(f"{opname}: bounds must be Int scalars or ints, got {v!r}")
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return const(v)
    raise DefinitionError(f"{opname}: bounds must be ints or Int scalars, got {v!r}")


def check_same_extent(opname: str, a: Val, da: int, b: Val, db: int, ea: Val, eb: Val):
    if S.is_const(ea) and S.is_const(eb) and ea.arg != eb.arg:
        raise DefinitionError(
            f"{opname}: incompatible shapes: dim {da} of {describe(a)} has extent {ea.arg} "
            f"but dim {db} of {describe(b)} has extent {eb.arg}")


def broadcast_axes(opname: str, tensors: list[Val]) -> tuple[Axis, ...]:
    """Align tensors from the right (rank broadcasting, as nvFuser's
    maybeBroadcast) and merge each dim's axes."""
    ndim = max(t.ndim for t in tensors)
    out = []
    for d in range(ndim):
        chosen: tuple[Val, int, Axis] | None = None
        expanded = None
        for t in tensors:
            td = d - (ndim - t.ndim)
            if td < 0:
                continue
            ax = t.logical[td]
            if ax.kind is AxisKind.ITER:
                if chosen is not None:
                    check_same_extent(opname, chosen[0], chosen[1], t, td, chosen[2].extent, ax.extent)
                else:
                    chosen = (t, td, ax)
            elif ax.is_expanded and expanded is None:
                expanded = (t, td, ax)
        if chosen is not None and expanded is not None:
            check_same_extent(opname, chosen[0], chosen[1], expanded[0], expanded[1],
                              chosen[2].extent, expanded[2].extent)
        if chosen is not None:
            out.append(Axis(chosen[2].extent, AxisKind.ITER))
        elif expanded is not None:
            out.append(Axis(expanded[2].extent, AxisKind.BCAST))
        else:
            out.append(Axis(ONE, AxisKind.BCAST))
    return tuple(out)


def operand_index(s: Val, out_ndim: int, ix: tuple, zero) -> tuple:
    """The index of operand `s` of a rank-broadcasting op at the op's index `ix`:
    aligned from the right, broadcast dims read index `zero`."""
    off = out_ndim - s.ndim
    return tuple(zero if ax.kind is AxisKind.BCAST else ix[off + d] for d, ax in enumerate(s.logical))


def aligned_dims(v: Val, k: int) -> tuple:
    """`OpDef.dims` of a rank-broadcasting op: operand dims align from the right."""
    s = v.src[k]
    if s.is_scalar:
        return ()
    off = v.ndim - s.ndim
    return tuple(range(off, v.ndim))


def same_dims(v: Val, k: int) -> tuple:
    """`OpDef.dims` of an op whose first operand keeps its dims (scalars have none)."""
    s = v.src[k]
    return tuple(range(s.ndim)) if s.is_tensor and k == 0 else ()


def scalars(env, vals) -> list:
    return [env.scalar(v) for v in vals]


def extent_agreement(v: Val, per_dim, opname: str):
    """A run-time check (a function of an Env) that for each `(dim, [(operand,
    extent), ...])` the extents agree; None where each dim has one extent node."""
    per_dim = [(d, pairs) for d, pairs in per_dim if len({id(e) for _, e in pairs}) > 1]
    if not per_dim:
        return None

    def check(env):
        for d, pairs in per_dim:
            vals = [env.scalar(e) for _, e in pairs]
            if len(set(vals)) > 1:
                listing = ", ".join(f"{s!r} has extent {x}" for (s, _), x in zip(pairs, vals))
                raise ExecutionError(
                    f"{opname} -> {v!r}: operands disagree at dim {d} of the result: {listing} "
                    f"(iteration dims must match; declare a size-1 dim as 1 to broadcast it)")
    return check


def same_extent(a: Val, b: Val) -> bool:
    return a is b or (S.is_const(a) and S.is_const(b) and a.arg == b.arg)
