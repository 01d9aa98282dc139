"""Random ops (uniform, normal, rand_like, randn_like): statistics on large
draws, exact reproducibility for a given rng_seed and rng_offset (the same bits
as hostir.ir.philox on CPU and GPU), fresh numbers every call without them,
repeatable under torch.manual_seed, distinct streams for two ops, values that
do not depend on how the kernel is laid out, fusion with pointwise ops
(dropout), and definition errors."""
import math

import pytest
import torch

from hostir import DataType, DefinitionError, FusionDefinition
from hostir.ir import philox
from ops_util import TEST_DEVICE, TORCH

D = DataType
DEV = TEST_DEVICE


def _uniform_fd(shape, dtype=D.Float, lo=0.0, hi=1.0, seeded=True):
    with FusionDefinition() as fd:
        if seeded:
            s = fd.define_scalar(None, dtype=D.Int)
            o = fd.define_scalar(None, dtype=D.Int)
            fd.add_output(fd.ops.uniform(lo, hi, shape, dtype, rng_seed=s, rng_offset=o))
        else:
            fd.add_output(fd.ops.uniform(lo, hi, shape, dtype))
    return fd


@pytest.mark.parametrize("dtype", [D.Float, D.Double, D.BFloat16, D.Half], ids=lambda d: d.short)
@pytest.mark.parametrize("lo,hi", [(0.0, 1.0), (-3.0, 5.0)])
def test_uniform_statistics(dtype, lo, hi):
    n = 1 << 18
    fd = _uniform_fd([n], dtype, lo, hi)
    (u,) = fd.execute([1234, 7], device=DEV)
    assert u.dtype == TORCH[dtype] and u.shape == (n,)
    x = u.double().cpu()
    assert x.min() >= lo and x.max() <= hi
    if dtype in (D.Float, D.Double):
        assert x.max() < hi
    width = hi - lo
    assert abs(x.mean() - (lo + hi) / 2) < 0.01 * width
    assert abs(x.std() - width / math.sqrt(12)) < 0.01 * width
    hist = torch.histc(x, bins=10, min=lo, max=hi) / n   # every tenth of the range about as full
    assert (hist - 0.1).abs().max() < 0.01


