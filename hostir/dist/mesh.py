"""Device meshes and parallel types, in nvFuser's vocabulary, and DTensor-style
placements (`Shard`, `Replicate`, `Partial`)."""
from __future__ import annotations

import enum
from dataclasses import dataclass

import torch

from ..ir.errors import DefinitionError
from .communicator import Communicator


class ParallelType(enum.Enum):
    """How a loop axis is parallelized: over the ranks along a mesh dimension
    (mesh_x is the mesh's last dimension, mesh_y the one before it, mesh_z the
    one before that), or over CUDA streams (a host for-loop over chunks)."""

    mesh_x = "mesh_x"
    mesh_y = "mesh_y"
    mesh_z = "mesh_z"
    stream = "stream"
    serial = "serial"

    # nvFuser's older spellings
    DIDx = "mesh_x"
    DIDy = "mesh_y"
    DIDz = "mesh_z"
    Stream = "stream"
    Serial = "serial"

    @property
    def is_device(self) -> bool:
        return self in (ParallelType.mesh_x, ParallelType.mesh_y, ParallelType.mesh_z)

    def mesh_dim(self, mesh: "DeviceMesh") -> int:
        """The mesh dimension this type runs over (mesh_x: the last)."""
        back = {ParallelType.mesh_x: 1, ParallelType.mesh_y: 2, ParallelType.mesh_z: 3}[self]
        if back > mesh.ndim:
            raise DefinitionError(f"{self.name} needs a mesh of {back} or more dimensions; "
                                  f"{mesh} has {mesh.ndim}")
        return mesh.ndim - back


class DeviceMesh:
    """Ranks laid out in 1 to 3 dimensions: `DeviceMesh(torch.arange(4))`,
    `DeviceMesh([[0, 1], [2, 3]])`, or `DeviceMesh(range(n))`."""

    def __init__(self, devices):
        t = devices if isinstance(devices, torch.Tensor) else torch.tensor(list(devices)
                                                                           if isinstance(devices, range)
                                                                           else devices)
        t = t.to(torch.int64)
        if t.ndim == 0 or t.ndim > 3 or t.numel() == 0:
            raise DefinitionError(f"DeviceMesh: expected a 1-D to 3-D list of ranks, got shape "
                                  f"{list(t.shape)}")
        flat = t.flatten().tolist()
        if len(set(flat)) != len(flat) or min(flat) < 0:
            raise DefinitionError(f"DeviceMesh: ranks must be distinct and non-negative, got {flat}")
        self.devices = t

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.devices.shape)

    @property
    def size(self) -> int:
        return self.devices.numel()

    @property
    def ndim(self) -> int:
        return self.devices.ndim

    @property
    def ranks(self) -> list[int]:
        return self.devices.flatten().tolist()

    def __eq__(self, other) -> bool:
        return isinstance(other, DeviceMesh) and self.shape == other.shape and \
            torch.equal(self.devices, other.devices)

    def __hash__(self) -> int:
        return hash((self.shape, tuple(self.ranks)))

    def __repr__(self) -> str:
        return f"DeviceMesh({self.devices.tolist()})"

    @property
    def first(self) -> int:
        """The mesh's first rank (its origin: coordinates count from it)."""
        return self.ranks[0]

    @property
    def is_consecutive(self) -> bool:
        """Whether the ranks are `first, first + 1, ...` in row-major order (a
        rank's coordinates are then arithmetic of the rank alone)."""
        return self.ranks == list(range(self.first, self.first + self.size))

    def has(self, rank: int) -> bool:
        """nvFuser's name: whether `rank` is in the mesh."""
        return rank in self.ranks

    def coordinates(self, rank: int) -> tuple[int, ...]:
        where = (self.devices == rank).nonzero()
        if where.numel() == 0:
            raise DefinitionError(f"rank {rank} is not in {self}")
        return tuple(where[0].tolist())

    def team(self, dim: int, rank: int) -> tuple[int, ...]:
        """The ranks along mesh dimension `dim` through `rank`, in mesh order."""
        index = list(self.coordinates(rank))
        index[dim] = slice(None)
        return tuple(self.devices[tuple(index)].tolist())

    def teams(self, dim: int) -> list[tuple[int, ...]]:
        """Every team along mesh dimension `dim` (each rank's included once), in a
        fixed order: teams are made collectively, so every rank makes all of them."""
        moved = self.devices.movedim(dim, -1).reshape(-1, self.shape[dim])
        return [tuple(row.tolist()) for row in moved]

    def shard_tensor(self, t: torch.Tensor, dim: int, rank: int | None = None,
                     parallel_type: ParallelType = ParallelType.mesh_x) -> torch.Tensor:
        """This rank's block of `t` along `dim`, split over the mesh dimension of
        `parallel_type` (contiguous blocks, as `outer_split(dim, n)` gives). On a
        rank outside the mesh: a placeholder (see `placeholder`)."""
        rank = Communicator.instance().rank() if rank is None else rank
        if not self.has(rank):
            return placeholder(t)
        mdim = parallel_type.mesh_dim(self)
        n, where = self.shape[mdim], self.coordinates(rank)[mdim]
        dim = dim % t.ndim
        if t.shape[dim] % n:
            raise DefinitionError(f"shard_tensor: dim {dim} of extent {t.shape[dim]} does not split "
                                  f"into {n} equal blocks")
        return t.chunk(n, dim)[where].contiguous()


def placeholder(t: torch.Tensor) -> torch.Tensor:
    """What a rank outside a tensor's mesh passes for it, and gets for an output
    on another mesh: an empty tensor of `t`'s dtype, device and number of dims
    (shape [0, 0, ...]; a 0-dim tensor's is [0]). hostir never reads it."""
    return torch.empty((0,) * max(t.ndim, 1), dtype=t.dtype, device=t.device)


class Placement:
    """DTensor-style placement of a tensor over one mesh dimension."""


@dataclass(frozen=True)
class Shard(Placement):
    """The tensor's dim `dim` is split in equal contiguous blocks over the mesh dimension."""

    dim: int


@dataclass(frozen=True)
class Replicate(Placement):
    """Every rank holds the whole tensor."""


@dataclass(frozen=True)
class Partial(Placement):
    """Every rank holds a partial result; the tensor is their sum (or `reduce_op`)."""

    reduce_op: str = "sum"
