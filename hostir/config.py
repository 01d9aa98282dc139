"""All of hostir's configuration. The one module that reads environment variables.

HOSTIR_DUMP      comma list of stages to print: fusion_ir, then the pipeline's stages
                 (concretized, preseg, aliases, segments, host_ir, kernels), and launch
                 (each kernel launch's variant and grid)
HOSTIR_ENABLE    comma list of optional features to turn on: grid_stride (cap kernel
                 grids at 32 blocks per SM and loop, instead of one thread per slot),
                 nvtx (an NVTX range around every launch, collective start and wait of a
                 host program on CUDA, for Nsight Systems)
HOSTIR_DISABLE   comma list of features to turn off: concretize_resize (keep slice/pad/cat
                 bounds symbolic), paired_lanes (no shared-read pairing in pointwise kernels),
                 pdl (launch kernels without programmatic dependent launch),
                 cuda_graphs (no CUDA-graph replay of repeated host program calls)
HOSTIR_CACHE_DIR where compiled kernels are kept (default ~/.cache/hostir)
HOSTIR_DEBUG     comma list of debug checks: verify (the fusion verifier around every pass
                 and stage, re-deriving each node's type; kernel-IR and host-IR checks)
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

DUMP_STAGES = frozenset({"fusion_ir", "concretized", "preseg", "aliases", "segments", "host_ir",
                         "kernels", "launch"})


def _csv(name: str) -> frozenset[str]:
    raw = os.environ.get(name, "")
    return frozenset(p.strip() for p in raw.split(",") if p.strip())


@dataclass(frozen=True)
class Config:
    dump: frozenset[str] = field(default_factory=frozenset)
    enable: frozenset[str] = field(default_factory=frozenset)
    disable: frozenset[str] = field(default_factory=frozenset)
    debug: frozenset[str] = field(default_factory=frozenset)
    cache_dir: Path = Path.home() / ".cache" / "hostir"
    # tuning knobs of generated kernels (no environment variable: benchmarks set
    # them with `override`); plans read them when they are made
    block: int = 256          # threads per block
    streaming: bool = False   # evict-first 16-byte stores

    @classmethod
    def from_env(cls) -> "Config":
        dump = _csv("HOSTIR_DUMP")
        unknown = dump - DUMP_STAGES
        if unknown:
            print(f"hostir: ignoring unknown HOSTIR_DUMP stages {sorted(unknown)}; "
                  f"known: {sorted(DUMP_STAGES)}", file=sys.stderr)
        cache = os.environ.get("HOSTIR_CACHE_DIR")
        return cls(
            dump=dump & DUMP_STAGES,
            enable=_csv("HOSTIR_ENABLE"),
            disable=_csv("HOSTIR_DISABLE"),
            debug=_csv("HOSTIR_DEBUG"),
            cache_dir=Path(cache) if cache else Path.home() / ".cache" / "hostir",
        )


_current = Config.from_env()


def get() -> Config:
    return _current


def reload() -> Config:
    """Re-read the environment (tests change it)."""
    global _current
    _current = Config.from_env()
    return _current


@contextmanager
def override(**fields):
    """Configuration with `fields` replaced, for the plans made inside the block
    (tests and benchmarks): `with config.override(block=128): ...`."""
    global _current
    saved = _current
    _current = replace(_current, **fields)
    try:
        yield _current
    finally:
        _current = saved


def dumping(stage: str) -> bool:
    return stage in _current.dump


def debugging(check: str) -> bool:
    return check in _current.debug


def enabled(feature: str) -> bool:
    return feature in _current.enable


def disabled(feature: str) -> bool:
    return feature in _current.disable


def dump(stage: str, value) -> None:
    """Print a debug stage if HOSTIR_DUMP asks for it. `value` prints itself
    (or is a function giving the text); nothing is formatted otherwise."""
    if stage in _current.dump:
        text = value() if callable(value) else str(value)
        print(f"===== hostir {stage} =====\n{text}", file=sys.stdout, flush=True)
