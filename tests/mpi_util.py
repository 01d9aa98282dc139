"""Running a program under mpirun from a test (the `mpi` marker)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostir.cli.launch import mpirun_command

ROOT = Path(__file__).resolve().parents[1]


def mpirun() -> list[str] | None:
    """The mpirun command, with Open MPI's flags for root and for more ranks than cores."""
    return mpirun_command()


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
