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
from hostir.multidevice import Replicate, Shard  # noqa: E402
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


# ---------------------------------------------------------------- several meshes
from hostir.dist.meshes import MeshMove, between_meshes, check_meshes, mesh_ranks  # noqa: E402
from hostir.dist.propagate import assign_meshes, propagate  # noqa: E402
from hostir.dist.sharding import Sharding  # noqa: E402

A1, B1 = DeviceMesh([0]), DeviceMesh([1])
A2, B2 = DeviceMesh([0, 1]), DeviceMesh([2, 3])


def test_meshes_of_one_shape_move_rank_for_rank_without_a_gather():
    assert between_meshes(Sharding(A1), Sharding(B1)) == \
        MeshMove([], Sharding(A1), ("send_recv", 1), Sharding(B1), [])
    assert between_meshes(sh(A2, 0), sh(B2, 0)) == MeshMove([], sh(A2, 0), ("send_recv", 2), sh(B2, 0), [])
    assert between_meshes(sh(B2, 1), sh(A2, 1)).move == ("send_recv", -2)
    # another placement on the consumer: resharded on the producer's mesh first, then sent
    assert between_meshes(sh(A2, 0), sh(B2, None)).before == [("allgather", 0, 0)]
    assert between_meshes(sh(A2, None), sh(B2, 1)).before == [("slice", 0, 1)]
    assert between_meshes(sh(A2, ("partial", "sum")), sh(B2, None)).before == [("allreduce", 0, "sum")]
    two_d = DeviceMesh([[4, 5], [6, 7]])
    assert between_meshes(sh(MESH2, 0, 1), sh(two_d, 0, 1)) == \
        MeshMove([], sh(MESH2, 0, 1), ("send_recv", 4), sh(two_d, 0, 1), [])


def test_meshes_of_other_shapes_move_whole_by_broadcast_from_one_rank():
    move = between_meshes(Sharding(A1), sh(MESH1, 1))
    assert move == MeshMove([], Sharding(A1), ("broadcast", 0, (0, 1, 2, 3)), Sharding(MESH1),
                            [("slice", 0, 1)])
    # the root is a producer rank that is also a consumer where there is one: a smaller team
    move = between_meshes(sh(A2, 0), Sharding(DeviceMesh([1, 2, 3])))
    assert move.before == [("allgather", 0, 0)] and move.move == ("broadcast", 1, (1, 2, 3))
    assert "broadcast from rank 1 to ranks [1, 2, 3]" in move.describe()


def test_a_consumer_within_the_producers_ranks_needs_no_move():
    move = between_meshes(sh(MESH1, ("partial", "sum")), Sharding(B1))
    assert move == MeshMove([("allreduce", 0, "sum")], Sharding(MESH1), None, Sharding(B1), [])
    # the same ranks in another shape
    assert between_meshes(sh(MESH1, 0), sh(MESH2, None, 0)).move is None


def test_meshes_the_job_cannot_run_are_named():
    check_meshes([A2, B2], 4, lambda m: "T0")
    with pytest.raises(DefinitionError, match=r"T0 is on DeviceMesh\(\[2, 3\]\), but ranks 2, 3 are "
                                              r"not in this job of 2 ranks \(0\.\.1\)"):
        check_meshes([A2, B2], 2, lambda m: "T0")
    with pytest.raises(UnsupportedError, match="consecutive in row-major order"):
        check_meshes([DeviceMesh([1, 0])], 2, lambda m: "T0")
    assert mesh_ranks(A2, 2) is None and mesh_ranks(A2, 4) == (0, 1) and mesh_ranks(None, 4) is None


