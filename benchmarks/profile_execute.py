"""Where the host time of a cached `fd.execute` goes: its parts timed one by
one (GPU), then a cProfile of repeated calls; with --new-shapes, a cProfile of
calls that each bring an input shape the fast path does not hold.

    python benchmarks/profile_execute.py [--new-shapes]
"""
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hostir import DataType, FusionDefinition  # noqa: E402
from hostir.host.steps import KernelStep  # noqa: E402
from hostir.runtime.launch import current_stream_handle  # noqa: E402


def per_call(fn, dev, n=5000, rounds=7) -> float:
    for _ in range(100):
        fn()
    if dev == "cuda":
        torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        if dev == "cuda":
            torch.cuda.synchronize()
        out.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(out)


def main():
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(fd.ops.add(t, 1.0), 2.0))
    if "--new-shapes" in sys.argv:
        shapes = [torch.randn(1024 + 4 * k, device=dev) for k in range(200)]  # > 64 signatures
        for s in shapes:
            fd.execute([s])
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(5):
            for s in shapes:
                fd.execute([s])
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(30)
        return
    x = torch.randn(1024, device=dev)
    for _ in range(3):
        fd.execute([x])
    cache = fd._cache
    sig = cache._signature([x])
    hit = cache.bound[sig]
    parts = {"fd.execute": lambda: fd.execute([x]),
             "cache.execute": lambda: cache.execute([x]),
             "signature": lambda: cache._signature([x]),
             "signature + table lookup": lambda: cache.bound.get(cache._signature([x]))}
    if dev == "cuda" and hit.direct is not None:
        step = [s.target for s in hit.plan.program.body if isinstance(s.target, KernelStep)][0]
        prep, _ = hit.prepared[step]
        out = torch.empty_like(x)
        stream = current_stream_handle(x.device)
        parts.update({
            "direct runner": lambda: hit.direct([x]),
            "outputs (new_empty)": prep.empty_outputs,
            "torch.empty(shape, dtype=, device=)": lambda: torch.empty([1024], dtype=torch.float32, device=x.device),
            "current stream handle": lambda: current_stream_handle(x.device),
            "prepared run (pointers + launch)": lambda: prep.run([x], [out], (), stream),
            "launcher only": lambda: prep.launcher(stream, prep.packed),
        })
    for name, fn in parts.items():
        print(f"{per_call(fn, dev):8.2f} us  {name}")
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(5000):
        fd.execute([x])
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
