"""Run under mpirun: rank 0 cannot open the process group's store. Every rank
must raise with rank 0's message (none may wait for an address that never
comes); each prints what it caught and the job exits 0."""
import torch.distributed as dist

from hostir.dist import Communicator


class Refused:
    def __init__(self, *args, **kwargs):
        raise OSError("no port today (on purpose)")


if __import__("hostir").config.launch().rank == 0:
    dist.TCPStore = Refused
try:
    Communicator.instance()
except RuntimeError as e:
    print(f"caught: {e}", flush=True)
