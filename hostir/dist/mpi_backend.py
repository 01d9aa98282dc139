"""Collectives through mpi4py (HOSTIR_COMM_BACKEND=mpi): nonblocking MPI calls on
host buffers. CUDA tensors are staged through host memory (a CUDA-aware MPI
could take device pointers; hostir does not assume one). Half and bfloat16
reductions run in float32, which numpy and MPI know."""
from __future__ import annotations

import time

import torch

from ..ir.errors import ExecutionError
from .torch_backend import Work, _self_transfers, check_op

_WIDE = {torch.float16: torch.float32, torch.bfloat16: torch.float32, torch.bool: torch.uint8}


class _Staged:
    """A host buffer standing for tensor `t` (itself when `t` is a contiguous CPU
    tensor numpy knows), and the copy back into `t` once the MPI call is done."""

    def __init__(self, t: torch.Tensor, reduce: bool):
        self.t = t
        dtype = _WIDE.get(t.dtype, t.dtype) if reduce else t.dtype
        direct = t.device.type == "cpu" and t.is_contiguous() and dtype is t.dtype
        self.host = t if direct else t.detach().to("cpu", dtype).contiguous()
        if not reduce and self.host.dtype in (torch.float16, torch.bfloat16, torch.bool):
            self.array = self.host.view(torch.uint8).numpy()  # moved as bytes
        else:
            self.array = self.host.numpy()

    def back(self) -> None:
        if self.host is not self.t:
            self.t.copy_(self.host)


class MpiBackend:
    name = "mpi"

    def __init__(self, device: torch.device, timeout: float = 300.0):
        from mpi4py import MPI
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD
        self.side = self.comm.Dup()  # host-side checks: never matched with a collective
        self.rank = self.comm.Get_rank()
        self.device = device
        self.timeout = timeout
        self._ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "product": MPI.PROD,
                     "avg": MPI.SUM}

    def _comm(self, team):
        return self.comm if team is None else team

    def barrier(self) -> None:
        self.comm.Barrier()

    def team(self, ranks):
        group = self.comm.Get_group().Incl(list(ranks))
        return self.comm.Create_group(group)  # collective over the ranks in it

    def gather_objects(self, value) -> list:
        return self.side.allgather(value)

    def gather_ints(self, value: int) -> list:
        import numpy as np
        mine = np.array([value], dtype=np.int64)
        out = np.empty(self.side.Get_size(), dtype=np.int64)
        _Request(self.side.Iallgather(mine, out), self.timeout, "a host-side check").wait()
        return out.tolist()

    def _done(self, reqs, staged, then=None):
        """A Work over MPI requests: wait for all, copy staged buffers back."""
        def finish():
            for s in staged:
                s.back()
            if then is not None:
                then()
        return Work([_Request(r, self.timeout) for r in reqs], finish)

    def allgather(self, out, x, team):
        src, dst = _Staged(x, False), _Staged(out, False)
        req = self._comm(team).Iallgather(src.array, dst.array)
        return self._done([req], [dst], lambda: src)

    def allreduce(self, x, op, team):
        check_op(op)
        buf = _Staged(x, True)
        comm = self._comm(team)
        req = comm.Iallreduce(self.MPI.IN_PLACE, buf.array, op=self._ops[op])
        size = comm.Get_size()
        return self._done([req], [buf], (lambda: x.div_(size)) if op == "avg" else None)

    def reduce_scatter(self, out, x, op, team):
        check_op(op)
        src, dst = _Staged(x, True), _Staged(out, True)
        comm = self._comm(team)
        req = comm.Ireduce_scatter_block(src.array, dst.array, op=self._ops[op])
        size = comm.Get_size()
        return self._done([req], [dst], lambda: (src, out.div_(size) if op == "avg" else None))

    def broadcast(self, x, root, team):
        buf = _Staged(x, False)
        req = self._comm(team).Ibcast(buf.array, root=root)
        return self._done([req], [buf])

    def all_to_all(self, out, x, team):
        src, dst = _Staged(x, False), _Staged(out, False)
        req = self._comm(team).Ialltoall(src.array, dst.array)
        return self._done([req], [dst], lambda: src)

    def send_recv(self, sends, recvs):
        sends, recvs = _self_transfers(sends, recvs, self.rank)
        reqs, staged, keep = [], [], []
        for t, peer in sends:
            s = _Staged(t, False)
            keep.append(s)  # the send buffer lives until the Work is done
            reqs.append(self.comm.Isend(s.array, dest=peer))
        for t, peer in recvs:
            s = _Staged(t, False)
            staged.append(s)
            reqs.append(self.comm.Irecv(s.array, source=peer))
        return self._done(reqs, staged, lambda: keep.clear())


class _Request:
    """An MPI request whose wait ends with an error after `timeout` seconds (MPI
    itself would wait for ever on a peer that never comes)."""

    __slots__ = ("req", "timeout", "what")

    def __init__(self, req, timeout: float, what: str = "an MPI collective"):
        self.req, self.timeout, self.what = req, timeout, what

    def wait(self) -> None:
        if self.req.Test():
            return
        deadline = time.monotonic() + self.timeout
        pause = 1e-5
        while not self.req.Test():
            if time.monotonic() > deadline:
                raise ExecutionError(f"{self.what} did not complete within {self.timeout:g} s "
                                     f"(HOSTIR_COMM_TIMEOUT): a rank is missing from it")
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)
