"""Starting and waiting for a host program's communication on the job's
communicator (dist/). A collective along dim d runs on the tensor with d
moved outermost, so each rank's block is one contiguous buffer; the result is
a view with d back in place (a copy only where the input was not already laid
out so). Checks that every rank can see for itself (divisibility, peers)
raise before anything is started."""
from __future__ import annotations

import torch

from .. import config
from ..dist.communicator import Communicator
from ..dist.torch_backend import check_op
from ..ir.errors import ExecutionError
from .ir import program_text


def _key(s):
    return ("comm", id(s))


def _outermost(x: torch.Tensor, dim: int) -> torch.Tensor:
    return x.movedim(dim, 0).contiguous() if dim else x.contiguous()


def _back(t: torch.Tensor, dim: int) -> torch.Tensor:
    return t.movedim(0, dim) if dim else t


def _blocks(s, x: torch.Tensor, size: int) -> None:
    if x.shape[s.dim] % size:
        raise ExecutionError(
            f"{s.kind}: dim {s.dim} of {s.input!r} has extent {x.shape[s.dim]}, which the "
            f"{size} ranks do not divide (each rank's block must have the same size)")


def start_collective(s, env, peer=None, recv_shapes=None) -> None:
    """Start communication `s` (a host-IR Communication) in `env`; `peer` is its
    evaluated root rank, `recv_shapes` a send_recv's evaluated receive shapes."""
    comm = Communicator.instance()
    if s.kind == "send_recv":
        _start_p2p(s, env, comm, recv_shapes)
        return
    check_op(s.op)
    x = env[s.input]
    team, size = _team(s, comm)
    if s.kind == "allgather":
        xt = _outermost(x, s.dim)
        out = torch.empty((size * xt.shape[0], *xt.shape[1:]), dtype=x.dtype, device=x.device)
        work, result = comm.allgather(out, xt, team), lambda: _back(out, s.dim)
    elif s.kind == "allreduce":
        y = x.clone(memory_format=torch.contiguous_format)
        work, result = comm.allreduce(y, s.op, team), lambda: y
    elif s.kind == "reduce_scatter":
        _blocks(s, x, size)
        xt = _outermost(x, s.dim)
        out = torch.empty((xt.shape[0] // size, *xt.shape[1:]), dtype=x.dtype, device=x.device)
        work, result = comm.reduce_scatter(out, xt, s.op, team), lambda: _back(out, s.dim)
    elif s.kind == "broadcast":
        if not 0 <= peer < size:
            raise ExecutionError(f"broadcast of {s.input!r}: root {peer} is not a rank of {size}")
        y = x.clone(memory_format=torch.contiguous_format)
        work, result = comm.broadcast(y, peer, team), lambda: y
    elif s.kind == "all_to_all":
        _blocks(s, x, size)
        xt = _outermost(x, s.dim)
        out = torch.empty_like(xt)
        work, result = comm.all_to_all(out, xt, team), lambda: _back(out, s.dim)
    else:
        raise ExecutionError(f"unknown collective {s.kind!r}")
    env[_key(s)] = (work, [(s.output, result)])


def _team(s, comm: Communicator):
    """(the communicator team of `s`, its size): None for all ranks."""
    if s.team is None:
        return None, comm.size()
    mesh, m = s.team
    ranks = mesh.team(m, comm.rank())
    if list(ranks) == list(range(comm.size())):
        return None, len(ranks)
    return comm.team(ranks), len(ranks)


def make_teams(mesh, comm: Communicator) -> None:
    """Every team of every mesh dimension, made by every rank in the same order
    (torch.distributed makes groups collectively), before any is used."""
    for m in range(mesh.ndim):
        for ranks in mesh.teams(m):
            if list(ranks) != list(range(comm.size())):
                comm.team(ranks)


def _start_p2p(s, env, comm: Communicator, recv_shapes) -> None:
    size = comm.size()
    sends, recvs, results = [], [], []
    for t, peer in s.sends:
        peer = env.scalar(peer)
        _check_peer("send", peer, size, comm)
        sends.append((env[t], peer))
    for (out, peer), shape in zip(s.recvs, recv_shapes):
        peer = env.scalar(peer)
        _check_peer("recv", peer, size, comm)
        buf = torch.empty(shape, dtype=out.dtype.torch, device=env.device)
        recvs.append((buf, peer))
        results.append((out, lambda buf=buf: buf))
    env[_key(s)] = (comm.send_recv(sends, recvs), results)


def _check_peer(kind: str, peer: int, size: int, comm: Communicator) -> None:
    if not 0 <= peer < size:
        hint = " (run under mpirun or torchrun with 2 or more ranks)" if size == 1 else ""
        raise ExecutionError(f"{kind}: peer {peer} is not a rank of this job of {size}{hint}")


def wait_collective(s, env) -> None:
    pending = env.pop(_key(s), None)
    if pending is None:
        return
    work, results = pending
    work.wait()
    for out, result in results:
        if out is not None:
            env[out] = result()


def world() -> tuple[int, int]:
    """(world size, rank) of the job."""
    comm = Communicator.instance()
    return comm.size(), comm.rank()


def check_ranks(program, inputs, first: bool) -> None:
    """Before a program with communication runs: every rank passes inputs of the
    same shapes and dtypes (else an error on every rank, naming the difference,
    not a hang; HOSTIR_DISABLE=rank_checks skips it), and with
    HOSTIR_CHECK_PROGRAM=1 the first run compares the programs' text."""
    comm = Communicator.instance()
    if comm.size() == 1:
        return
    if first and config.get().check_program:
        comm.agree_lines("the host program", program_text(program).splitlines())
    if not config.disabled("rank_checks"):
        comm.agree("the inputs' shapes and dtypes", [
            (i, tuple(a.shape), str(a.dtype).replace("torch.", ""))
            for i, a in enumerate(inputs) if isinstance(a, torch.Tensor)])
