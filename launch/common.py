"""Shared by the launch/ programs: the job, sizes, timing and reporting.
Run a program as `mpirun -np N python launch/<name>.py` or
`torchrun --nproc_per_node=N launch/<name>.py` (GPUs when present, else CPU)."""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from hostir.multidevice import Communicator, DeviceMesh


def job():
    """(communicator, 1-D mesh of every rank, device)."""
    comm = Communicator.instance()
    return comm, DeviceMesh(torch.arange(comm.size())), comm.device


def args(**defaults):
    ap = argparse.ArgumentParser()
    for k, v in defaults.items():
        ap.add_argument(f"--{k}", type=type(v), default=v)
    ap.add_argument("--steps", type=int, default=20)
    return ap.parse_args()


def data(seed: int, *shape, dtype=torch.float32, device="cpu", scale=1.0):
    """A whole tensor, the same on every rank."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype).to(device)


def ms_per_step(fn, device, steps: int) -> float:
    """Median over 5 rounds of `steps` back-to-back calls (CUDA events on GPUs)."""
    comm = Communicator.instance()
    for _ in range(3):
        fn()
    comm.barrier()
    out = []
    for _ in range(5):
        if device.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(steps):
                fn()
            b.record()
            b.synchronize()
            out.append(a.elapsed_time(b) / steps)
        else:
            t = time.perf_counter()
            for _ in range(steps):
                fn()
            out.append((time.perf_counter() - t) / steps * 1e3)
        comm.barrier()
    return statistics.median(out)


def report(name: str, got, want, ms: float, tol: float) -> None:
    comm = Communicator.instance()
    torch.testing.assert_close(got.float().cpu(), want.float().cpu(), rtol=tol, atol=tol)
    if comm.rank() == 0:
        print(f"{name}: {comm.size()} ranks on {comm.device.type}, result matches torch, "
              f"{ms:.3f} ms per step", flush=True)
