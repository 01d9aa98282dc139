"""Run under mpirun (tests/test_mpi.py): fusions whose tensors are on several
meshes (pipeline stages, as nvFuser's pipeline tests place them), each checked
against torch on the whole tensors: a 2-stage pipeline of one rank each
(send/recv), two stages of half the ranks each sharded alike (send/recv rank
for rank, no gather), a producer on one rank broadcast to every rank, a
reduction on one mesh consumed on another, an MLP split across two
tensor-parallel stages, an input extent a later stage reads, a hand-written
host program with `on_ranks` blocks; ranks outside an output's mesh get an
empty tensor, and meshes the job cannot run are refused by name."""
import re

import torch
import torch.nn.functional as F

from hostir import DataType, DefinitionError, FusionDefinition, HostProgram, ParallelType, UnsupportedError
from hostir.multidevice import Communicator, DeviceMesh, Replicate, Shard, shard_tensor

from common import full

comm = Communicator.instance()
d, rank = comm.size(), comm.rank()
DEV = comm.device
X = ParallelType.mesh_x
h = d // 2
FIRST, SECOND = DeviceMesh([0]), DeviceMesh([1])
HALF0, HALF1 = DeviceMesh(range(h)), DeviceMesh(range(h, 2 * h))   # [0], [1] at 2 ranks
ALL = DeviceMesh(range(d))


def check(name, got, want, mesh, tv=None):
    """`got` is this rank's part of `want` on `mesh` (as `tv` is sharded), or,
    outside the mesh, an empty tensor of its dtype and number of dims."""
    if mesh.has(rank):
        want = shard_tensor(want, tv) if tv is not None else want
        torch.testing.assert_close(got.cpu(), want.cpu(), rtol=1e-4, atol=1e-4)
    else:
        assert got.numel() == 0 and got.dtype == want.dtype and got.ndim == max(want.ndim, 1), got
    print(f"rank {rank}: {name} ok", flush=True)


def text(fd) -> str:
    return str(fd._dist.program)


# ---- a 2-stage pipeline: relu on rank 0, send/recv, a product on rank 1 (symbolic
# extents: the shape travels with the tensor)
with FusionDefinition() as fd:
    x = fd.define_tensor([-1, -1], dtype=DataType.Float)
    y = fd.ops.relu(x)
    z = fd.ops.set(y)
    w = fd.ops.mul(z, z)
    fd.add_output(w)
    for t in (x, y):
        t.set_device_mesh(FIRST)
    for t in (z, w):
        t.set_device_mesh(SECOND)
xs = full(5, 7)
for rows in (5, 3):  # a second call with another shape: nothing but rank 0 holds it
    xs = full(rows, 7)
    (out,) = fd.execute([shard_tensor(xs, x)])
    check(f"2-stage pipeline, {rows} rows", out, torch.relu(xs) ** 2, SECOND)
prog = text(fd)
assert "on ranks [0]:" in prog and "on ranks [1]:" in prog, prog
assert re.search(r"start send_recv\(send \[\w+ to \(rank \+ 1\)\], recv \[\], with shapes\)", prog), prog
assert "allgather" not in prog and "broadcast" not in prog, prog
assert "return T" in prog and "on ranks [1]" in prog.splitlines()[-2], prog

# ---- two stages of h ranks, each sharded on dim 0 alike: send/recv rank for rank,
# no gather (static extents: no shape travels)
with FusionDefinition() as fd:
    x = fd.define_tensor([2 * h, 6], dtype=DataType.Float)
    y = fd.ops.sin(x)
    z = fd.ops.set(y)
    w = fd.ops.add(z, 1.0)
    fd.add_output(w)
    for t, mesh in ((x, HALF0), (y, HALF0), (z, HALF1), (w, HALF1)):
        t.set_device_mesh(mesh)
        t.outer_split(0, h)
        t.axis(0).parallelize(X)
xs = full(2 * h, 6)
(out,) = fd.execute([shard_tensor(xs, x)])
check("two sharded stages, rank for rank", out, torch.sin(xs) + 1, HALF1, w)
prog = text(fd)
assert f"to (rank + {h})" in prog and f"from (rank - {h})" in prog, prog
assert "with shapes" not in prog and "allgather" not in prog, prog

