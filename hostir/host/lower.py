"""Lowering: a segmented fusion becomes a host program — one launch per
segment in dependency order (alias segments make views and launch nothing),
intermediates freed after their last use."""
from __future__ import annotations

import math

import torch

from .. import config
from ..codegen.cuda import kernel_source
from ..codegen.interpret import interpret
from ..codegen.kir import Kernel
from ..codegen.lower import lower_pointwise
from ..ir.errors import UnsupportedError
from ..ir.node import Op
from ..ir.reference import Env, eval_node
from ..runtime.launch import I64, PTR, CompiledKernel, param_ctype, sm_count
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


class KernelLaunch:
    """A segment compiled to a generated kernel: NVRTC + launch on CUDA tensors,
    the kernel-IR interpreter on CPU tensors."""

    BLOCK = 256

    def __init__(self, seg: Segment, kernel: Kernel):
        self.seg = seg
        self.kernel = kernel
        self.name = f"seg{seg.id}_{seg.scheduler}"
        self._compiled: CompiledKernel | None = None

    @property
    def source(self) -> str:
        return self.compiled.source

    @property
    def compiled(self) -> CompiledKernel:
        if self._compiled is None:
            self._compiled = CompiledKernel(self.kernel.name, kernel_source(self.kernel))
        return self._compiled

    def launch(self, env: Env, args: list) -> list:
        k = self.kernel
        extents = [env.scalar(e) for e in k.extent_vals]
        params = [env.scalar(p) for p in k.params]
        ins = [env[t.val] for t in k.inputs]
        outs = [torch.empty(env.extents(t.val.logical), dtype=t.dtype.torch, device=env.device)
                for t in k.outputs]
        numel = math.prod(extents)
        if numel == 0:
            return outs
        if env.device.type == "cuda":
            self._launch_cuda(env.device, ins, outs, params, extents, numel)
        else:
            interpret(k, ins, outs, params, extents)
        return outs

    def _launch_cuda(self, device, ins, outs, params, extents, numel) -> None:
        values, types = [], []
        for t in ins + outs:
            values.append(t.data_ptr())
            types.append(PTR)
            values += list(t.stride())
            types += [I64] * t.ndim
        for v, p in zip(params, self.kernel.params):
            values.append(v)
            types.append(param_ctype(p.dtype))
        values += extents + [numel]
        types += [I64] * (len(extents) + 1)
        grid = max(1, min(-(-numel // self.BLOCK), sm_count(device) * 16))
        stream = torch.cuda.current_stream(device).cuda_stream
        self.compiled.launch(device, grid, self.BLOCK, tuple(values), tuple(types), stream)


def make_launch(seg: Segment):
    """The launch target of a compute segment: a generated kernel where the
    segment's kind has a code generator, the reference evaluator otherwise."""
    if seg.scheduler == "pointwise":
        try:
            kernel = lower_pointwise(seg, f"hir_seg{seg.id}_pointwise")
        except UnsupportedError:
            return SegmentLaunch(seg)
        launch = KernelLaunch(seg, kernel)
        config.dump("kernels", launch.source)
        return launch
    return SegmentLaunch(seg)


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
            target = make_launch(seg)
        body.append(H.LaunchKernel(target, seg.inputs, seg.outputs))
        for v in seg.inputs:
            if (v.is_tensor and v.op is not Op.TENSOR_INPUT and id(v) not in outputs
                    and last_use[id(v)] == i):
                body.append(H.Deallocate(v))
    return H.HostIR(fusion.inputs, tuple(body), tuple(o.val for o in fusion.outputs))
