"""Run under mpirun (tests/test_mpi.py): sharded fusions in nvFuser's
multi-GPU vocabulary — the programs of nvFuser's communication and matmul
tests, written by us — each checked against torch on the whole tensors."""
import sys

import torch
import torch.nn.functional as F

import hostir
from hostir import DataType, FusionDefinition, ParallelType
from hostir.multidevice import Communicator, DeviceMesh, Replicate, Shard

from common import check, full

comm = Communicator.instance()
d, rank = comm.size(), comm.rank()
DEV = comm.device
mesh = DeviceMesh(torch.arange(d))
X = ParallelType.mesh_x


def shard(t, dim):
    return mesh.shard_tensor(t, dim)


# allgather: a sharded input, a replicated output of set
with FusionDefinition() as fd:
    inp = fd.define_tensor((d * 4,), contiguity=True, dtype=DataType.Float)
    fd.add_output(fd.ops.set(inp))
    for t in fd.fusion.outputs():
        t.set_device_mesh(mesh)
    for t in fd.fusion.inputs():
        t.set_device_mesh(mesh)
        t.outer_split(0, d)
        t.axis(0).parallelize(X)
x = full(d * 4)
check("allgather", fd.execute([shard(x, 0)])[0], x)

# allgather of an expanded broadcast: a device axis without a split holds one index
with FusionDefinition() as fd:
    inp = fd.define_tensor([d], contiguity=True, dtype=DataType.Float)
    expanded = fd.ops.broadcast_in_dim(inp, [d, 3], [0])
    out = fd.ops.set(expanded)
    fd.add_output(out)
    for tv in (inp, expanded, out):
        tv.set_device_mesh(mesh)
    inp.axis(0).parallelize(X)
    expanded.axis(0).parallelize(X)
x = full(d)
check("allgather of an expanded broadcast", fd.execute([shard(x, 0)])[0], x.unsqueeze(-1).expand(-1, 3))

# allreduce: a sum over a sharded dim
with FusionDefinition() as fd:
    inp = fd.define_tensor((-1, -1, -1), contiguity=True, dtype=DataType.Float)
    fd.add_output(fd.ops.sum(inp, [1]))
    for t in fd.fusion.inputs():
        t.set_device_mesh(mesh)
        t.outer_split(1, d)
        t.axis(1).parallelize(X)
x = full(2, d * 3, 5)
check("allreduce", fd.execute([shard(x, 1)])[0], x.sum(1))

# reduce-scatter: a sum over a sharded dim into an output sharded on another
for extra in ((), (3,)):
    with FusionDefinition() as fd:
        inp = fd.define_tensor((d, *extra, d * 4), contiguity=True, dtype=DataType.Float)
        out = fd.ops.sum(inp, [0])
        fd.add_output(out)
        inp.set_device_mesh(mesh)
        inp.axis(0).parallelize(X)
        out.set_device_mesh(mesh)
        out.outer_split(-1, d)
        out.axis(-2).parallelize(X)
    x = full(d, *extra, d * 4)
    check(f"reduce_scatter{' (not outermost)' if extra else ''}", fd.execute([shard(x, 0)])[0],
          shard(x.sum(0), len(extra)))

e = 8
# column-parallel linear: the weight and bias sharded on N; the output sharded on N
with FusionDefinition() as fd:
    inp = fd.define_tensor([-1, -1, e])
    weight = fd.define_tensor([d * e, e])
    bias = fd.define_tensor([d * e])
    fd.add_output(fd.ops.linear(inp, weight, bias))
    for t in fd.fusion.inputs():
        t.set_device_mesh(mesh)
    for t in (weight, bias):
        t.outer_split(0, d)
        t.axis(0).parallelize(X)
x, w, b = full(2, 6, e), full(d * e, e), full(d * e)
(out,) = fd.execute([x, shard(w, 0), shard(b, 0)])
check("column-parallel linear", out, shard(F.linear(x, w, b), -1))
assert fd.output_shardings()[0].dims == ((2, 0),)

