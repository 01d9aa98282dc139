"""The communication statements of the host program builder (a part of
HostProgram, kept apart by concept): collectives, the block-by-block forms,
point-to-point transfers and waits. Each starts asynchronously and returns
its output; a Wait is inserted before the output's first use."""
from __future__ import annotations

from ..dist.mesh import DeviceMesh
from ..ir import scalar as S
from ..ir.dtypes import DataType
from ..ir.errors import DefinitionError
from ..ir.node import Val, const
from . import ir as H


def _scalar_arg(x, what: str) -> Val:
    """A statement's scalar argument: a scalar expression, or a Python number."""
    if isinstance(x, Val):
        if x.is_tensor:
            raise DefinitionError(f"{what}: expected a scalar, got tensor {x!r}")
        return x
    if isinstance(x, (bool, int, float)):
        return const(x)
    raise DefinitionError(f"{what}: expected an int or a scalar expression, got {x!r}")


def _team_arg(team):
    """A team as (mesh, mesh dim): given so, or as a list of ranks (a 1-D mesh of them, sorted)."""
    if team is None or (isinstance(team, tuple) and len(team) == 2 and isinstance(team[0], DeviceMesh)):
        return team
    return (DeviceMesh(sorted(int(r) for r in team)), 0)


def _sized(extents, name: str) -> tuple:
    """(extents, name) of a tensor received with its shape: each extent that is
    not a constant (None: not known here) is bound from the shape received."""
    out = [e if e is not None and S.is_const(e) else H.sized_extent(name, d)
           for d, e in enumerate(extents)]
    return out, name


