"""cProfile of repeated `fd.execute` on a cached single-kernel fusion (host overhead breakdown).

    python benchmarks/profile_execute.py
"""
import cProfile
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hostir import DataType, FusionDefinition  # noqa: E402


def main():
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(fd.ops.add(t, 1.0), 2.0))
    x = torch.randn(1024, device=dev)
    for _ in range(200):
        fd.execute([x])
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        fd.execute([x])
    torch.cuda.synchronize() if dev == "cuda" else None
    print(f"{(time.perf_counter() - t0) / n * 1e6:.1f} us per execute")
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(5000):
        fd.execute([x])
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