# row-parallel linear (with and without bias): K sharded, a partial output allreduced
for with_bias in (False, True):
    with FusionDefinition() as fd:
        inp = fd.define_tensor([-1, -1, d * e])
        weight = fd.define_tensor([e, d * e])
        bias = fd.define_tensor([e]) if with_bias else None
        fd.add_output(fd.ops.linear(inp, weight, bias))
        for t in (inp, weight):
            t.set_device_mesh(mesh)
            t.outer_split(-1, d)
            t.axis(-2).parallelize(X)
    x, w, b = full(2, 3, d * e), full(e, d * e), full(e)
    args = [shard(x, -1), shard(w, -1)] + ([b] if with_bias else [])
    check(f"row-parallel linear{' with bias' if with_bias else ''}", fd.execute(args)[0],
          F.linear(x, w, b if with_bias else None))

# linear + reduce-scatter: the output sharded on the sequence dim
b_, s = 3, 5
with FusionDefinition() as fd:
    inp = fd.define_tensor([-1, d * s, d * e], dtype=DataType.BFloat16)
    weight = fd.define_tensor([-1, d * e], dtype=DataType.BFloat16)
    bias = fd.define_tensor([e], dtype=DataType.BFloat16)
    out = fd.ops.linear(inp, weight, bias)
    fd.add_output(out)
    bias.set_device_mesh(mesh)
    for tv in (inp, weight, out):
        tv.set_device_mesh(mesh)
        tv.split(-1, d, inner_split=False)
        tv.axis(-2).parallelize(X)
    out.outer_split(1, d)
    out.axis(1).parallelize(X)
x, w, bb = (full(*shape).mul(2).round().clamp(-2, 2).to(torch.bfloat16)
             for shape in ((b_, d * s, d * e), (e, d * e), (e,)))
(out,) = fd.execute([shard(x, -1), shard(w, -1), bb])
check("linear + reduce_scatter", out, shard(F.linear(x, w, bb), 1))
text = str(fd._dist.program)
assert text.count("start reduce_scatter_blocks") == 1 and "allreduce" not in text, text
assert text.count("push_block") == d, text  # a ring: each rank's block computed, then sent

# column-parallel matmul, the output annotated (its domain counts the reduction axis)
with FusionDefinition() as fd:
    inp = fd.define_tensor([-1, -1, e])
    weight = fd.define_tensor([e, d * e])
    out = fd.ops.matmul(inp, weight)
    fd.add_output(out)
    for t in (inp, weight, out):
        t.set_device_mesh(mesh)
    weight.outer_split(-1, d)
    weight.axis(-2).parallelize(X)
    out.outer_split(-2, d)
    out.axis(-3).parallelize(X)
x, w = full(2, 4, e), full(e, d * e)
check("column-parallel matmul", fd.execute([x, shard(w, -1)])[0], shard(x @ w, -1))

# row-parallel matmul
with FusionDefinition() as fd:
    inp = fd.define_tensor([-1, d * e], contiguity=True, dtype=DataType.Half)
    weight = fd.define_tensor([d * e, e], contiguity=True, dtype=DataType.Half)
    fd.add_output(fd.ops.matmul(inp, weight))
    for t in (inp, weight):
        t.set_device_mesh(mesh)
    inp.outer_split(-1, d)
    inp.axis(-2).parallelize(X)
    weight.outer_split(0, d)
    weight.axis(0).parallelize(X)
x, w = full(4, d * e, dtype=torch.half), full(d * e, e, dtype=torch.half)
if DEV.type == "cuda":
    check("row-parallel matmul", fd.execute([shard(x, -1), shard(w, 0)])[0], x.float() @ w.float(),
          rtol=1e-2, atol=1e-2)

# DTensor-style placements, and a tensor-parallel MLP block: linear, GELU, linear
h = 4 * e
with FusionDefinition() as fd:
    x_ = fd.define_tensor([-1, e], dtype=DataType.Float, mesh=mesh, placements=[Replicate()])
    w1 = fd.define_tensor([h * d, e], dtype=DataType.Float, mesh=mesh, placements=[Shard(0)])
    b1 = fd.define_tensor([h * d], dtype=DataType.Float, mesh=mesh, placements=[Shard(0)])
    w2 = fd.define_tensor([e, h * d], dtype=DataType.Float, mesh=mesh, placements=[Shard(1)])
    y = fd.ops.linear(x_, w1, b1)
    g = fd.ops.mul(fd.ops.mul(y, 0.5), fd.ops.add(fd.ops.erf(fd.ops.mul(y, 0.7071067811865476)), 1.0))
    fd.add_output(fd.ops.linear(g, w2))
