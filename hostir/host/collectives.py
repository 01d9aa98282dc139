"""Collective start/wait for host programs. With torch.distributed initialized
they run on its process group (asynchronously); in a single process they have
their world-size-1 meaning (a copy). The multi-GPU layer (dist/) adds meshes,
communicators and NCCL/gloo/MPI selection."""
from __future__ import annotations

import torch

from ..ir.errors import ExecutionError


def world():
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist, dist.get_world_size(), dist.get_rank()
    return None, 1, 0


_REDUCE = {"sum", "max", "min", "avg", "product"}


def _key(s):
    return ("comm", id(s))


def start_collective(s, env, peer=None, recv_shape=None) -> None:
    """Start collective `s` (a host-IR Communication) in `env`; `peer` is its
    evaluated root or peer rank, `recv_shape` a recv's evaluated output shape."""
    dist, size, rank = world()
    x = env[s.input] if s.input is not None else None
    out = None
    if s.kind == "recv":
        out = torch.empty(recv_shape, dtype=s.output.dtype.torch, device=env.device)
    if s.op not in _REDUCE:
        raise ExecutionError(f"{s.kind}: unknown reduction op {s.op!r}; expected one of {sorted(_REDUCE)}")
    if dist is None:
        if s.kind in ("send", "recv"):
            raise ExecutionError(f"{s.kind}: needs a peer process; run under mpirun/torchrun with "
                                 f"2 or more ranks")
        env[_key(s)] = None
        if s.output is not None:
            env[s.output] = x.clone()
        return
    op = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN,
          "avg": dist.ReduceOp.AVG, "product": dist.ReduceOp.PRODUCT}[s.op]
    if s.kind == "allgather":
        parts = [torch.empty_like(x) for _ in range(size)]
        work = dist.all_gather(parts, x.contiguous(), async_op=True)
        env[_key(s)] = (work, lambda: torch.cat(parts, dim=s.dim))
    elif s.kind == "allreduce":
        y = x.clone()
        work = dist.all_reduce(y, op=op, async_op=True)
        env[_key(s)] = (work, lambda: y)
    elif s.kind == "reduce_scatter":
        y = x.clone()
        work = dist.all_reduce(y, op=op, async_op=True)
        env[_key(s)] = (work, lambda: y.chunk(size, dim=s.dim)[rank].contiguous())
    elif s.kind == "broadcast":
        y = x.clone()
        work = dist.broadcast(y, src=peer, async_op=True)
        env[_key(s)] = (work, lambda: y)
    elif s.kind == "send":
        work = dist.isend(x.contiguous(), dst=peer)
        env[_key(s)] = (work, None)
    elif s.kind == "recv":
        work = dist.irecv(out, src=peer)
        env[_key(s)] = (work, lambda: out)
    elif s.kind == "all_to_all":
        parts_in = [p.contiguous() for p in x.chunk(size, dim=s.dim)]
        parts_out = [torch.empty_like(p) for p in parts_in]
        work = dist.all_to_all(parts_out, parts_in, async_op=True)
        env[_key(s)] = (work, lambda: torch.cat(parts_out, dim=s.dim))
    else:
        raise ExecutionError(f"unknown collective {s.kind!r}")


def wait_collective(s, env) -> None:
    pending = env.pop(_key(s), None)
    if pending is None:
        return
    work, result = pending
    work.wait()
    if result is not None and s.output is not None:
        env[s.output] = result()
