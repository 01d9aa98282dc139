"""Shared benchmark helpers: device timing, copy bandwidth, result tables."""
from __future__ import annotations

import json
import platform
import statistics
import subprocess
import time
from datetime import date
from pathlib import Path

import torch


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_interleaved(fns, device, rounds=7, reps=20, before=None) -> list[float]:
    """Median seconds per call of each fn (device events on CUDA, wall clock on
    CPU), measured in alternating batches (round r times fns[0], fns[1], ... in
    turn) so clock and thermal drift during the run affect them alike. Calls in
    a batch go back to back, as a training step issues them (host work overlaps
    the previous call's kernels); each batch starts with one untimed call, after
    `before()` where given (a barrier, so that ranks start a batch together)."""
    for fn in fns:
        for _ in range(3):
            fn()
    sync(device)
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            if before is not None:
                before()
            fn()
            if device.type == "cuda":
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                for _ in range(reps):
                    fn()
                b.record()
                b.synchronize()
                times[i].append(a.elapsed_time(b) / 1e3 / reps)
            else:
                t = time.perf_counter()
                for _ in range(reps):
                    fn()
                times[i].append((time.perf_counter() - t) / reps)
    return [statistics.median(t) for t in times]


def copy_bandwidth(device, nbytes=1 << 30) -> float:
    """Bytes/s of a large device copy, counting bytes read plus written."""
    n = nbytes // 4 if device.type == "cuda" else nbytes // 64
    src = torch.randn(n, device=device)
    dst = torch.empty_like(src)
    (t,) = time_interleaved([lambda: dst.copy_(src)], device, rounds=5, reps=10)
    return 2 * src.numel() * 4 / t


def device_name(device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.processor() or platform.machine()})"


def commit() -> str:
    import os
    if os.environ.get("HOSTIR_COMMIT"):  # the GPU machines get the tree without .git
        return os.environ["HOSTIR_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except Exception:
        return "unknown"


def write_results(out_dir: Path, name: str, meta: dict, rows: list[dict], columns: list[str]):
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = [f"### {name} — {meta['device']}, {meta['date']}, commit {meta['commit']}", ""]
    for k, v in meta.items():
        if k not in ("device", "date", "commit"):
            lines.append(f"- {k}: {v}")
    lines += ["", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(r.get(c, "")) for c in columns) + " |")
    text = "\n".join(lines) + "\n"
    (out_dir / f"{name}.md").write_text(text)
    print(text)
    return text


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)


def meta_for(device) -> dict:
    return {"device": device_name(device), "date": date.today().isoformat(), "commit": commit(),
            "torch": torch.__version__}


def _error(ours, ref) -> float:
    """Relative error of hostir's outputs against the eager ones (the worst output)."""
    ours = ours if isinstance(ours, (list, tuple)) else [ours]
    ref = ref if isinstance(ref, (list, tuple)) else [ref]
    return max(((o.double() - r.double()).norm() / r.double().norm().clamp_min(1e-30)).item()
               for o, r in zip(ours, ref))


def measure(case, dev, bw: float, rounds: int = 9, reps: int = 20, use_compile: bool = True) -> dict:
    """One case — (case name, FusionDefinition, eager function, inputs(device),
    bytes moved) — timed for hostir, torch eager and torch.compile in alternating
    batches; a row of times, GB/s, % of the copy bandwidth `bw` and the error."""
    name, fd, eager, make_inputs, nbytes = case
    inputs = make_inputs(dev)
    ours = fd.execute(inputs)
    err = _error(ours, eager(*inputs))
    fns = [lambda: fd.execute(inputs), lambda: eager(*inputs)]
    compile_error = None
    if use_compile:
        try:
            # each case compiled afresh and static: cases of one function at other
            # shapes would otherwise get a dynamic-shape recompile (slower kernels)
            torch._dynamo.reset()
            compiled = torch.compile(eager, dynamic=False)
            compiled(*inputs)
            fns.append(lambda: compiled(*inputs))
        except Exception as e:  # torch.compile may be unavailable (no compiler on CPU)
            compile_error = f"n/a ({type(e).__name__})"
    # timed in alternating batches, so drift during the run affects all alike
    t_h, t_e, *t_c = time_interleaved(fns, dev, rounds=rounds, reps=reps)
    row = {"case": name, "bytes": nbytes, "hostir us": t_h * 1e6, "hostir GB/s": nbytes / t_h / 1e9,
           "% copy": 100 * nbytes / t_h / bw, "eager us": t_e * 1e6, "eager GB/s": nbytes / t_e / 1e9,
           "rel err": err}
    row["vs eager"] = t_e / t_h
    if t_c:
        row["compile us"] = t_c[0] * 1e6
        row["compile GB/s"] = nbytes / t_c[0] / 1e9
        row["compile % copy"] = 100 * nbytes / t_c[0] / bw
        row["vs compile"] = t_c[0] / t_h
    elif compile_error:
        row["compile us"] = compile_error
    return row


COLUMNS = ["case", "hostir us", "hostir GB/s", "% copy", "eager us", "compile us",
           "compile % copy", "vs eager", "vs compile", "rel err"]


def run_suite(name: str, cases, argv=None) -> None:
    """hostir vs torch eager vs torch.compile on each of `cases(small)` (see
    `measure`), timed in alternating batches in one run; GB/s and % of the copy
    bandwidth measured in the same run. Writes DIR/<name>.json and .md.
    (`hostir bench` runs the same cases through `measure`.)"""
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/out")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--rounds", type=int, default=9, help="alternating timed batches per case")
    args = ap.parse_args(argv)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    small = args.small or dev.type == "cpu"
    bw = copy_bandwidth(dev)
    rows = [measure(case, dev, bw, args.rounds, use_compile=not args.no_compile)
            for case in cases(small)]
    meta = meta_for(dev)
    meta["copy GB/s"] = round(bw / 1e9, 1)
    write_results(Path(args.out), name, meta, rows, COLUMNS)
