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
