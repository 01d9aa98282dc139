"""One process, a one-rank NCCL group (a GPU): host programs of one collective
are captured as CUDA graphs after two eager calls; outputs a caller holds
across calls are never overwritten (each held output keeps its graph from
being replayed: another is captured, up to three, then calls run eagerly),
and once they are dropped the graph is replayed again into the same memory.
Run by tests/test_host_ir.py (gpu)."""
import os

import torch
import torch.distributed as dist

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))

from hostir import DataType, HostProgram  # noqa: E402
from hostir.multidevice import Communicator  # noqa: E402

assert Communicator.instance().name == "nccl"
dev = torch.device("cuda:0")
n = 4099
x = torch.randn(n, device=dev)
for kind in ("allgather", "allreduce", "reduce_scatter", "broadcast"):
    hp = HostProgram()
    t = hp.define_tensor([n], DataType.Float)
    hp.add_output(hp.allgather(t, 0) if kind == "allgather" else getattr(hp, kind)(t))
    held = []
    for i in range(7):
        x.copy_(torch.randn(n, device=dev))
        (out,) = hp.execute([x])
        held.append((out, x.clone()))
    torch.cuda.synchronize()
    g = hp._graphs
    assert g.error is None and g.count == 3 and g.replays == 3, (kind, g.error, g.count, g.replays)
    for out, want in held:
        assert torch.equal(out, want), kind
    del held, out
    ptrs = set()
    for _ in range(4):
        x.copy_(torch.randn(n, device=dev))
        got = hp.execute([x])[0]
        assert torch.equal(got, x), kind
        ptrs.add(got.data_ptr())
        del got
    assert g.replays == 7 and len(ptrs) == 1, (kind, g.replays, len(ptrs))
    print(f"{kind}: captured, replayed, held outputs intact ok", flush=True)
dist.destroy_process_group()
print("all one-rank NCCL graph programs ok")
