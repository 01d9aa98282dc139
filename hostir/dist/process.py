"""This process in the job: its rank, world size and local rank (from the
launcher, see config.launch), the GPU it uses, rank-tagged logging, and the
rule that an exception on one rank ends the whole job with its message
(as `python -m mpi4py` does), instead of leaving the other ranks waiting."""
from __future__ import annotations

import os
import sys
import threading
import time
import traceback

import torch

from .. import config

_hook_lock = threading.Lock()
_hook_installed = False


def device_for(local_rank: int, local_size: int = 1) -> torch.device:
    """One process per GPU, chosen by the local rank; the CPU without GPUs, or
    when this node runs more ranks than it has GPUs (NCCL needs a GPU per rank)."""
    if not torch.cuda.is_available():
        return torch.device("cpu")
    count = torch.cuda.device_count()
    if local_size > count:
        log(f"{local_size} ranks on this node but {count} GPU(s): every rank runs on the CPU")
        return torch.device("cpu")
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def log(message: str) -> None:
    """Print a rank-tagged line (rank 0 only, unless HOSTIR_LOG_RANKS says otherwise)."""
    config.tagged(message)


ABORT_GRACE_S = 1.0
"""Seconds a rank that ends the job waits, its message flushed, before
MPI_Abort: the launcher forwards a rank's output through its own processes,
and an abort that tears them down first loses it (twice in CI under load, an
MPICH job ended non-zero with no output at all: not the message, not even
MPI_Abort's own line)."""


def _abort_job(code: int = 1) -> None:
    """End every rank: MPI_Abort under an MPI launcher (after ABORT_GRACE_S,
    for the launcher to forward this rank's output), else this process exits
    (torchrun's agent then stops the others)."""
    if config.launch().launcher in ("openmpi", "mpich", "mvapich") and "mpi4py.MPI" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        time.sleep(ABORT_GRACE_S)
        sys.modules["mpi4py.MPI"].COMM_WORLD.Abort(code)
    os._exit(code)


def install_abort_hook() -> None:
    """From now on an uncaught exception on this rank prints its traceback,
    tagged with the rank, and ends the whole job (every rank exits non-zero)."""
    global _hook_installed
    with _hook_lock:
        if _hook_installed:
            return
        _hook_installed = True
    previous = sys.excepthook
    rank = config.launch().rank

    def hook(kind, value, tb):
        if issubclass(kind, KeyboardInterrupt):
            return previous(kind, value, tb)
        text = "".join(traceback.format_exception(kind, value, tb))
        sys.stderr.write("".join(f"[rank {rank}] {line}\n" for line in text.rstrip().splitlines()))
        sys.stderr.write(f"[rank {rank}] hostir: ending the job (this rank raised)\n")
        sys.stderr.flush()
        _abort_job(1)
    sys.excepthook = hook
