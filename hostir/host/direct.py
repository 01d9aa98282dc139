"""The direct path of a cached call: a plan whose host program is straight-line
generated-kernel launches runs, for an input signature seen before, as a list
of prepared launches, with no environment, stream pool or statement closures.

Each launch's packed arguments, grid and output shapes were fixed by the
first call of the signature (see `_Prepared`); a call allocates the outputs,
writes the new pointers and scalar values into the packed arguments and
launches. Intermediates are dropped after their last use, as the host
program's Deallocate statements would.
"""
from __future__ import annotations

import torch

from ..ir.node import Op
from ..ir.scalar import coerce
from ..runtime.launch import current_stream_handle, raw_stream_handle
from . import ir as H
from .lower import KernelLaunch


def direct_runner(program: H.HostIR, token: int, device: torch.device):
    """A function args -> outputs running `program` for the signature `token`,
    or None where the program is not straight-line prepared launches."""
    if device.type != "cuda":
        return None
    arg_of = {v: i for i, v in enumerate(program.inputs)}
    made: dict = {}        # Val -> slot of the value it names
    steps = []
    nslots = 0
    for s in program.body:
        if isinstance(s, H.Deallocate):
            continue
        if not isinstance(s, H.LaunchKernel) or s.into or not isinstance(s.target, KernelLaunch):
            return None
        prep = s.target._prepared.get(token)
        if prep is None or prep.tuning != KernelLaunch.tuning():
            return None
        ins, scalars = [], []
        if prep.compiled is not None:
            for _, v in prep.in_ptr:
                if v in made:
                    ins.append((True, made[v]))
                elif v in arg_of:
                    ins.append((False, arg_of[v]))
                else:
                    return None
            for _, v in prep.dyn:
                if v not in arg_of or v.op is not Op.SCALAR_INPUT:
                    return None
                scalars.append((arg_of[v], v.dtype))
        outs = []
        for val, _, _ in prep.outs:
            made[val] = nslots
            outs.append(nslots)
            nslots += 1
        steps.append([prep, ins, scalars, outs, []])
    results = []
    for v in program.outputs:
        if v not in made:
            return None
        results.append(made[v])
    # free each intermediate after the step that reads it last
    last: dict[int, int] = {}
    for k, (_, ins, _, _, _) in enumerate(steps):
        for from_slot, i in ins:
            if from_slot:
                last[i] = k
    keep = set(results)
    for slot, k in last.items():
        if slot not in keep:
            steps[k][4].append(slot)
    return _make_run(steps, nslots, results, device)


def _make_run(steps, nslots, results, device):
    if len(steps) == 1 and not steps[0][4]:  # the common case: one kernel
        prep, ins, scalars, outs, _ = steps[0]
        if all(not from_slot for from_slot, _ in ins) and prep.compiled is not None:
            return _one_kernel(prep, [i for _, i in ins], scalars, results, device)

    def run(args):
        stream = current_stream_handle(device)
        vals = [None] * nslots
        for prep, ins, scalars, outs, free in steps:
            res = prep.empty_outputs()
            for slot, t in zip(outs, res):
                vals[slot] = t
            if prep.compiled is not None:
                tensors = [vals[i] if from_slot else args[i] for from_slot, i in ins]
                prep.run(tensors, res, _scalars(args, scalars), stream)
            for slot in free:
                vals[slot] = None
        return [vals[s] for s in results]
    return run


def _one_kernel(prep, positions, scalars, results, device):
    """The runner of a plan that is one kernel reading only the call's arguments:
    everything it touches is bound here, so a call is a few attribute-free steps."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    alloc, lock, launcher, packed = prep.alloc, prep.lock, prep.launcher, prep.packed
    ins = list(zip(prep.in_objs, positions))
    outs, dyn = prep.out_objs, prep.dyn_objs
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
            launcher(raw_stream_handle(idx), packed)
        return res if order is None else [res[s] for s in order]
    return run_one


def _scalars(args, scalars):
    out = []
    for i, dtype in scalars:
        a = args[i]
        out.append(coerce(a.item() if isinstance(a, torch.Tensor) else a, dtype))
    return out
