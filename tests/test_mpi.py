"""Multi-rank programs under mpirun on the CPU (gloo, or MPI itself): each test
starts a job and checks that every rank reported success, or that a failure
ended every rank with its message."""
import time

import pytest

from mpi_util import run_mpi

pytestmark = pytest.mark.mpi


def _ok(proc, n, marker):
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert out.count(marker) == n, out[-4000:]


@pytest.mark.parametrize("n,backend", [(2, "torch"), (2, "mpi"), (4, "torch")])
def test_every_collective_kind(n, backend):
    proc = run_mpi(n, "tests/mpi/collectives.py", env={"HOSTIR_COMM_BACKEND": backend})
    _ok(proc, n, f"all collectives ok ({'gloo' if backend == 'torch' else 'mpi'}, {n} ranks)")


def test_a_rank_that_raises_ends_the_job_with_its_message():
    t = time.monotonic()
    proc = run_mpi(2, "tests/mpi/raises.py", timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "[rank 1] ValueError: rank 1 failed on purpose" in out, f"rc {proc.returncode}: {out[-3000:]!r}"
    assert "unreachable" not in out
    assert time.monotonic() - t < 60


@pytest.mark.parametrize("n", [2, 4])
def test_a_store_rank_0_cannot_open_is_an_error_on_every_rank(n):
    t = time.monotonic()
    proc = run_mpi(n, "tests/mpi/store_fails.py", timeout=120)
    _ok(proc, n, "caught: hostir: rank 0 could not open the process group's store")
    assert "no port today (on purpose)" in proc.stdout
    assert time.monotonic() - t < 60


@pytest.mark.parametrize("backend", ["torch", "mpi"])
def test_a_rank_that_alone_changes_its_shapes_later_ends_the_job_with_a_message(backend):
    """Ranks compare input shapes on inputs they have not passed before; a rank
    that alone passes new ones waits in a check no other rank makes (its own
    group, never another rank's collective), and the timeout names it."""
    t = time.monotonic()
    proc = run_mpi(2, "tests/mpi/shape_changes_alone.py", timeout=120,
                   env={"HOSTIR_COMM_BACKEND": backend, "HOSTIR_COMM_TIMEOUT": "4"})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    # whichever rank's timeout ends the job first says it: rank 1 names its new
    # shapes, rank 0 the collective rank 1 did not join and the likely cause
    named = "rank 1: comparing the inputs' shapes and dtypes with the other ranks failed" in out and \
        "[(0, (2, 5), 'float32')]" in out and "this rank alone passed inputs of new shapes" in out
    hinted = "allgather -> " in out and "did not complete" in out and \
        "passed inputs of other shapes or dtypes than on its earlier calls" in out
    assert named or hinted, f"rc {proc.returncode}: {out[-3000:]!r}"
    assert "unreachable" not in out
    assert time.monotonic() - t < 60


@pytest.mark.parametrize("n,backend", [(1, "torch"), (2, "torch"), (2, "mpi"), (4, "torch")])
def test_sharded_fusions(n, backend):
    """nvFuser's communication and matmul programs, placements, an MLP block, a 2-D mesh."""
    proc = run_mpi(n, "tests/mpi/sharded.py", env={"HOSTIR_COMM_BACKEND": backend})
    _ok(proc, n, f"all sharded fusions ok ({n} ranks)")


@pytest.mark.parametrize("n,backend", [(2, "torch"), (2, "mpi"), (4, "torch")])
def test_shards_that_are_not_one_block(n, backend):
    """Device axes as inner parts of splits, in the middle of a dim, nested over
    two mesh dims: shard_tensor, compute, gather, reduce, reshard."""
    proc = run_mpi(n, "tests/mpi/layouts.py", env={"HOSTIR_COMM_BACKEND": backend})
    _ok(proc, n, f"all layouts ok ({n} ranks)")


@pytest.mark.parametrize("n", [2, 4])
def test_dtensors_in_and_out(n):
    """hostir.dtensor_execute: nvFuser's test_dtensor programs (torch backend)."""
    proc = run_mpi(n, "tests/mpi/dtensors.py", env={"HOSTIR_COMM_BACKEND": "torch"})
    _ok(proc, n, f"all dtensor programs ok ({n} ranks)")


@pytest.mark.parametrize("n,backend,chunks", [(2, "torch", "1 3"), (2, "mpi", "3"), (4, "torch", "3")])
def test_stream_pipelined_fusions(n, backend, chunks):
    """Stream-parallel axes: host for-loops over chunks on rotating streams, s in {1, 3}."""
    proc = run_mpi(n, "tests/mpi/pipelined.py", *chunks.split(), env={"HOSTIR_COMM_BACKEND": backend})
    _ok(proc, n, f"all pipelined fusions ok ({n} ranks)")


@pytest.mark.parametrize("n,backend", [(2, "torch"), (2, "mpi"), (4, "torch")])
def test_tensors_on_different_meshes(n, backend):
    """Pipeline stages: send/recv, broadcast, stages sharded alike, an MLP across
    tensor-parallel stages, ranks outside a mesh (the programs' text compared
    across ranks, every call's inputs checked)."""
    proc = run_mpi(n, "tests/mpi/meshes.py", env={"HOSTIR_COMM_BACKEND": backend,
                                                  "HOSTIR_CHECK_PROGRAM": "1", "HOSTIR_DEBUG": "verify"})
    _ok(proc, n, f"all mesh programs ok ({'gloo' if backend == 'torch' else 'mpi'}, {n} ranks)")


@pytest.mark.parametrize("program", ["launch/mlp.py", "launch/allgather_linear.py",
                                     "launch/linear_reduce_scatter.py"])
def test_launch_programs(program):
    proc = run_mpi(2, program, "--steps", "2")
    _ok(proc, 1, "ranks on cpu, result matches torch")
