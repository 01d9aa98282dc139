"""Lowering: a segmented fusion becomes a host program — one launch per
segment in dependency order (alias segments make views and launch nothing; a
scatter segment launches two kernels on one buffer), intermediates freed after
their last use."""
from __future__ import annotations

from .. import config
from ..codegen.scan import scan_spec
from ..codegen.scatter import row_scatter_spec, scatter_specs
from ..codegen.options import KernelOptions
from ..codegen.spec import pointwise_spec, reduction_spec
from ..ir.env import Env
from ..ir.errors import ExecutionError, UnsupportedError
from ..ir.node import Op
from ..segment import Segment, SegmentedFusion
from . import ir as H
from .steps import AliasStep, KernelStep, ScatterFillStep, ScatterWriteStep, TorchStep


def make_step(seg: Segment, sf: SegmentedFusion, env: Env | None, options: KernelOptions,
              specialized: bool = True):
    """The launch target of a segment: views for an alias segment, a generated
    kernel where the segment's kind has a code generator, torch ops otherwise.
    `env` (the inputs the plan is made for) lets the scheduler pick paired
    lanes: with its extents compiled in where the plan is `specialized`, else
    with preconditions checked at launch."""
    if seg.scheduler == "alias":
        return AliasStep(seg, sf.aliases.views)
    if seg.scheduler == "pointwise":
        extents = at = None
        if env is not None and specialized:
            try:
                extents = env.extents(seg.outputs[0].logical)
            except ExecutionError:
                pass
        elif env is not None:
            at = env.scalar
        try:
            return KernelStep(seg, pointwise_spec(seg, f"hir_seg{seg.id}_pointwise", extents, options,
                                                  at))
        except UnsupportedError:
            pass
    if seg.scheduler == "scan":
        try:
            return KernelStep(seg, scan_spec(seg, f"hir_seg{seg.id}_scan", options))
        except UnsupportedError:
            pass
    if seg.scheduler in ("reduction", "normalization") and not config.disabled("reduction_kernels"):
        try:
            return KernelStep(seg, reduction_spec(seg, f"hir_seg{seg.id}_reduction", options))
        except UnsupportedError:
            pass
    return TorchStep(seg)


def segment_launches(seg: Segment, sf: SegmentedFusion, env: Env | None,
                     options: KernelOptions, specialized: bool = True) -> list[H.LaunchKernel]:
    """The launch statements of a segment: one, or a scatter's fill kernel and
    then its write kernel into the fill's result (torch ops where a prologue
    op has no kernel rule)."""
    if seg.scheduler == "scatter":
        try:
            fill, write = scatter_specs(seg, f"hir_seg{seg.id}_scatter", options)
        except UnsupportedError:
            return [H.LaunchKernel(TorchStep(seg), seg.inputs, seg.outputs)]
        rows = row_scatter_spec(fill, write, f"hir_seg{seg.id}_scatter_rows", options)

        def used(spec):
            names = {id(t.val) for t in spec.plain.inputs} | {id(p) for p in spec.plain.params}
            return tuple(v for v in seg.inputs if id(v) in names)
        fill_in = tuple(seg.inputs) if rows is not None else used(fill)
        fill_step = ScatterFillStep(seg, fill, fill_in, rows)
        write_in = used(write)
        return [H.LaunchKernel(fill_step, fill_in, seg.outputs),
                H.LaunchKernel(ScatterWriteStep(seg, write, write_in, fill_step), write_in, seg.outputs,
                               into=True)]
    return [H.LaunchKernel(make_step(seg, sf, env, options, specialized), seg.inputs, seg.outputs)]


def lower(sf: SegmentedFusion, env: Env | None = None,
          options: KernelOptions | None = None, specialized: bool = True) -> H.HostIR:
    """The host program of `sf`; `specialized` says whether the plan compiled
    its resize bounds in (else its kernels must hold for other calls too)."""
    options = options or KernelOptions.from_config()
    fusion = sf.fusion
    outputs = {id(o.val) for o in fusion.outputs}
    last_use: dict[int, int] = {}
    for i, seg in enumerate(sf.segments):
        for v in seg.inputs:
            last_use[id(v)] = i
    body: list = []
    for i, seg in enumerate(sf.segments):
        body += segment_launches(seg, sf, env, options, specialized)
        for v in seg.inputs:
            if (v.is_tensor and v.op is not Op.TENSOR_INPUT and id(v) not in outputs
                    and last_use[id(v)] == i):
                body.append(H.Deallocate(v))
    return H.HostIR(fusion.inputs, tuple(body), tuple(o.val for o in fusion.outputs))
