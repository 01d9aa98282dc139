"""Starting a program on N ranks: the one place that knows how to call mpirun
(and torchrun). Standard library only, so `scripts/mpirun.sh` runs this file as
a script without importing torch:

    python hostir/cli/launch.py N PROGRAM [ARGS...]   # exec mpirun -np N PROGRAM ARGS

The mpirun is the one beside the Python running this (MPICH from pip in .venv),
else the one on PATH. Open MPI (the GPU machines) needs --oversubscribe to run
more ranks than cores and --allow-run-as-root as root; MPICH takes neither.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path


def find_mpirun(python: str | None = None) -> str | None:
    exe = Path(python or sys.executable).with_name("mpirun")
    return str(exe) if exe.exists() else shutil.which("mpirun")


@functools.cache
def mpi_flavor(mpirun: str) -> str:
    """'openmpi', 'mpich' or 'unknown', from `mpirun --version`."""
    try:
        text = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if "Open MPI" in text or "OpenRTE" in text:
        return "openmpi"
    if "HYDRA" in text or "MPICH" in text or "Intel(R) MPI" in text:
        return "mpich"
    return "unknown"


def mpirun_command(python: str | None = None) -> list[str] | None:
    """mpirun and the flags its flavour needs here (no -np yet); None without one."""
    path = find_mpirun(python)
    if path is None:
        return None
    extra = []
    if mpi_flavor(path) == "openmpi":
        extra.append("--oversubscribe")
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            extra.append("--allow-run-as-root")
    return [path, *extra]


def ranks_command(n: int, program: list[str], launcher: str = "mpirun",
                  python: str | None = None) -> list[str]:
    """The command that starts `program` (a full command line: for torchrun, a
    Python script and its arguments) on n ranks."""
    if launcher == "torchrun":
        return [python or sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={n}",
                *program]
    if launcher != "mpirun":
        raise ValueError(f"unknown launcher {launcher!r}: expected mpirun or torchrun")
    cmd = mpirun_command(python)
    if cmd is None:
        raise FileNotFoundError("mpirun not found beside this Python or on PATH "
                                "(pip install mpi4py mpich, or use --launcher torchrun)")
    return [*cmd, "-np", str(n), *program]


def main(argv: list[str]) -> None:
    if len(argv) < 2 or not argv[0].isdigit():
        sys.exit("usage: launch.py N PROGRAM [ARGS...]")
    try:
        cmd = ranks_command(int(argv[0]), argv[1:])
    except FileNotFoundError as e:
        sys.exit(f"hostir: {e}")
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
