"""`hostir bench`: the suites of benchmarks/ (a checkout's folder; the wheel has
no benchmarks). The fusion suites (pointwise, reduction) run here through the
suite's own cases and benchmarks/harness.py's `measure`, with a progress bar on
a terminal; the others run as their scripts (multigpu under mpirun)."""
from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

from .. import progress

FUSION_SUITES = ("pointwise", "reduction", "scan", "indexing", "random_ops")
SCRIPT_SUITES = ("multigpu", "compile_time", "host_overhead", "planning_time")
SUITES = FUSION_SUITES + SCRIPT_SUITES


class BenchError(Exception):
    pass


def find_benchmarks(given: str | None = None) -> Path:
    """The benchmarks/ folder: `given`, else the checkout's beside this hostir, else ./benchmarks."""
    candidates = [Path(given)] if given else [Path(__file__).resolve().parents[2] / "benchmarks",
                                              Path.cwd() / "benchmarks"]
    for d in candidates:
        if (d / "harness.py").is_file():
            return d.resolve()
    raise BenchError("hostir bench needs the benchmarks/ folder of a hostir checkout (it is not "
                     "part of the installed package); looked in " + ", ".join(map(str, candidates))
                     + ". Run it from a clone of the repository, or pass --benchmarks DIR.")


def _import(bench_dir: Path, name: str):
    if str(bench_dir) not in sys.path:
        sys.path.insert(0, str(bench_dir))
    return importlib.import_module(name)


def bench(args) -> int:
    try:
        bench_dir = find_benchmarks(args.benchmarks)
    except BenchError as e:
        print(f"hostir: {e}", file=sys.stderr)
        return 2
    suites = args.suites or list(FUSION_SUITES)
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        print(f"hostir bench: unknown suite(s) {', '.join(unknown)}; suites: {', '.join(SUITES)}",
              file=sys.stderr)
        return 2
    if args.plot:  # fail before measuring, not after
        from .plots import require_matplotlib
        try:
            require_matplotlib()
        except ImportError as e:
            print(f"hostir: {e}", file=sys.stderr)
            return 2
    out = Path(args.out)
    status = 0
    for suite in suites:
        if suite in FUSION_SUITES:
            fusion_suite(bench_dir, suite, args, out)
        else:
            status = script_suite(bench_dir, suite, args, out) or status
    return status


def fusion_suite(bench_dir: Path, suite: str, args, out: Path) -> list[Path]:
    """Run a fusion suite's cases (and with --plot its size sweep); write
    <suite>.json/.md (and <suite>_sweep.json/.md, PNGs) to `out`. Returns the files."""
    import torch
    harness = _import(bench_dir, "harness")
    module = _import(bench_dir, suite)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tiny = args.tiny
    rounds = args.rounds or (1 if tiny else 9)
    reps = 2 if tiny else 20
    use_compile = not (args.no_compile or tiny)
    bw = harness.copy_bandwidth(dev, nbytes=1 << 22 if tiny else 1 << 30)
    meta = harness.meta_for(dev)
    meta["copy GB/s"] = round(bw / 1e9, 1)
    if tiny:
        meta["sizes"] = "tiny (a check that the suite runs, not a measurement)"
    if tiny and hasattr(module, "tiny_cases"):
        cases = module.tiny_cases()
    else:
        cases = module.cases(tiny or dev.type == "cpu")
    rows = []
    for case in progress.track(cases, f"hostir bench {suite}"):
        rows.append(harness.measure(case, dev, bw, rounds, reps, use_compile))
    harness.write_results(out, suite, meta, rows, harness.COLUMNS)
    files = [out / f"{suite}.json", out / f"{suite}.md"]
    if args.plot:
        files += sweep(harness, module, suite, dev, bw, meta, out, tiny, rounds, reps, use_compile)
    return files


def sweep(harness, module, suite, dev, bw, meta, out, tiny, rounds, reps, use_compile) -> list[Path]:
    from .plots import plot_bandwidth
    if not hasattr(module, "sweep"):
        print(f"hostir bench: {suite} has no size sweep to plot", file=sys.stderr)
        return []
    groups = module.sweep(tiny)
    total = sum(len(makers) for _, makers in groups)
    rows = []
    bar = progress.Progress(total, f"hostir bench {suite} sizes")
    try:
        for fusion, makers in groups:
            for make in makers:
                row = harness.measure(make(), dev, bw, rounds, reps, use_compile)
                row["fusion"] = fusion
                rows.append(row)
                bar.update()
    finally:
        bar.close()
    harness.write_results(out, f"{suite}_sweep", meta, rows,
                          ["fusion", "case", "bytes", "hostir GB/s", "eager GB/s", "compile GB/s",
                           "% copy", "rel err"])
    pngs = plot_bandwidth(rows, out, suite, meta)
    for p in pngs:
        print(f"hostir bench: wrote {p}")
    return [out / f"{suite}_sweep.json", out / f"{suite}_sweep.md", *pngs]


def script_suite(bench_dir: Path, suite: str, args, out: Path) -> int:
    script = bench_dir / f"{suite}.py"
    extra = ["--out", str(out)]
    if args.tiny:
        extra += {"multigpu": ["--tiny"], "host_overhead": ["--n", "20"],
                  "planning_time": ["--samples", "3"]}.get(suite, [])
    program = [sys.executable, str(script), *extra]
    if suite == "multigpu":
        from .launch import ranks_command
        try:
            program = ranks_command(args.ranks, program)
        except FileNotFoundError as e:
            print(f"hostir: {e}", file=sys.stderr)
            return 2
    print(f"hostir bench: {' '.join(program)}", file=sys.stderr, flush=True)
    code = subprocess.run(program).returncode
    if code:
        print(f"hostir bench: {suite} failed (exit status {code})", file=sys.stderr)
    return code
