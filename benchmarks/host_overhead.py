"""Host overhead: time per launch in a 1,000-iteration host loop of tiny
launches, and `execute` latency of a cached single-kernel fusion, beside
torch eager, torch.compile and a bare launch of the same generated kernel.

    python benchmarks/host_overhead.py [--out DIR]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import meta_for, sync, write_results  # noqa: E402

from hostir import DataType, FusionDefinition, HostProgram  # noqa: E402


def per_call(fn, device, n=1000, rounds=5) -> float:
    """Median over rounds of (host wall time of n calls) / n, device drained after."""
    for _ in range(20):
        fn()
    sync(device)
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        sync(device)
        out.append((time.perf_counter() - t) / n)
    return statistics.median(out)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/out")
    ap.add_argument("--n", type=int, default=1000)
    args = ap.parse_args(argv)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(fd.ops.add(t, 1.0), 2.0))
    x = torch.randn(1024, device=dev)
    rows = []

    def eager(x):
        return (x + 1.0) * 2.0

    rows.append({"what": "fd.execute, cached single-kernel fusion",
                 "us": per_call(lambda: fd.execute([x]), dev, args.n) * 1e6})

    shapes = [torch.randn(1024 + 4 * k, device=dev) for k in range(200)]  # > 64 signatures
    for t in shapes:
        fd.execute([t])
    state = {"k": 0}

    def new_signature():
        state["k"] = (state["k"] + 1) % len(shapes)
        fd.execute([shapes[state["k"]]])
    rows.append({"what": "fd.execute, another input shape every call (no fast path: validation, "
                         "key, plan hit, launch set-up)", "us": per_call(new_signature, dev, args.n) * 1e6})

    def loop_program():
        hp = HostProgram()
        tin = hp.define_tensor(shape=[-1], dtype=DataType.Float)
        with hp.for_loop(0, args.n):
            hp.launch(fd, [tin])
        hp.add_output(tin)
        return hp

    def per_launch(hp) -> float:
        for _ in range(4):  # plans, kernels, direct runners; then the graph capture
            hp.execute([x])
        times = []
        for _ in range(5):
            sync(dev)
            t0 = time.perf_counter()
            hp.execute([x])
            sync(dev)
            times.append((time.perf_counter() - t0) / args.n)
        return statistics.median(times) * 1e6

    hp = loop_program()
    rows.append({"what": f"HostProgram loop, per launch ({args.n} iterations; CUDA-graph replay "
                         f"on a GPU)", "us": per_launch(hp)})
    hp = loop_program()
    hp.execute([x])
    hp._graphs = None  # as HOSTIR_DISABLE=cuda_graphs: every launch from Python
    rows.append({"what": f"HostProgram loop, per launch ({args.n} iterations, no graph)",
                 "us": per_launch(hp)})
    rows.append({"what": "torch eager (x + 1) * 2 (2 ops)", "us": per_call(lambda: eager(x), dev, args.n) * 1e6})
    try:
        comp = torch.compile(eager)
        comp(x)
        rows.append({"what": "torch.compile call", "us": per_call(lambda: comp(x), dev, args.n) * 1e6})
    except Exception as e:
        rows.append({"what": f"torch.compile call: n/a ({type(e).__name__})", "us": float("nan")})
    if dev.type == "cuda":
        from hostir.host.steps import KernelStep
        from hostir.runtime.backend import compiled
        from hostir.runtime.launch import I64, PTR, arch_of, current_stream_handle
        from hostir.runtime.nvrtc import compile_cubin
        spec = [s.target for s in fd._cache.last_plan.program.body
                if isinstance(s.target, KernelStep)][0].spec
        out = torch.empty_like(x)
        comp_k = compiled(spec.variant(spec.plain, 1, "long long"))  # one point per thread, 64-bit indices
        block = spec.options.block
        values = (x.data_ptr(), 1, out.data_ptr(), 1, 1024, 1024)
        types = (PTR, I64, PTR, I64, I64, I64)
        stream = current_stream_handle(dev)
        comp_k.launch(dev, 1024 // block, block, values, types, stream)
        rows.append({"what": "hostir CompiledKernel.launch (argument packing + launch)",
                     "us": per_call(lambda: comp_k.launch(dev, 1024 // block, block, values, types, stream), dev,
                                    args.n) * 1e6})
        from cuda.bindings import driver as cu
        f = comp_k.function(dev)
        rows.append({"what": "bare cuLaunchKernel (cuda.bindings), arguments as (values, types)",
                     "us": per_call(lambda: cu.cuLaunchKernel(f, 1024 // block, 1, 1, block, 1, 1, 0, stream,
                                                              (values, types), 0), dev, args.n) * 1e6})
        from hostir.runtime.launch import PackedArgs
        packed = PackedArgs(values, types)
        addr, cstream = packed.address, cu.CUstream(stream)
        rows.append({"what": "bare cuLaunchKernel (cuda.bindings), arguments packed before",
                     "us": per_call(lambda: cu.cuLaunchKernel(f, 1024 // block, 1, 1, block, 1, 1, 0, cstream,
                                                              addr, 0), dev, args.n) * 1e6})
        direct = comp_k.launcher(dev, 1024 // block, block)
        rows.append({"what": f"hostir DirectLauncher (packed arguments{', PDL' if comp_k.pdl else ''})",
                     "us": per_call(lambda: direct(stream, packed), dev, args.n) * 1e6})
        try:
            import numpy as np
            from cuda.core import LaunchConfig, ObjectCode, Stream
            from cuda.core import launch as cc_launch
            kern = ObjectCode.from_cubin(compile_cubin(comp_k.source, arch_of(dev), comp_k.name)
                                         ).get_kernel(comp_k.name)
            cs = Stream.from_handle(stream)
            cfg = LaunchConfig(grid=1024 // block, block=block)
            a = (np.uint64(x.data_ptr()), np.int64(1), np.uint64(out.data_ptr()), np.int64(1),
                 np.int64(1024), np.int64(1024))
            cc_launch(cs, cfg, kern, *a)
            rows.append({"what": "bare cuda.core launch of the same kernel (prebuilt args)",
                         "us": per_call(lambda: cc_launch(cs, cfg, kern, *a), dev, args.n) * 1e6})
            torch.testing.assert_close(out, eager(x))
        except Exception as e:
            rows.append({"what": f"bare cuda.core launch: failed ({type(e).__name__}: {e})"[:200],
                         "us": float("nan")})
    write_results(Path(args.out), "host_overhead", meta_for(dev), rows, ["what", "us"])


if __name__ == "__main__":
    main()