x, W1, B1, W2 = full(6, e), full(h * d, e), full(h * d), full(e, h * d)
(out,) = fd.execute([x, shard(W1, 0), shard(B1, 0), shard(W2, 1)])
check("tensor-parallel MLP block", out, F.linear(F.gelu(F.linear(x, W1, B1)), W2), rtol=1e-4, atol=1e-4)
assert str(fd._dist.program).count("start allreduce") == 1

# all-to-all (nvFuser's test_alltoall): a tensor sharded on dim 2, resharded on dim 1
k_, m_, n_ = 2, 3, 5
with FusionDefinition() as fd:
    inp = fd.define_tensor((k_, d * m_, d * n_), contiguity=True, dtype=DataType.Half)
    a2a_in = fd.ops.set(inp)
    a2a_out = fd.ops.set(a2a_in)
    out = fd.ops.set(a2a_out)
    for t in (a2a_in, a2a_out, out):
        fd.add_output(t)
    inp.set_device_mesh(mesh)
    inp.outer_split(2, d)
    inp.axis(2).parallelize(X)
    a2a_in.set_device_mesh(mesh)
    a2a_in.outer_split(2, d)
    a2a_in.axis(2).parallelize(X)
    a2a_in.outer_split(1, d)
    a2a_in.reorder({1: 0})
    a2a_in.set_allocation_domain(a2a_in.get_loop_domain(), True)
    a2a_out.set_device_mesh(mesh)
    a2a_out.outer_split(2, d)
    a2a_out.outer_split(1, d)
    a2a_out.axis(1).parallelize(X)
    a2a_out.reorder({3: 0})
    a2a_out.set_allocation_domain(a2a_out.get_loop_domain(), True)
    out.set_device_mesh(mesh)
    out.outer_split(1, d)
    out.axis(1).parallelize(X)
    out.set_allocation_domain(out.get_loop_domain(), True)
x = torch.arange(k_ * d * m_ * d * n_, dtype=torch.float16).reshape(k_, d * m_, d * n_).to(DEV)
got_in, got_out, got = fd.execute([shard(x, 2)])
check("all-to-all: the input's sharding", got_in, shard(x, 2))
check("all-to-all: resharded on dim 1", got_out, shard(x, 1))
check("all-to-all: its consumer", got, shard(x, 1))
if d > 1:
    assert str(fd._dist.program).count("start all_to_all") == 1, fd._dist.program
    assert "start allgather" not in str(fd._dist.program), fd._dist.program

# resharding between dims: a pointwise result sharded on one dim, its consumer
# annotated on another: a single all-to-all each
for src, dst in ((0, 1), (1, 0), (2, 0)):
    x = full(2 * d, 3 * d, d)
    with FusionDefinition() as fd:
        inp = fd.define_tensor([-1, -1, -1], dtype=DataType.Float, mesh=mesh, placements=[Shard(src)])
        y = fd.ops.mul(fd.ops.relu(inp), 2.0)
        z = fd.ops.set(y)
        z.set_device_mesh(mesh)
        z.outer_split(dst, d)
        z.axis(dst).parallelize(X)
        fd.add_output(fd.ops.exp(z))
    (got,) = fd.execute([shard(x, src)])
    check(f"reshard Shard({src}) -> Shard({dst})", got, shard((x.relu() * 2).exp(), dst))
    if d > 1:
        text = str(fd._dist.program)
        assert text.count("start all_to_all") == 1 and "allgather" not in text, text

# nvFuser's test_multidevice programs: every value given the mesh through
# fd.fusion.vals(), a device axis without a split (one index per rank)
with FusionDefinition() as fd:
    t0 = fd.define_tensor((-1, -1), contiguity=False, dtype=DataType.Float)
    t1 = fd.ops.relu(t0)
    fd.add_output(fd.ops.add(t1, t1))
    for t in fd.fusion.vals():
        if t.is_tensor():
            t.set_device_mesh(mesh)
    for t in fd.fusion.inputs():
        t.axis(0).parallelize(X)
