"""Lowering: a segmented fusion becomes a host program — one launch per
segment in dependency order (alias segments make views and launch nothing),
intermediates freed after their last use."""
from __future__ import annotations

from ..ir.node import Op
from ..ir.reference import Env, eval_node
from ..passes.alias import apply_view
from ..segment import Segment, SegmentedFusion
from . import ir as H


class SegmentLaunch:
    """A segment run by the reference evaluator (the kernel backends replace it)."""

    def __init__(self, seg: Segment):
        self.seg = seg
        self.name = f"seg{seg.id}_{seg.scheduler}"

    def launch(self, env: Env, args: list) -> list:
        for v in self.seg.exprs:
            env[v] = eval_node(v, env)
        return [env[o] for o in self.seg.outputs]


class AliasViews:
    """Outputs that are views of inputs: torch views, no kernel."""

    def __init__(self, seg: Segment, views: dict):
        self.seg = seg
        self.name = f"seg{seg.id}_alias(no kernel)"
        self.chains = [views[i] for i in sorted(views)]

    def launch(self, env: Env, args: list) -> list:
        out = []
        for chain in self.chains:
            t = env[chain[0]]
            if len(chain) == 1:
                out.append(t.view_as(t))
                continue
            try:
                for v in chain[1:]:
                    t = apply_view(v, t, env)
            except RuntimeError:  # a layout the plan's key did not foresee: copy instead
                for v in chain[1:]:
                    env[v] = eval_node(v, env)
                t = env[chain[-1]]
            out.append(t)
        return out


def lower(sf: SegmentedFusion) -> H.HostIR:
    fusion = sf.fusion
    outputs = {id(o.val) for o in fusion.outputs}
    last_use: dict[int, int] = {}
    for i, seg in enumerate(sf.segments):
        for v in seg.inputs:
            last_use[id(v)] = i
    body: list = []
    for i, seg in enumerate(sf.segments):
        if seg.scheduler == "alias":
            target = AliasViews(seg, sf.aliases.views)
        else:
            target = SegmentLaunch(seg)
        body.append(H.LaunchKernel(target, seg.inputs, seg.outputs))
        for v in seg.inputs:
            if (v.is_tensor and v.op is not Op.TENSOR_INPUT and id(v) not in outputs
                    and last_use[id(v)] == i):
                body.append(H.Deallocate(v))
    return H.HostIR(fusion.inputs, tuple(body), tuple(o.val for o in fusion.outputs))
