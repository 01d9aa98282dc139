"""Running a program under mpirun from a test (the `mpi` marker)."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def mpirun() -> list[str] | None:
    """The mpirun command, with Open MPI's flags for root and for more ranks than cores."""
    exe = Path(sys.executable).with_name("mpirun")
    path = str(exe) if exe.exists() else shutil.which("mpirun")
    if path is None:
        return None
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    if "Open MPI" in version or "OpenRTE" in version:
        extra = ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
        return [path, *extra]
    return [path]


def run_mpi(n: int, script: str, *args: str, env: dict | None = None, timeout: float = 300):
    """Run `python script args` on n ranks; returns the CompletedProcess."""
    cmd = mpirun()
    if cmd is None:
        pytest.skip("mpirun not found (pip install mpi4py mpich)")
    full = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
                PYTHONUNBUFFERED="1", **(env or {}))
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        full.pop(k, None)
    return subprocess.run([*cmd, "-np", str(n), sys.executable, str(ROOT / script), *args],
                          capture_output=True, text=True, timeout=timeout, env=full, cwd=ROOT)
