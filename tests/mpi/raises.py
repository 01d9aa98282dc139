"""Run under mpirun: rank 1 raises before a collective that rank 0 has entered.
The job must end on every rank, non-zero, with rank 1's message shown."""
import torch

from hostir import DataType, HostProgram
from hostir.dist import Communicator

comm = Communicator.instance()
hp = HostProgram()
x = hp.define_tensor([-1], DataType.Float)
hp.add_output(hp.allreduce(x))
hp.execute([torch.ones(4)])  # everyone together once
if comm.rank() == 1:
    raise ValueError("rank 1 failed on purpose")
hp.execute([torch.ones(4)])  # rank 0 waits here for rank 1, which never comes
print("unreachable", flush=True)
