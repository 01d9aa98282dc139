"""Reliability (issue 4): a long host loop of tiny launches, and a cached fusion
executed many times, do not grow process memory after warm-up, and their plan
caches stay bounded. On CPU RSS comes from /proc/self/statm; Python-level
leaks (a tensor or a dict entry kept per iteration) are caught by counting
gc-tracked objects, which is exact where RSS is noisy."""
import ctypes
import gc
import os
import sys
import time

import pytest
import torch

from hostir import DataType, FusionDefinition, HostProgram

PAGE = os.sysconf("SC_PAGE_SIZE")
RSS_TOLERANCE = 8 * 2**20          # bytes
OBJECT_TOLERANCE = 500             # gc-tracked objects; a per-iteration leak adds >= 2,000
ITERS = 2000
WIDTH = 16                         # floats per row: tiny launches

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/statm"),
                                reason="needs /proc/self/statm (Linux)")

try:
    _libc = ctypes.CDLL("libc.so.6")
except OSError:  # pragma: no cover - not glibc
    _libc = None


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def settle() -> tuple[int, int]:
    """(RSS, gc-tracked objects) after collecting garbage and returning free heap
    pages to the OS (so allocator caching is not mistaken for growth)."""
    gc.collect()
    if _libc is not None:
        _libc.malloc_trim(0)
    return rss(), len(gc.get_objects())


def row_fusion() -> FusionDefinition:
    """x[i:i+1, :] * 3 + i, with the loop index i as an Int scalar input."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1])
        i = fd.define_scalar(dtype=DataType.Int)
        s = fd.ops.slice(x, [i, 0], [i + 1, fd.ops.size(x, 1)])
        fd.add_output(fd.ops.add(fd.ops.mul(s, 3.0), i))
    return fd


def loop_program(fd, streams: bool) -> HostProgram:
    hp = HostProgram()
    x = hp.define_tensor([-1, -1])
    n = hp.define_scalar(DataType.Int)
    acc = hp.allocate([n, x.logical[1].extent])
    with hp.for_loop(0, n) as i:
        row = hp.slice(acc, 0, i, i + 1)
        if streams:
            with hp.stream(i % 2):
                hp.launch(fd, [x, i], outputs=[row])
        else:
            hp.launch(fd, [x, i], outputs=[row])
    hp.add_output(acc)
    return hp


@pytest.mark.parametrize("streams", [False, True], ids=["main-stream", "stream-pool"])
def test_host_loop_of_tiny_launches_does_not_grow_memory(streams):
    fd = row_fusion()
    hp = loop_program(fd, streams)
    a = torch.randn(ITERS, WIDTH) + 0.5
    expected = a * 3 + torch.arange(ITERS, dtype=a.dtype)[:, None]
    start = time.perf_counter()
    for _ in range(2):                              # warm-up: plans, allocator, closures
        (out,) = hp.execute([a, ITERS])
    torch.testing.assert_close(out, expected)
    del out
    plans_after_warmup = fd.cache_info().plans
    rss0, objs0 = settle()
    peak_rss, peak_objs = rss0, objs0
    runs = 3
    for _ in range(runs):
        (out,) = hp.execute([a, ITERS])
        torch.testing.assert_close(out, expected)
        del out
        r, o = settle()
        peak_rss, peak_objs = max(peak_rss, r), max(peak_objs, o)
    elapsed = time.perf_counter() - start
    growth = peak_rss - rss0
    assert growth <= RSS_TOLERANCE, (
        f"RSS grew by {growth / 2**20:.1f} MiB over {runs} x {ITERS} launches after warm-up")
    assert peak_objs - objs0 <= OBJECT_TOLERANCE, (
        f"{peak_objs - objs0} more gc-tracked objects after {runs} x {ITERS} launches")
    info = fd.cache_info()
    # the slice bound changes every iteration: one specialized plan, then a symbolic one
    assert info.plans <= 2, info
    assert info.plans == plans_after_warmup, info
    assert info.hits + info.misses == (2 + runs) * ITERS, info
    # a guard against a pathological per-launch cost (not a timing target: CI shares its cores)
    assert elapsed < 90, f"{(2 + runs) * ITERS} launches took {elapsed:.1f} s"


def test_repeated_execute_makes_one_plan_and_does_not_grow_memory():
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1])
        y = fd.define_tensor([-1])
        fd.add_output(fd.ops.add(fd.ops.mul(fd.ops.sin(x), y), 1.5))
    a = torch.randn(4, 32) + 0.5
    b = torch.randn(32) + 0.5
    expected = a.sin() * b + 1.5
    start = time.perf_counter()
    for _ in range(100):                            # warm-up
        (out,) = fd.execute([a, b])
    torch.testing.assert_close(out, expected)
    del out
    rss0, objs0 = settle()
    for k in range(ITERS - 100):
        (out,) = fd.execute([a, b])
        if k % 500 == 0:
            torch.testing.assert_close(out, expected)
    torch.testing.assert_close(out, expected)
    del out
    rss1, objs1 = settle()
    elapsed = time.perf_counter() - start
    info = fd.cache_info()
    assert info.plans == 1 and info.misses == 1 and info.hits == ITERS - 1, info
    assert rss1 - rss0 <= RSS_TOLERANCE, (
        f"RSS grew by {(rss1 - rss0) / 2**20:.1f} MiB over {ITERS - 100} cached executes")
    assert objs1 - objs0 <= OBJECT_TOLERANCE, (
        f"{objs1 - objs0} more gc-tracked objects after {ITERS - 100} cached executes")
    assert elapsed < 90, f"{ITERS} executes took {elapsed:.1f} s"  # a guard, as above


@pytest.mark.gpu
@pytest.mark.parametrize("graphs", [True, False], ids=["graph-replay", "eager"])
def test_host_loop_does_not_grow_cuda_memory(graphs):
    fd = row_fusion()
    hp = loop_program(fd, streams=True)
    a = torch.randn(ITERS, WIDTH, device="cuda") + 0.5
    expected = a * 3 + torch.arange(ITERS, dtype=a.dtype, device="cuda")[:, None]
    for _ in range(3):  # with graphs, the third call is captured
        (out,) = hp.execute([a, ITERS])
        if not graphs:
            hp._graphs = None
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expected)
    del out
    gc.collect()
    base = torch.cuda.memory_allocated()
    for _ in range(3):
        (out,) = hp.execute([a, ITERS])
        torch.cuda.synchronize()
        torch.testing.assert_close(out, expected)
        del out
    gc.collect()
    assert torch.cuda.memory_allocated() <= base, (
        f"allocated CUDA memory grew by {(torch.cuda.memory_allocated() - base) / 2**20:.1f} MiB")
    assert fd.cache_info().plans <= 2
    if graphs:
        assert hp._graphs.error is None and hp._graphs.replays == 4, hp._graphs.error


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
