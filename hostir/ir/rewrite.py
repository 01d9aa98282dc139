"""Rebuilding nodes on new sources (re-running each op's shape rule), and
whole-fusion substitution, the two tools every pass is written with."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from . import ops as O
from .fusion import LEAVES, Fusion, toposort
from .node import BINARY, UNARY, Axis, AxisKind, Op, Val


def rebuild(v: Val, src: tuple[Val, ...]) -> Val:
    """`v` recomputed from new sources: dtype and axes follow the op's rules,
    the name is kept. Sources must have the logical shapes the op allows."""
    op = v.op
    if op in UNARY or op in BINARY:
        out = O.pointwise(op, *src)
    elif op is Op.WHERE:
        out = O.where(*src)
    elif op is Op.CAST:
        out = O.cast(src[0], v.arg)
    elif op is Op.SET:
        out = O.set_(src[0])
    elif op is Op.BROADCAST:
        out = O.broadcast(src[0], v.arg)
    elif op is Op.SQUEEZE:
        out = O.squeeze(src[0], v.arg, squeeze_expanded=True)
    elif op is Op.EXPAND:
        out = O.expand(src[0], list(src[1:]))
    elif op is Op.RESHAPE:
        out = O.reshape(src[0], list(src[1:]))
    elif op is Op.PERMUTE:
        out = O.permute(src[0], v.arg)
    elif op is Op.SLICE:
        out = O.slice_raw(src[0], src[1:], v.arg)
    elif op is Op.PAD:
        out = O.pad_raw(src[0], src[1], src[2:])
    elif op is Op.CAT:
        out = O.cat(list(src), v.arg)
    elif op in (Op.SUM, Op.MAX, Op.MIN, Op.MEAN, Op.VAR):
        out = O.reduction_raw(op, src[0], v.arg)
    elif op is Op.MATMUL:
        out = O.matmul(*src)
    elif op is Op.LINEAR:
        out = O.linear(*src)
    elif op is Op.FULL:
        out = O.full(list(src[1:]), src[0], v.dtype)
    elif op is Op.IOTA:
        out = O.iota(src[0], src[1], src[2], v.dtype)
    elif op in LEAVES:
        return v
    else:
        raise AssertionError(f"rebuild: no rule for {op}")
    if out.is_scalar or out.op is not op:
        return out
    return replace(out, name=v.name)


def with_axis_kinds(v: Val, kinds: list[AxisKind]) -> Val:
    """`v` with its logical axes given new kinds (a BCAST axis gets extent 1)."""
    logical = iter(kinds)
    axes = []
    for ax in v.axes:
        if ax.kind is AxisKind.REDUCE:
            axes.append(ax)
            continue
        kind = next(logical)
        axes.append(Axis(O.ONE, kind) if kind is AxisKind.BCAST and not ax.is_broadcast
                     else Axis(ax.extent, kind))
    return replace(v, axes=tuple(axes))


Rule = Callable[[Val, dict], "Val | None"]


def substitute(fusion: Fusion, rule: Rule, once: bool = False) -> Fusion:
    """Rebuild the fusion bottom-up. For each node (with sources already
    substituted) `rule(node, ctx)` returns a replacement or None, applied to
    a fixpoint unless `once`; ctx holds
    `uses` (node -> consumer count in the original fusion) and `old`
    (new node -> the node it replaces)."""
    uses: dict[int, int] = {}
    for v in fusion.exprs():
        for s in v.src:
            uses[id(s)] = uses.get(id(s), 0) + 1
    for o in fusion.outputs:
        uses[id(o.val)] = uses.get(id(o.val), 0) + 1
    ctx = {"uses": uses, "old": {}}
    mapping: dict[int, Val] = {}
    for v in toposort([o.val for o in fusion.outputs]):
        if v.op in LEAVES:
            mapping[id(v)] = v
            continue
        src = tuple(mapping.get(id(s), s) for s in v.src)
        new = v if all(a is b for a, b in zip(src, v.src)) else rebuild(v, src)
        if new is not v:
            ctx["old"][id(new)] = v
        ctx["old"].setdefault(id(new), v)
        repl = rule(new, ctx)
        while repl is not None and repl is not new:
            ctx["old"][id(repl)] = v
            new = repl
            repl = None if once or new.op in LEAVES else rule(new, ctx)
        mapping[id(v)] = new
    outputs = tuple(replace(o, val=mapping.get(id(o.val), o.val)) for o in fusion.outputs)
    if all(a.val is b.val for a, b in zip(outputs, fusion.outputs)):
        return fusion
    return Fusion(fusion.inputs, outputs)


def uses_of(v: Val, ctx: dict) -> int:
    """Consumers of the original node that `v` stands for."""
    old = ctx["old"].get(id(v), v)
    return ctx["uses"].get(id(old), 0)


def op_counts(fusion: Fusion) -> dict[str, int]:
    counts: dict[str, int] = {}
    for v in fusion.tensor_exprs():
        counts[v.op.value] = counts.get(v.op.value, 0) + 1
    return counts
