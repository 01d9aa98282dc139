"""Run under mpirun: after a call every rank made alike, rank 1 alone passes
an input of a new shape. The job must end on every rank, non-zero, with a
message saying what rank 1 passed and why that is wrong (never a result built
from mismatched collectives, never a hang)."""
import torch

from hostir import DataType, FusionDefinition
from hostir.multidevice import Communicator, DeviceMesh, Shard

comm = Communicator.instance()
mesh = DeviceMesh(torch.arange(comm.size()))
with FusionDefinition() as fd:
    inp = fd.define_tensor((-1, -1), dtype=DataType.Float, mesh=mesh, placements=[Shard(0)])
    out = fd.ops.set(inp)
    out.set_device_mesh(mesh)  # replicated: an allgather
    fd.add_output(out)
# barriers (no timeout) keep a slow start on a loaded machine from timing out
# the first call: only the second call's mismatch may end the job
comm.barrier()
fd.execute([torch.randn(2, 3)])
comm.barrier()
fd.execute([torch.randn(2, 3) if comm.rank() == 0 else torch.randn(2, 5)])
print("unreachable", flush=True)
