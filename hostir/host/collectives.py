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
from ..dist.layout import interleave
from ..dist.torch_backend import check_op
from ..ir.errors import ExecutionError
from . import ir as H
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
    if s.kind == "allgather_blocks":
        env[_key(s)] = _start_blocks(s, env, comm)
        return
    if s.kind == "reduce_scatter_blocks":
        check_op(s.op)
        if s.input is not None:
            _blocks(s, env[s.input], _team(s, comm)[1])
        env[_key(s)] = _start_reduce_blocks(s, env, comm, tuple(recv_shapes[0]))
        return
    if s.kind == "broadcast" and s.with_shape:
        _start_shaped_broadcast(s, env, comm, peer, recv_shapes[0])
        return
    check_op(s.op)
    x = env[s.input]
    team, size = _team(s, comm)
    dest = env[s.output] if s.into else None
    if s.kind == "allgather":
        xt = _outermost(x, s.dim)
        shape = (size * xt.shape[0], *xt.shape[1:])
        if s.within is not None:  # gathered rank-major, then interleaved into [A, n, B]
            out = torch.empty(shape, dtype=x.dtype, device=x.device)
            work = comm.allgather(out, xt, team)
            env[_key(s)] = (work, [(s.output, lambda: _result(
                interleave(out, size, *s.within), s.dim, dest))])
            return
        out = _target(s, dest, s.dim, shape, x)
        work = comm.allgather(out, xt, team)
    elif s.kind == "allreduce":
        out = _target(s, dest, 0, x.shape, x)
        if out.data_ptr() != x.data_ptr() or out.stride() != x.stride():
            out.copy_(x)
        work = comm.allreduce(out, s.op, team)
    elif s.kind == "reduce_scatter":
        _blocks(s, x, size)
        xt = _outermost(x, s.dim)
        out = _target(s, dest, s.dim, (xt.shape[0] // size, *xt.shape[1:]), x)
        work = comm.reduce_scatter(out, xt, s.op, team)
    elif s.kind == "broadcast":
        if not 0 <= peer < size:
            raise ExecutionError(f"broadcast of {s.input!r}: root {peer} is not a rank of {size}")
        out = x.clone(memory_format=torch.contiguous_format)
        work = comm.broadcast(out, peer, team)
    elif s.kind == "all_to_all":
        _start_all_to_all(s, env, comm, x, dest)
        return
    else:
        raise ExecutionError(f"unknown collective {s.kind!r}")
    dim = s.dim if s.kind in ("allgather", "reduce_scatter") else 0
    env[_key(s)] = (work, [(s.output, lambda: _result(out, dim, dest))])


def _start_all_to_all(s, env, comm, x, dest) -> None:
    """Block r of `x` along s.dim to rank r, as one buffer with the ranks'
    blocks outermost; the received buffer (a block per source rank, outermost)
    is joined along s.gather_dim: a view where that dim is the outermost, a
    copy otherwise."""
    team, size = _team(s, comm)
    _blocks(s, x, size)
    g = s.dim if s.gather_dim is None else s.gather_dim
    shape = list(x.shape)
    shape[s.dim] //= size
    shape[g] *= size
    if dest is not None and list(dest.shape) != shape:
        raise ExecutionError(f"all_to_all of {s.input!r}: the result has shape {shape} but its "
                             f"out buffer {s.output!r} has {list(dest.shape)}")
    send = x.unflatten(s.dim, (size, -1)).movedim(s.dim, 0).contiguous()
    recv = torch.empty_like(send)
    work = comm.all_to_all(recv, send, team)

    def result():
        got = recv.movedim(0, g).flatten(g, g + 1)
        if dest is None:
            return got
        dest.copy_(got)
        return dest
    env[_key(s)] = (work, [(s.output, result)])


def _target(s, dest, dim: int, shape, x) -> torch.Tensor:
    """Where a collective writes: `dest` with `dim` moved outermost when that is
    one contiguous buffer, else a new buffer (copied into `dest` at the wait)."""
    if dest is not None:
        d = dest.movedim(dim, 0) if dim else dest
        if tuple(d.shape) != tuple(shape):
            want = list(_back(torch.empty(shape, device="meta"), dim).shape)
            raise ExecutionError(f"{s.kind} of {s.input!r}: the result has shape {want} but its "
                                 f"out buffer {s.output!r} has {list(dest.shape)}")
        if d.is_contiguous():
            return d
    return torch.empty(shape, dtype=x.dtype, device=x.device)


def _result(out, dim: int, dest) -> torch.Tensor:
    """The collective's result, with `dim` back in place; written into `dest` if
    there is one and the collective did not write there itself."""
    got = _back(out, dim)
    if dest is None:
        return got
    if got.data_ptr() != dest.data_ptr() or got.stride() != dest.stride():
        dest.copy_(got)
    return dest


def _team(s, comm: Communicator):
    """(the communicator team of `s`, its size): None for all ranks."""
    if s.team is None:
        return None, comm.size()
    mesh, m = s.team
    ranks = mesh.team(m, comm.rank())
    if list(ranks) == list(range(comm.size())):
        return None, len(ranks)
    return comm.team(ranks), len(ranks)


def make_teams(body, comm: Communicator) -> None:
    """Every team of every (mesh, mesh dim) the statements' communication runs
    on (each rank's and the others'), made by every rank in the same order
    (torch.distributed makes groups collectively) before any is used: every
    rank builds the same program, so the order is the program's."""
    for mesh, m in _teams_of(body, []):
        for ranks in mesh.teams(m):
            if list(ranks) != list(range(comm.size())):
                comm.team(ranks)


def _teams_of(body, out: list) -> list:
    for s in body:
        if isinstance(s, H.Communication) and s.team is not None and s.team not in out:
            out.append(s.team)
        _teams_of(getattr(s, "body", ()), out)
    return out


def _shape_of(x: torch.Tensor) -> torch.Tensor:
    return torch.tensor(list(x.shape), dtype=torch.int64, device=x.device)


def _received(s, out, got, known, env) -> list[int]:
    """The shape `got` (a received header) of output `out`, checked against the
    extents known here, its sized extents bound in `env`."""
    shape = [int(n) for n in got.tolist()]
    for d, (n, k) in enumerate(zip(shape, known)):
        if k is not None and k != n:
            raise ExecutionError(f"{s.kind} -> {out!r}: dim {d} arrives with extent {n}, but it is "
                                 f"{k} here (the ranks disagree on the tensor's shape)")
    for d, leaf in H.sized_extents(out):
        env[leaf] = shape[d]
    return shape


def _start_shaped_broadcast(s, env, comm: Communicator, root: int, known) -> None:
    """A broadcast whose root alone holds the input: its shape first, then the data."""
    team, size = _team(s, comm)
    if not 0 <= root < size:
        raise ExecutionError(f"broadcast of {s.input!r}: root {root} is not a rank of {size}")
    here = comm.rank() if team is None else s.team[0].coordinates(comm.rank())[s.team[1]]
    if here == root:
        x = env[s.input]
        header = _shape_of(x)
    else:
        header = torch.empty(s.output.ndim, dtype=torch.int64, device=env.device)
    comm.broadcast(header, root, team).wait()
    shape = _received(s, s.output, header, known, env)
    if here == root:
        out = x.clone(memory_format=torch.contiguous_format)
    else:
        out = torch.empty(shape, dtype=s.output.dtype.torch, device=env.device)
    env[_key(s)] = (comm.broadcast(out, root, team), [(s.output, lambda: out)])


def _start_p2p(s, env, comm: Communicator, recv_shapes) -> None:
    size = comm.size()
    sends, recvs, results = [], [], []
    for t, peer in s.sends:
        peer = env.scalar(peer)
        _check_peer("send", peer, size, comm)
        sends.append((env[t], peer))
    peers = [env.scalar(peer) for _, peer in s.recvs]
    for p in peers:
        _check_peer("recv", p, size, comm)
    if s.with_shape:  # the shapes first, in a group of their own (every rank sends before it waits)
        headers = [torch.empty(out.ndim, dtype=torch.int64, device=env.device) for out, _ in s.recvs]
        comm.send_recv([(_shape_of(t), p) for t, p in sends], list(zip(headers, peers))).wait()
        recv_shapes = [_received(s, out, h, known, env)
                       for (out, _), h, known in zip(s.recvs, headers, recv_shapes)]
    for (out, _), peer, shape in zip(s.recvs, peers, recv_shapes):
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
    if isinstance(pending, _ReduceBlocks):
        env[s.output] = pending.finish()
        return
    if isinstance(pending, _Blocks):
        pending.finish()
        return
    work, results = pending
    try:
        work.wait()
    except Exception as e:  # noqa: BLE001 - a timeout or a peer that ended: name the collective
        raise ExecutionError(
            f"{s.kind} -> {s.output!r} did not complete ({e}): a rank did not join it. It may have "
            f"raised, or passed inputs of other shapes or dtypes than on its earlier calls (ranks "
            f"compare them only on inputs they have not passed before; HOSTIR_CHECK_PROGRAM=1 "
            f"compares on every call)") from e
    for out, result in results:
        if out is not None:
            env[out] = result()


def world() -> tuple[int, int]:
    """(world size, rank) of the job."""
    comm = Communicator.instance()
    return comm.size(), comm.rank()


class RankCheck:
    """Before a program with communication runs on inputs of a signature (shapes
    and dtypes) this rank has not passed it before, every rank compares its
    signature with the others' and a difference is an error on every rank,
    naming it, before anything starts. Repeated signatures are not compared
    again: a rank that alone changes its shapes later waits in a comparison no
    other rank makes (on a group of its own, so it never meets another rank's
    collective), and when the collective timeout (HOSTIR_COMM_TIMEOUT) ends it
    the error names its new shapes; the others' collective that it did not join
    ends so too, naming the likely cause. HOSTIR_CHECK_PROGRAM=1 compares on every call,
    and the programs' text on the first; HOSTIR_DISABLE=rank_checks skips it."""

    MAX_SEEN = 64

    def __init__(self):
        self.seen: set = set()
        self.first = True

    def __call__(self, program, inputs) -> None:
        comm = Communicator.instance()
        if comm.size() == 1 or config.disabled("rank_checks"):
            return
        every_call = config.get().check_program
        if self.first and every_call:
            comm.agree_lines("the host program", program_text(program).splitlines())
        self.first = False
        sig = tuple((i, tuple(a.shape), str(a.dtype).replace("torch.", ""))
                    for i, a in enumerate(inputs) if isinstance(a, torch.Tensor))
        if sig in self.seen and not every_call:
            return
        comm.agree("the inputs' shapes and dtypes", list(sig))
        if len(self.seen) >= self.MAX_SEEN:
            self.seen.clear()
        self.seen.add(sig)


# ---------------------------------------------------------------- allgather, block by block

class _Blocks:
    """A running allgather_blocks: every rank's block (along dim 0 of the
    input), each available as soon as it is here."""

    def __init__(self, x, size: int, coord: int):
        self.x, self.size, self.coord = x, size, coord

    def block(self, index: int):
        raise NotImplementedError

    def finish(self) -> None:
        pass


class _GatheredBlocks(_Blocks):
    """Fallback: one allgather of everything; a block is a view once it is done."""

    def __init__(self, x, size, coord, comm, team):
        super().__init__(x, size, coord)
        self.out = torch.empty((size * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
        self.work = comm.allgather(self.out, x, team)

    def block(self, index: int):
        if index == self.coord:
            return self.x
        if self.work is not None:
            self.work.wait()
            self.work = None
        return self.out.chunk(self.size, 0)[index]

    def finish(self) -> None:
        if self.work is not None:
            self.work.wait()


_symm_buffers: dict = {}   # (shape, dtype, device) -> (buffer, handle): reused across calls
_copy_streams: dict = {}   # device -> the stream peer copies run on


def _symmetric(shape, dtype, device, use: str = "allgather_blocks"):
    """A symmetric-memory buffer (every rank's, rendezvoused once) of this shape,
    for one use (an allgather's and a reduce-scatter's never share one)."""
    key = (tuple(shape), dtype, device, use)
    got = _symm_buffers.get(key)
    if got is None:
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm
        buf = symm.empty(tuple(shape), dtype=dtype, device=device)
        got = _symm_buffers[key] = (buf, symm.rendezvous(buf, dist.group.WORLD.group_name))
        config.log("dist", f"symmetric-memory buffer {list(shape)} {dtype} on {device} "
                   f"rendezvoused (peer copies for {use})")
    return got


class _PeerBlocks(_Blocks):
    """Blocks pushed over peer memory: every rank's gather buffer is symmetric
    memory; on a copy stream each rank's copy engines write its block straight
    into the next ranks' buffers, one ring step at a time, each step ended by a
    device-side barrier (after step j the block of the rank j behind is here),
    while the current stream computes on the blocks already here, its own first.
    A barrier before the first write keeps a rank from overwriting a buffer its
    peer is still reading from the last call."""

    def __init__(self, x, size, coord):
        super().__init__(x, size, coord)
        dev = x.device
        shape = (size * x.shape[0], *x.shape[1:])
        self.out, handle = _symmetric(shape, x.dtype, dev)
        copy = _copy_streams.get(dev)
        if copy is None:
            copy = _copy_streams[dev] = torch.cuda.Stream(dev)
        main = torch.cuda.current_stream(dev)
        self.events = {}
        copy.wait_stream(main)  # x is ready, and this rank is done with its buffer
        with torch.cuda.stream(copy):
            handle.barrier(channel=0)  # ... and so is every peer with theirs
            for j in range(1, size):
                dst = (coord + j) % size
                handle.get_buffer(dst, shape, x.dtype).chunk(size, 0)[coord].copy_(x)
                handle.barrier(channel=j)
                self.events[(coord - j) % size] = copy.record_event()
        x.record_stream(copy)
        self.copy = copy

    def block(self, index: int):
        if index == self.coord:
            return self.x
        torch.cuda.current_stream(self.x.device).wait_event(self.events[index])
        return self.out.chunk(self.size, 0)[index]

    def finish(self) -> None:
        torch.cuda.current_stream(self.x.device).wait_stream(self.copy)


def _start_blocks(s, env, comm: Communicator) -> _Blocks:
    x = env[s.input].contiguous()
    team, size = _team(s, comm)
    coord = comm.rank() if team is None else s.team[0].coordinates(comm.rank())[s.team[1]]
    if (x.is_cuda and team is None and size > 1 and comm.name == "nccl"
            and not config.disabled("peer_copies")):
        try:
            return _PeerBlocks(x, size, coord)
        except Exception as e:  # no symmetric memory here: the collective does it
            config.note_once("peer_copies", f"peer-memory copies unavailable ({type(e).__name__}: "
                                            f"{e}); allgather_blocks uses the collective")
    return _GatheredBlocks(x, size, coord, comm, team)


# ---------------------------------------------------------------- reduce-scatter, block by block

class _ReduceBlocks:
    """A running reduce_scatter_blocks: this rank's contribution to each rank's
    block (written into `block(r)`, sent by `push(r)`); `finish` returns the sum
    of every rank's contribution to this rank's block."""

    def __init__(self, shape, dtype, device, size: int, coord: int, op: str):
        self.shape, self.dtype, self.device = shape, dtype, device
        self.size, self.coord, self.op = size, coord, op

    def block(self, index: int):
        raise NotImplementedError

    def push(self, index: int) -> None:
        pass

    def finish(self):
        raise NotImplementedError


class _ScatteredBlocks(_ReduceBlocks):
    """Fallback: the blocks are written into one local buffer, reduce-scattered
    at the end by the collective."""

    def __init__(self, shape, dtype, device, size, coord, op, comm, team):
        super().__init__(shape, dtype, device, size, coord, op)
        self.comm, self.team = comm, team
        self.full = torch.empty((size * shape[0], *shape[1:]), dtype=dtype, device=device)

    def block(self, index: int):
        return self.full.chunk(self.size, 0)[index]

    def finish(self):
        out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
        self.comm.reduce_scatter(out, self.full, self.op, self.team).wait()
        return out


_stage_buffers: dict = {}  # (shape, dtype, device, peer) -> a reduce_scatter_blocks staging buffer


class _PeerReduceBlocks(_ReduceBlocks):
    """Contributions pushed over peer memory: every rank's receive buffer is
    symmetric memory with a slot per sending rank; a contribution to a peer is
    computed into a staging buffer and written by the copy engines into the
    peer's slot for this rank, on a copy stream, while the current stream
    computes the next; this rank's own contribution is computed into its own
    slot. At the end a device barrier (every rank's pushes are done) and the
    sum over the slots. A barrier before the first write keeps a rank from
    overwriting slots its peer is still summing from the last call."""

    def __init__(self, shape, dtype, device, size, coord, op):
        super().__init__(shape, dtype, device, size, coord, op)
        full = (size * shape[0], *shape[1:])
        self.full_shape = full
        self.slots, self.handle = _symmetric(full, dtype, device, "reduce_scatter_blocks")
        copy = _copy_streams.get(device)
        if copy is None:
            copy = _copy_streams[device] = torch.cuda.Stream(device)
        self.copy, self.main = copy, torch.cuda.current_stream(device)
        copy.wait_stream(self.main)  # this rank is done summing its slots
        with torch.cuda.stream(copy):
            self.handle.barrier(channel=0)  # ... and so is every peer

    def block(self, index: int):
        if index == self.coord:
            return self.slots.chunk(self.size, 0)[index]
        key = (self.shape, self.dtype, self.device, index)
        buf = _stage_buffers.get(key)
        if buf is None:  # (reused: the last call's copies ended before its sum, which this call follows)
            buf = _stage_buffers[key] = torch.empty(self.shape, dtype=self.dtype, device=self.device)
        return buf

    def push(self, index: int) -> None:
        if index == self.coord:
            return
        src = self.block(index)
        self.copy.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.copy):
            dst = self.handle.get_buffer(index, self.full_shape, self.dtype)
            dst.chunk(self.size, 0)[self.coord].copy_(src)

    def finish(self):
        with torch.cuda.stream(self.copy):
            self.handle.barrier(channel=1)  # every rank's pushes into every slot are done
        main = torch.cuda.current_stream(self.device)
        main.wait_stream(self.copy)
        return self.slots.view(self.size, *self.shape).sum(0)


def _start_reduce_blocks(s, env, comm: Communicator, shape) -> _ReduceBlocks:
    team, size = _team(s, comm)
    coord = comm.rank() if team is None else s.team[0].coordinates(comm.rank())[s.team[1]]
    dtype, device = s.output.dtype.torch, env.device
    if (device.type == "cuda" and team is None and size > 1 and comm.name == "nccl"
            and s.op == "sum" and not config.disabled("peer_copies")):
        try:
            return _PeerReduceBlocks(shape, dtype, device, size, coord, s.op)
        except Exception as e:  # no symmetric memory here: the collective does it
            config.note_once("peer_copies_rs", f"peer-memory copies unavailable ({type(e).__name__}: "
                                               f"{e}); reduce_scatter_blocks uses the collective")
    return _ScatteredBlocks(shape, dtype, device, size, coord, s.op, comm, team)


def push_block(s, env, index: int) -> None:
    """Send this rank's contribution to block `index` of the running
    reduce_scatter_blocks `s`."""
    state = env.get(_key(s))
    if state is None:
        raise ExecutionError(f"push_block: the {s.kind} is not running")
    if not 0 <= index < state.size:
        raise ExecutionError(f"push_block: index {index} is not a rank of {state.size}")
    state.push(index)


def peer_block(s, env, index: int):
    """Block `index` of the running allgather_blocks `s` (waits for that block only)."""
    state = env.get(_key(s))
    if state is None:
        raise ExecutionError(f"peer_block: the {s.kind} is not running")
    if not 0 <= index < state.size:
        raise ExecutionError(f"peer_block: index {index} is not a rank of {state.size}")
    return state.block(index)
