"""Per-fusion cache: input signature -> bound plan -> plan (per concretization key).

Resize bounds are specialized by default; when a fusion's specialized
bounds change between calls, it switches to symbolic bounds for good
(like automatic dynamic shapes), so a loop over many offsets makes at most
two plans. Plans and bound plans are kept least-recently-used first out;
evicting a plan drops the bound plans that use it.
"""
from __future__ import annotations

import sys
from collections import OrderedDict
from dataclasses import dataclass

import torch

from .. import config
from ..concretize import concretization_key, dynamic_info, run_shape_checks
from ..ir.env import Env, bind_inputs
from ..ir.errors import ExecutionError
from ..ir.fusion import Fusion, toposort
from ..ir.inputs import strides_for, validate_inputs
from ..ir.node import OPS, Op
from .context import RunContext
from .pipeline import build_plan
from .plan import BoundPlan, Plan
from .why import signature_changes, why

MAX_SPECIALIZATIONS = 1
MAX_SIGNATURES = 64  # input signatures with a bound plan per fusion
MAX_PLANS = 32       # concretizations kept per fusion


@dataclass(frozen=True)
class CacheInfo:
    """`fd.cache_info()`: this fusion's plans, and this process's kernel compiles
    (NVRTC runs, disk-cache hits) and the disk cache's size. Prints itself."""

    hits: int
    misses: int
    plans: int
    specialize_resize: bool
    keys: tuple
    kernels_compiled: int = 0   # NVRTC compiles in this process (every fusion)
    disk_hits: int = 0          # cubins read from the disk cache in this process
    disk_entries: int = 0       # cubins in HOSTIR_CACHE_DIR
    disk_bytes: int = 0

    def __str__(self) -> str:
        mode = "specialized" if self.specialize_resize else "symbolic"
        return (f"plans {self.plans} (calls: {self.hits} hits, {self.misses} misses; resize bounds "
                f"{mode}); kernels compiled {self.kernels_compiled}, disk hits {self.disk_hits} "
                f"(this process); disk cache {self.disk_entries} cubins, {human_bytes(self.disk_bytes)}")


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