# ---- a producer on one rank, broadcast to every rank, consumed sharded there
with FusionDefinition() as fd:
    x = fd.define_tensor([-1, 4 * d], dtype=DataType.Float, mesh=FIRST, placements=[Replicate()])
    y = fd.ops.exp(x)
    z = fd.ops.mul(y, 3.0)
    fd.add_output(y)
    fd.add_output(z)
    y.set_device_mesh(FIRST)
    z.set_device_mesh(ALL)
    z.outer_split(1, d)
    z.axis(1).parallelize(X)
xs = full(3, 4 * d)
y_out, z_out = fd.execute([shard_tensor(xs, x)])
check("broadcast: the producer's own output", y_out, torch.exp(xs), FIRST)
check("broadcast from one rank, then each rank's block", z_out, torch.exp(xs) * 3, ALL, z)
prog = text(fd)
assert "start broadcast(" in prog and "root=0" in prog and "with shape" in prog, prog
if d > 1:
    assert f"team=DeviceMesh({list(range(d))})[dim 0]" in prog, prog

# ---- a reduction over a sharded dim on one mesh, its result consumed on another:
# the partial sums are combined on the producer's mesh, then moved
with FusionDefinition() as fd:
    x = fd.define_tensor([4, 2 * h * 3], dtype=DataType.Float, mesh=HALF0, placements=[Shard(1)])
    s = fd.ops.sum(x, dims=[1])
    t = fd.ops.neg(s)
    fd.add_output(t)
    s.set_device_mesh(HALF0)
    t.set_device_mesh(HALF1)
xs = full(4, 2 * h * 3)
(out,) = fd.execute([shard_tensor(xs, x)])
check("reduction on one mesh, consumed on another", out, -xs.sum(1), HALF1)
prog = text(fd)
assert "allreduce" in prog and "send_recv" in prog, prog

# ... and on a mesh of other ranks and size: whole on the producer's, then a broadcast
with FusionDefinition() as fd:
    x = fd.define_tensor([-1, 2 * d], dtype=DataType.Float, mesh=ALL, placements=[Shard(1)])
    s = fd.ops.sum(x, dims=[1])
    t = fd.ops.mul(s, 2.0)
    fd.add_output(t)
    s.set_device_mesh(ALL)
    t.set_device_mesh(SECOND)
xs = full(6, 2 * d)
(out,) = fd.execute([shard_tensor(xs, x)])
check("reduction over every rank, consumed on rank 1", out, xs.sum(1) * 2, SECOND)
assert "allreduce" in text(fd) and "broadcast" not in text(fd), text(fd)  # rank 1 holds it already

# ---- an MLP split across two stages, each tensor parallel over its h ranks:
# column-parallel linear + gelu on the first, row-parallel linear on the second;
# the activation moves rank for rank in its shards, the result is allreduced there
e, f = 8, 4 * h
with FusionDefinition() as fd:
    x = fd.define_tensor([-1, e], dtype=DataType.Float, mesh=HALF0, placements=[Replicate()])
    w1 = fd.define_tensor([f, e], dtype=DataType.Float, mesh=HALF0, placements=[Shard(0)])
    b1 = fd.define_tensor([f], dtype=DataType.Float, mesh=HALF0, placements=[Shard(0)])
    w2 = fd.define_tensor([e, f], dtype=DataType.Float, mesh=HALF1, placements=[Shard(1)])
    b2 = fd.define_tensor([e], dtype=DataType.Float, mesh=HALF1, placements=[Replicate()])
    a = fd.ops.linear(x, w1, b1)
    g = fd.ops.mul(fd.ops.mul(a, 0.5), fd.ops.add(fd.ops.erf(fd.ops.mul(a, 0.7071067811865476)), 1.0))
    out = fd.ops.linear(g, w2, b2)
    fd.add_output(out)
    out.set_device_mesh(HALF1)
