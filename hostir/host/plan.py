"""Plans, and plans bound to an input signature.

A `Plan` is what the pipeline makes for one concretization key: the
segmented fusion, its host program (compiled to closures) and the run-time
shape checks. A `BoundPlan` is a plan for one input signature (shapes,
strides, dtypes, device, alignment, shape-deciding scalars): it owns the
prepared launch of each kernel step, made by the signature's first call, and
from its second call on a direct runner where the program is straight-line
kernel launches: no RunContext, stream pool or statement closures, just
allocate, write pointers and scalars into the packed arguments, launch.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..ir.dtypes import coerce
from ..ir.env import bind_inputs
from ..runtime.backend import CudaLaunch
from ..runtime.launch import current_stream_handle, raw_stream_handle
from ..segment import SegmentedFusion
from . import ir as H
from . import tracing
from .context import RunContext
from .evaluator import run_block
from .steps import KernelStep


@dataclass(frozen=True, eq=False)
class Plan:
    key: tuple
    segmented: SegmentedFusion
    specialized: bool
    program: H.HostIR
    run: object    # the program compiled to closures
    checks: tuple  # run-time extent checks of the concrete fusion


class BoundPlan:
    __slots__ = ("plan", "device", "prepared", "direct", "tried")

    def __init__(self, plan: Plan, device: torch.device):
        self.plan = plan
        self.device = device
        self.prepared: dict = {}   # KernelStep -> (Prepared, positions of its inputs)
        self.direct = None         # args -> outputs, once built
        self.tried = False         # the direct runner was attempted

    def run(self, params, args, out_buffers=None, ctx: RunContext | None = None) -> RunContext:
        """Run the plan's program on `args` (bound to the fusion's `params`, or
        already bound in `ctx`); returns the run's context, which holds every value."""
        if ctx is None:
            ctx = bind_inputs(params, args, RunContext(self.device))
        ctx.bound = self
        ctx.out_buffers = out_buffers
        run_block(self.plan.run, ctx)
        return ctx

    def build_direct(self):
        """The direct runner of this signature, or None where the program is not
        straight-line launches of prepared kernel steps."""
        self.tried = True
        if tracing.tracer() is not None:  # every launch through the evaluator, traced
            return None
        steps = _direct_steps(self.plan.program, self.prepared)
        if steps is None:
            return None
        steps, nslots, results = steps
        if len(steps) == 1 and not steps[0].free:
            self.direct = _one_kernel(steps[0], results, self.device)
        else:
            self.direct = _many_kernels(steps, nslots, results, self.device)
        return self.direct


class _Step:
    """One launch of the direct runner: where its tensor inputs and scalar
    inputs come from (call arguments or earlier outputs), which slots its
    outputs fill and which slots it frees."""

    __slots__ = ("prep", "ins", "scalars", "outs", "into", "free")

    def __init__(self, prep, ins, scalars, outs, into=False):
        self.prep, self.ins, self.scalars, self.outs, self.free = prep, ins, scalars, outs, []
        self.into = into  # its outputs are earlier steps' (a scatter's write kernel)


def _direct_steps(program: H.HostIR, prepared: dict):
    arg_of = {id(v): i for i, v in enumerate(program.inputs)}
    made: dict[int, int] = {}   # id(Val) -> slot of the value it names
    steps: list[_Step] = []
    for s in program.body:
        if isinstance(s, H.Deallocate):
            continue
        if not isinstance(s, H.LaunchKernel) or not isinstance(s.target, KernelStep):
            return None
        if s.into and any(id(o) not in made for o in s.outputs):
            return None
        got = prepared.get(s.target)
        if got is None:
            return None
        prep, positions = got
        ins = []
        for p in positions:
            v = s.inputs[p]
            if id(v) in made:
                ins.append((True, made[id(v)]))
            elif id(v) in arg_of:
                ins.append((False, arg_of[id(v)]))
            else:
                return None
        if any(id(v) not in arg_of for v in prep.dyn):
            return None
        scalars = [(arg_of[id(v)], v.dtype) for v in prep.dyn]
        outs = []
        for val in s.outputs if s.into else [val for val, _, _ in prep.outs]:
            made.setdefault(id(val), len(made))
            outs.append(made[id(val)])
        steps.append(_Step(prep, ins, scalars, outs, s.into))
    if any(id(v) not in made for v in program.outputs):
        return None
    results = [made[id(v)] for v in program.outputs]
    _free_after_last_use(steps, set(results))
    return steps, len(made), results


def _free_after_last_use(steps: list[_Step], keep: set[int]) -> None:
    last: dict[int, int] = {}
    for k, step in enumerate(steps):
        for from_slot, i in step.ins:
            if from_slot:
                last[i] = k
    for slot, k in last.items():
        if slot not in keep:
            steps[k].free.append(slot)


def _stream_getter(device: torch.device):
    if device.type != "cuda":
        return lambda: None
    return lambda: current_stream_handle(device)


def _many_kernels(steps: list[_Step], nslots: int, results: list[int], device):
    stream_of = _stream_getter(device)

    def run(args):
        stream = stream_of()
        vals = [None] * nslots
        for step in steps:
            if step.into:
                res = [vals[slot] for slot in step.outs]
            else:
                res = step.prep.empty_outputs()
                for slot, t in zip(step.outs, res):
                    vals[slot] = t
            tensors = [vals[i] if from_slot else args[i] for from_slot, i in step.ins]
            step.prep.run(tensors, res, _scalars(args, step.scalars), stream)
            for slot in step.free:
                vals[slot] = None
        return [vals[s] for s in results]
    return run


def _one_kernel(step: _Step, results: list[int], device):
    """The runner of a plan that is one kernel: everything it touches is bound
    here, so a call is a few attribute-free steps (the hottest path of execute)."""
    prep = step.prep
    if isinstance(prep, CudaLaunch) and prep.launcher is not None:
        return _one_cuda_kernel(step, results, device)
    return _many_kernels([step], len(step.outs), results, device)


def _one_cuda_kernel(step: _Step, results: list[int], device):
    prep = step.prep
    idx = device.index if device.index is not None else torch.cuda.current_device()
    alloc, lock, launcher, packed = prep.alloc, prep.lock, prep.launcher, prep.packed
    ins = list(zip(prep.in_objs, [i for _, i in step.ins]))
    outs, dyn, scalars = prep.out_objs, prep.dyn_objs, step.scalars
    scratch = prep.scratch is not None
    order = None if results == list(range(len(alloc))) else results

    def run_one(args):
        res = [t.new_empty(shape) for t, shape in alloc]
        with lock:
            for o, i in ins:
                o.value = args[i].data_ptr()
            for o, t in zip(outs, res):
                o.value = t.data_ptr()
            if scalars:
                for o, x in zip(dyn, _scalars(args, scalars)):
                    o.value = x
            stream = raw_stream_handle(idx)
            if scratch:  # the stream's own counters (a split reduction, a chained scan)
                prep.bind_scratch(stream)
            launcher(stream, packed)
        return res if order is None else [res[s] for s in order]
    return run_one


def _scalars(args, scalars) -> list:
    out = []
    for i, dtype in scalars:
        a = args[i]
        out.append(coerce(a.item() if isinstance(a, torch.Tensor) else a, dtype))
    return out
