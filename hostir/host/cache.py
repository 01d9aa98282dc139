"""Per-fusion cache: input signature -> concrete fusion -> segmented plan.

Resize bounds are specialized by default; when a fusion's specialized
bounds change between calls, it switches to symbolic bounds for good
(like automatic dynamic shapes), so a loop over many offsets makes at most
two plans.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import torch

from .. import config
from ..concretize import (concretization_key, concretize, dynamic_info, run_shape_checks,
                          shape_checks)
from ..ir.errors import ExecutionError
from ..ir.fusion import Fusion
from ..ir.fusion import toposort
from ..ir.inputs import strides_for, validate_inputs
from ..ir.node import Op
from ..ir.printer import fusion_text
from ..ir.reference import Env, bind_inputs
from ..passes.alias import analyze_aliases
from ..passes.pipeline import run_passes
from ..segment import SegmentedFusion, segment
from ..segment.printer import segmented_text
from .direct import direct_runner
from .evaluator import Compiler, run_block
from .ir import HostIR, program_text
from .lower import lower

MAX_SPECIALIZATIONS = 1
MAX_SIGNATURES = 64  # input signatures with a fast path per fusion (oldest evicted first)


@dataclass(frozen=True)
class Plan:
    key: tuple
    segmented: SegmentedFusion
    specialized: bool
    program: HostIR
    run: object  # the program compiled to closures
    checks: tuple  # run-time extent agreements of the concrete fusion


@dataclass(frozen=True)
class CacheInfo:
    hits: int
    misses: int
    plans: int
    specialize_resize: bool
    keys: tuple


class _Fast:
    """What a call with a signature seen before needs: the plan, the device,
    the token launches key their prepared state by, and the direct runner
    (None until the signature's second call builds it, or where the plan is
    not straight-line kernel launches)."""

    __slots__ = ("plan", "device", "token", "direct", "tried")

    def __init__(self, plan: Plan, device: torch.device, token: int):
        self.plan, self.device, self.token = plan, device, token
        self.direct = None
        self.tried = False


class FusionCache:
    def __init__(self, fusion: Fusion, name: str = "fusion"):
        self.fusion = fusion
        self.name = name
        self.info = dynamic_info(fusion)
        self.plans: dict[tuple, Plan] = {}
        self.hits = 0
        self.misses = 0
        self.specialize = not config.disabled("concretize_resize")
        self._resize_seen: set = set()
        self.last_plan: Plan | None = None
        self._fast: dict[tuple, _Fast] = {}   # signature -> what its calls need
        self._tokens = 0
        self._shape_scalars = _shape_scalar_positions(fusion)
        # outputs returned as they are: no in-place updates, no requested layouts
        self._plain_outputs = all(o.alias_input is None and o.stride_order is None
                                  for o in fusion.outputs)

    def cache_info(self) -> CacheInfo:
        return CacheInfo(self.hits, self.misses, len(self.plans), self.specialize,
                         tuple(self.plans))

    def _plan_for(self, env: Env, args) -> Plan:
        key = concretization_key(self.info, env, args, self.specialize)
        plan = self.plans.get(key)
        if plan is not None:
            self.hits += 1
            return plan
        if self.specialize and self.info.resize_bounds:
            self._resize_seen.add(key[0])
            if len(self._resize_seen) > MAX_SPECIALIZATIONS:
                self.specialize = False
                print(f"hostir: {self.name}: slice/pad/cat bounds changed between calls; "
                      f"switching to symbolic bounds to avoid recompiling for every value "
                      f"(HOSTIR_DISABLE=concretize_resize starts that way)", file=sys.stderr)
                key = concretization_key(self.info, env, args, False)
                plan = self.plans.get(key)
                if plan is not None:
                    self.hits += 1
                    return plan
        self.misses += 1
        plan = self._build(key, env)
        self.plans[key] = plan
        return plan

    def _build(self, key: tuple, env: Env) -> Plan:
        concrete = concretize(self.fusion, env, self.specialize)
        config.dump("concretized", fusion_text(concrete))
        simplified, notes = run_passes(concrete, check="verify" in config.get().debug)
        config.dump("preseg", fusion_text(simplified))
        aliases = analyze_aliases(simplified, env)
        sf = segment(simplified, aliases, notes)
        config.dump("segments", segmented_text(sf))
        program = lower(sf, env)
        config.dump("host_ir", program_text(program))
        return Plan(key, sf, self.specialize, program, Compiler().block(program.body),
                    shape_checks(concrete))

    def execute(self, args, device=None, out=None) -> list[torch.Tensor]:
        """Validate `args`, then run. Inputs with the signature of an earlier
        validated call (shapes, strides, dtypes, devices, alignment, scalar types
        and shape-deciding scalar values) skip validation, the key computation
        and the shape checks: those depend on nothing else."""
        sig = self._signature(args)
        if out is not None:  # results go into the caller's buffers: their layout matters too
            sig = (sig, self._signature(out))
        hit = self._fast.get(sig)
        if hit is not None:
            self.hits += 1
            plan = hit.plan
            if hit.direct is not None:
                self.last_plan = plan
                return hit.direct(args)
            env = bind_inputs(self.fusion, args, hit.device)
            env.token = hit.token
            results = self._execute_plan(plan, env, args, out)
            if not hit.tried and out is None and self._plain_outputs:
                hit.tried = True
                hit.direct = direct_runner(plan.program, hit.token, hit.device)
            return results
        run_device = validate_inputs(self.fusion, args)
        if device is not None and not any(v.op is Op.TENSOR_INPUT for v in self.fusion.inputs):
            run_device = torch.device(device)
        env = bind_inputs(self.fusion, args, run_device)
        plan = self._plan_for(env, args)
        if plan.checks:
            run_shape_checks(plan.checks, env)
        if len(self._fast) >= MAX_SIGNATURES:  # the oldest signature makes room
            del self._fast[next(iter(self._fast))]
        env.token = self._tokens = self._tokens + 1  # never reused: launches key on it
        self._fast[sig] = _Fast(plan, run_device, env.token)
        return self._execute_plan(plan, env, args, out)

    def _signature(self, args) -> tuple:
        sig = []
        shape_scalars = self._shape_scalars
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                sig.append((a.shape, a.stride(), a.dtype, a.get_device(), a.data_ptr() % 16))
            elif i in shape_scalars:
                sig.append((type(a), a))
            else:
                sig.append(type(a))
        return tuple(sig)

    def _execute_plan(self, plan: Plan, env: Env, args, out=None) -> list[torch.Tensor]:
        """Run `plan`. With `out` (one tensor per returned output), kernels write
        those results straight into them; others are copied in at the end."""
        self.last_plan = plan
        if out is not None:
            returned = [o.val for o in plan.segmented.fusion.outputs if o.alias_input is None]
            # a buffer that shares memory with an input is written after the fact instead:
            # a kernel may read other positions of its inputs than it writes
            inputs = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
            env.out_buffers = {v: b for v, b in zip(returned, out)
                               if b.untyped_storage().data_ptr() not in inputs}
        run_block(plan.run, env)
        return self._outputs(plan.segmented, env, args)

    def _outputs(self, sf: SegmentedFusion, env: Env, args) -> list[torch.Tensor]:
        if self._plain_outputs:
            return [env[o.val] for o in sf.fusion.outputs]
        results = []
        for i, out in enumerate(sf.fusion.outputs):
            chain = sf.aliases.views.get(i)
            value = env[out.val]
            if out.alias_input is not None:
                target = args[out.alias_input.arg.index]
                if list(target.shape) != list(value.shape):
                    raise ExecutionError(
                        f"output {out.val!r} updates {out.alias_input!r} in place but has shape "
                        f"{list(value.shape)}, the input {list(target.shape)}")
                target.copy_(value)
                continue
            if out.stride_order is not None and chain is None:
                want = strides_for(list(value.shape), out.stride_order)
                if list(value.stride()) != want:
                    value = torch.empty_strided(value.shape, want, dtype=value.dtype,
                                                device=value.device).copy_(value)
            results.append(value)
        return results


def _shape_scalar_positions(fusion: Fusion) -> frozenset[int]:
    """Positions of scalar inputs that shapes, slice/pad bounds or reshape
    extents depend on (their values are part of the fast-path signature)."""
    roots = []
    for v in fusion.tensor_exprs():
        roots += [a.extent for a in v.axes]
        if v.op in (Op.SLICE, Op.PAD, Op.RESHAPE, Op.EXPAND, Op.FULL, Op.IOTA):
            roots += [s for s in v.src if s.is_scalar]
    return frozenset(v.arg for v in toposort(roots) if v.op is Op.SCALAR_INPUT)
