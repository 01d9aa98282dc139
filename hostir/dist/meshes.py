"""Tensors on different meshes (pipeline stages): how a tensor moves from its
producer's mesh to a consumer's.

A move has three parts, as nvFuser lowers one: on the producer's mesh the
tensor takes a sharding the move can carry (the resharding steps of one mesh:
allgather, allreduce, ...), it crosses, and on the consumer's mesh it takes the
sharding the consumer reads it in (a rank's block: local). It crosses

- rank for rank, by send/recv pairs, where the meshes have the same shape: it
  is first resharded on the producer's mesh to the consumer's placement
  (nothing at all where the two already match), then the rank at each
  coordinate of one mesh sends its part to the rank at that coordinate of the
  other: no gather;
- by a broadcast from one rank of the producer's mesh, where it is whole,
  over the team of that rank and the consumer's ranks, otherwise;
- not at all where it is whole on the producer's mesh and the consumer's
  ranks are all in it (every consumer rank holds it already).

Only meshes whose ranks are consecutive in row-major order run (each rank's
coordinates are arithmetic of the rank; see `check_meshes`).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.errors import DefinitionError, UnsupportedError
from .mesh import DeviceMesh
from .propagate import reshard_steps
from .sharding import Sharding


@dataclass(frozen=True)
class MeshMove:
    """Sharding `src` on one mesh to `dst` on another: `before` (steps on the
    producer's mesh, reshard_steps' kinds) to `crosses` (the sharding it
    crosses in, on the producer's mesh), `move`, then `after` (steps on the
    consumer's mesh, from `arrives`). `move` is ("send_recv", shift): the rank
    r of the producer's mesh sends to r + shift, the ranks at the same
    coordinates; ("broadcast", root, team): global rank `root` sends to the
    sorted global ranks `team` (itself among them); or None: every consumer
    rank holds it already."""

    before: list
    crosses: Sharding
    move: tuple | None
    arrives: Sharding
    after: list

    def describe(self) -> str:
        a, b = self.crosses.mesh, self.arrives.mesh
        if self.move is None:
            how = f"already whole on every rank of {b}"
        elif self.move[0] == "send_recv":
            how = f"send/recv rank for rank ({a} -> {b})"
        else:
            how = f"broadcast from rank {self.move[1]} to ranks {list(self.move[2])}"
        return f"{self.crosses.describe()} on {a}, {how}"


def between_meshes(src: Sharding, dst: Sharding) -> MeshMove:
    """How a tensor sharded as `src` on one mesh gets to `dst` on another."""
    a, b = src.mesh, dst.mesh
    if a is None or b is None or a == b:
        raise ValueError(f"between_meshes: expected two meshes, got {a} and {b}")
    if a.shape == b.shape:
        crosses = Sharding(a, dst.dims, dst.partial, None, dst.layouts)
        return MeshMove(reshard_steps(src, crosses), crosses, ("send_recv", b.first - a.first),
                        dst, [])
    crosses, arrives = Sharding(a), Sharding(b)
    if set(b.ranks) <= set(a.ranks):
        move = None
    else:
        root = next((r for r in a.ranks if b.has(r)), a.first)
        move = ("broadcast", root, tuple(sorted(set(b.ranks) | {root})))
    return MeshMove(reshard_steps(src, crosses), crosses, move, arrives, reshard_steps(arrives, dst))


def check_meshes(meshes, world_size: int, where) -> None:
    """Every mesh's ranks are ranks of the job (DefinitionError naming a tensor
    on it: `where(mesh)`), and consecutive in row-major order (UnsupportedError)."""
    for mesh in meshes:
        bad = [r for r in mesh.ranks if r >= world_size]
        if bad:
            raise DefinitionError(f"{where(mesh)} is on {mesh}, but rank{'s' if len(bad) > 1 else ''} "
                                  f"{', '.join(map(str, bad))} {'are' if len(bad) > 1 else 'is'} not in "
                                  f"this job of {world_size} rank{'s' if world_size > 1 else ''} "
                                  f"(0..{world_size - 1})")
        if not mesh.is_consecutive:
            raise UnsupportedError(f"{where(mesh)} is on {mesh}: hostir runs meshes whose ranks are "
                                   f"consecutive in row-major order (e.g. DeviceMesh([2, 3]) or "
                                   f"DeviceMesh([[0, 1], [2, 3]])), where a rank's coordinates follow "
                                   f"from the rank alone")


def mesh_ranks(mesh: DeviceMesh | None, world_size: int) -> tuple[int, ...] | None:
    """The ranks a mesh runs on, None where that is every rank of the job."""
    if mesh is None or sorted(mesh.ranks) == list(range(world_size)):
        return None
    return tuple(sorted(mesh.ranks))
