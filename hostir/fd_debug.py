"""What a FusionDefinition shows of itself and how it checks itself, as
nvFuser's: the stages as text (fusion_ir, the last run's or a call's plan:
segments, CUDA code, host IR), validate against reference outputs or the
fusion's own reference evaluation, and runnable repro scripts. A mixin of
frontend.FusionDefinition."""
from __future__ import annotations

import torch

from . import repro
from .host.ir import program_text
from .host.steps import KernelStep
from .ir.errors import DefinitionError, InputError, UnsupportedAttribute, UnsupportedError
from .ir.printer import fusion_text
from .ir.reference import evaluate
from .runtime.nvrtc import HEADER_DIR
from .segment import Segment, segmented_text


# nvFuser FusionDefinition members hostir does not have, and why (docs/ops_parity.md)
NOT_PROVIDED = {
    "inputs": "the fusion's input handles: hostir's are the define_tensor/define_scalar results, "
              "in definition order",
    "outputs": "the fusion's output handles: hostir's are the add_output arguments, in order",
    "extents": "the symbolic extents: fd.fusion_ir() prints them",
    "id": "nvFuser's fusion-cache id: hostir keeps a plan cache per FusionDefinition (fd.cache_info())",
    "getValTolerances": "nvFuser's tolerance table: fd.validate uses per-dtype tolerances",
    "segment": "segmenting by hand: hostir segments every fusion (fd.last_segmented_fusion_ir())",
    "debug_output": "captured debug output: HOSTIR_DUMP and fd.last_cuda_code() give it",
    "profile": "nvFuser's profiler: hostir traces with HOSTIR_TRACE (hostir trace)",
    "schedule": "user schedules of a single-GPU fusion: hostir schedules its kernels itself "
                "(multidevice_schedule and fd.sched serve sharding)",
    "manual_execute": "nvFuser's direct frontend: use fd.execute",
    "manual_validate": "nvFuser's direct frontend: use fd.validate",
    "validate_definition": "nvFuser's direct frontend: hostir verifies every definition as it is made",
}


