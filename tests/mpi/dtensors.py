"""Run under mpirun with the torch backend (tests/test_mpi.py): DTensors in and
out through hostir.dtensor_execute (nvFuser's test_dtensor programs, written by
us), each checked against torch on the whole tensors."""
import sys

import torch
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

import hostir
from hostir import DataType, FusionDefinition, ParallelType, dtensor_execute
from hostir.multidevice import Communicator, DeviceMesh

comm = Communicator.instance()  # bootstraps torch.distributed
d, rank = comm.size(), comm.rank()
tmesh = init_device_mesh(comm.device.type, [d])
mesh = DeviceMesh(tmesh.mesh.tolist())


def schedule(tv, placement):
    """The fusion input's annotation from a DTensor placement (nvFuser's test)."""
    tv.set_device_mesh(mesh)
    if placement.is_shard():
        tv.split(placement.dim, mesh.size, inner_split=False)
        tv.axis(placement.dim).parallelize(ParallelType.mesh_x)
        tv.set_allocation_domain(tv.get_loop_domain(), new_contiguity=True)


def check(name, got, want):
    torch.testing.assert_close(got.cpu(), want.cpu(), rtol=1e-4, atol=1e-4)
    print(f"rank {rank}: {name} ok", flush=True)


torch.manual_seed(0)  # every rank draws the same whole tensors
x = torch.randn(d, 4)
xd = distribute_tensor(x, tmesh, [Shard(0)])
with FusionDefinition() as fd:
    inp = fd.define_tensor((-1, -1), contiguity=False, dtype=DataType.Float)
    fd.add_output(fd.ops.add(inp, fd.define_scalar(1.0, dtype=DataType.Float)))
    schedule(inp, xd.placements[0])
(out,) = dtensor_execute(fd, [xd])
check("plus one", out.to_local(), xd.to_local() + 1)
assert out.device_mesh == xd.device_mesh and tuple(out.placements) == (Shard(0),), out.placements
check("plus one, whole", out.full_tensor(), x + 1)

b, s, e = 2, 3, 5
a, w = torch.randn(b, s, e), torch.randn(d * e, e)
ad, wd = distribute_tensor(a, tmesh, [Replicate()]), distribute_tensor(w, tmesh, [Shard(0)])
with FusionDefinition() as fd:
    inp = fd.define_tensor([-1, -1, e], dtype=DataType.Float)
    weight = fd.define_tensor([d * e, e], dtype=DataType.Float)
    fd.add_output(fd.ops.linear(inp, weight))
    schedule(inp, Replicate())
    schedule(weight, Shard(0))
(out,) = dtensor_execute(fd, [ad, wd])
assert tuple(out.placements) == (Shard(2),), out.placements
check("column-parallel linear", out.full_tensor(), F.linear(a, w))

a, w = torch.randn(b, s, d * e), torch.randn(e, d * e)
ad, wd = distribute_tensor(a, tmesh, [Shard(-1)]), distribute_tensor(w, tmesh, [Shard(-1)])
with FusionDefinition() as fd:
    inp = fd.define_tensor([-1, -1, d * e], dtype=DataType.Float)
    weight = fd.define_tensor([e, d * e], dtype=DataType.Float)
    fd.add_output(fd.ops.linear(inp, weight))
    schedule(inp, Shard(2))
    schedule(weight, Shard(1))
(out,) = dtensor_execute(fd, [ad, wd])
assert tuple(out.placements) == (Replicate(),), out.placements
check("row-parallel linear", out.to_local(), F.linear(a, w))

# a DTensor placed otherwise than the fusion says is an error naming both
try:
    dtensor_execute(fd, [distribute_tensor(a, tmesh, [Replicate()]), wd])
except hostir.DefinitionError as err:
    assert "input 0" in str(err) and "annotated dim 2 on mesh dim 0" in str(err), err
    print(f"rank {rank}: mismatched placements raised ok", flush=True)
else:
    raise AssertionError("a mismatched DTensor was accepted")

print(f"rank {rank}: all dtensor programs ok ({d} ranks)", flush=True)
sys.exit(0)
