"""The compilation pipeline, in one place:

    concretized -> preseg -> aliases -> segments -> host_ir -> kernels

Each stage is a function whose result prints itself: HOSTIR_DUMP=<stage>
prints it (nothing is formatted otherwise), HOSTIR_DEBUG=verify runs the
stage's verifier on it.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import config
from ..codegen.options import KernelOptions
from ..concretize import concretize, shape_checks
from ..ir.env import Env
from ..ir.fusion import Fusion
from ..ir.verify import verify
from ..passes.alias import analyze_aliases
from ..passes.pipeline import run_passes
from ..segment import segment
from . import ir as H
from .evaluator import Compiler
from .lower import lower
from .plan import Plan
from .steps import KernelStep
from .verify import verify_program

STAGES = ("concretized", "preseg", "aliases", "segments", "host_ir", "kernels")


def _stage(name: str, value, check=None):
    if check is not None and config.debugging("verify"):
        check(value)
    config.dump(name, value)
    return value


@dataclass(frozen=True)
class Kernels:
    """The generated kernels of a host program (the `kernels` stage)."""

    steps: tuple[KernelStep, ...]

    def verify(self) -> None:
        for step in self.steps:
            step.spec.verify()

    def __str__(self) -> str:
        return "\n".join(f"// {s.name}\n{s.spec}" for s in self.steps) or "(no generated kernels)"


def compile_kernels(program: H.HostIR, env: Env) -> Kernels:
    """The program's kernel steps; on CUDA their likely variants start compiling
    on the background NVRTC pool, so a plan's kernels compile in parallel."""
    steps = []
    for s in program.body:
        if isinstance(s, H.LaunchKernel) and isinstance(s.target, KernelStep):
            steps.append(s.target)
            if env.device.type == "cuda":
                s.target.prefetch(env, [env.get(v) for v in s.inputs])
    return Kernels(tuple(steps))


def _segments_line(sf) -> str:
    """The segmentation in one log line (HOSTIR_LOGS=segments), cuts included."""
    parts = []
    for seg in sf.segments:
        text = f"seg{seg.id} {seg.scheduler} [{', '.join(seg.ops)}]"
        if seg.reasons:
            text += " (cut: " + "; ".join(seg.reasons) + ")"
        parts.append(text)
    return f"{len(sf.segments)} segment(s): " + (", ".join(parts) or "none")


def build_plan(fusion: Fusion, env: Env, key: tuple, specialize: bool) -> Plan:
    """The plan of `fusion` for the inputs bound in `env` (concretization key `key`)."""
    options = KernelOptions.from_config()
    concrete = _stage("concretized", concretize(fusion, env, specialize), verify)
    simplified, notes = run_passes(concrete, check=config.debugging("verify"))
    _stage("preseg", simplified, verify)
    aliases = _stage("aliases", analyze_aliases(simplified, env))
    sf = _stage("segments", segment(simplified, aliases, notes))
    config.log("segments", lambda: _segments_line(sf))
    program = _stage("host_ir", lower(sf, env, options, specialize), verify_program)
    _stage("kernels", compile_kernels(program, env), Kernels.verify)
    return Plan(key, sf, specialize, program, Compiler().block(program.body), shape_checks(concrete))