def stages():
    """x (no mesh) + w on A2, then * 2 on B2, then + y (no mesh)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([4, 6], dtype=DataType.Float)
        w = fd.define_tensor([4, 6], dtype=DataType.Float, mesh=A2, placements=[Shard(1)])
        y = fd.define_tensor([4, 6], dtype=DataType.Float)
        a = fd.ops.add(x, w)
        b = fd.ops.mul(a, 2.0)
        c = fd.ops.add(b, y)
        fd.add_output(c)
        b.set_device_mesh(B2)
    return fd, (x, w, y, a, b, c)


def test_each_tensor_takes_its_annotations_mesh_else_its_operands_else_its_first_consumers():
    fd, tvs = stages()
    meshes = assign_meshes(fd.ir(), fd._annotations())
    assert [meshes[id(t.val)] for t in tvs] == [A2, A2, B2, A2, B2, B2]


def test_a_node_takes_shardings_only_from_operands_on_its_own_mesh():
    fd, (x, w, y, a, b, c) = stages()
    prop = propagate(fd.ir(), fd._annotations())
    assert prop.mesh is None and prop.meshes == [A2, B2]
    assert prop.computed[a.val] == sh(A2, 1)        # w's sharding, on A2
    assert prop.computed[b.val] == Sharding(B2)      # a is on another mesh: nothing from it
    assert prop.needs[(b.val, 0)] == Sharding(B2)    # read whole there: a crosses from A2
    assert between_meshes(prop.computed[a.val], prop.needs[(b.val, 0)]).before == [("allgather", 0, 1)]


def test_shard_tensor_outside_the_mesh_gives_a_placeholder():
    from hostir.multidevice import placeholder, shard_tensor
    with FusionDefinition() as fd:
        x = fd.define_tensor([4, 6], dtype=DataType.Float, mesh=B1, placements=[Replicate()])
        fd.add_output(x)
    got = shard_tensor(torch.ones(4, 6, dtype=torch.float64), x)  # this process is rank 0
    assert got.shape == (0, 0) and got.dtype == torch.float64
    assert B1.shard_tensor(torch.ones(4), 0).shape == (0,) and placeholder(torch.tensor(1.0)).shape == (0,)


def test_class_style_multidevice_schedule_annotates_through_fd_sched():
    """nvFuser's class style: multidevice_schedule() runs after definition(), its
    fd.sched calls land on the tensors' loop domains; the calls that only shape
    a single-GPU kernel are refused naming the ones hostir takes."""
    from hostir import DataType, FusionDefinition, ParallelType
    from hostir.ir.errors import DefinitionError, UnsupportedError

    class Model(FusionDefinition):
        def definition(self):
            self.inp = self.define_tensor((8, -1), contiguity=True, dtype=DataType.Float)
            self.out = self.ops.sum(self.inp, [0])
            self.add_output(self.out)

        def multidevice_schedule(self):
            mesh = self.sched._create_device_mesh(range(4))
            for t in (self.inp, self.out):
                self.sched._set_device_mesh(t, mesh)
            self.sched.split(self.inp, 0, 4, False)
            self.sched.parallelize(self.inp, 0, ParallelType.mesh_x)
            self.sched.set_allocation_as_loop(self.inp)
            self.seen = [str(t.val) for t in self.sched.tensors()]

    m = Model()
    m.ir()
    assert m.inp.mesh.size == 4 and m.inp.axis(0).parallel_type is ParallelType.mesh_x
    assert m.inp.get_loop_domain()[1].parallel_type is None
    assert m.seen[0] == str(m.inp.val) and len(m.seen) == 2
    with pytest.raises(UnsupportedError, match=r"fd.sched.cache_after: hostir schedules its kernels itself"):
        m.sched.cache_after(m.inp)
    with pytest.raises(UnsupportedError, match="merge of loop axes is not supported"):
        m.sched.merge(m.inp, 0)
    with pytest.raises(DefinitionError, match="sched.parallelize: expected a tensor of this fusion"):
        m.sched.parallelize(Model().sched, 0, ParallelType.mesh_x)
    with pytest.raises(DefinitionError, match="_set_device_mesh: expected a DeviceMesh"):
        m.sched._set_device_mesh(m.out, range(4))
