"""The communicator: collectives between the ranks of the job.

`Communicator.instance()` reuses the user's torch.distributed process group if
one is initialized; otherwise it bootstraps one from the launcher's
environment: under mpirun, rank 0 picks a free port and broadcasts host:port
with mpi4py, so nobody sets MASTER_ADDR; under torchrun, from MASTER_ADDR and
MASTER_PORT. NCCL on GPUs, gloo on the CPU, or (HOSTIR_COMM_BACKEND=mpi)
mpi4py itself. Every collective is asynchronous: it returns a `Work` whose
`wait()` makes the current CUDA stream wait for it (NCCL; no host block) or
blocks the host (gloo, MPI). Collectives time out after HOSTIR_COMM_TIMEOUT.

Teams (sub-communicators over mesh slices) are made by every rank in the same
order and cached.
"""
from __future__ import annotations

import atexit
import gc
import hashlib
import socket
import threading
import time
from datetime import timedelta

import torch

from .. import config
from ..ir.errors import ExecutionError
from .mpi_backend import MpiBackend
from .process import device_for, install_abort_hook
from .torch_backend import LocalBackend, TorchBackend


class Communicator:
    """Size, rank and collectives of this job (nvFuser's `Communicator`)."""

    _instance: "Communicator | None" = None
    _lock = threading.Lock()

    def __init__(self, backend, rank: int, size: int, local_rank: int, local_size: int,
                 device: torch.device):
        self.backend = backend
        self._rank, self._size = rank, size
        self._local_rank, self._local_size = local_rank, local_size
        self.device = device
        self._teams: dict[tuple, object] = {}

    @classmethod
    def instance(cls) -> "Communicator":
        """The job's communicator, made (and the process group bootstrapped) on first use."""
        with cls._lock:
            if cls._instance is None:
                t = time.perf_counter()
                cls._instance = c = _bootstrap()
                config.log("dist", lambda: f"communicator: {c.name} backend, rank {c.rank()} of "
                           f"{c.size()} (local {c.local_rank()} of {c.local_size()}) on {c.device}, "
                           f"launcher {config.launch().launcher}, set up in "
                           f"{time.perf_counter() - t:.2f} s")
                if cls._instance.size() > 1:  # after torch's own hook, which it replaces
                    install_abort_hook()
            return cls._instance

    @classmethod
    def reset(cls) -> None:
        """Forget the communicator (tests that change the backend)."""
        with cls._lock:
            cls._instance = None

    # nvFuser's names
    def size(self) -> int:
        return self._size

    def rank(self) -> int:
        return self._rank

    def local_size(self) -> int:
        return self._local_size

    def local_rank(self) -> int:
        return self._local_rank

    def barrier(self) -> None:
        self.backend.barrier()

    @property
    def name(self) -> str:
        return self.backend.name

    def team(self, ranks) -> object:
        """The sub-communicator of `ranks` (every rank must ask for every team,
        in the same order: torch.distributed makes groups collectively)."""
        ranks = tuple(int(r) for r in ranks)
        got = self._teams.get(ranks)
        if got is None:
            got = self._teams[ranks] = self.backend.team(ranks)
            config.log("dist", f"team of ranks {list(ranks)} made ({self.name})")
        return got

    def agree(self, what: str, value) -> None:
        """Check that every rank holds the same `value` (host-side, small);
        raise on every rank, naming the ranks that differ from rank 0."""
        if self._size == 1:
            return
        try:
            digests = self.backend.gather_ints(_digest(value))
        except Exception as e:  # noqa: BLE001 - a timeout or a peer that ended: say what was checked
            raise ExecutionError(
                f"rank {self._rank}: comparing {what} with the other ranks failed ({e}); this rank "
                f"has {_describe(value)}. Ranks compare them only on inputs they have not passed "
                f"before: if another rank went on without comparing, this rank alone passed inputs "
                f"of new shapes or dtypes (every rank must pass inputs of the same shapes and "
                f"dtypes on each call)") from e
        if len(set(digests)) == 1:  # the common case: one exchange
            return
        self._disagree(what, value)

    def _disagree(self, what: str, value) -> None:
        values = self.backend.gather_objects(value)
        bad = [r for r, v in enumerate(values) if v != values[0]]
        if bad:
            r = bad[0]
            raise ExecutionError(
                f"ranks disagree on {what}: rank {r} has {_describe(values[r])}, rank 0 has "
                f"{_describe(values[0])} (every rank must run the same program on inputs of "
                f"the same shapes and dtypes)")

    def agree_lines(self, what: str, lines: list[str]) -> None:
        """Check that every rank holds the same text; name the first line that
        differs from rank 0's (HOSTIR_CHECK_PROGRAM compares host programs so)."""
        if self._size == 1:
            return
        texts = self.backend.gather_objects(list(lines))
        for r, other in enumerate(texts):
            if other == texts[0]:
                continue
            k = next((i for i, (a, b) in enumerate(zip(texts[0], other)) if a != b),
                     min(len(texts[0]), len(other)))
            mine = other[k] if k < len(other) else "<end>"
            ref = texts[0][k] if k < len(texts[0]) else "<end>"
            raise ExecutionError(f"ranks disagree on {what}: rank {r} differs from rank 0 at "
                                 f"line {k + 1}: {mine.strip()!r} on rank {r}, {ref.strip()!r} on rank 0")

    # collectives: each returns a Work; outputs are written into the tensors given
    def allgather(self, out: torch.Tensor, x: torch.Tensor, team=None):
        """`out` (contiguous, [size * x.shape[0], ...]) = every rank's `x` along dim 0."""
        return self.backend.allgather(out, x, team)

    def allreduce(self, x: torch.Tensor, op: str = "sum", team=None):
        return self.backend.allreduce(x, op, team)

    def reduce_scatter(self, out: torch.Tensor, x: torch.Tensor, op: str = "sum", team=None):
        """`out` = this rank's dim-0 block of the reduction of every rank's `x`."""
        return self.backend.reduce_scatter(out, x, op, team)

    def broadcast(self, x: torch.Tensor, root: int, team=None):
        return self.backend.broadcast(x, root, team)

    def all_to_all(self, out: torch.Tensor, x: torch.Tensor, team=None):
        """Block r of `x` along dim 0 goes to rank r; block r of `out` comes from it."""
        return self.backend.all_to_all(out, x, team)

    def send_recv(self, sends, recvs):
        """A group of point-to-point transfers started together, one Work for all
        (a ring where every rank sends first cannot deadlock): `sends` and
        `recvs` are lists of (tensor, peer rank)."""
        return self.backend.send_recv(sends, recvs)


