"""A tensor-parallel transformer MLP block: linear (column parallel), GELU,
linear (row parallel), then the partial results allreduced. Every rank holds
the whole input and its shards of the weights; the output is whole. With
--chunks s > 1 (default 2) the tokens are pipelined over CUDA streams in s
chunks: chunk i's allreduce overlaps chunk i+1's GEMMs."""
import torch
import torch.nn.functional as F

from common import args, data, job, ms_per_step, report
from hostir import DataType, FusionDefinition, ParallelType
from hostir.multidevice import Replicate, Shard


def main():
    comm, mesh, dev = job()
    d, cuda = comm.size(), dev.type == "cuda"
    a = args(tokens=4096 if cuda else 64, hidden=2048 if cuda else 32, chunks=2)
    t, e, h = a.tokens, a.hidden, 4 * a.hidden
    dtype = DataType.BFloat16 if cuda else DataType.Float
    with FusionDefinition() as fd:
        x = fd.define_tensor([t, e], dtype=dtype, mesh=mesh, placements=[Replicate()])
        w1 = fd.define_tensor([h, e], dtype=dtype, mesh=mesh, placements=[Shard(0)])
        b1 = fd.define_tensor([h], dtype=dtype, mesh=mesh, placements=[Shard(0)])
        w2 = fd.define_tensor([e, h], dtype=dtype, mesh=mesh, placements=[Shard(1)])
        y = fd.ops.cast(fd.ops.linear(x, w1, b1), DataType.Float)
        g = fd.ops.mul(fd.ops.mul(y, 0.5), fd.ops.add(fd.ops.erf(fd.ops.mul(y, 0.7071067811865476)), 1.0))
        fd.add_output(fd.ops.linear(fd.ops.cast(g, dtype), w2))
        if a.chunks > 1:  # the token dim as a host for-loop over chunks on rotating streams
            x.outer_split(0, a.chunks)
            x.axis(0).parallelize(ParallelType.stream)
    tdt = dtype.torch
    X, W1, B1, W2 = (data(i, *s, dtype=tdt, device=dev, scale=s[-1] ** -0.5)
                     for i, s in enumerate([(t, e), (h, e), (h,), (e, h)]))
    inputs = [X, mesh.shard_tensor(W1, 0), mesh.shard_tensor(B1, 0), mesh.shard_tensor(W2, 1)]
    want = F.linear(F.gelu(F.linear(X.float(), W1.float(), B1.float())).to(tdt).float(), W2.float())
    ms = ms_per_step(lambda: fd.execute(inputs), dev, a.steps)
    (out,) = fd.execute(inputs)  # after the timed calls (graph replays on GPUs)
    piped = f", pipelined in {a.chunks} token chunks" if a.chunks > 1 else ""
    report(f"MLP block (linear, GELU, linear{piped})", out, want, ms, 3e-2 if cuda else 1e-4)


if __name__ == "__main__":
    main()
