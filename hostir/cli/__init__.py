"""The `hostir` command (also `python -m hostir`):

    hostir run SCRIPT [--ranks N] [--launcher mpirun|torchrun] [-- ARGS]
    hostir dump SCRIPT --stage fusion|preseg|segments|host_ir|kernels[,...] [--ranks N] [-- ARGS]
    hostir bench [SUITE ...] [--plot] [--out DIR] [--tiny]
    hostir cache info|clear
    hostir trace merge OUT.json IN.json ...  |  hostir trace plot TRACE.json OUT.png

Everything after `--` goes to the script.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from .. import config
from . import launch

# the CLI's stage names -> HOSTIR_DUMP's (any HOSTIR_DUMP name is taken as it is)
STAGES = {"fusion": "fusion_ir", "preseg": "preseg", "segments": "segments", "host_ir": "host_ir",
          "kernels": "kernels"}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="hostir", description="hostir: run programs, dump their IR, "
                                 "run the benchmarks, look at the kernel cache.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def script_options(p):
        p.add_argument("script", help="a Python program")
        p.add_argument("--ranks", type=int, help="start N ranks (mpirun -np N, or torchrun); "
                       "without it the script runs in one process")
        p.add_argument("--launcher", choices=("mpirun", "torchrun"), default="mpirun")

    p = sub.add_parser("run", help="run a program (on N ranks with --ranks)",
                       description="Run SCRIPT with this Python; with --ranks N under mpirun -np N "
                       "(Open MPI's --oversubscribe and, as root, --allow-run-as-root added) or "
                       "torchrun --nproc_per_node=N. Arguments after -- go to the script.")
    script_options(p)
    p = sub.add_parser("dump", help="run a program printing a compilation stage (HOSTIR_DUMP)",
                       description="Run SCRIPT with HOSTIR_DUMP set: each fusion prints the stage "
                       f"when it plans. Stages: {', '.join(STAGES)} (or any of "
                       f"{', '.join(sorted(config.DUMP_STAGES))}), comma separated.")
    script_options(p)
    p.add_argument("--stage", required=True)
    p = sub.add_parser("bench", help="run benchmark suites (hostir vs torch eager vs torch.compile)",
                       description="Run suites of benchmarks/ (a hostir checkout's folder, not part "
                       "of an installed wheel); a table per suite, JSON and markdown in --out.")
    from .bench import SUITES
    p.add_argument("suites", nargs="*", metavar="SUITE",
                   help=f"{', '.join(SUITES)} (default: pointwise reduction)")
    p.add_argument("--out", default="benchmarks/out", help="where results go (default %(default)s)")
    p.add_argument("--plot", action="store_true", help="also measure each fusion at growing sizes "
                   "and plot GB/s vs size (PNG; needs matplotlib)")
    p.add_argument("--tiny", action="store_true", help="tiny sizes and few repetitions, no "
                   "torch.compile: checks that the suites run (CPU)")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--rounds", type=int, help="alternating timed batches per case")
    p.add_argument("--ranks", type=int, default=2, help="ranks of the multigpu suite (default 2)")
    p.add_argument("--benchmarks", help="the benchmarks/ folder (default: the checkout's)")
    p = sub.add_parser("cache", help="the disk cache of compiled kernels (HOSTIR_CACHE_DIR)")
    p.add_argument("action", choices=("info", "clear"))
    p = sub.add_parser("trace", help="HOSTIR_TRACE files: merge ranks' files, plot a timeline",
                       description="merge OUT.json IN.json...: every rank's trace in one file (a "
                       "process per rank). plot TRACE.json OUT.png: a timeline, a row per rank "
                       "and stream, launches, collectives and waits coloured (needs matplotlib).")
    p.add_argument("action", choices=("merge", "plot"))
    p.add_argument("files", nargs="+")
    p.add_argument("--last", type=float, metavar="MS", help="plot: only the trace's last MS "
                   "milliseconds (the steady state, after first-call compiles)")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, script_args = argv[:cut], argv[cut + 1:]
    args = _parser().parse_args(argv)
    if args.command == "run":
        return run_script(args.script, script_args, args.ranks, args.launcher)
    if args.command == "dump":
        stages = []
        for s in (x.strip() for x in args.stage.split(",") if x.strip()):
            name = STAGES.get(s, s)
            if name not in config.DUMP_STAGES:
                print(f"hostir dump: unknown stage {s!r}; stages: {', '.join(STAGES)} (or any of "
                      f"{', '.join(sorted(config.DUMP_STAGES))})", file=sys.stderr)
                return 2
            stages.append(name)
        return run_script(args.script, script_args, args.ranks, args.launcher,
                          {"HOSTIR_DUMP": ",".join(stages)})
    if args.command == "bench":
        from .bench import bench
        return bench(args)
    if args.command == "cache":
        from .cache import cache_command
        return cache_command(args.action)
    if args.command == "trace":
        from .trace import trace_command
        return trace_command(args)
    return 2


def run_script(script: str, script_args: list[str], ranks: int | None, launcher: str,
               env: dict | None = None) -> int:
    """Run `python SCRIPT ARGS` (on `ranks` ranks); returns its exit status."""
    if not os.path.isfile(script):
        print(f"hostir: no such script: {script}", file=sys.stderr)
        return 2
    program = [sys.executable, script, *script_args]
    if ranks is not None:
        if ranks < 1:
            print(f"hostir: --ranks must be at least 1, got {ranks}", file=sys.stderr)
            return 2
        try:
            program = launch.ranks_command(ranks, program if launcher == "mpirun" else program[1:],
                                           launcher)
        except FileNotFoundError as e:
            print(f"hostir: {e}", file=sys.stderr)
            return 2
    full_env = config.child_environ(env)
    # the children import the same hostir as this command (a checkout not installed, say)
    root = str(Path(__file__).resolve().parents[2])
    path = full_env.get("PYTHONPATH", "")
    if root not in path.split(os.pathsep):
        full_env["PYTHONPATH"] = root + (os.pathsep + path if path else "")
    try:
        return subprocess.run(program, env=full_env).returncode
    except KeyboardInterrupt:
        return 130
