"""The multi-GPU vocabulary of nvFuser's frontend: `hostir.multidevice.DeviceMesh`,
`ParallelType`, `Communicator`, `shard_tensor`, DTensor-style placements, and
the loop-domain handle `axis(i)` returns."""
from __future__ import annotations

import torch

from .dist.communicator import Communicator
from .dist.layout import part_of
from .dist.mesh import DeviceMesh, ParallelType, Partial, Placement, Replicate, Shard, placeholder
from .dist.sharding import LoopDomain
from .ir.errors import DefinitionError, UnsupportedError


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
    device-parallel part taken at this rank's coordinate. On a rank outside
    `tv`'s mesh: a placeholder (an empty tensor of `t`'s dtype and number of
    dims), what such a rank passes for `tv`."""
    sharding = tv.fd._sharding_of(tv.val)
    rank = Communicator.instance().rank()
    if sharding.mesh is not None and not sharding.mesh.has(rank):
        return placeholder(t)
    if sharding.is_replicated:
        return t.contiguous()
    shape = sharding.mesh.shape
    coords = sharding.mesh.coordinates(rank)
    for d in sorted({d for d, _ in sharding.dims}):
        n = sharding.parts(d)
        if t.shape[d] % n:
            raise DefinitionError(f"shard_tensor: dim {d} of extent {t.shape[d]} does not split "
                                  f"into {n} equal parts")
        t = part_of(t, d, sharding.layout(d), shape, coords)
    return t.contiguous()


def dtensor_execute(fd, inputs) -> list:
    """nvFuser's `dtensor_execute`: run `fd` on `torch.distributed.tensor`
    DTensors (and plain tensors), each DTensor's placements checked against
    the fusion's annotation of that input; returns the outputs as DTensors on
    the inputs' device mesh, placed as hostir computed them."""
    from torch.distributed.tensor import DTensor
    given = [(i, x) for i, x in enumerate(inputs) if isinstance(x, DTensor)]
    if not given:
        raise DefinitionError("dtensor_execute: no input is a DTensor (use fd.execute)")
    tmesh = given[0][1].device_mesh
    mesh = DeviceMesh(tmesh.mesh)
    for i, x in given:
        if DeviceMesh(x.device_mesh.mesh) != mesh:
            raise DefinitionError(f"dtensor_execute: input {i} is on {DeviceMesh(x.device_mesh.mesh)}, "
                                  f"input {given[0][0]} on {mesh}: one mesh for all")
        _check_placements(fd, i, x, mesh)
    outs = fd.execute([x.to_local() if isinstance(x, DTensor) else x for x in inputs])
    shardings = fd.output_shardings() if fd._dist is not None else [None] * len(outs)
    return [DTensor.from_local(o, tmesh, _placements(j, sh, mesh), run_check=False)
            for j, (o, sh) in enumerate(zip(outs, shardings))]


def _check_placements(fd, i: int, x, mesh: DeviceMesh) -> None:
    from .dist.sharding import placements_sharding
    val = fd._inputs[i]
    want = fd._sharding_of(val)
    got = placements_sharding(val, mesh, [_hostir_placement(p) for p in x.placements])
    if want.mesh is not None and want.mesh != mesh:
        raise DefinitionError(f"dtensor_execute: input {i} ({val.name}) is annotated on {want.mesh} "
                              f"but the DTensor is on {mesh}")
    if (want.dims, want.partial, want.layouts) != (got.dims, got.partial, got.layouts):
        raise DefinitionError(f"dtensor_execute: input {i} ({val.name}) is annotated "
                              f"{want.describe()} but the DTensor is placed {list(x.placements)} "
                              f"({got.describe()})")


def _hostir_placement(p) -> Placement:
    if p.is_shard():
        return Shard(p.dim)
    if p.is_partial():
        return Partial(getattr(p, "reduce_op", "sum"))
    return Replicate()


def _placements(j: int, sh, mesh: DeviceMesh) -> list:
    from torch.distributed.tensor import Partial as TPartial, Replicate as TReplicate, Shard as TShard
    if sh is None or sh.mesh is None:
        return [TReplicate()] * mesh.ndim
    out = []
    for m in range(mesh.ndim):
        e = sh.on(m)
        if e is None:
            out.append(TReplicate())
        elif e[0] == "partial":
            out.append(TPartial(e[1]))
        elif not sh.layout(e[1]).is_block:
            raise UnsupportedError(f"dtensor_execute: output {j} lies as {sh.describe()}, which no "
                                   f"DTensor placement describes (annotate it in contiguous blocks)")
        else:
            out.append(TShard(e[1]))
    return out


__all__ = ["Communicator", "DeviceMesh", "IterDomain", "ParallelType", "Partial", "Placement",
           "Replicate", "Shard", "dtensor_execute", "placeholder", "shard_tensor"]
