"""Collectives through torch.distributed (NCCL on GPUs, gloo on the CPU), and
the world-size-1 backend. A `Work` is started collectives plus what to do
once they are done."""
from __future__ import annotations

import atexit

import torch

from ..ir.errors import ExecutionError

REDUCE_OPS = ("sum", "max", "min", "avg", "product")


class Work:
    """Started communication: `wait()` ends it (on CUDA with NCCL, the current
    stream waits; the host does not) and runs what must follow (`then`)."""

    __slots__ = ("handles", "then")

    def __init__(self, handles=(), then=None):
        self.handles = [h for h in handles if h is not None]
        self.then = then

    def wait(self) -> None:
        for h in self.handles:
            h.wait()
        self.handles = []
        if self.then is not None:
            then, self.then = self.then, None
            then()


def check_op(op: str) -> None:
    if op not in REDUCE_OPS:
        raise ExecutionError(f"unknown reduction op {op!r}; expected one of {', '.join(REDUCE_OPS)}")


class LocalBackend:
    """One rank: every collective is its world-size-1 meaning (a copy or nothing)."""

    name = "local"

    def barrier(self) -> None:
        pass

    def team(self, ranks):
        return None

    def gather_objects(self, value) -> list:
        return [value]

    def gather_ints(self, value: int) -> list:
        return [value]

    def allgather(self, out, x, team):
        out.copy_(x)
        return Work()

    def allreduce(self, x, op, team):
        check_op(op)
        return Work()

    def reduce_scatter(self, out, x, op, team):
        check_op(op)
        out.copy_(x)
        return Work()

    def broadcast(self, x, root, team):
        return Work()

    def all_to_all(self, out, x, team):
        out.copy_(x)
        return Work()

    def send_recv(self, sends, recvs):
        _self_transfers(sends, recvs, 0)
        return Work()


def _self_transfers(sends, recvs, rank: int) -> tuple[list, list]:
    """Transfers with this rank itself are local copies; returns the others.
    A recv from self takes the send to self made in the same group."""
    own = [t for t, peer in sends if peer == rank]
    mine = [t for t, peer in recvs if peer == rank]
    if len(own) != len(mine):
        raise ExecutionError(f"send_recv: {len(own)} sends to this rank ({rank}) but "
                             f"{len(mine)} receives from it")
    for dst, src in zip(mine, own):
        dst.copy_(src)
    return ([(t, p) for t, p in sends if p != rank], [(t, p) for t, p in recvs if p != rank])


def _first(dist, *names):
    for n in names:
        f = getattr(dist, n, None)
        if f is not None:
            return f
    raise ExecutionError(f"torch.distributed has none of {names}")


def _close_group(dist, group) -> None:
    """Take a gloo group down before the interpreter's teardown: its threads
    would otherwise outlive Python ("terminate called without an active
    exception", the process aborts after a program that ran well)."""
    try:
        if dist.is_initialized():
            dist.destroy_process_group(group)
    except Exception:  # noqa: BLE001 - the user took the world down first: nothing left to close
        pass


class TorchBackend:
    def __init__(self, dist, timeout):
        self.dist = dist
        self.name = dist.get_backend()
        self.timeout = timeout
        self.rank = dist.get_rank()
        # host-side checks go through a group of their own (gloo, also beside NCCL): a
        # check that one rank alone makes never meets another rank's collective
        self.side = dist.new_group(backend="gloo", timeout=timeout)
        if self.name != "gloo":  # (a gloo world goes down whole at exit: communicator._destroy)
            atexit.register(_close_group, dist, self.side)
        self._all_gather = _first(dist, "all_gather_single", "all_gather_into_tensor")
        self._reduce_scatter = _first(dist, "reduce_scatter_single", "reduce_scatter_tensor")
        ops = dist.ReduceOp
        self._ops = {"sum": ops.SUM, "max": ops.MAX, "min": ops.MIN, "product": ops.PRODUCT,
                     "avg": getattr(ops, "AVG", None)}

    def barrier(self) -> None:
        self.dist.barrier()

    def team(self, ranks):
        return self.dist.new_group(list(ranks), timeout=self.timeout)

    def gather_objects(self, value) -> list:
        out = [None] * self.dist.get_world_size()
        self.dist.all_gather_object(out, value, group=self.side)
        return out

    def gather_ints(self, value: int) -> list:
        """Every rank's int64, through the host-side (gloo) group: one small exchange."""
        mine = torch.tensor([value], dtype=torch.int64)
        out = torch.empty(self.dist.get_world_size(), dtype=torch.int64)
        self._all_gather(out, mine, group=self.side)
        return out.tolist()

    def _op(self, op: str, team):
        """(ReduceOp, divisor applied after): gloo has no AVG, so it sums and divides."""
        check_op(op)
        if op == "avg" and (self.name != "nccl" or self._ops["avg"] is None):
            size = self.dist.get_world_size(team) if team is not None else self.dist.get_world_size()
            return self._ops["sum"], size
        return self._ops[op], None

    def allgather(self, out, x, team):
        return Work([self._all_gather(out, x.contiguous(), group=team, async_op=True)])

    def allreduce(self, x, op, team):
        red, divide = self._op(op, team)
        h = self.dist.all_reduce(x, op=red, group=team, async_op=True)
        return Work([h], (lambda: x.div_(divide)) if divide else None)

    def reduce_scatter(self, out, x, op, team):
        red, divide = self._op(op, team)
        h = self._reduce_scatter(out, x.contiguous(), op=red, group=team, async_op=True)
        return Work([h], (lambda: out.div_(divide)) if divide else None)

    def broadcast(self, x, root, team):
        src = self.dist.get_global_rank(team, root) if team is not None else root
        return Work([self.dist.broadcast(x, src=src, group=team, async_op=True)])

    def all_to_all(self, out, x, team):
        return Work([self.dist.all_to_all_single(out, x.contiguous(), group=team, async_op=True)])

    def send_recv(self, sends, recvs):
        sends, recvs = _self_transfers(sends, recvs, self.rank)
        ops = [self.dist.P2POp(self.dist.isend, t.contiguous(), p) for t, p in sends]
        ops += [self.dist.P2POp(self.dist.irecv, t, p) for t, p in recvs]
        return Work(self.dist.batch_isend_irecv(ops) if ops else ())


__all__ = ["LocalBackend", "REDUCE_OPS", "TorchBackend", "Work", "check_op"]