class CommunicationStatements:
    """Mixed into HostProgram: it provides _use, _emit, _tensor, _wait and the
    bookkeeping (_started, _pending, _base, _read_only, _world)."""

    def _note_start(self, comm: H.Communication) -> None:
        """Record `comm`, just emitted, as started here: waited for at the end of
        this block at the latest, and in this block of ranks."""
        self._started[-1].append(comm)
        self._home[id(comm)] = (self._blocks[-1], len(self._ranks))

    def _start(self, comm: H.Communication) -> None:
        self._emit(comm)
        self._note_start(comm)
        for out in comm.outputs:
            self._pending[id(out)] = comm
            if comm.into:
                self._pending[("into", id(self._base.get(id(out), out)))] = comm

    def _writable(self, v: Val) -> Val:
        if id(v) in self._read_only:
            raise DefinitionError(f"{v!r} is a rank_part (a copy where it is not one block): "
                                  f"it takes no writes; write into its source's buffer")
        return v

    def _team_size(self, team) -> Val:
        return self._world if team is None else const(team[0].shape[team[1]])

    def _collective(self, kind: str, t: Val, out_extents, out=None, **kw) -> Val:
        if out is None:
            out = self._tensor(t.dtype, out_extents)
            self._start(H.Communication(kind, t, out, **kw))
            return out
        out = self._writable(self._use(out, f"{kind} out"))
        if out.dtype is not t.dtype or out.ndim != len(out_extents):
            raise DefinitionError(f"{kind} of {t!r}: out {out!r} must be {t.dtype.short} with "
                                  f"{len(out_extents)} dims")
        self._start(H.Communication(kind, t, out, into=True, **kw))
        return out

    def allgather(self, t: Val, dim: int = 0, team=None, out=None, within=None) -> Val:
        """Every rank's `t` concatenated along `dim` (`team`: (mesh, mesh dim), the
        ranks along that mesh dimension; None: all ranks). With `out` (a buffer
        or a view of one), the result is written there: straight from the
        collective when `out` is contiguous with `dim` outermost. With `within`
        = (A, B) (see rank_part), each rank's `t` is [A, B] along `dim` and the
        result [A, n, B]: the ranks' parts interleaved, not concatenated."""
        t = self._use(t, "allgather")
        d = self._dim(t, dim, "allgather")
        ext = [a.extent for a in t.logical]
        ext[d] = S.mul(ext[d], self._team_size(team))
        within = None if within is None or within[0] == 1 else tuple(within)
        return self._collective("allgather", t, ext, out, dim=d, team=team, within=within)

    def allreduce(self, t: Val, op: str = "sum", team=None, out=None) -> Val:
        """With `out`, the result is written there (in place when `out` is `t`)."""
        t = self._use(t, "allreduce")
        return self._collective("allreduce", t, [a.extent for a in t.logical], out, op=op, team=team)

    def reduce_scatter(self, t: Val, dim: int = 0, op: str = "sum", team=None, out=None) -> Val:
        t = self._use(t, "reduce_scatter")
        d = self._dim(t, dim, "reduce_scatter")
        ext = [a.extent for a in t.logical]
        ext[d] = S.floordiv(ext[d], self._team_size(team))
        return self._collective("reduce_scatter", t, ext, out, dim=d, op=op, team=team)

    def broadcast(self, t: Val, root=0, team=None, with_shape: bool = False) -> Val:
        """Rank `root`'s `t` (root: an index into `team`, which is (mesh, mesh
        dim) or a list of ranks; None: all ranks) on every rank of the team.
        With `with_shape`, the root sends the shape first and only the root reads
        `t` (it may exist there alone, as between pipeline stages): the result's
        extents that are not constants come from that shape."""
        t = self._use(t, "broadcast")
        team = _team_arg(team)
        if not with_shape:
            return self._collective("broadcast", t, [a.extent for a in t.logical],
                                    peer=_scalar_arg(root, "broadcast"), team=team)
        out = self._tensor(t.dtype, *_sized([a.extent for a in t.logical], self._name()))
        self._start(H.Communication("broadcast", t, out, peer=_scalar_arg(root, "broadcast"),
                                    team=team, with_shape=True))
        return out

    def all_to_all(self, t: Val, dim: int = 0, gather_dim: int | None = None, team=None,
                   out=None) -> Val:
        """Block r of `t` along `dim` goes to rank r (of `team`); the blocks this
        rank receives are joined along `gather_dim` (default `dim`) in rank
        order. With dim != gather_dim it moves a sharding from `gather_dim` to
        `dim`: a tensor split over the ranks along `gather_dim` comes back whole
        there and split along `dim`."""
        t = self._use(t, "all_to_all")
        d = self._dim(t, dim, "all_to_all")
        g = d if gather_dim is None else self._dim(t, gather_dim, "all_to_all")
        ext = [a.extent for a in t.logical]
        if g != d:
            n = self._team_size(team)
            ext[d], ext[g] = S.floordiv(ext[d], n), S.mul(ext[g], n)
        return self._collective("all_to_all", t, ext, out, dim=d, gather_dim=g, team=team)

    def allgather_blocks(self, t: Val, team=None) -> H.Communication:
        """Start gathering every rank's `t` (blocks along dim 0, in rank order);
        returns a handle: `peer_block(handle, r)` is rank r's block once it is
        here, `wait(handle)` ends it. Computing on the blocks as they arrive
        overlaps the transfers (over peer memory with copy engines on GPUs that
        allow it, else one collective)."""
        t = self._use(t, "allgather_blocks")
        comm = H.Communication("allgather_blocks", t, None, team=team)
        self._emit(comm)
        self._note_start(comm)
        return comm

    def reduce_scatter_blocks(self, shape, dtype, op: str = "sum", team=None, blocks_of: Val | None = None,
                              dim: int = 0) -> H.Communication:
        """Start a reduce-scatter computed block by block: returns a handle;
        `peer_block(handle, r)` is the buffer this rank writes its contribution
        to rank r's block into, `push_block(handle, r)` sends it once written
        (over peer memory with copy engines on GPUs that allow it, else one
        reduce-scatter at the end), and after `wait(handle)`, `handle.output`
        (shape `shape`) is the sum of every rank's contribution to this rank's
        block. Writing the blocks of the other ranks first, this rank's last,
        overlaps the transfers with the compute. `blocks_of`: the tensor whose
        blocks along `dim` the contributions are computed from (the start checks
        that the ranks divide it, as a reduce_scatter checks its input)."""
        out = self._tensor(dtype, [_scalar_arg(e, "reduce_scatter_blocks shape") for e in shape])
        src = None
        if blocks_of is not None:
            src = self._use(blocks_of, "reduce_scatter_blocks")
            dim = self._dim(src, dim, "reduce_scatter_blocks")
        comm = H.Communication("reduce_scatter_blocks", src, out, dim=dim, op=op, team=team)
        self._start(comm)
        return comm

    def peer_block(self, handle: H.Communication, index) -> Val:
        """Block `index` of a blocks communication: rank `index`'s block of an
        allgather_blocks once it is here, or the buffer for this rank's
        contribution to rank `index`'s block of a reduce_scatter_blocks."""
        if not isinstance(handle, H.Communication) or handle.kind not in (
                "allgather_blocks", "reduce_scatter_blocks"):
            raise DefinitionError(f"peer_block: expected the handle allgather_blocks or "
                                  f"reduce_scatter_blocks returns, got {handle!r}")
        t = handle.input if handle.kind == "allgather_blocks" else handle.output
        out = self._tensor(t.dtype, [a.extent for a in t.logical])
        self._emit(H.PeerBlock(out, handle, _scalar_arg(index, "peer_block")))
        return out

    def push_block(self, handle: H.Communication, index) -> None:
        """Send this rank's contribution to rank `index`'s block (written into
        `peer_block(handle, index)`) of a reduce_scatter_blocks."""
        if not isinstance(handle, H.Communication) or handle.kind != "reduce_scatter_blocks":
            raise DefinitionError(f"push_block: expected the handle reduce_scatter_blocks returns, "
                                  f"got {handle!r}")
        self._emit(H.PushBlock(handle, _scalar_arg(index, "push_block")))

    def send_recv(self, sends=(), recvs=(), with_shape: bool | None = None) -> list[Val]:
        """Point-to-point transfers started together and waited for together (a
        ring where every rank sends first cannot deadlock): `sends` are
        (tensor, peer rank) pairs, `recvs` (shape, dtype, peer rank) triples;
        returns the received tensors. A peer that is this rank is a local copy.
        With `with_shape` (implied by a None extent in a recv's shape: it comes
        from the sender), every transfer sends its shape first; the peer's
        send_recv must say so too."""
        sends = [(self._use(t, "send_recv send"), _scalar_arg(p, "send_recv peer")) for t, p in sends]
        if with_shape is None:
            with_shape = any(e is None for shape, _, _ in recvs for e in shape)
        outs = []
        for shape, dtype, p in recvs:
            ext = [e if e is None else _scalar_arg(e, "send_recv shape") for e in shape]
            outs.append((self._tensor(dtype, *_sized(ext, self._name())) if with_shape else
                         self._tensor(dtype, ext), _scalar_arg(p, "send_recv peer")))
        if not sends and not outs:
            raise DefinitionError("send_recv: nothing to send or receive")
        self._start(H.Communication("send_recv", None, None, sends=tuple(sends), recvs=tuple(outs),
                                    with_shape=bool(with_shape)))
        return [o for o, _ in outs]

    def send(self, t: Val, peer, with_shape: bool = False) -> None:
        """Send `t` to rank `peer` (waited for at the end of the enclosing block)."""
        self.send_recv(sends=[(t, peer)], with_shape=with_shape)

    def recv(self, shape, dtype: DataType, peer) -> Val:
        """A tensor from rank `peer`; a None extent in `shape` comes from the
        sender (which sends `with_shape=True`)."""
        return self.send_recv(recvs=[(shape, dtype, peer)])[0]

    def wait(self, t) -> None:
        """Wait for the communication that makes `t` (or for handle `t`)."""
        if isinstance(t, H.Communication):
            self._wait(t)
            return
        comm = self._pending.get(id(t))
        if comm is None:
            raise DefinitionError(f"wait: {t!r} is not the output of a pending collective")
        self._wait(comm)

