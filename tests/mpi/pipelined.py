"""Run under mpirun (tests/test_mpi.py): stream-parallel (pipelined) sharded
fusions in nvFuser's vocabulary — row-parallel linear + allreduce, allgather +
linear with the stream axis outermost or the same as the device axis, linear +
reduce-scatter, an MLP block, pointwise with symbolic chunks — for chunk
counts s given on the command line, each against torch on whole tensors and
each lowered to a host for-loop over chunks on rotating streams."""
import re
import sys

import torch
import torch.nn.functional as F

from hostir import DataType, FusionDefinition, ParallelType
from hostir.ir.errors import UnsupportedError
from hostir.multidevice import Communicator, DeviceMesh, Shard

import common
from common import full

comm = Communicator.instance()
d, rank = comm.size(), comm.rank()
mesh = DeviceMesh(torch.arange(d))
X, STREAM = ParallelType.mesh_x, ParallelType.stream


def check(name, got, want):
    common.check(name, got, want, as_float=False)


def loop_of(fd, chunks):
    """The host program pipelines: a for-loop of `chunks` iterations that switches streams."""
    text = str(fd._dist.program)
    assert re.search(rf"for \w+ in range\(0, {chunks}\):", text), text
    assert "set_current_stream(((" in text, text
    return text


for s in [int(a) for a in sys.argv[1:]] or [1, 3]:
    # row-parallel linear: the rows in s chunks (stream), K sharded; each chunk's
    # partial product is allreduced in place in its block of the output
    for t in (2 * s, 2 * s + 1):   # the last chunk shorter when s does not divide t
        h = 3
        with FusionDefinition() as fd:
            inp = fd.define_tensor(shape=[-1, h * 2 * d], contiguity=True, dtype=DataType.Float)
            weight = fd.define_tensor(shape=[h, h * 2 * d], contiguity=True, dtype=DataType.Float)
            fd.add_output(fd.ops.linear(inp, weight))
            for tv in (inp, weight):
                tv.set_device_mesh(mesh)
            inp.outer_split(0, s)
            inp.axis(0).parallelize(STREAM)
            inp.outer_split(2, d)
            inp.axis(2).parallelize(X)
            weight.outer_split(1, d)
            weight.axis(1).parallelize(X)
        x, w = full(t, h * 2 * d), full(h, h * 2 * d)
        out = fd.execute([mesh.shard_tensor(x, 1), mesh.shard_tensor(w, 1)])[0]
        check(f"row-parallel linear, {t} rows in {s} chunks", out, F.linear(x, w))
        text = loop_of(fd, s)
        assert "start allreduce(" in text and "-> into" in text, text

    # allgather + linear, the stream axis outermost: x [s, d, m/(s d), k], sharded on dim 1
    m, k, n = s * d * 2, 5, 4
    with FusionDefinition() as fd:
        x_ = fd.define_tensor(shape=[s, d, m // (s * d), k], contiguity=True, dtype=DataType.Float)
        w_ = fd.define_tensor(shape=[n, k], contiguity=True, dtype=DataType.Float)
        b_ = fd.define_tensor(shape=[n], contiguity=True, dtype=DataType.Float)
        out = fd.ops.linear(x_, w_, b_)
        fd.add_output(out)
        for tv in (x_, w_, b_, out):
            tv.set_device_mesh(mesh)
        x_.axis(1).parallelize(X)
        out.axis(0).parallelize(STREAM)
    x, w, b = full(s, d, m // (s * d), k), full(n, k), full(n)
    got = fd.execute([mesh.shard_tensor(x, 1), w, b])[0]
    check(f"allgather + linear, stream outermost, s={s}", got, F.linear(x, w, b))
    assert list(got.shape) == [s, d, m // (s * d), n]
    assert "start allgather(" in loop_of(fd, s)

    # linear + reduce-scatter: x [s, m, k] and w sharded on K, the output on dim 1
    m, k, n = 2 * d, 3 * d, 4
    with FusionDefinition() as fd:
        x_ = fd.define_tensor(shape=[s, m, k], contiguity=True, dtype=DataType.Float)
        w_ = fd.define_tensor(shape=[n, k], contiguity=True, dtype=DataType.Float)
        out = fd.ops.linear(x_, w_)
        fd.add_output(out)
        for tv in (x_, w_, out):
            tv.set_device_mesh(mesh)
        x_.outer_split(2, d)
        x_.axis(2).parallelize(X)
        w_.outer_split(1, d)
        w_.axis(1).parallelize(X)
        out.outer_split(1, d)
        out.axis(1).parallelize(X)
        out.axis(0).parallelize(STREAM)
    x, w = full(s, m, k), full(n, k)
    got = fd.execute([mesh.shard_tensor(x, 2), mesh.shard_tensor(w, 1)])[0]
    check(f"linear + reduce_scatter, s={s}", got, mesh.shard_tensor(F.linear(x, w), 1))
    assert "start reduce_scatter(" in loop_of(fd, s)

    # a tensor-parallel MLP block (column- then row-parallel) on s chunks of rows
    t, e, hh = 2 * s + 1, 6, 4 * d
    with FusionDefinition() as fd:
        x_ = fd.define_tensor([-1, e], dtype=DataType.Float, mesh=mesh)
        w1 = fd.define_tensor([hh, e], dtype=DataType.Float, mesh=mesh, placements=[Shard(0)])
        b1 = fd.define_tensor([hh], dtype=DataType.Float, mesh=mesh, placements=[Shard(0)])
        w2 = fd.define_tensor([e, hh], dtype=DataType.Float, mesh=mesh, placements=[Shard(1)])
        b2 = fd.define_tensor([e], dtype=DataType.Float, mesh=mesh)
        y = fd.ops.linear(x_, w1, b1)
        g = fd.ops.mul(fd.ops.mul(y, 0.5), fd.ops.add(fd.ops.erf(fd.ops.mul(y, 0.7071067811865476)), 1.0))
        y = fd.ops.linear(g, w2, b2)
        fd.add_output(y)
        x_.outer_split(0, s)
        x_.axis(0).parallelize(STREAM)
    x, W1, B1, W2, B2 = full(t, e), full(hh, e), full(hh), full(e, hh), full(e)
    got = fd.execute([x, mesh.shard_tensor(W1, 0), mesh.shard_tensor(B1, 0),
                      mesh.shard_tensor(W2, 1), B2])[0]
    check(f"MLP block, {t} rows in {s} chunks", got, F.linear(F.gelu(F.linear(x, W1, B1)), W2, B2))
    loop_of(fd, s)

    # pointwise over a sharded tensor whose rows (a symbolic extent) come in s chunks,
    # with a broadcast operand that has no stream axis
    with FusionDefinition() as fd:
        a = fd.define_tensor([-1, 2 * d], contiguity=True, dtype=DataType.Float)
        c = fd.define_tensor([2 * d], contiguity=True, dtype=DataType.Float)
        y = fd.ops.add(fd.ops.mul(a, 2.0), fd.ops.broadcast_in_dim(c, [a.shape()[0], 2 * d], [1]))
        fd.add_output(fd.ops.sum(y, [1]))
        fd.add_output(y)
        for tv in (a, c):
            tv.set_device_mesh(mesh)
        a.outer_split(0, s)
        a.axis(0).parallelize(STREAM)
        a.outer_split(2, d)
        a.axis(2).parallelize(X)
        c.outer_split(0, d)
        c.axis(0).parallelize(X)
    for rows in (s, 3 * s + 2):
        av, cv = full(rows, 2 * d), full(2 * d)
        r, y = fd.execute([mesh.shard_tensor(av, 1), mesh.shard_tensor(cv, 0)])
        check(f"pointwise + sum, {rows} rows in {s} chunks, output 0", r, (av * 2 + cv).sum(1))
        check(f"pointwise + sum, {rows} rows in {s} chunks, output 1", y,
              mesh.shard_tensor(av * 2 + cv, 1))
    loop_of(fd, s)

# allgather + linear, the stream axis the device axis (nvFuser's "shard outermost"):
# the ranks' blocks are the chunks, each computed as it arrives (this rank's first)
m, k, n = 4 * d, 5, 3
with FusionDefinition() as fd:
    x_ = fd.define_tensor(shape=[d, m // d, k], contiguity=True, dtype=DataType.Float)
    w_ = fd.define_tensor(shape=[n, k], contiguity=True, dtype=DataType.Float)
    b_ = fd.define_tensor(shape=[n], contiguity=True, dtype=DataType.Float)
    out = fd.ops.linear(x_, w_, b_)
    fd.add_output(out)
    for tv in (x_, w_, b_, out):
        tv.set_device_mesh(mesh)
    x_.axis(0).parallelize(X)
    out.axis(0).parallelize(STREAM)
x, w, b = full(d, m // d, k), full(n, k), full(n)
check("allgather + linear, stream axis = device axis",
      fd.execute([mesh.shard_tensor(x, 0), w, b])[0], F.linear(x, w, b))
assert "allgather_blocks" in str(fd._dist.program)

# a stream axis the fusion reduces is refused, naming the op
with FusionDefinition() as fd:
    a = fd.define_tensor([-1, 4], contiguity=True, dtype=DataType.Float)
    fd.add_output(fd.ops.sum(a, [0]))
    a.set_device_mesh(mesh)
    a.outer_split(0, 2)
    a.axis(0).parallelize(STREAM)
try:
    fd.execute([full(4, 4)])
    raise AssertionError("a reduced stream axis ran")
except UnsupportedError as e:
    assert "reduces the stream-parallel axis" in str(e), e
print(f"rank {rank}: refused a reduced stream axis ok", flush=True)

comm.barrier()
print(f"rank {rank}: all pipelined fusions ok ({d} ranks)", flush=True)
