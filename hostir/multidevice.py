"""The multi-GPU vocabulary of nvFuser's frontend: `hostir.multidevice.DeviceMesh`,
`ParallelType`, `Communicator`, `shard_tensor`, DTensor-style placements, and
the loop-domain handle `axis(i)` returns."""
from __future__ import annotations

import torch

from .dist.communicator import Communicator
from .dist.layout import part_of
from .dist.mesh import DeviceMesh, ParallelType, Partial, Placement, Replicate, Shard
from .dist.sharding import LoopDomain
from .ir.errors import DefinitionError


class IterDomain:
    """One loop axis of a tensor (what `tensor.axis(i)` returns)."""

    __slots__ = ("domain", "index")

    def __init__(self, domain: LoopDomain, index: int):
        self.domain, self.index = domain, index

    def parallelize(self, parallel_type: ParallelType) -> None:
        if not isinstance(parallel_type, ParallelType):
            raise DefinitionError(f"parallelize: expected a ParallelType, got {parallel_type!r}")
        self.domain.axes[self.index].ptype = parallel_type

    @property
    def parallel_type(self) -> ParallelType | None:
        return self.domain.axes[self.index].ptype

    def __repr__(self) -> str:
        ax = self.domain.axes[self.index]
        p = f" {ax.ptype.name}" if ax.ptype else ""
        size = "rest" if ax.size is None else ax.size
        return f"IterDomain({self.domain.val!r} axis {self.index}: {size} of dim {ax.source}{p})"


def shard_tensor(t: torch.Tensor, tv) -> torch.Tensor:
    """This rank's shard of the whole tensor `t` as the annotated fusion tensor
    `tv` (a handle from the definition) lays it out: its splits replayed, each
    device-parallel part taken at this rank's coordinate."""
    sharding = tv.fd._sharding_of(tv.val)
    if sharding.is_replicated:
        return t.contiguous()
    shape = sharding.mesh.shape
    coords = sharding.mesh.coordinates(Communicator.instance().rank())
    for d in sorted({d for d, _ in sharding.dims}):
        n = sharding.parts(d)
        if t.shape[d] % n:
            raise DefinitionError(f"shard_tensor: dim {d} of extent {t.shape[d]} does not split "
                                  f"into {n} equal parts")
        t = part_of(t, d, sharding.layout(d), shape, coords)
    return t.contiguous()


__all__ = ["Communicator", "DeviceMesh", "IterDomain", "ParallelType", "Partial", "Placement",
           "Replicate", "Shard", "shard_tensor"]