x = full(d, 4)
# (the output has the mesh and no device axis: replicated, as nvFuser returns it)
check("pointwise, each rank one row, gathered", fd.execute([shard(x, 0)])[0], x.relu() * 2)
assert fd.output_shardings()[0].is_replicated

# a replicated and a sharded operand: the replicated one is sliced locally
with FusionDefinition() as fd:
    a_ = fd.define_tensor((-1, -1), contiguity=True, dtype=DataType.Half)
    b_ = fd.define_tensor((-1, -1), contiguity=True, dtype=DataType.Half)
    fd.add_output(fd.ops.add(a_, b_))
    a_.set_device_mesh(mesh)
    b_.set_device_mesh(mesh)
    b_.outer_split(0, d)
    b_.axis(0).parallelize(X)
x, y = full(2 * d, 3, dtype=torch.half), full(2 * d, 3, dtype=torch.half)
check("replicated + sharded", fd.execute([x, shard(y, 0)])[0], shard(x.float() + y.float(), 0),
      rtol=1e-3, atol=1e-3)

# broadcast and squeeze around a sharded input, sums over a sharded and a local dim
with FusionDefinition() as fd:
    inp = fd.define_tensor((-1, -1, -1), dtype=DataType.BFloat16)
    t2 = fd.ops.cast(fd.ops.squeeze(fd.ops.broadcast(inp, [True, False, False, False]), dims=[0]),
                     dtype=DataType.Float)
    fd.add_output(fd.ops.sum(t2, dims=[0]))
    fd.add_output(fd.ops.sum(t2, dims=[1]))
    for t in fd.fusion.inputs():
        t.set_device_mesh(mesh)
        t.outer_split(0, d)
        t.axis(0).parallelize(X)
x = full(d * 3, 5, 6, dtype=torch.bfloat16)
s0, s1 = fd.execute([shard(x, 0)])
check("a sum over the sharded dim", s0, x.float().sum(0), rtol=1e-3, atol=1e-3)
check("a sum over a local dim", s1, shard(x, 0).float().sum(1), rtol=1e-3, atol=1e-3)

# var_mean over a local dim of a tensor sharded on another
with FusionDefinition() as fd:
    inp = fd.define_tensor(shape=[1, 16 * d, 48], contiguity=True)
    var, mean = fd.ops.var_mean(inp, dims=[2], correction=0, keepdim=False)
    fd.add_output(var)
    fd.add_output(mean)
    inp.set_device_mesh(mesh)
    inp.outer_split(1, d)
    inp.axis(1).parallelize(X)
x = full(1, 16 * d, 48)
var, mean = fd.execute([shard(x, 1)])
check("var_mean (var) of a local dim", var, shard(x, 1).var(2, correction=0), rtol=1e-4, atol=1e-4)
check("var_mean (mean) of a local dim", mean, shard(x, 1).mean(2), rtol=1e-4, atol=1e-4)

# the output's sharded axis read back as nvFuser does, through fd.fec
with FusionDefinition() as fd:
    inp = fd.define_tensor([2, 3, e])
    weight = fd.define_tensor([d * e, e], contiguity=True, mesh=mesh, placements=[Shard(0)])
    fd.add_output(fd.ops.linear(inp, weight))
    fd.add_output(fd.ops.relu(inp))
    inp.set_device_mesh(mesh)
x, W = full(2, 3, e), full(d * e, e)
out, _ = fd.execute([x, shard(W, 0)])
sharded, whole = fd.fec.get_output_shardings()
assert sharded.axis_sharded_on(X) == 2 and whole.axis_sharded_on(X) == -1, (sharded, whole)
check("column-parallel linear, its sharding read back", out, shard(F.linear(x, W), 2))