@pytest.mark.parametrize("dtype", [D.Float, D.Double, D.BFloat16], ids=lambda d: d.short)
def test_normal_statistics(dtype):
    n = 1 << 18
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.normal(2.0, 3.0, [512, n // 512], dtype, rng_seed=99, rng_offset=0))
    (z,) = fd.execute([], device=DEV)
    x = (z.double().cpu() - 2.0) / 3.0
    assert abs(x.mean()) < 0.01 and abs(x.std() - 1) < 0.01
    assert abs((x.abs() < 1).double().mean() - 0.6827) < 0.01
    assert abs((x.abs() < 2).double().mean() - 0.9545) < 0.01


def test_seeded_draws_are_exact_philox_bits_and_reproducible():
    shape = [37, 129]
    fd = _uniform_fd(shape)
    (a,) = fd.execute([2 ** 40 + 5, 11], device=DEV)
    (b,) = _uniform_fd(shape).execute([2 ** 40 + 5, 11], device=DEV)  # another definition
    want = philox.uniform(2 ** 40 + 5, 11, 0, torch.arange(37 * 129), False).reshape(shape)
    assert torch.equal(a.cpu(), want) and torch.equal(b.cpu(), want)  # bit for bit, CPU or GPU
    (c,) = fd.execute([2 ** 40 + 5, 12], device=DEV)
    (d,) = fd.execute([2 ** 40 + 6, 11], device=DEV)
    assert not torch.equal(a, c) and not torch.equal(a, d)
    with FusionDefinition() as fd2:
        fd2.add_output(fd2.ops.normal(0.0, 1.0, shape, D.Double, rng_seed=3, rng_offset=4))
    (z,) = fd2.execute([], device=DEV)
    torch.testing.assert_close(z.cpu(), philox.normal(3, 4, 0, torch.arange(37 * 129), True).reshape(shape),
                               rtol=1e-12, atol=1e-12)
    with FusionDefinition() as fd3:  # float: four normals a draw (cos, sin of two pairs)
        fd3.add_output(fd3.ops.normal(0.0, 1.0, shape, D.Float, rng_seed=3, rng_offset=4))
    (f,) = fd3.execute([], device=DEV)
    want = philox.normal(3, 4, 0, torch.arange(37 * 129), False).reshape(shape)
    torch.testing.assert_close(f.cpu(), want, rtol=1e-5, atol=1e-5)
    w = want.flatten()[:4 * 1000].reshape(-1, 2)  # (cos, sin) pairs: one radius, two angles' parts
    assert (w[:, 0] != w[:, 1]).all() and ((w ** 2).sum(1) > 0).all()


def test_values_do_not_depend_on_the_kernel_layout():
    """The same seeded draw alone, fused with an op on another input, at a
    shape that is vectorized and one that is not: the same numbers."""
    outs = []
    for width in (128, 128):
        with FusionDefinition() as fd:
            x = fd.define_tensor([-1, -1], contiguity=[True, True])
            u = fd.ops.uniform(0.0, 1.0, x.shape(), D.Float, rng_seed=5, rng_offset=1)
            fd.add_output(u)
            fd.add_output(fd.ops.add(x, u))
        outs.append(fd.execute([torch.randn(3, width, device=DEV)])[0])
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.uniform(0.0, 1.0, [3, 128], D.Float, rng_seed=5, rng_offset=1))
    (alone,) = fd.execute([], device=DEV)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], alone)
    strided = torch.randn(3, 256, device=DEV)[:, ::2]  # not contiguous: the scalar variant
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], contiguity=[True, False])
        fd.add_output(fd.ops.add(fd.ops.mul(x, 0.0), fd.ops.uniform(0.0, 1.0, x.shape(), D.Float,
                                                                    rng_seed=5, rng_offset=1)))
    (got,) = fd.execute([strided])
    assert torch.equal(got, alone)


def test_unseeded_ops_draw_fresh_numbers_each_call_and_repeat_under_manual_seed():
    def make():
        with FusionDefinition() as fd:
            x = fd.define_tensor([-1, -1], contiguity=[True, True])
            fd.add_output(fd.ops.rand_like(x))
            fd.add_output(fd.ops.rand_like(x))      # a second op: another stream
            fd.add_output(fd.ops.randn_like(x))
        return fd
    x = torch.randn(64, 33, device=DEV)
    torch.manual_seed(17)
    fd = make()
    first = fd.execute([x])
    second = fd.execute([x])
    assert not torch.equal(first[0], first[1])
    assert not torch.equal(first[0], second[0]) and not torch.equal(first[2], second[2])
    torch.manual_seed(17)
    again = make()
    assert all(torch.equal(a, b) for a, b in zip(again.execute([x]), first))
    assert all(torch.equal(a, b) for a, b in zip(again.execute([x]), second))


@pytest.mark.parametrize("shape", [(1,), (5, 1), (1, 7), (33, 65), (2, 3, 4)], ids=str)
def test_dropout_fused(shape):
    p = 0.3
    x = torch.randn(*shape, device=DEV)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1] * len(shape), contiguity=True)
        pp = fd.define_scalar(None, dtype=D.Double)
        u = fd.ops.rand_like(t)
        keep = fd.ops.ge(u, pp)
        fd.add_output(fd.ops.where(keep, fd.ops.div(t, fd.ops.sub(1.0, pp)), 0.0))
        fd.add_output(u)
    out, u = fd.execute([x, p])
    want = torch.where(u >= p, x / (1 - p), torch.zeros((), device=DEV))
    torch.testing.assert_close(out, want)


