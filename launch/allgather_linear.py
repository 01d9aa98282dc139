"""Sequence-parallel input, column-parallel linear: every rank holds a block
of the input's rows and a block of the weight's rows (output features); the
input is allgathered and multiplied, each rank's output holds its block of
the output features."""
import torch.nn.functional as F

from common import args, data, job, ms_per_step, report
from hostir import DataType, FusionDefinition
from hostir.multidevice import Shard


def main():
    comm, mesh, dev = job()
    d, cuda = comm.size(), dev.type == "cuda"
    a = args(m=16384 if cuda else 64, k=8192 if cuda else 32, n=3584 if cuda else 48)
    dtype = DataType.BFloat16 if cuda else DataType.Float
    with FusionDefinition() as fd:
        x = fd.define_tensor([a.m, a.k], dtype=dtype, mesh=mesh, placements=[Shard(0)])
        w = fd.define_tensor([a.n, a.k], dtype=dtype, mesh=mesh, placements=[Shard(0)])
        fd.add_output(fd.ops.linear(x, w))
    X, W = (data(i, *s, dtype=dtype.torch, device=dev, scale=s[-1] ** -0.5)
            for i, s in enumerate([(a.m, a.k), (a.n, a.k)]))
    inputs = [mesh.shard_tensor(X, 0), mesh.shard_tensor(W, 0)]
    want = mesh.shard_tensor(F.linear(X.float(), W.float()), 1)
    ms = ms_per_step(lambda: fd.execute(inputs), dev, a.steps)
    (out,) = fd.execute(inputs)  # after the timed calls (graph replays on GPUs)
    report(f"allgather + linear (m={a.m}, k={a.k}, n={a.n})", out, want, ms, 3e-2 if cuda else 1e-4)


if __name__ == "__main__":
    main()