def _digest(value) -> int:
    return int.from_bytes(hashlib.blake2b(repr(value).encode(), digest_size=8).digest(),
                          "little", signed=True)


def _describe(v) -> str:
    text = repr(v)
    return text if len(text) < 300 else text[:300] + "..."


def _mpi_store(dist, launch, timeout):
    """The process group's store under an MPI launcher: rank 0's TCPStore, bound
    to a port the system picks as it opens (a port found free and opened later
    could be taken in between by another job starting on the machine: its ranks
    then meet the wrong store), its address broadcast through MPI. Where rank 0
    cannot open it, every rank raises its message (none waits in the broadcast)."""
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    host = "127.0.0.1" if launch.local_size == launch.size else socket.getfqdn()
    store = failed = None
    if launch.rank == 0:
        try:
            store = dist.TCPStore(host, 0, launch.size, True, timeout=timeout, wait_for_workers=False)
        except Exception as e:  # told to every rank below
            failed = e
    where = world.bcast((host, store.port) if store is not None else
                        f"rank 0 could not open the process group's store on {host}: {failed}", root=0)
    if isinstance(where, str):
        raise RuntimeError(f"hostir: {where}") from failed
    if store is None:
        store = dist.TCPStore(*where, launch.size, False, timeout=timeout)
    return store


def _destroy(dist) -> None:
    """Take a gloo world down at exit, while the interpreter is whole: a
    barrier first (every rank's collectives finished before any rank's groups
    go: a gloo worker thread that finishes a work during the interpreter's
    teardown drops its tensors without the interpreter and aborts the process,
    "terminate called without an active exception"; and rank 0's store stays up
    while the others take their groups down), then what nothing references any
    more is collected and every group destroyed. A rank that raised ended the
    job before this (process.install_abort_hook); a barrier that fails (a peer
    gone) is passed over."""
    if not dist.is_initialized():
        return
    try:
        dist.barrier()
    except Exception:  # noqa: BLE001 - a peer already gone: take this rank's groups down anyway
        pass
    gc.collect()
    dist.destroy_process_group()


def _bootstrap() -> Communicator:
    import torch.distributed as dist
    cfg, launch = config.get(), config.launch()
    timeout = timedelta(seconds=cfg.comm_timeout)
    if dist.is_available() and dist.is_initialized():  # the user's process group
        rank, size = dist.get_rank(), dist.get_world_size()
        device = device_for(launch.local_rank if launch.size == size else rank,
                            launch.local_size if launch.size == size else 1)
        return Communicator(TorchBackend(dist, timeout), rank, size, launch.local_rank,
                            launch.local_size, device)
    device = device_for(launch.local_rank, launch.local_size)
    if launch.size == 1:
        return Communicator(LocalBackend(), 0, 1, 0, 1, device)
    if cfg.comm_backend == "mpi":
        return Communicator(MpiBackend(device, cfg.comm_timeout), launch.rank, launch.size,
                            launch.local_rank, launch.local_size, device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    kwargs = {"device_id": device} if device.type == "cuda" else {}
    if launch.master_addr and launch.master_port:
        kwargs["init_method"] = f"tcp://{launch.master_addr}:{launch.master_port}"
    else:  # an MPI launcher: rank 0 opens the store and tells the others where
        kwargs["store"] = _mpi_store(dist, launch, timeout)
    dist.init_process_group(backend, rank=launch.rank, world_size=launch.size, timeout=timeout,
                            **kwargs)
    if backend == "gloo":  # taken down before the interpreter's own teardown (gloo's threads
        # otherwise outlive it: "terminate called without an active exception"); NCCL's is
        # left to torch (destroying it under live CUDA graphs that hold its kernels hangs)
        atexit.register(_destroy, dist)
    return Communicator(TorchBackend(dist, timeout), launch.rank, launch.size, launch.local_rank,
                        launch.local_size, device)


__all__ = ["Communicator"]