tensors = [full(5, e), full(f, e), full(f), full(e, f), full(e)]
xs, w1s, b1s, w2s, b2s = tensors
(got,) = fd.execute([shard_tensor(t, tv) for t, tv in zip(tensors, (x, w1, b1, w2, b2))])
check("MLP across two tensor-parallel stages", got, F.linear(F.gelu(F.linear(xs, w1s, b1s)), w2s, b2s),
      HALF1)
prog = text(fd)
assert "allgather" not in prog and "send_recv" in prog, prog
assert h == 1 or "allreduce" in prog, prog

# ---- a later stage reads an input's extent as a scalar (reshape): taken from the
# tensor moved there
with FusionDefinition() as fd:
    x = fd.define_tensor([-1, -1], dtype=DataType.Float, mesh=FIRST, placements=[Replicate()])
    y = fd.ops.cos(x)
    n0, n1 = x.shape()
    z = fd.ops.reshape(y, [fd.ops.mul(n0, n1)])
    fd.add_output(z)
    y.set_device_mesh(FIRST)
    z.set_device_mesh(SECOND)
xs = full(3, 5)
(out,) = fd.execute([shard_tensor(xs, x)])
check("an input's extents on a later stage", out, torch.cos(xs).reshape(-1), SECOND)

# ---- a hand-written host program: a stage per rank, blocks on ranks
hp = HostProgram()
t0 = hp.define_tensor([-1], DataType.Float, ranks=[0])
with hp.on_ranks([0]):
    hp.send(t0, 1, with_shape=True)
with hp.on_ranks([1]):
    got = hp.recv([None], DataType.Float, 0)
    back = hp.broadcast(got, root=0, team=[1])  # (a team of one: a copy)
hp.add_output(back)
v = torch.arange(6.0).to(DEV)
(out,) = hp.execute([v if rank == 0 else torch.empty(0, device=DEV)])
check("hand-written on_ranks program", out, v, SECOND)
assert "on ranks [0]:" in str(hp) and "T0 float[n0_0] on ranks [0]" in str(hp), str(hp)

# ---- meshes this job cannot run: named
with FusionDefinition() as fd:
    x = fd.define_tensor([-1], dtype=DataType.Float, mesh=FIRST, placements=[Replicate()])
    y = fd.ops.abs(x)
    fd.add_output(y)
    y.set_device_mesh(DeviceMesh([d]))
try:
    fd.execute([torch.ones(3, device=DEV)])
    raise AssertionError("a mesh outside the job ran")
except DefinitionError as err:
    assert f"DeviceMesh([{d}])" in str(err) and f"rank {d} is not in this job of {d} rank" in str(err) \
        and "tensor" in str(err), err
with FusionDefinition() as fd:
    x = fd.define_tensor([-1], dtype=DataType.Float, mesh=DeviceMesh([1, 0]), placements=[Replicate()])
    fd.add_output(fd.ops.abs(x))
try:
    fd.execute([torch.ones(3, device=DEV)])
    raise AssertionError("a mesh of unordered ranks ran")
except UnsupportedError as err:
    assert "DeviceMesh([1, 0])" in str(err) and "consecutive" in str(err), err
with FusionDefinition() as fd:  # stage 1 reads x's second extent, which no moved tensor has
    x = fd.define_tensor([-1, -1], dtype=DataType.Float, mesh=FIRST, placements=[Replicate()])
    y = fd.ops.sum(x, dims=[1])
    n0, n1 = x.shape()
    z = fd.ops.broadcast_in_dim(y, [n0, n1], [0])
    fd.add_output(z)
    y.set_device_mesh(FIRST)
    z.set_device_mesh(SECOND)
try:
    fd.execute([torch.ones(2, 3, device=DEV)])
    raise AssertionError("an extent known on another mesh alone was used")
except UnsupportedError as err:
    assert "DeviceMesh([1]) reads the extent" in str(err) and "held by ranks [0] alone" in str(err), err
assert shard_tensor(torch.ones(2, 3), x).shape == ((2, 3) if rank == 0 else (0, 0))  # (x on rank 0)

print(f"rank {rank}: all mesh programs ok ({comm.name}, {d} ranks)", flush=True)
