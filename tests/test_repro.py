"""Repros of failing fusions: the error's note is a Python program that, run on
its own, fails the same way (printed when short, written to a file when long)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hostir import DataType, ExecutionError, FusionDefinition, InputError, config

ROOT = Path(__file__).resolve().parents[1]


def _rerun(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / "repro.py"
    path.write_text(code)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env,
                          timeout=300)


def _note(err: BaseException) -> str:
    return "\n".join(getattr(err, "__notes__", []))


def _mismatch_fusion():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        s = fd.define_scalar(None, dtype=DataType.Double)
        b = fd.ops.broadcast_in_dim(t1, t0.shape(), [1])
        y = fd.ops.mul(fd.ops.add(t0, b), s) * 2.0
        v, m = fd.ops.var_mean(y, [1], correction=0)
        fd.add_output(y)
        fd.add_output(fd.ops.sum(y, dims=[1], keepdim=False))
        fd.add_output(v)
    return fd


def test_the_printed_repro_reproduces_the_error(tmp_path):
    fd = _mismatch_fusion()
    x, w = torch.randn(4, 5), torch.randn(6)
    with pytest.raises(ExecutionError) as info:
        fd.execute([x, w, 2.0])
    note = _note(info.value)
    assert "hostir repro (run it to reproduce this error)" in note
    code = note.split("\n", 1)[1]
    assert "fd.ops.var_mean(" in code and "torch.tensor(" in code and "torch " in code
    proc = _rerun(code, tmp_path)
    assert proc.returncode != 0
    first = str(info.value).splitlines()[0]
    assert f"ExecutionError: {first}" in proc.stderr, proc.stderr[-2000:]
    # and the same definition runs where the inputs agree (the repro is the fusion, not a stub)
    fixed = code.replace("fd.execute(inputs)", "inputs[1] = torch.randn(5)\nprint(fd.execute(inputs)[1].shape)")
    proc = _rerun(fixed, tmp_path)
    assert proc.returncode == 0 and "torch.Size([4])" in proc.stdout, proc.stderr[-2000:]


def test_a_long_repro_goes_to_a_file_with_strided_inputs(tmp_path):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[False, True], dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Half)
        y = t0
        for k in range(45):
            y = fd.ops.add(fd.ops.mul(y, 1.0 + k / 100), 0.5)
        fd.add_output(fd.ops.add(y, fd.ops.cast(t1, DataType.Float)))
    x = torch.randn(30, 40)[:, :20]  # not contiguous, more than EXACT_VALUES elements
    with pytest.raises(ExecutionError) as info, config.override(repro_dir=str(tmp_path / "repros")):
        fd.execute([x, torch.randn(30, 7, dtype=torch.half)])
    note = _note(info.value)
    path = re.search(r"hostir repro written to (\S+\.py)", note)
    assert path, note
    code = Path(path.group(1)).read_text()
    assert Path(path.group(1)).parent == tmp_path / "repros"
    assert ".as_strided((30, 20), (40, 1), 0)" in code and "dtype=torch.float16" in code
    proc = _rerun(code, tmp_path)
    assert proc.returncode != 0 and "ExecutionError" in proc.stderr


def test_bad_input_errors_carry_a_repro_and_successes_nothing(tmp_path):
    fd = _mismatch_fusion()
    out = fd.execute([torch.randn(3, 4), torch.randn(4), 1.5])
    assert len(out) == 3
    with pytest.raises(InputError) as info:
        fd.execute([torch.randn(3, 4), torch.randn(4)])  # a missing scalar
    proc = _rerun(_note(info.value).split("\n", 1)[1], tmp_path)
    assert proc.returncode != 0 and "InputError" in proc.stderr, proc.stderr[-2000:]
