"""Rebuilding nodes on new sources (re-running each op's shape rule), and
whole-fusion substitution, the two tools every pass is written with."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from .fusion import LEAVES, Fusion, toposort
from .node import OPS, Val, refine


def rebuild(v: Val, src: tuple[Val, ...]) -> Val:
    """`v` recomputed from new sources by its op's rule: dtype and axes follow
    the rule (and `v`'s concretization refinement), the name is kept. Sources
    must have the logical shapes the op allows."""
    if not v.src:
        return v
    out = OPS[v.op].rebuild(v, src)
    if out.is_scalar or out.op is not v.op:
        return out
    if v.refined:
        out = refine(out, v.refined)
    return replace(out, name=v.name) if out.name != v.name else out


Rule = Callable[[Val, dict], "Val | None"]


def substitute(fusion: Fusion, rule: Rule, once: bool = False,
               mapping: dict | None = None) -> Fusion:
    """Rebuild the fusion bottom-up. For each node (with sources already
    substituted) `rule(node, ctx)` returns a replacement or None, applied to
    a fixpoint unless `once`; ctx holds
    `uses` (node -> consumer count in the original fusion) and `old`
    (new node -> the node it replaces). `mapping`, if given, receives
    id(original node) -> its replacement for every node."""
    uses: dict[int, int] = {}
    for v in fusion.exprs():
        for s in v.src:
            uses[id(s)] = uses.get(id(s), 0) + 1
    for o in fusion.outputs:
        uses[id(o.val)] = uses.get(id(o.val), 0) + 1
    ctx = {"uses": uses, "old": {}}
    mapping = {} if mapping is None else mapping
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
