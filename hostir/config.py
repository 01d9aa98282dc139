"""All of hostir's configuration. The one module that reads environment variables.

HOSTIR_DUMP      comma list of stages to print: fusion_ir, sharding (a sharded fusion:
                 each tensor's sharding and the local pieces), then the pipeline's stages
                 (concretized, preseg, aliases, segments, host_ir, kernels), and launch
                 (each kernel launch's variant and grid)
HOSTIR_ENABLE    comma list of optional features to turn on: grid_stride (cap kernel
                 grids at 32 blocks per SM and loop, instead of one thread per slot),
                 nvtx (an NVTX range around every launch, collective start and wait of a
                 host program on CUDA, for Nsight Systems), fast_math (generated kernels
                 use the hardware's approximate exp, log and float division, as
                 torch.compile's kernels do: a few ulp of float32 instead of correctly
                 rounded or 1-2 ulp; compute-bound kernels such as a bf16 softmax gain)
HOSTIR_DISABLE   comma list of features to turn off: concretize_resize (keep slice/pad/cat
                 bounds symbolic), paired_lanes (no shared-read pairing in pointwise kernels),
                 pdl (launch kernels without programmatic dependent launch),
                 peer_copies (allgather_blocks through the collective, not copy engines
                 over peer memory), rank_checks (no comparison of input shapes across
                 ranks before a program communicates),
                 cuda_graphs (no CUDA-graph replay of repeated host program calls),
                 reduction_kernels (reduction segments through torch ops, not generated
                 kernels), tiled_transpose (pointwise kernels that transpose read
                 without shared-memory tiles), online_softmax (a normalization's max and
                 its sum of exp(x - max) stay two passes over rows the persistent
                 schedule does not hold, not one online pass), smem_rows (rows too long
                 for registers are not kept in shared memory: more a thread in registers),
                 narrow_math (kernels whose every output is a half, bfloat16 or float8
                 tensor compute exp and float division correctly rounded too, not with
                 the hardware's approximations: relative errors up to 1e-5), clusters
                 (rows too long for one block's shared memory are not split over
                 thread-block clusters), shifted_rows (rows that start off a 16-byte
                 boundary, or whose length is no multiple of a vector, are read a point
                 at a time, not in vectors at the boundaries)
HOSTIR_CACHE_DIR where compiled kernels are kept (default ~/.cache/hostir)
HOSTIR_DEBUG     comma list of debug checks: verify (the fusion verifier around every pass
                 and stage, re-deriving each node's type; kernel-IR and host-IR checks),
                 indices (generated GPU kernels check every gather index and trap, printing
                 the op and the value, where one is out of range; ops through ATen on GPUs,
                 index_put_accumulate and grouped_mm, check their indices and offsets on the
                 host first; CPU runs always check)
HOSTIR_COMM_BACKEND  how collectives run between ranks: torch (default; torch.distributed,
                 NCCL on GPUs, gloo on CPU) or mpi (mpi4py; CUDA buffers only with a
                 CUDA-aware MPI)
HOSTIR_COMM_TIMEOUT  seconds a collective may take before the job is ended (default 300)
HOSTIR_CHECK_PROGRAM  1: before a host program first runs, every rank compares a
                 fingerprint of it with rank 0's and names the first difference
HOSTIR_LOGS      comma list of subsystems whose log lines are printed (rank-tagged, on
                 stderr), or "all": segments (each fusion's segmentation), compile (each
                 kernel compile: cold, disk or memory hit, time), dist (process groups and
                 communicators set up), cache (plans made and why a fusion recompiles)
HOSTIR_LOG_RANKS comma list of ranks whose log lines are printed, or "all" (default: 0)
HOSTIR_REPRO_DIR where repros of failing fusions too long to print go (default: the temp dir)
HOSTIR_TRACE     path of a Chrome/Perfetto trace (JSON) of host program execution: one
                 track per stream, spans for kernel launches, collectives (start to
                 completion) and waits, timed with CUDA events on GPUs; written at exit,
                 one file per rank (".rankN" before the suffix) when there are several;
                 `hostir trace merge` joins them, `hostir trace plot` draws a timeline.
                 Tracing turns CUDA-graph replay off (each launch is its own span)

Launchers tell a process its rank, world size and local rank; they are read in
this order: Open MPI (OMPI_COMM_WORLD_*), MPICH/Hydra and Intel MPI (PMI_RANK,
PMI_SIZE, MPI_LOCALRANKID), MVAPICH (MV2_COMM_WORLD_*), Slurm (SLURM_PROCID,
SLURM_NTASKS, SLURM_LOCALID), then torchrun (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT).
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

DUMP_STAGES = frozenset({"fusion_ir", "sharding", "concretized", "preseg", "aliases", "segments", "host_ir",
                         "kernels", "launch"})
LOG_SUBSYSTEMS = frozenset({"segments", "compile", "dist", "cache"})


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
    comm_backend: str = "torch"
    comm_timeout: float = 300.0
    check_program: bool = False
    log_ranks: str = "0"
    logs: frozenset[str] = field(default_factory=frozenset)
    trace: str = ""
    repro_dir: str = ""

    @classmethod
    def from_env(cls) -> "Config":
        dump = _csv("HOSTIR_DUMP")
        unknown = dump - DUMP_STAGES
        if unknown:
            print(f"hostir: ignoring unknown HOSTIR_DUMP stages {sorted(unknown)}; "
                  f"known: {sorted(DUMP_STAGES)}", file=sys.stderr)
        cache = os.environ.get("HOSTIR_CACHE_DIR")
        logs = _csv("HOSTIR_LOGS")
        logs = LOG_SUBSYSTEMS if "all" in logs else logs
        if logs - LOG_SUBSYSTEMS:
            print(f"hostir: ignoring unknown HOSTIR_LOGS subsystems {sorted(logs - LOG_SUBSYSTEMS)}; "
                  f"known: {sorted(LOG_SUBSYSTEMS)} or all", file=sys.stderr)
        return cls(
            dump=dump & DUMP_STAGES,
            enable=_csv("HOSTIR_ENABLE"),
            disable=_csv("HOSTIR_DISABLE"),
            debug=_csv("HOSTIR_DEBUG"),
            cache_dir=Path(cache) if cache else Path.home() / ".cache" / "hostir",
            comm_backend=_choice("HOSTIR_COMM_BACKEND", ("torch", "mpi")),
            comm_timeout=float(os.environ.get("HOSTIR_COMM_TIMEOUT", "300")),
            check_program=os.environ.get("HOSTIR_CHECK_PROGRAM", "0") not in ("", "0"),
            log_ranks=os.environ.get("HOSTIR_LOG_RANKS", "0"),
            logs=logs & LOG_SUBSYSTEMS,
            trace=os.environ.get("HOSTIR_TRACE", "").strip(),
            repro_dir=os.environ.get("HOSTIR_REPRO_DIR", "").strip(),
        )


def _choice(name: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, choices[0]).strip() or choices[0]
    if value not in choices:
        raise ValueError(f"{name}={value!r}: expected one of {', '.join(choices)}")
    return value


@dataclass(frozen=True)
class Launch:
    """What the launcher told this process (world size 1 without one)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1
    launcher: str = "none"      # openmpi | mpich | mvapich | slurm | torchrun | none
    master_addr: str | None = None
    master_port: int | None = None


