"""Sharding arithmetic that needs no ranks: the steps between two shardings."""
import pytest
import torch

from hostir.dist.mesh import DeviceMesh
from hostir.dist.propagate import reshard_steps
from hostir.dist.sharding import make_sharding

MESH1 = DeviceMesh(torch.arange(4))
MESH2 = DeviceMesh(torch.arange(4).reshape(2, 2))


def sh(mesh, *entries):
    """A sharding from one entry per mesh dim: a dim index, ("partial", op) or None."""
    return make_sharding(mesh, {m: (("dim", e) if isinstance(e, int) else e)
                                for m, e in enumerate(entries) if e is not None})


@pytest.mark.parametrize("src,dst,want", [
    ((0,), (1,), [("all_to_all", 0, 0, 1)]),
    ((2,), (0,), [("all_to_all", 0, 2, 0)]),
    ((0,), (None,), [("allgather", 0, 0)]),
    ((None,), (1,), [("slice", 0, 1)]),
    ((("partial", "sum"),), (None,), [("allreduce", 0, "sum")]),
    ((("partial", "sum"),), (1,), [("reduce_scatter", 0, 1, "sum")]),
    ((1,), (1,), []),
])
def test_steps_on_a_1d_mesh(src, dst, want):
    assert reshard_steps(sh(MESH1, *src), sh(MESH1, *dst)) == want


def test_a_dim_moves_along_one_mesh_dim_of_a_2d_mesh_by_all_to_all():
    assert reshard_steps(sh(MESH2, 0, None), sh(MESH2, 1, None)) == [("all_to_all", 0, 0, 1)]
    assert reshard_steps(sh(MESH2, 0, 2), sh(MESH2, 1, 2)) == [("all_to_all", 0, 0, 1)]


def test_dims_swapped_between_mesh_dims_are_gathered_and_sliced():
    """Midway, one dim would be split over both mesh dims (nested blocks): an
    all-to-all on one team would order them wrongly."""
    steps = reshard_steps(sh(MESH2, 0, 1), sh(MESH2, 1, 0))
    assert sorted(steps) == sorted([("allgather", 0, 0), ("slice", 0, 1),
                                    ("allgather", 1, 1), ("slice", 1, 0)])
    steps = reshard_steps(sh(MESH2, 0, 1), sh(MESH2, 1, None))
    assert ("all_to_all", 0, 0, 1) not in steps


# ---------------------------------------------------------------- layouts
from hostir import DataType, DefinitionError, FusionDefinition, ParallelType, UnsupportedError  # noqa: E402
from hostir.dist.layout import Layout, interleave, take  # noqa: E402

X, Y = ParallelType.mesh_x, ParallelType.mesh_y


def layout_of(build, mesh=MESH1, shape=(-1,)):
    with FusionDefinition() as fd:
        tv = fd.define_tensor(list(shape), dtype=DataType.Float)
        fd.add_output(tv)
        tv.set_device_mesh(mesh)
        build(tv)
    return fd._sharding_of(tv.val)


def test_split_chains_give_layouts():
    assert layout_of(lambda t: (t.outer_split(0, 4), t.axis(0).parallelize(X))).layouts == ()
    s = layout_of(lambda t: (t.inner_split(0, 4), t.axis(1).parallelize(X)))
    assert s.layout(0) == Layout((0,), (None, 1))
    s = layout_of(lambda t: (t.outer_split(0, 2), t.outer_split(1, 4), t.axis(1).parallelize(X)))
    assert s.layout(0) == Layout((0,), (2, None))
    s = layout_of(lambda t: (t.outer_split(0, 2), t.axis(0).parallelize(Y), t.outer_split(1, 2),
                             t.axis(1).parallelize(X)), MESH2)
    assert s.layout(0) == Layout((0, 1), (1, 1, None)) and s.parts(0) == 4
    # a static extent: the innermost part is what is left
    s = layout_of(lambda t: (t.inner_split(0, 4), t.axis(1).parallelize(X)), shape=(12,))
    assert s.layout(0) == Layout((0,), (3, None))


@pytest.mark.parametrize("size,layout", [(24, Layout((0,), (None, 1))), (24, Layout((0,), (2, None))),
                                         (24, Layout((0,), (1, None))), (0, Layout((0,), (3, None)))])
def test_take_then_gather_is_the_identity_on_one_mesh_dim(size, layout):
    """Every rank's part, gathered rank-major and interleaved, is the whole dim again."""
    t = torch.randn(3, size)
    ((m, a, b),) = layout.steps((4,))
    parts = [take(t, 1, r, 4, a, b) for r in range(4)]
    gathered = torch.cat([p.transpose(0, 1) for p in parts], 0)  # dim 1 outermost, rank-major
    torch.testing.assert_close(interleave(gathered, 4, a, b).transpose(0, 1), t)
    if size and layout.locals == (None, 1):  # every 4th element
        torch.testing.assert_close(parts[1], t[:, 1::4])


def test_a_device_axis_of_the_wrong_size_is_refused():
    with pytest.raises(DefinitionError, match="axis 0 has extent 3 but is parallelized over a mesh "
                                              "dimension of 4 ranks"):
        layout_of(lambda t: (t.outer_split(0, 3), t.axis(0).parallelize(X)))
    with pytest.raises(DefinitionError, match="axis 0 of extent 6 is parallelized over 4 ranks without a split"):
        layout_of(lambda t: t.axis(0).parallelize(X), shape=(6,))


def test_a_dim_both_device_and_stream_parallel_in_one_tensor_is_refused():
    with pytest.raises(UnsupportedError, match="device-parallel and stream-parallel parts"):
        layout_of(lambda t: (t.outer_split(0, 4), t.axis(0).parallelize(X), t.outer_split(1, 2),
                             t.axis(1).parallelize(ParallelType.stream)))


def test_a_dim_in_another_layout_moves_whole():
    cyc = make_sharding(MESH1, {0: ("dim", 1)}, layouts={1: Layout((0,), (None, 1))})
    assert reshard_steps(cyc, sh(MESH1, None)) == [("gather", 1, Layout((0,), (None, 1)))]
    assert reshard_steps(sh(MESH1, 1), cyc) == [("gather", 1, Layout.block(0)),
                                               ("take", 1, Layout((0,), (None, 1)))]
    assert reshard_steps(cyc, cyc) == []
    partial = sh(MESH1, ("partial", "sum"))
    assert reshard_steps(partial, cyc) == [("allreduce", 0, "sum"), ("take", 1, Layout((0,), (None, 1)))]


def test_rfactor_takes_reduction_axes_and_its_annotations_leave_the_plan_alone():
    with FusionDefinition() as fd:
        a = fd.define_tensor([-1, 8], dtype=DataType.Float)
        b = fd.define_tensor([8, -1], dtype=DataType.Float)
        out = fd.ops.matmul(a, b)
        fd.add_output(out)
        out.set_device_mesh(MESH1)
        out.outer_split(-1, 4)  # [i{M}, i{N}, r{4}, r{2}]
        with pytest.raises(DefinitionError, match="loop axis 0 is not a reduction axis"):
            out.rfactor(axes=[0])
        partials = out.rfactor(axes=[-1])
        partials.set_device_mesh(MESH1)
        partials.axis(-2).parallelize(X)
    assert fd._sharding_of(out.val).is_replicated  # the output's own annotation is unchanged
    with pytest.raises(UnsupportedError, match="merge of loop axes"):
        out.merge(0)
