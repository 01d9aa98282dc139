"""Concretization (seed 001): bind the actual inputs, decide what to specialize.

Resize ops (slice, pad, cat) get their bounds compiled in as constants by
default (`specialize=True`); otherwise they stay symbolic and only the kind
of each output axis is fixed (extent 1 at run time -> broadcast). Reshape,
expand and factory outputs get their axis kinds fixed the same way. The
cache key holds exactly what was specialized, plus the layout signature of
inputs whose outputs may be views (alias analysis depends on it).
"""
from __future__ import annotations

from dataclasses import dataclass

from .ir import ops as O
from .ir.fusion import Fusion
from .ir.node import AxisKind, Op, Val, const
from .ir.reference import Env
from .ir.rewrite import substitute, with_axis_kinds
from .passes.alias import layout_signature, view_chain

RESIZE_OPS = (Op.SLICE, Op.PAD, Op.CAT)
SHAPE_OPS = (Op.SLICE, Op.PAD, Op.CAT, Op.RESHAPE, Op.EXPAND, Op.FULL, Op.IOTA)


@dataclass(frozen=True)
class DynamicInfo:
    """What concretization looks at, found once per fusion definition."""

    shape_nodes: tuple[Val, ...]      # nodes whose axis kinds depend on values
    resize_bounds: tuple[tuple[Val, ...], ...]  # per resize node, its scalar bounds
    view_inputs: tuple[int, ...]      # input positions that start a view chain to an output


def dynamic_info(fusion: Fusion) -> DynamicInfo:
    nodes = [v for v in fusion.tensor_exprs() if v.op in SHAPE_OPS]
    bounds = tuple(_bounds(v) for v in nodes if v.op in RESIZE_OPS)
    view_inputs = set()
    for out in fusion.outputs:
        chain = view_chain(out.val)
        if chain is not None and out.alias_input is None:
            view_inputs.add(chain[0].arg.index)
    return DynamicInfo(tuple(nodes), bounds, tuple(sorted(view_inputs)))


def _bounds(v: Val) -> tuple[Val, ...]:
    if v.op is Op.SLICE:
        return tuple(v.src[1:])
    if v.op is Op.PAD:
        return tuple(v.src[2:])
    return tuple(s.logical[v.arg].extent for s in v.src)  # cat: piece extents


def _kinds(v: Val, env: Env) -> tuple[bool, ...]:
    """Per logical axis: is it size 1 at run time (a broadcast)?"""
    return tuple(a.kind is AxisKind.BCAST or env.scalar(a.extent) == 1 for a in v.logical)


def concretization_key(info: DynamicInfo, env: Env, args, specialize: bool) -> tuple:
    resize = tuple(tuple(env.scalar(b) for b in bs) for bs in info.resize_bounds) if specialize else None
    kinds = tuple(_kinds(v, env) for v in info.shape_nodes)
    layouts = tuple(layout_signature(args[i]) for i in info.view_inputs)
    return (resize, kinds, layouts)


def concretize(fusion: Fusion, env: Env, specialize: bool) -> Fusion:
    """The concrete fusion for the inputs bound in `env`."""

    def rule(v: Val, ctx) -> Val | None:
        if not v.is_tensor or v.op not in SHAPE_OPS:
            return None
        old = ctx["old"].get(id(v), v)
        if specialize and v.op is Op.SLICE:
            new = O.slice_raw(v.src[0], [const(env.scalar(b)) for b in old.src[1:]], v.arg)
        elif specialize and v.op is Op.PAD:
            new = O.pad_raw(v.src[0], v.src[1], [const(env.scalar(w)) for w in old.src[2:]])
        else:
            new = v
        kinds = [AxisKind.BCAST if one else AxisKind.ITER for one in _kinds(old, env)]
        new = with_axis_kinds(new, kinds)
        return new.renamed(v.name)

    return substitute(fusion, rule, once=True)


# ---------------------------------------------------------------- run-time shape checks

@dataclass(frozen=True)
class ShapeCheck:
    """Extents that must agree at run time (symbolic, so not checked at definition)."""

    node: Val
    dim: int
    operands: tuple  # (operand Val, extent Val) pairs; for reshape: (input, new shape)


def shape_checks(fusion: Fusion) -> tuple[ShapeCheck, ...]:
    from .ir.node import POINTWISE
    checks = []
    for v in fusion.tensor_exprs():
        if v.op in POINTWISE:
            out = v.logical
            for d in range(len(out)):
                pairs = []
                for s in v.src:
                    if not s.is_tensor:
                        continue
                    sd = d - (len(out) - s.ndim)
                    if sd >= 0 and (s.logical[sd].kind is AxisKind.ITER or s.logical[sd].is_expanded):
                        pairs.append((s, s.logical[sd].extent))
                if len({id(e) for _, e in pairs}) > 1:
                    checks.append(ShapeCheck(v, d, tuple(pairs)))
        elif v.op is Op.EXPAND:
            for d, (a, b) in enumerate(zip(v.src[0].logical, v.logical)):
                if a.kind is AxisKind.ITER and a.extent is not b.extent:
                    checks.append(ShapeCheck(v, d, ((v.src[0], a.extent), (v, b.extent))))
        elif v.op is Op.RESHAPE:
            checks.append(ShapeCheck(v, -1, ((v.src[0], None),)))
        elif v.op is Op.PAD:  # negative widths may crop an axis below zero
            for d, ax in enumerate(v.logical):
                if not (ax.extent.op is Op.CONST and ax.extent.arg >= 0):
                    checks.append(ShapeCheck(v, d, ((v.src[0], ax.extent),)))
    return tuple(checks)


def run_shape_checks(checks, env: Env) -> None:
    from .ir.errors import ExecutionError
    for c in checks:
        if c.node.op is Op.PAD:
            src, extent = c.operands[0]
            n = env.scalar(extent)
            if n < 0:
                w = [env.scalar(x) for x in c.node.src[2 + 2 * c.dim:4 + 2 * c.dim]]
                raise ExecutionError(
                    f"pad -> {c.node!r}: dim {c.dim} of {src!r} has extent "
                    f"{env.scalar(src.logical[c.dim].extent)}; widths ({w[0]}, {w[1]}) "
                    f"would give it extent {n}")
            continue
        if c.dim < 0:
            src = c.operands[0][0]
            old = env.extents(src.logical)
            new = env.extents(c.node.logical)
            if _prod(old) != _prod(new):
                raise ExecutionError(
                    f"reshape -> {c.node!r}: {src!r} of shape {old} has {_prod(old)} elements but "
                    f"the new shape {new} has {_prod(new)}")
            continue
        vals = [env.scalar(e) for _, e in c.operands]
        if len(set(vals)) > 1:
            listing = ", ".join(f"{s!r} has extent {x}" for (s, _), x in zip(c.operands, vals))
            op = "expand (from expand or broadcast_in_dim)" if c.node.op is Op.EXPAND else c.node.op.value
            raise ExecutionError(
                f"{op} -> {c.node!r}: operands disagree at dim {c.dim} of the result: "
                f"{listing} (iteration dims must match; declare a size-1 dim as 1 to broadcast it)")


def _prod(xs):
    out = 1
    for x in xs:
        out *= x
    return out