# nvFuser's test_row_parallel_matmul: rfactor's partials annotated (hostir plans them)
with FusionDefinition() as fd:
    inp = fd.define_tensor([-1, d * e], contiguity=True, dtype=DataType.Float)
    weight = fd.define_tensor([d * e, e], contiguity=True, dtype=DataType.Float)
    out = fd.ops.matmul(inp, weight)
    fd.add_output(out)
    for t in (inp, weight, out):
        t.set_device_mesh(mesh)
    inp.outer_split(-1, d)
    inp.axis(-2).parallelize(X)
    weight.outer_split(0, d)
    weight.axis(0).parallelize(X)
    out.outer_split(-1, d)
    local_out = out.rfactor(axes=[-1])
    local_out.set_device_mesh(mesh)
    local_out.axis(-2).parallelize(X)
x, w = full(4, d * e), full(d * e, e)
check("row-parallel matmul with rfactor", fd.execute([shard(x, -1), shard(w, 0)])[0], x @ w)

# a scatter reads its operands whole: a sharded input is gathered first
with FusionDefinition() as fd:
    inp = fd.define_tensor([-1, -1], dtype=DataType.Float, mesh=mesh, placements=[Shard(0)])
    idx = fd.define_tensor([-1, -1], dtype=DataType.Int)
    src = fd.define_tensor([-1, -1], dtype=DataType.Float)
    fd.add_output(fd.ops.scatter(fd.ops.mul(inp, 2.0), idx, src, 1))
x, v = full(2 * d, 6), full(2 * d, 3)
index = torch.stack([torch.randperm(6, generator=torch.Generator().manual_seed(r))[:3]
                     for r in range(2 * d)]).to(DEV)
check("scatter of a gathered input", fd.execute([shard(x, 0), index, v])[0],
      torch.scatter(x * 2, 1, index, v))

# nvFuser's test_sdpa: head-parallel attention, forward and backward, on inputs
# [d, b, h / d, s, e / h] with the device dim outermost (BHSE and BSHE
# layouts, kept by the outputs); each rank runs ATen's flash attention on its
# heads, no communication
b, s, h, e = 2, 32, 12, 96


def sdpa_fwd_bwd(fd, q, k, v, out_grad):
    dropout_p = fd.define_scalar(0.0, dtype=DataType.Double)
    is_causal = fd.define_scalar(True, dtype=DataType.Bool)
    attn, log_sumexp, seed, offset = fd.ops.sdpfa_fwd(q, k, v, dropout_p, is_causal, scale=None)
    q_grad, k_grad, v_grad = fd.ops.sdpfa_bwd(out_grad, q, k, v, attn, log_sumexp, dropout_p, is_causal,
                                              seed, offset, scale=None)
    for t in (attn, q_grad, k_grad, v_grad):
        fd.add_output(t)


