"""The README's tutorial runs as written (its first two steps in one process,
the multi-GPU layer on 2 ranks under mpirun, on the CPU), and its table of
environment variables names every variable hostir reads."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from mpi_util import run_mpi

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _tutorial_blocks() -> list[str]:
    start = README.index("## Tutorial")
    end = README.index("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", README[start:end], re.S)


def test_the_tutorial_has_three_steps():
    assert len(_tutorial_blocks()) == 3


def test_tutorial_fusion_and_host_program_run():
    fusion, program, _ = _tutorial_blocks()
    scope: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(fusion, "README tutorial step 1", "exec"), scope)
        exec(compile(program, "README tutorial step 2", "exec"), scope)
    text = out.getvalue()
    assert "normalization" in text, text[-2000:]                  # step 1's segments
    assert "for " in text and "set_current_stream" in text, text[-2000:]  # step 2's program


@pytest.mark.mpi
def test_tutorial_multi_gpu_layer_runs_on_two_ranks(tmp_path):
    *_, layer = _tutorial_blocks()
    path = tmp_path / "layer.py"
    path.write_text(layer)
    proc = run_mpi(2, str(path))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert out.count("layer ok") == 2, out[-3000:]


def test_every_environment_variable_is_in_the_table():
    start = README.index("| Variable | What it does |")
    table = README[start:README.index("\n\n", start)]
    listed = set(re.findall(r"`(HOSTIR_\w+)`", table))
    used = set()
    for f in (ROOT / "hostir").rglob("*.py"):
        used |= set(re.findall(r"[\"'](HOSTIR_[A-Z_]+)[\"']", f.read_text()))
    assert used <= listed, sorted(used - listed)
