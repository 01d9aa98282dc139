"""Many GPUs, one run: collective bandwidth through hostir against raw
torch.distributed, and allgather+GEMM / GEMM+reduce-scatter: GEMM alone,
serial, hostir, and PyTorch's fused symmetric-memory ops, timed back to back
in alternating rounds. Run with one rank per GPU:

    scripts/mpirun.sh 2 python benchmarks/multigpu.py [--out DIR] [--quick]

Writes multigpu.json / multigpu.md (rank 0).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import meta_for, time_interleaved, write_results  # noqa: E402

from hostir import DataType, FusionDefinition, HostProgram, ParallelType  # noqa: E402
from hostir.multidevice import Communicator, DeviceMesh, Shard  # noqa: E402


def timed(fns: dict, comm, rounds: int = 7, reps: int = 10) -> dict:
    """Median ms per call of each fn (harness.time_interleaved), ranks starting
    each batch together."""
    times = time_interleaved(list(fns.values()), comm.device, rounds, reps, before=comm.barrier)
    return {k: t * 1e3 for k, t in zip(fns, times)}


def collectives(comm, dev, quick: bool, sizes=None) -> list[dict]:
    """allgather, allreduce and reduce-scatter of `nbytes` per rank (bf16):
    hostir's host program against the raw torch.distributed call. busbw as
    nccl-tests defines it: (d-1)/d of algbw for allgather and reduce-scatter,
    2(d-1)/d for allreduce."""
    import torch.distributed as dist
    d = comm.size()
    rows = []
    sizes = sizes or ([] if quick else [1 << 20]) + [16 << 20, 256 << 20]
    for nbytes in sizes:
        n = nbytes // 2
        x = torch.randn(n, device=dev).bfloat16()
        gathered = torch.empty(n * d, device=dev, dtype=torch.bfloat16)
        reduced = torch.empty(n, device=dev, dtype=torch.bfloat16)
        scattered = torch.empty(n // d, device=dev, dtype=torch.bfloat16)
        kinds = {
            # kind: (hostir statement, torch call, its result, bytes moved per rank for algbw, busbw factor)
            "allgather": (lambda hp, t: hp.allgather(t, 0),
                          lambda: dist.all_gather_into_tensor(gathered, x), gathered, nbytes * d, (d - 1) / d),
            "allreduce": (lambda hp, t: hp.allreduce(t),
                          lambda: dist.all_reduce(reduced), reduced, nbytes, 2 * (d - 1) / d),
            "reduce-scatter": (lambda hp, t: hp.reduce_scatter(t, 0),
                               lambda: dist.reduce_scatter_tensor(scattered, x), scattered, nbytes, (d - 1) / d),
        }
        for kind, (stmt, raw, result, moved, factor) in kinds.items():
            hp = HostProgram()
            t = hp.define_tensor([n], DataType.BFloat16)
            hp.add_output(stmt(hp, t))
            fns = {"torch": raw, "hostir": lambda hp=hp: hp.execute([x])}
            if kind == "allreduce":  # as the raw call: in place on a buffer of the caller's
                inplace, buf = HostProgram(), x.clone()
                b = inplace.define_tensor([n], DataType.BFloat16)
                inplace.add_output(inplace.allreduce(b, out=b))
                fns["hostir, in place"] = lambda: inplace.execute([buf])
            ms = timed(fns, comm)  # raw allreduce in place (no copy; its values overflow, harmlessly)
            reduced.copy_(x)
            raw()
            torch.testing.assert_close(hp.execute([x])[0], result, rtol=2e-2, atol=2e-2)
            for k, v in ms.items():
                algbw = moved / (v * 1e-3) / 1e9
                rows.append({"case": f"{kind} {nbytes >> 20} MiB/rank", "who": k, "ms": v,
                             "algbw GB/s": algbw, "busbw GB/s": algbw * factor})
    return rows


def ag_gemm(comm, dev, m, k, n, quick: bool) -> list[dict]:  # noqa: C901
    """x [m, k] sharded on m; each rank's weight [n, k] (the global weight [n * d, k]
    sharded on its rows); out [m, n] on every rank: each rank's GEMM is m x k x n."""
    import torch.distributed as dist
    d, rank = comm.size(), comm.rank()
    mesh = DeviceMesh(torch.arange(d))
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(m // d, k, device=dev, generator=g).bfloat16() * k ** -0.5
    w = torch.randn(n, k, device=dev, generator=g).bfloat16()
    full = torch.empty(m, k, device=dev, dtype=torch.bfloat16)
    dist.all_gather_into_tensor(full, x)
    with FusionDefinition() as fd:
        xs = fd.define_tensor([m, k], dtype=DataType.BFloat16, mesh=mesh, placements=[Shard(0)])
        ws = fd.define_tensor([n * d, k], dtype=DataType.BFloat16, mesh=mesh, placements=[Shard(0)])
        fd.add_output(fd.ops.linear(xs, ws))

    def serial():
        dist.all_gather_into_tensor(full, x)
        return torch.mm(full, w.t())
    fns = {"GEMM alone": lambda: torch.mm(full, w.t()), "serial (allgather, GEMM)": serial,
           "hostir": lambda: fd.execute([x, w])}
    fused = _fused_ag(x, w, comm)
    if fused is not None:
        fns["torch fused symm-mem op"] = fused
    if not quick and dev.type == "cuda":
        for chunks in (2, 4):
            fns[f"torch NCCL pipeline, {chunks} chunks"] = _nccl_pipeline(x, w, full, chunks)
        ring = _ce_ring(x, w, full, comm)
        if ring is not None:
            fns["copy-engine ring (peer copies)"] = ring
    ref = serial().clone()
    torch.testing.assert_close(fd.execute([x, w])[0].float(), ref.float(), rtol=2e-2, atol=2e-2)
    streamed = {}
    for s in (() if quick else (2, 4)):
        # nvFuser's "stream outermost" layout: rows [s, d, m/(s d)], a chunk per stream
        fds, x3 = _ag_stream(mesh, m, k, n, s, x)
        fns[f"hostir, {s} stream chunks"] = lambda fds=fds, x3=x3: fds.execute([x3, w])
        want = torch.mm(full.view(d, s, m // (s * d), k).transpose(0, 1).reshape(m, k), w.t())
        streamed[s] = (fds, x3, want.view(s, d, m // (s * d), n))
    ms = timed(fns, comm)
    torch.testing.assert_close(fd.execute([x, w])[0].float(), ref.float(), rtol=2e-2, atol=2e-2)
    for fds, x3, want in streamed.values():
        torch.testing.assert_close(fds.execute([x3, w])[0].float(), want.float(), rtol=2e-2, atol=2e-2)
    return _rows(f"AG+GEMM ({m}, {k}, {n})", ms)


def _ag_stream(mesh, m, k, n, s, x):
    d = mesh.size
    with FusionDefinition() as fd:
        xs = fd.define_tensor([s, d, m // (s * d), k], dtype=DataType.BFloat16)
        ws = fd.define_tensor([n * d, k], dtype=DataType.BFloat16)
        out = fd.ops.linear(xs, ws)
        fd.add_output(out)
        for tv in (xs, ws, out):
            tv.set_device_mesh(mesh)
        xs.axis(1).parallelize(ParallelType.mesh_x)
        ws.outer_split(0, d)
        ws.axis(0).parallelize(ParallelType.mesh_x)
        out.outer_split(3, d)   # column parallel: each rank its block of the output features
        out.axis(3).parallelize(ParallelType.mesh_x)
        out.axis(0).parallelize(ParallelType.stream)
    return fd, x.view(s, 1, m // (s * d), k)


def gemm_rs(comm, dev, m, k, n) -> list[dict]:
    """x [m, k * d] sharded on k (each rank [m, k]), w [n, k * d] sharded on k;
    out [m, n] sharded on m: each rank's GEMM is m x k x n, then reduce-scatter."""
    import torch.distributed as dist
    d = comm.size()
    mesh = DeviceMesh(torch.arange(d))
    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.randn(m, k, device=dev, generator=g).bfloat16() * k ** -0.5
    w = torch.randn(n, k, device=dev, generator=g).bfloat16()
    part = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    out = torch.empty(m // d, n, device=dev, dtype=torch.bfloat16)
    with FusionDefinition() as fd:
        xs = fd.define_tensor([m, k * d], dtype=DataType.BFloat16, mesh=mesh, placements=[Shard(1)])
        ws = fd.define_tensor([n, k * d], dtype=DataType.BFloat16, mesh=mesh, placements=[Shard(1)])
        y = fd.ops.linear(xs, ws)
        fd.add_output(y)
        y.set_device_mesh(mesh)
        y.outer_split(0, d)
        y.axis(0).parallelize(ParallelType.mesh_x)

    def serial():
        torch.mm(x, w.t(), out=part)
        dist.reduce_scatter_tensor(out, part)
        return out
    fns = {"GEMM alone": lambda: torch.mm(x, w.t(), out=part), "serial (GEMM, reduce_scatter)": serial,
           "hostir": lambda: fd.execute([x, w])}
    try:
        group = dist.group.WORLD.group_name
        wt = w.t()
        torch.ops.symm_mem.fused_matmul_reduce_scatter(x, wt, "sum", scatter_dim=0, group_name=group)
        fns["torch fused symm-mem op"] = lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(
            x, wt, "sum", scatter_dim=0, group_name=group)
    except Exception as e:
        if comm.rank() == 0:
            print(f"fused_matmul_reduce_scatter unavailable: {type(e).__name__}: {e}", flush=True)
    ref = serial().clone()
    torch.testing.assert_close(fd.execute([x, w])[0].float(), ref.float(), rtol=2e-2, atol=2e-2)
    summed = torch.mm(x, w.t())
    dist.all_reduce(summed)
    streamed = {}
    for s in (2, 4):
        # the stream axis outermost: x [s, m/s, k], out [s, m/s, n] sharded on dim 1
        fds = _rs_stream(mesh, m, k, n, s)
        x3 = x.view(s, m // s, k)
        fns[f"hostir, {s} stream chunks"] = lambda fds=fds, x3=x3: fds.execute([x3, w])
        streamed[s] = (fds, x3, summed.view(s, d, m // (s * d), n)[:, comm.rank()])
    ms = timed(fns, comm)
    torch.testing.assert_close(fd.execute([x, w])[0].float(), ref.float(), rtol=2e-2, atol=2e-2)
    for fds, x3, want in streamed.values():
        torch.testing.assert_close(fds.execute([x3, w])[0].float(), want.float(), rtol=3e-2, atol=3e-2)
    return _rows(f"GEMM+RS ({m}, {k}, {n})", ms)


def _rs_stream(mesh, m, k, n, s):
    d = mesh.size
    with FusionDefinition() as fd:
        xs = fd.define_tensor([s, m // s, k * d], dtype=DataType.BFloat16)
        ws = fd.define_tensor([n, k * d], dtype=DataType.BFloat16)
        y = fd.ops.linear(xs, ws)
        fd.add_output(y)
        for tv in (xs, ws, y):
            tv.set_device_mesh(mesh)
        xs.outer_split(2, d)
        xs.axis(2).parallelize(ParallelType.mesh_x)
        ws.outer_split(1, d)
        ws.axis(1).parallelize(ParallelType.mesh_x)
        y.outer_split(1, d)
        y.axis(1).parallelize(ParallelType.mesh_x)
        y.axis(0).parallelize(ParallelType.stream)
    return fd


def _fused_ag(x, w, comm):
    try:
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm
        group = dist.group.WORLD.group_name
        if hasattr(symm, "enable_symm_mem_for_group"):
            symm.enable_symm_mem_for_group(group)
        wt = w.t()
        torch.ops.symm_mem.fused_all_gather_matmul(x, [wt], gather_dim=0, group_name=group)
        return lambda: torch.ops.symm_mem.fused_all_gather_matmul(x, [wt], gather_dim=0,
                                                                   group_name=group)[1][0]
    except Exception as e:  # the op needs symmetric memory (CUDA, a recent torch)
        if comm.rank() == 0:
            print(f"fused_all_gather_matmul unavailable: {type(e).__name__}: {e}", flush=True)
        return None


def _nccl_pipeline(x, w, full, chunks):
    """Chunk j of every rank's shard allgathered, then its GEMM, on 2 rotating streams."""
    import torch.distributed as dist
    d = full.shape[0] // x.shape[0]
    streams = [torch.cuda.Stream() for _ in range(2)]
    xs = x.chunk(chunks)
    gathered = [torch.empty(d * c.shape[0], x.shape[1], device=x.device, dtype=x.dtype) for c in xs]
    out = torch.empty(full.shape[0], w.shape[0], device=x.device, dtype=x.dtype)
    out_v = out.view(d, chunks, -1, w.shape[0])

    def run():
        main = torch.cuda.current_stream()
        for j, c in enumerate(xs):
            s = streams[j % 2]
            s.wait_stream(main)
            with torch.cuda.stream(s):
                dist.all_gather_into_tensor(gathered[j], c)
                r = torch.mm(gathered[j], w.t())
                out_v[:, j].copy_(r.view(d, -1, w.shape[0]))
        for s in streams:
            main.wait_stream(s)
        return out
    return run


def _ce_ring(x, w, full, comm):
    """Each rank's shard in symmetric memory; peers' shards pulled with copy-engine
    copies on a side stream while the GEMM of what is here runs."""
    try:
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm
        d, rank = comm.size(), comm.rank()
        buf = symm.empty(x.shape, dtype=x.dtype, device=x.device)
        hdl = symm.rendezvous(buf, dist.group.WORLD.group_name)
        mb = x.shape[0]
        out = torch.empty(full.shape[0], w.shape[0], device=x.device, dtype=x.dtype)
        copy = torch.cuda.Stream()
        peers = [hdl.get_buffer(p, x.shape, x.dtype) for p in range(d)]

        def run():
            main = torch.cuda.current_stream()
            copy.wait_stream(main)
            with torch.cuda.stream(copy):
                buf.copy_(x)
                hdl.barrier(channel=0)
            torch.mm(x, w.t(), out=out[rank * mb:(rank + 1) * mb])
            for j in range(1, d):
                p = (rank + j) % d
                with torch.cuda.stream(copy):
                    full[p * mb:(p + 1) * mb].copy_(peers[p])
                main.wait_stream(copy)
                torch.mm(full[p * mb:(p + 1) * mb], w.t(), out=out[p * mb:(p + 1) * mb])
            with torch.cuda.stream(copy):
                hdl.barrier(channel=1)
            main.wait_stream(copy)
            return out
        run()
        return run
    except Exception as e:
        if comm.rank() == 0:
            print(f"copy-engine ring unavailable: {type(e).__name__}: {e}", flush=True)
        return None


def _rows(case: str, ms: dict) -> list[dict]:
    serial = ms.get("serial (allgather, GEMM)") or ms.get("serial (GEMM, reduce_scatter)")
    gemm = ms["GEMM alone"]
    return [{"case": case, "who": k, "ms": v, "vs serial": serial / v, "% of ideal": 100 * gemm / v}
            for k, v in ms.items()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="small sizes: checks the script itself (CPU)")
    args = ap.parse_args()
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    comm = Communicator.instance()
    dev = comm.device
    rows = collectives(comm, dev, args.quick, [1 << 16] if args.tiny else None)
    shapes = [(16384, 8192, 3584)] + ([] if args.quick else [(16384, 8192, 8192), (8192, 8192, 3584)])
    for m, k, n in ([(64, 32, 48)] if args.tiny else shapes):
        rows += ag_gemm(comm, dev, m, k, n, args.quick)
    rows += gemm_rs(comm, dev, *((64, 32, 48) if args.tiny else (16384, 3584, 8192)))
    if comm.rank() == 0:
        meta = meta_for(dev)
        meta["ranks"] = comm.size()
        write_results(Path(args.out), "multigpu", meta, rows,
                      ["case", "who", "ms", "algbw GB/s", "busbw GB/s", "vs serial", "% of ideal"])


if __name__ == "__main__":
    main()