_LAUNCHERS = (  # (name, rank, size, local rank, local size)
    ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("mvapich", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK",
     "MV2_COMM_WORLD_LOCAL_SIZE"),
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
)


def child_environ(extra: dict | None = None) -> dict:
    """The environment a child process of a hostir command starts with: this
    process's (its settings and the launcher's variables pass on), `extra` on top."""
    return dict(os.environ, **(extra or {}))


def launch() -> Launch:
    """Rank, world size and local rank from the launcher's environment."""
    env = os.environ
    for name, rank, size, local, local_size in _LAUNCHERS:
        if rank in env and size in env:
            r, n = int(env[rank]), int(env[size])
            lr = int(env.get(local, r))
            ls = env.get(local_size, "")
            ls = int(ls.split("(")[0]) if ls[:1].isdigit() else n  # Slurm: "4(x2)"
            port = env.get("MASTER_PORT")
            return Launch(r, n, lr, ls, name, env.get("MASTER_ADDR"), int(port) if port else None)
    return Launch()


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


def logging_rank() -> bool:
    """Does this rank print (HOSTIR_LOG_RANKS; rank 0 by default)?"""
    ranks = _current.log_ranks
    return ranks == "all" or str(launch().rank) in {r.strip() for r in ranks.split(",")}


def tagged(message: str) -> None:
    """Print a rank-tagged line on stderr, from the ranks HOSTIR_LOG_RANKS names."""
    if logging_rank():
        where = launch()
        print(f"[hostir rank {where.rank}/{where.size}] {message}", file=sys.stderr, flush=True)


def logging(subsystem: str) -> bool:
    """Does HOSTIR_LOGS ask for `subsystem`'s lines (check before formatting one)?"""
    return subsystem in _current.logs


def log(subsystem: str, message) -> None:
    """A rank-tagged log line of `subsystem` if HOSTIR_LOGS asks for it. `message`
    is a string or a function giving one (called only when the line is printed)."""
    if subsystem in _current.logs and logging_rank():
        tagged(f"{subsystem}: {message() if callable(message) else message}")


_noted: set = set()


def note_once(key: str, message: str) -> None:
    """Print a hostir note once per process (a fallback taken, say)."""
    if key not in _noted:
        _noted.add(key)
        print(f"hostir: {message}", file=sys.stderr, flush=True)


def dump(stage: str, value) -> None:
    """Print a debug stage if HOSTIR_DUMP asks for it. `value` prints itself
    (or is a function giving the text); nothing is formatted otherwise."""
    if stage in _current.dump and logging_rank():
        text = value() if callable(value) else str(value)
        print(f"===== hostir {stage} =====\n{text}", file=sys.stdout, flush=True)
