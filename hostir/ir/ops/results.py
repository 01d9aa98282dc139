"""Several results of one node. An op that makes several tensors in one call
(sdpfa_fwd's output, log-sum-exp and rng state come from one ATen call) is one
node whose value is the tuple of them, typed as its first result, with an
`OpDef.results` rule giving every result's type. Each result the frontend
hands out is a RESULT node reading one entry of that tuple, so the call runs
once however many of its results are used, and every other stage sees plain
single-tensor nodes. The segmenter keeps a node and its RESULT nodes in one
segment; nothing else reads the tuple."""
from __future__ import annotations

from ..errors import DefinitionError
from ..node import OPS, Family, Op, OpDef, Val, define


def result(node: Val, i: int) -> Val:
    """Result `i` of several-result `node`."""
    rule = OPS[node.op].results
    if rule is None:
        raise DefinitionError(f"result: {node!r} ({node.op.value}) makes one tensor, not several")
    types = rule(node)
    if not 0 <= i < len(types):
        raise DefinitionError(f"result: {node.op.value} makes {len(types)} results, asked for {i}")
    return Val(Op.RESULT, types[i].dtype, (node,), arg=i, axes=types[i].axes)


def results(node: Val) -> tuple[Val, ...]:
    """Every result of several-result `node`, in order."""
    return tuple(result(node, i) for i in range(len(OPS[node.op].results(node))))


def is_several(v: Val) -> bool:
    """Is `v` a several-result node (its value a tuple)?"""
    return OPS[v.op].results is not None


def _text(v: Val, n) -> str:
    return f"{n(v.src[0])}[{v.arg}]"


define(OpDef(Op.RESULT, Family.ATEN, build=result, rebuild=lambda v, src: result(src[0], v.arg),
             reference=lambda v, args, env: args[0][v.arg], text=_text,
             dims=lambda v, k: OPS[v.src[0].op].results(v.src[0])[v.arg].dims))