class FusionCache:
    def __init__(self, fusion: Fusion, name: str = "fusion"):
        self.fusion = fusion
        self.name = name
        self.info = dynamic_info(fusion)
        self.plans: OrderedDict[tuple, Plan] = OrderedDict()
        self.bound: OrderedDict[tuple, BoundPlan] = OrderedDict()  # signature -> bound plan
        self.hits = 0
        self.misses = 0
        self.specialize = not config.disabled("concretize_resize")
        self._resize_seen: set = set()
        self.last_plan: Plan | None = None
        self._last_sig = self._last_key = None  # of the last new signature (why a plan is made)
        self._shape_scalars = _shape_scalar_positions(fusion)
        # outputs returned as they are: no in-place updates, no requested layouts
        self._plain_outputs = all(o.alias_input is None and o.stride_order is None
                                  for o in fusion.outputs)

    def cache_info(self) -> CacheInfo:
        from ..runtime import nvrtc
        entries, nbytes = nvrtc.disk_usage()
        return CacheInfo(self.hits, self.misses, len(self.plans), self.specialize,
                         tuple(self.plans), nvrtc.stats.nvrtc_calls, nvrtc.stats.disk_hits,
                         entries, nbytes)

    # ------------------------------------------------------------ calls
    def execute(self, args, device=None, out=None) -> list[torch.Tensor]:
        """Validate `args`, then run. Inputs with the signature of an earlier
        validated call (shapes, strides, dtypes, devices, alignment, scalar types
        and shape-deciding scalar values) skip validation, the key computation
        and the shape checks: those depend on nothing else. With `out` (one
        tensor per returned output), results are written into those tensors."""
        sig = self._signature(args)
        if out is not None:  # results go into the caller's buffers: their layout matters too
            sig = (sig, self._signature(out))
        bound = self.bound.get(sig)
        if bound is None:
            return self._first_call(sig, args, device, out)
        self.hits += 1
        self.bound.move_to_end(sig)
        self.last_plan = bound.plan
        if bound.direct is not None:
            return bound.direct(args)
        results = self._run(bound, args, out)
        if not bound.tried and out is None and self._plain_outputs:
            bound.build_direct()
        return results

    def plan(self, args, device=None) -> Plan:
        """The plan a call with `args` runs, made (or found) without running it."""
        _, ctx = self._bind(args, device)
        plan = self.last_plan = self._plan_for(ctx, args, self._signature(args))
        return plan

    def _bind(self, args, device) -> tuple[torch.device, RunContext]:
        """Validate `args` and bind them: the device the call runs on and its context."""
        run_device = validate_inputs(self.fusion, args)
        if device is not None and not any(v.op is Op.TENSOR_INPUT for v in self.fusion.inputs):
            run_device = torch.device(device)
        return run_device, bind_inputs(self.fusion.inputs, args, RunContext(run_device))

    def _first_call(self, sig, args, device, out) -> list[torch.Tensor]:
        run_device, ctx = self._bind(args, device)
        plan = self._plan_for(ctx, args, sig if out is None else sig[0])
        run_shape_checks(plan.checks, ctx)
        bound = BoundPlan(plan, run_device)
        self.bound[sig] = bound
        if len(self.bound) > MAX_SIGNATURES:
            self.bound.popitem(last=False)
        self.last_plan = plan
        return self._run(bound, args, out, ctx)

    def _run(self, bound: BoundPlan, args, out, ctx=None) -> list[torch.Tensor]:
        """Run a bound plan. With `out`, kernels write those results straight
        into them; others are copied in at the end."""
        buffers = None
        if out is not None:
            returned = [o.val for o in bound.plan.segmented.fusion.outputs if o.alias_input is None]
            # a buffer that shares memory with an input is written after the fact instead:
            # a kernel may read other positions of its inputs than it writes
            inputs = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
            buffers = {v: b for v, b in zip(returned, out)
                       if b.untyped_storage().data_ptr() not in inputs}
        ctx = bound.run(self.fusion.inputs, args, buffers, ctx)
        return self._outputs(bound.plan, ctx, args)

    def _outputs(self, plan: Plan, ctx, args) -> list[torch.Tensor]:
        fusion = plan.segmented.fusion
        if self._plain_outputs:
            return [ctx[o.val] for o in fusion.outputs]
        results = []
        for i, out in enumerate(fusion.outputs):
            value = ctx[out.val]
            if out.alias_input is not None:
                target = args[out.alias_input.arg.index]
                if list(target.shape) != list(value.shape):
                    raise ExecutionError(
                        f"output {out.val!r} updates {out.alias_input!r} in place but has shape "
                        f"{list(value.shape)}, the input {list(target.shape)}")
                target.copy_(value)
                continue
            if out.stride_order is not None and i not in plan.segmented.aliases.views:
                want = strides_for(list(value.shape), out.stride_order)
                if list(value.stride()) != want:
                    value = torch.empty_strided(value.shape, want, dtype=value.dtype,
                                                device=value.device).copy_(value)
            results.append(value)
        return results

    # ------------------------------------------------------------ plans
    def _plan_for(self, env: Env, args, sig: tuple = None) -> Plan:
        key = concretization_key(self.info, env, args, self.specialize)
        plan = self.plans.get(key)
        changed_key = key  # what the log compares with the previous key
        if plan is None and self.specialize and self.info.resize_bounds:
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
            self.plans.move_to_end(key)
            if config.logging("cache"):
                changed = signature_changes(self.fusion, self._last_sig, sig) if self._last_sig else []
                config.log("cache", f"{self.name}: new input signature ({'; '.join(changed) or 'first'}"
                           f"), plan reused: its concretization key is unchanged")
            self._last_sig, self._last_key = sig, key
            return plan
        self.misses += 1
        config.log("cache", lambda: f"{self.name}: {'recompiling' if self.plans else 'compiling'} "
                   f"(plan {len(self.plans) + 1}): " + why(self.fusion, self.info, self._last_sig,
                                                            sig, self._last_key, changed_key)
                   + ("" if changed_key is key else "; bounds now symbolic"))
        self._last_sig, self._last_key = sig, key
        plan = self.plans[key] = build_plan(self.fusion, env, key, self.specialize)
        if len(self.plans) > MAX_PLANS:
            _, old = self.plans.popitem(last=False)
            for sig in [s for s, b in self.bound.items() if b.plan is old]:
                del self.bound[sig]
        return plan

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


def _shape_scalar_positions(fusion: Fusion) -> frozenset[int]:
    """Positions of scalar inputs that shapes or specialized bounds depend on
    (their values are part of the signature)."""
    roots = []
    for v in fusion.tensor_exprs():
        roots += [a.extent for a in v.axes]
        bounds = OPS[v.op].bounds
        if bounds is not None:
            roots += list(bounds(v))
    return frozenset(v.arg for v in toposort(roots) if v.op is Op.SCALAR_INPUT)
