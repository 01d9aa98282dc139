"""Run under mpirun (tests/test_mpi.py): shards that are not one contiguous
block per rank — a device axis as the inner part of a split (every n-th
element), in the middle of a dim's splits, or two mesh dims nesting their
blocks in one dim — as nvFuser's loop domains make them: shard_tensor replays
them (the programs of nvFuser's TestShardTensor, written by us), and fusions
compute on them and gather, reduce and reshard them, each checked against
torch on the whole tensors."""
import sys

import torch
import torch.nn.functional as F

from hostir import DataType, FusionDefinition, ParallelType
from hostir.multidevice import Communicator, DeviceMesh, shard_tensor

import common
from common import full

comm = Communicator.instance()
d, rank = comm.size(), comm.rank()
mesh = DeviceMesh(torch.arange(d))
X, Y = ParallelType.mesh_x, ParallelType.mesh_y


def check(name, got, want, **tol):
    common.check(name, got, want, **(tol or dict(rtol=1e-5, atol=1e-5)))


# ---- shard_tensor replays the splits (nvFuser's TestShardTensor programs)
with FusionDefinition() as fd:
    tv = fd.define_tensor([-1])
    fd.add_output(tv)
    tv.set_device_mesh(mesh)
    tv.inner_split(0, d)
    tv.axis(1).parallelize(X)
t = torch.arange(3 * d, dtype=torch.float)
check("shard_tensor of an inner split", shard_tensor(t, tv), t.reshape(3, d)[:, rank])

with FusionDefinition() as fd:
    tv = fd.define_tensor([-1])
    fd.add_output(tv)
    tv.set_device_mesh(mesh)
    tv.outer_split(0, 2)
    tv.outer_split(1, d)
    tv.axis(1).parallelize(X)
t = torch.arange(2 * d * 3, dtype=torch.float)
check("shard_tensor of a split that is not outermost", shard_tensor(t, tv),
      t.reshape(2, d, 3)[:, rank, :].flatten())

with FusionDefinition() as fd:
    tv = fd.define_tensor([-1, -1], contiguity=[True, None])
    fd.add_output(tv)
    tv.set_device_mesh(mesh)
    tv.outer_split(1, d)
    tv.axis(1).parallelize(X)
t = torch.arange(2, dtype=torch.float).unsqueeze(-1).expand(-1, d * 3)
check("shard_tensor of an expanded broadcast", shard_tensor(t, tv),
      torch.arange(2, dtype=torch.float).unsqueeze(-1).expand(-1, 3))

if d % 2 == 0:
    tp, dp = 2, d // 2
    mesh2 = DeviceMesh(torch.arange(d).reshape(dp, tp))
    dp_rank, tp_rank = rank // tp, rank % tp
    with FusionDefinition() as fd:
        tv = fd.define_tensor([-1])
        fd.add_output(tv)
        tv.set_device_mesh(mesh2)
        tv.inner_split(0, tp * 3)
        tv.outer_split(0, dp)
        tv.axis(0).parallelize(Y)
        tv.outer_split(2, tp)
        tv.axis(2).parallelize(X)
    t = torch.arange(dp * 2 * tp * 3, dtype=torch.float)
    check("shard_tensor of a 2-D sharded vector", shard_tensor(t, tv),
          t.reshape(dp, 2, tp, 3)[dp_rank, :, tp_rank, :].flatten())

    e = 5
    with FusionDefinition() as fd:
        tv = fd.define_tensor([-1, -1, e])  # [b, s, e]
        fd.add_output(tv)
        tv.set_device_mesh(mesh2)
        tv.outer_split(1, tp)
        tv.axis(1).parallelize(X)
        tv.outer_split(2, dp)
        tv.axis(2).parallelize(Y)
        tv.reorder({2: 0, 1: 1})
    b, s = 2, tp * dp * 3
    t = torch.arange(b * s * e, dtype=torch.float).reshape(b, s, e)
    check("shard_tensor of context and tensor parallel", shard_tensor(t, tv),
          t.reshape(b, tp, dp, 3, e)[:, tp_rank, dp_rank, :, :])


# ---- fusions on such shards
def cyclic(tv, dim):
    """Shard `dim` of `tv` so that rank r holds elements r, r + d, r + 2d, ..."""
    tv.set_device_mesh(mesh)
    tv.inner_split(dim, d)
    tv.axis(dim + 1).parallelize(X)


def middle(tv, dim, outer=2):
    """Shard `dim` as [outer, d, rest]: each rank holds `outer` blocks."""
    tv.set_device_mesh(mesh)
    tv.outer_split(dim, outer)
    tv.outer_split(dim + 1, d)
    tv.axis(dim + 1).parallelize(X)


def block(tv, dim):
    tv.set_device_mesh(mesh)
    tv.outer_split(dim, d)
    tv.axis(dim).parallelize(X)