class Inspection:
    """The debugging and validation forms of a FusionDefinition."""

    def __getattr__(self, name: str):
        """A member of nvFuser's FusionDefinition that hostir does not have: an
        UnsupportedError (also an AttributeError) that says so and what to use."""
        why = NOT_PROVIDED.get(name)
        if why is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        raise UnsupportedAttribute(f"FusionDefinition.{name} (nvFuser's) is not provided by hostir: {why}")

    # tolerances of validate, by output dtype (torch.testing's defaults, loosened for
    # the low-precision types whose rounding order may differ from the reference's)
    _VALIDATE_TOL = {torch.float16: (1e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2),
                     torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7)}

    def validate(self, inputs, reference_outputs=None, **kwargs) -> None:
        """Run the fusion on `inputs` and compare each output with
        `reference_outputs` (nvFuser's fd.validate): same shapes and dtypes,
        values within a tolerance of the dtype (exact for integers and bools);
        an AssertionError names the first output that differs. Without
        reference outputs, the fusion's own reference evaluation gives them (op
        by op with torch, as nvFuser's validate evaluates it with ATen; random
        ops draw the same numbers for the same seed and offset)."""
        if reference_outputs is None:
            reference_outputs = self._reference_outputs(inputs)
        outs = self.execute(inputs, **kwargs)
        refs = list(reference_outputs)
        if len(refs) != len(outs):
            raise AssertionError(f"validate: the fusion has {len(outs)} outputs, "
                                 f"{len(refs)} reference outputs were given")
        for i, (got, want) in enumerate(zip(outs, refs)):
            want = torch.as_tensor(want)
            rtol, atol = self._VALIDATE_TOL.get(got.dtype, (0.0, 0.0))
            try:
                torch.testing.assert_close(got, want.to(got.device), rtol=rtol, atol=atol,
                                           equal_nan=True)
            except AssertionError as e:
                raise AssertionError(f"validate: output {i} ({got.dtype}, shape "
                                     f"{list(got.shape)}) differs from its reference: {e}") from None

    def _reference_outputs(self, inputs) -> list[torch.Tensor]:
        """The returned outputs on `inputs` by the reference evaluator (the next
        call's rng offset)."""
        if self._annotations():
            raise UnsupportedError("validate without reference_outputs: a sharded fusion's reference "
                                   "needs the whole tensors; pass reference_outputs")
        if not isinstance(inputs, (list, tuple)):
            raise InputError(f"validate expects a list of inputs, got {type(inputs).__name__}")
        args = list(self._prepared(inputs, advance=False))
        fusion = self.ir()
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        values = evaluate(fusion, args, device)
        return [v for v, o in zip(values, fusion.outputs) if o.alias_input is None]

    def _last_plan(self, what: str):
        plan = self._cache.last_plan if self._fusion_cache is not None else None
        if plan is None:
            raise DefinitionError(f"{what}: nothing has run yet; call execute() first")
        return plan

    def last_segments(self) -> list[Segment]:
        """The segments of the last run, as data (`.scheduler`, `.ops`, ...)."""
        return list(self._last_plan("last_segments").segmented.segments)

    def last_segmented_fusion_ir(self) -> str:
        return segmented_text(self._last_plan("last_segmented_fusion_ir").segmented)

    def last_cuda_code(self, intrinsic_code: bool = False, *, override_user_schedule: bool = False) -> str:
        """CUDA C++ of the kernels the last run's plan generates (one per kernel
        segment); with `intrinsic_code`, kernels/hostir.cuh (the helpers they
        include) first. hostir has no user schedules: override_user_schedule
        changes nothing."""
        return _cuda_code(self._last_plan("last_cuda_code"), intrinsic_code)

    def cuda_code_for(self, inputs, intrinsic_code: bool = False, *,
                      override_user_schedule: bool = False) -> str:
        """last_cuda_code of the plan a call with `inputs` runs, made without running it."""
        return _cuda_code(self._plan_for_inputs(inputs, "cuda_code_for"), intrinsic_code)

    def last_host_ir(self) -> str:
        """The host program the last run executed."""
        return program_text(self._last_plan("last_host_ir").program)

    def last_scheduled_fusion_ir(self, tensor_transforms: bool = False, *,
                                 override_user_schedule: bool = False) -> str:
        """The fusion IR the last run segmented (after the pre-segmentation
        passes). hostir's schedules live in the kernel IR, not in tensor
        transforms: `tensor_transforms` and `override_user_schedule` change nothing."""
        return fusion_text(self._last_plan("last_scheduled_fusion_ir").segmented.fusion)

    def scheduled_fusion_ir_for(self, inputs, tensor_transforms: bool = False, *,
                                override_user_schedule: bool = False) -> str:
        """last_scheduled_fusion_ir of the plan a call with `inputs` runs, made without running it."""
        return fusion_text(self._plan_for_inputs(inputs, "scheduled_fusion_ir_for").segmented.fusion)

    def _plan_for_inputs(self, inputs, what: str):
        if self._annotations():
            raise UnsupportedError(f"{what}: a sharded fusion's plans are made per rank at execute")
        if not isinstance(inputs, (list, tuple)):
            raise InputError(f"{what} expects a list of inputs, got {type(inputs).__name__}")
        return self._cache.plan(self._prepared(inputs, advance=False))

    def repro_script_for(self, inputs=None) -> str:
        """A runnable script that defines this fusion again and, given `inputs`,
        makes inputs like them (their values where small) and executes it."""
        return repro.repro_text(self._script, inputs)

    def last_repro_script(self) -> str:
        """repro_script_for the inputs of the last execute(..., save_repro_inputs=True)."""
        if self._repro is None:
            raise DefinitionError("last_repro_script: no inputs were saved; call "
                                  "execute(inputs, save_repro_inputs=True) first")
        return self._repro

    # ------------------------------------------------------------ debug text
    def fusion_ir(self) -> str:
        return fusion_text(self.ir())

    def __repr__(self) -> str:
        return self.fusion_ir() if self._fusion is not None else "FusionDefinition(<undefined>)"


def _cuda_code(plan, intrinsic_code: bool) -> str:
    code = "\n".join(s.target.source for s in plan.program.body
                     if isinstance(getattr(s, "target", None), KernelStep))
    return (HEADER_DIR / "hostir.cuh").read_text() + "\n" + code if intrinsic_code else code

