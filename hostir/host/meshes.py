"""Lowering a fusion whose tensors are on several meshes (pipeline stages), or
on one mesh of some of the job's ranks: what runs where, and the moves between.

Every rank builds the same host program; a piece, and the resharding on its
mesh, runs in an `on ranks` block of its mesh's ranks. A tensor crosses from
one mesh to another as dist/meshes.py plans it: steps on the producer's mesh,
a send/recv pair per rank (the meshes of one shape) or a broadcast from one
rank (in a block on the team of that rank and the consumer's), steps on the
consumer's mesh. A received tensor's shape travels with it where it is not
static: a rank outside an input's mesh passes a placeholder, so extents that
come from that input are known only on its mesh. The extents of fusion inputs
that a piece reads as scalars (reshape's shape, ...) are taken on the piece's
mesh from a tensor moved there, or the fusion is refused.
"""
from __future__ import annotations

from contextlib import contextmanager

from ..dist.meshes import between_meshes, check_meshes, mesh_ranks
from ..dist.propagate import reshard_steps
from ..dist.sharding import Sharding
from ..ir import scalar as S
from ..ir.errors import UnsupportedError
from ..ir.node import Op, Val


def _covers(on, ranks) -> bool:
    """Whether something that exists on `on` (None: every rank) exists on every one of `ranks`."""
    return on is None or (ranks is not None and set(ranks) <= set(on))


class MeshLowering:
    """Mixed into DistributedFusion: it provides hp, comm, prop, avail,
    leaf_value and _step (one resharding step on a mesh)."""

    def _start_meshes(self) -> None:
        """Check every mesh (its ranks in the job: else an error naming a tensor on
        it) and start the bookkeeping of what exists on which ranks."""
        def tensor_on(mesh) -> str:
            prop = self.prop
            v = next((v for v, s in [*prop.final.items(), *prop.computed.items()] if s.mesh == mesh),
                     None)
            return f"tensor {v!r}" if v is not None else "a tensor"
        check_meshes(self.prop.meshes, self.comm.size(), tensor_on)
        self._in_block = None         # the ranks of the open on_ranks block (None: none open)
        self.leaf_ranks: dict = {}    # id(fusion leaf) -> the ranks its leaf_value is known on
        self.leaf_elsewhere: dict = {}  # (id(leaf), ranks) -> its value there, from a moved tensor

    def _ranks(self, mesh) -> tuple | None:
        return mesh_ranks(mesh, self.comm.size())

    @contextmanager
    def _on(self, ranks):
        """Statements inside run on `ranks` (None: every rank; the ranks of the
        block already open: nothing new). Blocks do not nest here."""
        if ranks is None or ranks == self._in_block:
            yield
            return
        if self._in_block is not None:
            raise AssertionError(f"on_ranks({list(ranks)}) inside on_ranks({list(self._in_block)})")
        self._in_block = ranks
        try:
            with self.hp.on_ranks(ranks):
                yield
        finally:
            self._in_block = None

    def _leaf(self, leaf: Val, mesh) -> Val:
        """The host value of fusion scalar leaf `leaf` for a piece on `mesh`."""
        ranks = self._ranks(mesh)
        on = self.leaf_ranks.get(id(leaf))
        if _covers(on, ranks):
            return self.leaf_value[id(leaf)]
        got = self.leaf_elsewhere.get((id(leaf), ranks))
        if got is None:
            raise UnsupportedError(
                f"a piece on {mesh} reads the extent {leaf!r} of an input held by ranks {list(on)} "
                f"alone, and no tensor moved to {mesh} has it as a dim; not supported (give that "
                f"input to the stage's mesh too, or reshape on the producer's mesh)")
        return got

    def _learn(self, g: Val, hv: Val, sh: Sharding) -> None:
        """Where fusion tensor `g` arrives on a mesh (host value `hv`, sharded
        `sh`), each of its dims whose extent is an input's is that input's extent there."""
        ranks = self._ranks(sh.mesh)
        for d, ax in enumerate(g.logical):
            leaf = ax.extent
            if leaf.op is Op.EXTENT and not _covers(self.leaf_ranks.get(id(leaf)), ranks):
                self.leaf_elsewhere.setdefault((id(leaf), ranks),
                                               S.mul(hv.logical[d].extent, sh.parts(d)))

    def _reshard(self, hv: Val, have: Sharding, want: Sharding, into: Val | None = None) -> Val:
        """`hv` from `have` to `want` on one mesh, in a block on its ranks."""
        mesh = want.mesh or have.mesh
        steps = reshard_steps(have, want)
        steps.sort(key=lambda st: st[0] in ("slice", "take"))  # communicate first, then take blocks
        with self._on(self._ranks(mesh)):
            for n, step in enumerate(steps):
                last = n == len(steps) - 1 and step[0] not in ("slice", "take")
                hv = self._step(hv, step, mesh, into if last else None)
        return hv

    def _cross(self, g: Val, hv: Val, have: Sharding, want: Sharding) -> Val:
        """`hv` (fusion tensor `g`, `have` on one mesh) to `want` on another."""
        hp, move = self.hp, between_meshes(have, want)
        a, b = have.mesh, want.mesh
        hv = self._reshard(hv, have, move.crosses)
        self.avail.setdefault((id(g), move.crosses), hv)
        if move.move is not None and move.move[0] == "send_recv":
            shift = move.move[1]
            known = [ax.extent if S.is_const(ax.extent) else None for ax in hv.logical]
            sized = None in known
            with self._on(self._ranks(a)):
                hp.send(hv, S.add(hp.rank, shift), with_shape=sized)
            with self._on(self._ranks(b)):
                hv = hp.recv(known, hv.dtype, S.sub(hp.rank, shift))
        elif move.move is not None:
            _, root, team = move.move
            with self._on(self._ranks_of_team(team)):
                hv = hp.broadcast(hv, root=team.index(root), team=list(team), with_shape=True)
        self._learn(g, hv, move.arrives)
        return self._reshard(hv, move.arrives, want)

    def _ranks_of_team(self, team) -> tuple | None:
        return None if list(team) == list(range(self.comm.size())) else tuple(team)

    def _input_ranks(self, v: Val, mesh) -> None:
        """Input `v` is held on `mesh`'s ranks: its extents are known there."""
        ranks = self._ranks(mesh)
        for ax in v.logical:
            if ax.extent.op is Op.EXTENT:
                self.leaf_ranks[id(ax.extent)] = ranks