def sdpa_reference(dtype):
    q, k, v = (full(b, h, s, e // h, dtype=dtype).cpu().requires_grad_() for _ in range(3))
    grad = full(b, h, s, e // h, dtype=dtype).cpu()
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.backward(grad)
    return [t.detach() for t in (q, k, v, grad)], [out.detach(), q.grad, k.grad, v.grad]


for fmt, order in (("BHSE", [4, 3, 2, 1, 0]), ("BSHE", [4, 3, 1, 2, 0])):
    with FusionDefinition() as fd:
        sdpa_fwd_bwd(fd, *[fd.define_tensor(shape=[d, b, h // d, s, e // h], contiguity=True,
                                            dtype=DataType.BFloat16, stride_order=order) for _ in range(4)])
        # BSHE: the outputs annotated too, as they are computed (no resharding)
        for t in fd.fusion.inputs() + (fd.fusion.outputs() if fmt == "BSHE" else []):
            t.set_device_mesh(mesh)
            t.axis(0).parallelize(X)
    ins, wants = sdpa_reference(torch.bfloat16)

    def heads(t):
        """This rank's heads as [1, b, h / d, s, e / h], laid out as `fmt`."""
        t = t.view(b, d, h // d, s, e // h).narrow(1, rank, 1)
        t = t.transpose(0, 1).contiguous() if fmt == "BHSE" else t.permute(1, 0, 3, 2, 4).contiguous().transpose(2, 3)
        return t.to(DEV)
    outs = fd.execute([heads(t) for t in ins])
    # (one rank: the device dim of extent 1 is a broadcast, "gathered" from itself into a
    # contiguous buffer, whose layout the results then keep)
    if d > 1:
        assert "start" not in str(fd._dist.program), fd._dist.program  # no collective
    for name, got, want in zip(("output", "q_grad", "k_grad", "v_grad"), outs, wants):
        if d > 1:
            assert (got if fmt == "BHSE" else got.transpose(2, 3)).is_contiguous(), (name, got.stride())
        check(f"head-parallel sdpa {fmt} {name}", got, heads(want), rtol=1.6e-2, atol=1e-2)

# nvFuser's test_sdpa_loop_split: inputs [b, h, s, e / h] whose head dim is split
# over the ranks (Float on the CPU, whose flash attention takes it)
flash_dtype = DataType.BFloat16 if DEV.type == "cuda" else DataType.Float
with FusionDefinition() as fd:
    sdpa_fwd_bwd(fd, *[fd.define_tensor(shape=[-1, h, -1, e // h], dtype=flash_dtype) for _ in range(4)])
    for t in fd.fusion.inputs():
        t.set_device_mesh(mesh)
        t.split(1, d, inner_split=False)
        t.axis(1).parallelize(X)
ins, wants = sdpa_reference(flash_dtype.torch)
outs = fd.execute([shard(t.to(DEV), 1) for t in ins])
for name, got, want in zip(("output", "q_grad", "k_grad", "v_grad"), outs, wants):
    check(f"head-split sdpa {name}", got, shard(want.to(DEV), 1),
          **(dict(rtol=1.6e-2, atol=1e-2) if DEV.type == "cuda" else {}))

# attention takes sequences whole: inputs sharded on the sequence dim are gathered
with FusionDefinition() as fd:
    qkv = [fd.define_tensor(shape=[-1, h, -1, e // h], dtype=flash_dtype, mesh=mesh,
                            placements=[Shard(2)]) for _ in range(3)]
    attn, *_ = fd.ops.sdpfa_fwd(*qkv, is_causal=True)
    fd.add_output(attn)
ins, wants = sdpa_reference(flash_dtype.torch)
(got,) = fd.execute([shard(t.to(DEV), 2) for t in ins[:3]])
assert "allgather" in str(fd._dist.program), fd._dist.program
check("sequence-sharded sdpa, gathered", got, wants[0],
      **(dict(rtol=1.6e-2, atol=1e-2) if DEV.type == "cuda" else {}))

# uneven shards are an error on every rank, naming the difference
with FusionDefinition() as fd:
    inp = fd.define_tensor((-1,), contiguity=True, dtype=DataType.Float, mesh=mesh, placements=[Shard(0)])
    fd.add_output(fd.ops.set(inp))
try:
    fd.execute([full(3 + rank)])
except hostir.ExecutionError as err:
    assert "ranks disagree" in str(err), err
    print(f"rank {rank}: uneven shards raised ok", flush=True)
else:
    if d > 1:
        raise AssertionError("uneven shards were not reported")

# a 2-D mesh (4 ranks): tensor parallel over mesh_x, data parallel over mesh_y
if d == 4:
    mesh2 = DeviceMesh(torch.arange(4).reshape(2, 2))
    with FusionDefinition() as fd:
        x_ = fd.define_tensor([-1, e], dtype=DataType.Float, mesh=mesh2, placements=[Shard(0), Replicate()])
        w = fd.define_tensor([2 * e, e], dtype=DataType.Float, mesh=mesh2, placements=[Replicate(), Shard(0)])
        fd.add_output(fd.ops.linear(x_, w))
    x, w = full(4, e), full(2 * e, e)
    coord = mesh2.coordinates(rank)
    out = fd.execute([x.chunk(2, 0)[coord[0]], w.chunk(2, 0)[coord[1]]])[0]
    want = F.linear(x, w).chunk(2, 0)[coord[0]].chunk(2, 1)[coord[1]]
    check("2-D mesh linear", out, want)
    # resharding on a 2-D mesh: dims swapped between the mesh dims (nested
    # blocks: gathered and sliced) and one dim moved along mesh_y (an all-to-all
    # among the two ranks of each mesh_y team)
    Y = ParallelType.mesh_y

    def block(t, dims):
        """This rank's block of `t`, dims[m] split over mesh dim m."""
        for m, dd in enumerate(dims):
            if dd is not None:
                t = t.chunk(2, dd)[coord[m]]
        return t
    for src, dst in (((0, 1), (1, 0)), ((0, None), (1, None)), ((None, 2), (None, 0))):
        with FusionDefinition() as fd:
            place = [Replicate() if s_ is None else Shard(s_) for s_ in src]
            inp = fd.define_tensor([-1, -1, -1], dtype=DataType.Float, mesh=mesh2, placements=place)
            z = fd.ops.set(fd.ops.mul(inp, 3.0))
            z.set_device_mesh(mesh2)
            for ptype, dd in zip((Y, X), dst):
                if dd is not None:
                    z.outer_split(dd, 2)
                    z.axis(dd).parallelize(ptype)
            fd.add_output(fd.ops.neg(z))
        x = full(4, 6, 2)
        check(f"2-D mesh reshard {src} -> {dst}", fd.execute([block(x, src)])[0], block(-3 * x, dst))
        if None in src:
            text = str(fd._dist.program)
            assert text.count("start all_to_all") == 1 and "allgather" not in text, text
    with FusionDefinition() as fd:
        x_ = fd.define_tensor([-1, -1], dtype=DataType.Float, mesh=mesh2, placements=[Shard(0), Shard(1)])
        fd.add_output(fd.ops.sum(x_, [0, 1]))
    x = full(4, 6)
    check("2-D mesh sum over both mesh dims", fd.execute([x.chunk(2, 0)[coord[0]].chunk(2, 1)[coord[1]]])[0],
          x.sum())



# nvFuser's class style: definition(), then multidevice_schedule() through fd.sched
class AllgatherModel(FusionDefinition):
    def definition(self):
        self.inp = self.define_tensor((d * 4,), contiguity=True, dtype=DataType.Float)
        self.out = self.ops.set(self.inp)
        self.add_output(self.out)

    def multidevice_schedule(self):
        for t in (self.inp, self.out):
            self.sched._set_device_mesh(t, mesh)
            self.sched.split(t, 0, d, False)
            self.sched.set_allocation_as_loop(t)
        self.sched.parallelize(self.inp, 0, ParallelType.mesh_x)


x = full(d * 4)
check("class-style allgather (fd.sched)", AllgatherModel().execute([shard(x, 0)])[0], x)


class PointwiseModel(FusionDefinition):
    def definition(self):
        self.t0 = self.define_tensor((-1, -1), contiguity=(False, False), dtype=DataType.Float)
        self.t1 = self.ops.relu(self.t0)
        self.t2 = self.ops.add(self.t1, self.t1)
        self.add_output(self.t2)

    def multidevice_schedule(self):
        mesh_ = self.sched._create_device_mesh(range(d))
        for t in (self.t0, self.t1, self.t2):
            self.sched._set_device_mesh(t, mesh_)
        self.sched.parallelize(self.t0, 0, ParallelType.mesh_x)


x = full(d, 6)
out = PointwiseModel().execute([x[rank:rank + 1]])[0]  # (t1, t2 on the mesh, not sharded: gathered)
check("class-style sharded pointwise (fd.sched)", out, torch.relu(x) * 2)


class ColumnParallelLinear(FusionDefinition):
    def definition(self):
        self.x = self.define_tensor([-1, e], contiguity=True, dtype=DataType.Float)
        self.w = self.define_tensor([d * 3, e], contiguity=True, dtype=DataType.Float)
        self.out = self.ops.linear(self.x, self.w)
        self.add_output(self.out)

    def multidevice_schedule(self):
        for t in (self.x, self.w, self.out):
            self.sched._set_device_mesh(t, mesh)
        self.sched.split(self.w, 0, d, False)
        self.sched.parallelize(self.w, 0, ParallelType.mesh_x)
        self.sched.split(self.out, -2, d, False)
        self.sched.parallelize(self.out, -3, ParallelType.mesh_x)


x, w = full(5, e), full(d * 3, e)
check("class-style column-parallel linear (fd.sched)", ColumnParallelLinear().execute([x, shard(w, 0)])[0],
      shard(F.linear(x, w), 1))

print(f"rank {rank}: all sharded fusions ok ({d} ranks)", flush=True)
sys.exit(0)
