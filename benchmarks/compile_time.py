"""Compile times of the benchmark cases' generated kernels: cold NVRTC compile
(empty cache), disk-cache hit (memory cache cleared) and memory-cache hit.
Needs NVRTC only (no GPU); the arch is the GPU's when one is present, else sm_90.

    python benchmarks/compile_time.py [--out DIR]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import meta_for, write_results  # noqa: E402
from pointwise import cases  # noqa: E402

from hostir import config  # noqa: E402
from hostir.host.steps import KernelStep  # noqa: E402
from hostir.runtime import nvrtc as N  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/out")
    args = ap.parse_args(argv)
    import os
    os.environ["HOSTIR_CACHE_DIR"] = tempfile.mkdtemp(prefix="hostir-compile-")
    config.reload()
    cuda = torch.cuda.is_available()
    arch = "sm_%d%d" % torch.cuda.get_device_capability() if cuda else "sm_90"
    rows, cold_all = [], []
    for name, fd, _, make_inputs, _ in cases(small=True):
        fd.execute(make_inputs(torch.device("cpu")))  # builds the plan (CPU: interpreter)
        steps = [s.target for s in fd._cache.last_plan.program.body if isinstance(s.target, KernelStep)]
        for step in steps:
            for ck in step.spec.typical_variants():
                N.clear_memory_cache()
                t = time.perf_counter()
                N.compile_cubin(ck.source, arch, ck.name)
                cold = time.perf_counter() - t
                N.clear_memory_cache()
                t = time.perf_counter()
                N.compile_cubin(ck.source, arch, ck.name)
                disk = time.perf_counter() - t
                t = time.perf_counter()
                N.compile_cubin(ck.source, arch, ck.name)
                mem = time.perf_counter() - t
                cold_all.append(cold)
                rows.append({"kernel": f"{name}: {ck.name}", "cold ms": cold * 1e3,
                             "disk hit ms": disk * 1e3, "memory hit ms": mem * 1e3})
    meta = meta_for(torch.device("cuda" if cuda else "cpu"))
    meta["arch"] = arch
    meta["NVRTC"] = ".".join(map(str, N.nvrtc_version()))
    meta["median cold ms"] = round(statistics.median(cold_all) * 1e3, 1)
    write_results(Path(args.out), "compile_time", meta, rows,
                  ["kernel", "cold ms", "disk hit ms", "memory hit ms"])


if __name__ == "__main__":
    main()
