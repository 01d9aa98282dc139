"""Run under mpirun (tests/test_mpi.py starts it): every collective kind of a
host program, on this job's ranks, against a torch computation of what each
rank must get. Each rank's data is seeded by its rank, so every rank can
compute every other rank's inputs."""
import os
import sys

import torch

from hostir import DataType, FusionDefinition, HostProgram
from hostir.dist import Communicator

comm = Communicator.instance()
W, R = comm.size(), comm.rank()
DEV = comm.device


def data(rank, shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(1000 + rank)
    t = torch.randn(shape, generator=g)
    return t.to(dtype).to(DEV)


def check(name, got, want):
    torch.testing.assert_close(got.cpu().float(), want.cpu().float(), rtol=1e-5, atol=1e-5)
    print(f"rank {R}: {name} ok", flush=True)


def program(build):
    hp = HostProgram()
    x = hp.define_tensor([-1, -1], DataType.Float)
    hp.add_output(build(hp, x))
    return hp


def run(hp, shape=(2 * W, 3)):
    return hp.execute([data(R, shape)])[0]


every = [data(r, (2 * W, 3)) for r in range(W)]
for dim in (0, 1):
    check(f"allgather dim {dim}", run(program(lambda hp, x: hp.allgather(x, dim))), torch.cat(every, dim))
for op, fn in (("sum", sum), ("max", lambda ts: torch.stack(ts).amax(0)),
               ("avg", lambda ts: sum(ts) / W)):
    check(f"allreduce {op}", run(program(lambda hp, x: hp.allreduce(x, op))), fn(every))
for dim in (0, 1):
    shape = (2 * W, 3) if dim == 0 else (3, 2 * W)
    alls = [data(r, shape) for r in range(W)]
    got = run(program(lambda hp, x: hp.reduce_scatter(x, dim)), shape)
    check(f"reduce_scatter dim {dim}", got, sum(alls).chunk(W, dim)[R])
check("broadcast", run(program(lambda hp, x: hp.broadcast(x, W - 1))), every[W - 1])
check("all_to_all", run(program(lambda hp, x: hp.all_to_all(x, 0))),
      torch.cat([every[r].chunk(W, 0)[R] for r in range(W)], 0))


# all_to_all that moves a split: block R of every rank's x along `dim`, joined
# along `gather` (3-D: the outermost, a middle and the innermost dim)
def a2a_program(dim, gather, into):
    hp = HostProgram()
    x = hp.define_tensor([-1, -1, -1], DataType.Float)
    if into:
        ext = [a.extent for a in x.logical]
        ext[dim], ext[gather] = ext[dim] // hp.world_size, ext[gather] * hp.world_size
        ext[2] = ext[2] * 2
        buf = hp.allocate(ext, DataType.Float)
        out = hp.slice(buf, dim=2, start=0, stop=ext[2] // 2)  # a strided view: copied at the wait
        hp.all_to_all(x, dim, gather_dim=gather, out=out)
        hp.add_output(out)
    else:
        hp.add_output(hp.all_to_all(x, dim, gather_dim=gather))
    return hp


shape3 = (2 * W, 3 * W, W)
every3 = [data(r, shape3) for r in range(W)]
for dim, gather in ((1, 0), (0, 1), (2, 0), (0, 2), (2, 1)):
    for into in (False, True):
        got = a2a_program(dim, gather, into).execute([data(R, shape3)])[0]
        check(f"all_to_all dim {dim} gather_dim {gather}{' into a view' if into else ''}", got,
              torch.cat([every3[r].chunk(W, dim)[R] for r in range(W)], gather))



# results written into a given buffer: a contiguous block (straight from the
# collective), a strided view (copied at the wait), the input itself (in place)
def into(kind, dim, rows_of):
    def build(hp, x):
        n0, n1 = x.logical[0].extent, x.logical[1].extent
        buf = hp.allocate([n0 * hp.world_size * 2, n1 * hp.world_size * 2], DataType.Float)
        big = [n0 * hp.world_size, n1] if dim == 0 else [n0, n1 * hp.world_size]
        small = [n0 // hp.world_size, n1] if dim == 0 else [n0, n1 // hp.world_size]
        shape = big if kind == "allgather" else small if kind == "reduce_scatter" else [n0, n1]
        view = hp.slice(hp.slice(buf, 0, rows_of, rows_of + shape[0]), 1, 0, shape[1])
        if kind == "allgather":
            hp.allgather(x, dim, out=view)
        elif kind == "reduce_scatter":
            hp.reduce_scatter(x, dim, out=view)
        else:
            hp.allreduce(x, out=view)
        return view
    return build


square = [data(r, (2 * W, 2 * W)) for r in range(W)]
for rows_of in (0, 1):
    for dim in (0, 1):
        check(f"allgather dim {dim} into a view at row {rows_of}",
              run(program(into("allgather", dim, rows_of)), (2 * W, 2 * W)), torch.cat(square, dim))
        check(f"reduce_scatter dim {dim} into a view at row {rows_of}",
              run(program(into("reduce_scatter", dim, rows_of)), (2 * W, 2 * W)),
              sum(square).chunk(W, dim)[R])
    check(f"allreduce into a view at row {rows_of}",
          run(program(into("allreduce", 0, rows_of)), (2 * W, 2 * W)), sum(square))
hp = HostProgram()
x = hp.define_tensor([-1, -1], DataType.Float)
y = hp.allocate([x.logical[0].extent * W, x.logical[1].extent], DataType.Float)
blk = hp.chunk(y, 0, 1 % W, W)   # a contiguous block of a buffer: the collective writes there
hp.allgather(x, 0, out=y)
hp.allreduce(blk, out=blk)       # in place
hp.add_output(y)
want = torch.cat(every, 0)
want.chunk(W, 0)[1 % W].mul_(W)
check("allgather into a buffer, then an in-place allreduce of one block", run(hp), want)

# a ring: every rank sends to the next and receives from the previous, in one group
def ring(hp, x):
    (y,) = hp.send_recv(sends=[(x, (hp.rank + 1) % hp.world_size)],
                        recvs=[([x.logical[0].extent, x.logical[1].extent], DataType.Float,
                                (hp.rank + hp.world_size - 1) % hp.world_size)])
    return y


check("ring send_recv", run(program(ring)), every[(R - 1) % W])

# collectives inside a loop, each iteration's result consumed by a fusion
with FusionDefinition() as fd:
    a = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    fd.add_output(fd.ops.mul(a, 2.0))
hp = HostProgram()
x = hp.define_tensor([-1, -1], DataType.Float)
acc = hp.allocate([x.logical[0].extent * hp.world_size, x.logical[1].extent], DataType.Float)
with hp.for_loop(0, 3) as i:
    g = hp.allgather(x, 0)
    hp.launch(fd, [g], outputs=[acc])
hp.add_output(acc)
check("allgather in a loop", run(hp), torch.cat(every, 0) * 2)

# blocks of an allgather, each used as it arrives, in ring order (this rank's first)
with FusionDefinition() as neg:
    u = neg.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    neg.add_output(neg.ops.neg(u))
hp = HostProgram()
x = hp.define_tensor([-1, -1], DataType.Float)
out = hp.allocate([x.logical[0].extent * hp.world_size, x.logical[1].extent], DataType.Float)
handle = hp.allgather_blocks(x)
for j in range(W):
    p = (hp.rank + j) % hp.world_size
    hp.launch(neg, [hp.peer_block(handle, p)], outputs=[hp.chunk(out, 0, p, hp.world_size)])
hp.wait(handle)
hp.add_output(out)
check("allgather_blocks in ring order", run(hp), -torch.cat(every, 0))

# ranks that pass different shapes: an error on every rank, naming the difference
hp = program(lambda hp, x: hp.allreduce(x))
try:
    hp.execute([data(R, (2, 3 + R))])
except Exception as e:
    assert "ranks disagree on the inputs' shapes and dtypes" in str(e) and "rank 1" in str(e), e
    print(f"rank {R}: shape mismatch raised: {e}", flush=True)
else:
    raise AssertionError("different shapes on different ranks were not reported")

print(f"rank {R}: all collectives ok ({comm.name}, {W} ranks)", flush=True)
if os.environ.get("HOSTIR_TEST_BARRIER_EXIT"):
    comm.barrier()
sys.exit(0)
