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
from ..ir.inputs import strides_for
from ..ir.printer import fusion_text
from ..ir.reference import Env, bind_inputs
from ..passes.alias import analyze_aliases
from ..passes.pipeline import run_passes
from ..segment import SegmentedFusion, segment
from ..segment.printer import segmented_text
from .evaluator import Compiler, run_block
from .ir import HostIR, program_text
from .lower import lower

MAX_SPECIALIZATIONS = 1


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
        program = lower(sf)
        config.dump("host_ir", program_text(program))
        return Plan(key, sf, self.specialize, program, Compiler().block(program.body),
                    shape_checks(concrete))

    def run(self, args, device: torch.device) -> list[torch.Tensor]:
        env = bind_inputs(self.fusion, args, device)
        plan = self._plan_for(env, args)
        if plan.checks:
            run_shape_checks(plan.checks, env)
        self.last_plan = plan
        run_block(plan.run, env)
        return self._outputs(plan.segmented, env, args)

    def _outputs(self, sf: SegmentedFusion, env: Env, args) -> list[torch.Tensor]:
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