def test_shapes_from_vectors_and_scalars():
    with FusionDefinition() as fd:
        n = fd.define_scalar(None, dtype=D.Int)
        v = fd.define_vector([n, 3])
        fd.add_output(fd.ops.normal(0.0, 1.0, v, D.Float, rng_seed=1, rng_offset=2))
    (z,) = fd.execute([5], device=DEV)
    assert z.shape == (5, 3)
    (z0,) = fd.execute([0], device=DEV)
    assert z0.shape == (0, 3)


def test_definition_errors():
    with pytest.raises(DefinitionError, match="uniform: dtype must be a floating type"):
        with FusionDefinition() as fd:
            fd.ops.uniform(0.0, 1.0, [4], D.Int)
    with pytest.raises(DefinitionError, match="both rng_seed and rng_offset"):
        with FusionDefinition() as fd:
            fd.ops.normal(0.0, 1.0, [4], D.Float, rng_seed=3)
    with pytest.raises(DefinitionError, match="rng_seed must be an Int scalar"):
        with FusionDefinition() as fd:
            fd.ops.uniform(0.0, 1.0, [4], D.Float, rng_seed=1.5, rng_offset=0)
    with pytest.raises(DefinitionError, match="negative extent"):
        with FusionDefinition() as fd:
            fd.ops.uniform(0.0, 1.0, [-3], D.Float)


def test_philox_known_answers():
    """Random123's known-answer vectors for Philox-4x32-10 (counter, key ->
    output), through hostir's mapping: counter (index low, index high, offset
    low, offset high), key (seed low, seed high)."""
    def s64(x):
        return x - (1 << 64) if x >= (1 << 63) else x

    def draw(ctr, key):
        idx = torch.tensor([s64(ctr[0] | (ctr[1] << 32))])
        return [int(w) for w in philox.philox(key[0] | (key[1] << 32), ctr[2] | (ctr[3] << 32), 0, idx)]
    assert draw([0, 0, 0, 0], [0, 0]) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert draw([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2) == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
    assert draw([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0]) == \
        [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


def test_random_ops_in_a_sharded_fusion_are_refused():
    """Each rank would draw its shard from the same local indices: refused,
    naming the op (rather than every rank getting the same numbers)."""
    from hostir import UnsupportedError
    from hostir.multidevice import DeviceMesh, Shard
    mesh = DeviceMesh([0])
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=D.Float, mesh=mesh, placements=[Shard(0)])
        fd.add_output(fd.ops.mul(x, fd.ops.rand_like(x)))
    with pytest.raises(UnsupportedError, match="uniform .* sharded fusion"):
        fd.execute([torch.randn(4, 3, device=DEV)])


def test_generating_kernels_loop_over_a_capped_grid():
    """A kernel that only draws numbers loops in 32 blocks an SM (its threads
    set up their draws once); one that also reads a tensor (dropout) takes a
    thread per vector like any pointwise kernel."""
    from hostir.codegen import spec as S
    made = []
    S.observers.append(made.append)
    try:
        x = torch.randn(1 << 12)
        with FusionDefinition() as fd:
            t = fd.define_tensor([-1], contiguity=[True])
            fd.add_output(fd.ops.rand_like(t))
        fd.execute([x])
        with FusionDefinition() as fd2:
            t = fd2.define_tensor([-1], contiguity=[True])
            fd2.add_output(fd2.ops.where(fd2.ops.ge(fd2.ops.rand_like(t), 0.1), t, 0.0))
        fd2.execute([x])
    finally:
        S.observers.remove(made.append)
    gen, drop = made
    v_gen = gen.variant(gen.kernels[0], 4, "int")
    v_drop = drop.variant(drop.kernels[0], 4, "int")
    assert v_gen.generates and not v_drop.generates
    assert gen.grid(v_gen, 1 << 24, 132) == 132 * 32
    assert drop.grid(v_drop, 1 << 24, 132) == (1 << 24) // 256
