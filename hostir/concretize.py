"""Concretization (seed 001): bind the actual inputs, decide what to specialize.

Resize ops (slice, pad, cat) get their bounds compiled in as constants by
default (`specialize=True`); otherwise they stay symbolic and only the kind
of each output axis is fixed: an axis whose extent is 1 at run time becomes a
broadcast (`node.refine`, the one change of a node's type concretization
makes). The cache key holds exactly what was specialized, plus the layout
signature of inputs whose outputs may be views (alias analysis depends on it).
"""
from __future__ import annotations

from dataclasses import dataclass

from .ir.env import Env
from .ir.fusion import Fusion
from .ir.node import OPS, AxisKind, Family, Val, const, refine
from .ir.rewrite import rebuild, substitute
from .passes.alias import layout_signature, view_chain


def makes_extents(v: Val) -> bool:
    """Ops whose output extents are scalar expressions of their own (resizes,
    factories, views given a shape), not copies of their sources' axes: where
    such an extent is 1 at run time, concretization makes the axis a broadcast."""
    family = OPS[v.op].family
    return v.is_tensor and (family in (Family.RESIZE, Family.FACTORY) or (
        family is Family.VIEW and any(s.is_scalar for s in v.src)))


@dataclass(frozen=True)
class DynamicInfo:
    """What concretization looks at, found once per fusion definition."""

    shape_nodes: tuple[Val, ...]      # nodes whose axis kinds depend on values
    resize_bounds: tuple[tuple[Val, ...], ...]  # per resize node, its scalar bounds
    view_inputs: tuple[int, ...]      # input positions that start a view chain to an output


def dynamic_info(fusion: Fusion) -> DynamicInfo:
    nodes = [v for v in fusion.tensor_exprs() if makes_extents(v)]
    bounds = tuple(tuple(OPS[v.op].bounds(v)) for v in nodes if OPS[v.op].bounds is not None)
    view_inputs = set()
    for out in fusion.outputs:
        chain = view_chain(out.val)
        if chain is not None and out.alias_input is None:
            view_inputs.add(chain[0].arg.index)
    return DynamicInfo(tuple(nodes), bounds, tuple(sorted(view_inputs)))


def _size_one_axes(v: Val, env: Env) -> tuple[bool, ...]:
    """Per logical axis: is it size 1 at run time (a broadcast)?"""
    return tuple(a.kind is AxisKind.BCAST or env.scalar(a.extent) == 1 for a in v.logical)


def concretization_key(info: DynamicInfo, env: Env, args, specialize: bool) -> tuple:
    resize = tuple(tuple(env.scalar(b) for b in bs) for bs in info.resize_bounds) if specialize else None
    kinds = tuple(_size_one_axes(v, env) for v in info.shape_nodes)
    layouts = tuple(layout_signature(args[i]) for i in info.view_inputs)
    return (resize, kinds, layouts)


def concretize(fusion: Fusion, env: Env, specialize: bool) -> Fusion:
    """The concrete fusion for the inputs bound in `env`."""

    def rule(v: Val, ctx) -> Val | None:
        if not makes_extents(v):
            return None
        bounds = OPS[v.op].bounds
        if specialize and bounds is not None:
            fixed = {id(b) for b in bounds(v)}
            v = rebuild(v, tuple(const(env.scalar(s)) if id(s) in fixed else s for s in v.src))
        ones = [d for d, (a, one) in enumerate(zip(v.logical, _size_one_axes(v, env)))
                if one and a.kind is AxisKind.ITER]
        return refine(v, ones)

    return substitute(fusion, rule, once=True)


def shape_checks(fusion: Fusion) -> tuple:
    """The run-time extent checks of the fusion's symbolic shapes (each op's
    `check` rule), as functions of an Env."""
    checks = []
    for v in fusion.tensor_exprs():
        rule = OPS[v.op].check
        check = rule(v) if rule is not None else None
        if check is not None:
            checks.append(check)
    return tuple(checks)


def run_shape_checks(checks, env: Env) -> None:
    for check in checks:
        check(env)