x = full(4, 6 * d)

# pointwise on every n-th column, returned in that layout and gathered whole
with FusionDefinition() as fd:
    inp = fd.define_tensor([-1, -1], contiguity=True, dtype=DataType.Float)
    y = fd.ops.mul(fd.ops.relu(inp), 2.0)
    whole = fd.ops.set(y)
    fd.add_output(y)
    fd.add_output(whole)
    cyclic(inp, 1)
    whole.set_device_mesh(mesh)
got_y, got_whole = fd.execute([shard_tensor(x, inp)])
check("pointwise on an inner split", got_y, shard_tensor(x.relu() * 2, inp))
check("an inner split gathered whole", got_whole, x.relu() * 2)

# a sum over a dim in every n-th element: partial sums, allreduced
with FusionDefinition() as fd:
    inp = fd.define_tensor([-1, -1], contiguity=True, dtype=DataType.Float)
    fd.add_output(fd.ops.sum(inp, [1]))
    cyclic(inp, 1)
check("a sum over an inner split", fd.execute([shard_tensor(x, inp)])[0], x.sum(1), rtol=1e-4, atol=1e-4)

# resharding between layouts: [2, d, rest] -> contiguous blocks -> every n-th
with FusionDefinition() as fd:
    inp = fd.define_tensor([-1, -1], contiguity=True, dtype=DataType.Float)
    a = fd.ops.exp(inp)
    b = fd.ops.set(a)
    c = fd.ops.neg(fd.ops.set(b))
    fd.add_output(b)
    fd.add_output(c)
    middle(inp, 1)
    block(b, 1)
    cyclic(c, 1)
got_b, got_c = fd.execute([shard_tensor(x, inp)])
check("[2, d, rest] resharded to blocks", got_b, shard_tensor(x.exp(), b))
check("blocks resharded to every n-th", got_c, shard_tensor(-x.exp(), c))

# a column-parallel linear whose weight rows are dealt out one by one
k_, n_ = 8, 3 * d
with FusionDefinition() as fd:
    inp = fd.define_tensor([-1, k_], contiguity=True, dtype=DataType.Float)
    w = fd.define_tensor([n_, k_], contiguity=True, dtype=DataType.Float)
    out = fd.ops.linear(inp, w)
    whole = fd.ops.set(out)
    fd.add_output(out)
    fd.add_output(whole)
    inp.set_device_mesh(mesh)
    cyclic(w, 0)
    whole.set_device_mesh(mesh)
xi, W = full(5, k_), full(n_, k_)
got_out, got_whole = fd.execute([xi, shard_tensor(W, w)])
check("linear with every n-th weight row", got_out, F.linear(xi, W)[:, rank::d], rtol=1e-4, atol=1e-4)
check("linear with every n-th weight row, gathered", got_whole, F.linear(xi, W), rtol=1e-4, atol=1e-4)

# two mesh dims nested in one dim (4 ranks): kept, gathered, and summed over
if d == 4:
    mesh2 = DeviceMesh(torch.arange(4).reshape(2, 2))
    x = full(3, 12, 5)
    with FusionDefinition() as fd:
        inp = fd.define_tensor([-1, -1, -1], contiguity=True, dtype=DataType.Float)
        y = fd.ops.sigmoid(inp)
        whole = fd.ops.set(y)
        total = fd.ops.sum(inp, [1])
        for t in (y, whole, total):
            fd.add_output(t)
        inp.set_device_mesh(mesh2)
        inp.outer_split(1, 2)
        inp.axis(1).parallelize(X)
        inp.outer_split(2, 2)
        inp.axis(2).parallelize(Y)
        whole.set_device_mesh(mesh2)
    got_y, got_whole, got_total = fd.execute([shard_tensor(x, inp)])
    check("nested mesh dims: pointwise", got_y, shard_tensor(x.sigmoid(), inp))
    check("nested mesh dims: gathered", got_whole, x.sigmoid())
    check("nested mesh dims: summed over", got_total, x.sum(1), rtol=1e-4, atol=1e-4)

    # DTensor placements sharding one dim over both mesh dims nest them (mesh dim 0 outer)
    from hostir.multidevice import Shard
    with FusionDefinition() as fd:
        inp = fd.define_tensor([-1, -1], dtype=DataType.Float, mesh=mesh2, placements=[Shard(1), Shard(1)])
        out = fd.ops.set(fd.ops.abs(inp))
        out.set_device_mesh(mesh2)
        fd.add_output(out)
    x = full(3, 8)
    c0, c1 = mesh2.coordinates(rank)
    check("Shard(1) on both mesh dims, gathered", fd.execute([x.chunk(2, 1)[c0].chunk(2, 1)[c1]])[0], x.abs())

print(f"rank {rank}: all layouts ok ({d} ranks)", flush=True)
sys.exit(0)
