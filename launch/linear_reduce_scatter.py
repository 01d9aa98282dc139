"""Row-parallel linear with a sequence-parallel output: every rank holds a
block of the input's features and of the weight's input features; the
partial products are reduce-scattered so each rank gets a block of rows."""
import torch.nn.functional as F

from common import args, data, job, ms_per_step, report
from hostir import DataType, FusionDefinition, ParallelType


def main():
    comm, mesh, dev = job()
    d, cuda = comm.size(), dev.type == "cuda"
    a = args(m=16384 if cuda else 64, k=3584 if cuda else 32, n=8192 if cuda else 48)
    dtype = DataType.BFloat16 if cuda else DataType.Float
    with FusionDefinition() as fd:
        x = fd.define_tensor([a.m, a.k], dtype=dtype)
        w = fd.define_tensor([a.n, a.k], dtype=dtype)
        out = fd.ops.linear(x, w)
        fd.add_output(out)
        for t in (x, w, out):
            t.set_device_mesh(mesh)
        for t in (x, w):
            t.outer_split(-1, d)
            t.axis(-2).parallelize(ParallelType.mesh_x)
        out.outer_split(0, d)
        out.axis(0).parallelize(ParallelType.mesh_x)
    X, W = (data(i, *s, dtype=dtype.torch, device=dev, scale=s[-1] ** -0.5)
            for i, s in enumerate([(a.m, a.k), (a.n, a.k)]))
    inputs = [mesh.shard_tensor(X, 1), mesh.shard_tensor(W, 1)]
    want = mesh.shard_tensor(F.linear(X.float(), W.float()), 0)
    ms = ms_per_step(lambda: fd.execute(inputs), dev, a.steps)
    (out,) = fd.execute(inputs)  # after the timed calls (graph replays on GPUs)
    report(f"linear + reduce_scatter (m={a.m}, k={a.k}, n={a.n})", out, want, ms, 3e-2 if cuda else 1e-4)


if __name__ == "__main__":
    main()
