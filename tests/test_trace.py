"""HOSTIR_TRACE: the Chrome trace a program writes (one process and two ranks),
`hostir trace merge` and `hostir trace plot`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mpi_util import run_mpi

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = '''
import torch
import hostir
from hostir import DataType, FusionDefinition, HostProgram
with FusionDefinition() as fd:
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    fd.add_output(fd.ops.sum(fd.ops.mul(fd.ops.tanh(t0), 0.5), dims=[1]))
x = torch.randn(6, 8, device="cuda" if torch.cuda.is_available() else "cpu")
for _ in range(3):
    (out,) = fd.execute([x])
torch.testing.assert_close(out, (torch.tanh(x) * 0.5).sum(1))
hp = HostProgram()
t = hp.define_tensor([-1, 8])
outs = hp.allocate([6], DataType.Float)
with hp.for_loop(0, 3) as i:
    hp.launch(fd, [hp.chunk(t, 0, i, 3)], outputs=[hp.chunk(outs, 0, i, 3)])
hp.add_output(outs)
(res,) = hp.execute([x])
torch.testing.assert_close(res, out)
print("traced ok", flush=True)
'''


def _spans(data):
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in data["traceEvents"]
             if e.get("ph") == "M" and e["name"] == "thread_name"}
    return [(names[(e["pid"], e["tid"])], e) for e in data["traceEvents"] if e.get("ph") == "X"], names


def test_a_fusion_and_a_host_program_write_a_trace(tmp_path):
    path = tmp_path / "sub" / "trace.json"
    env = dict(os.environ, HOSTIR_TRACE=str(path), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0 and "traced ok" in proc.stdout, proc.stderr[-3000:]
    data = json.loads(path.read_text())
    spans, names = _spans(data)
    launches = [e for track, e in spans if e["cat"] == "launch"]
    # three fusion calls (every call traced: no direct runner, no graph replay), and the
    # loop's three launches of the fusion, each holding its kernel's span
    names_ = [e["name"] for e in launches]
    assert names_.count("seg0_reduction") == 6 and names_.count("fusion0") == 3, names_
    for outer in (e for e in launches if e["name"] == "fusion0"):
        assert any(e["name"] == "seg0_reduction" and outer["ts"] <= e["ts"]
                   and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"] + 1e-3 for e in launches)
    assert len({track for track, _ in spans}) == 1  # one stream ("stream 0", or "CUDA stream 0")
    assert all(e["dur"] >= 0 and e["ts"] > 0 for _, e in spans)


def test_no_trace_without_the_variable(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HOSTIR_TRACE"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not list(tmp_path.rglob("*.json"))


@pytest.mark.mpi
def test_two_ranks_merged_and_plotted(tmp_path):
    """The pipelined allgather + linear on 2 ranks: a file per rank, each with its
    stream and communication tracks; merged into one (a process per rank); the
    timeline plotted to a PNG."""
    pytest.importorskip("matplotlib")
    proc = run_mpi(2, "launch/allgather_linear.py", "--steps", "3",
                   env={"HOSTIR_TRACE": str(tmp_path / "t.json")})
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    files = sorted(tmp_path.glob("t.rank*.json"))
    assert [f.name for f in files] == ["t.rank0.json", "t.rank1.json"]
    for rank, f in enumerate(files):
        spans, names = _spans(json.loads(f.read_text()))
        tracks = {track for track, _ in spans}
        assert "communication" in tracks and "stream 0" in tracks, tracks
        assert {e["pid"] for _, e in spans} == {rank}
        assert any(e["cat"] == "collective" and e["dur"] > 0 for _, e in spans)
    run = [sys.executable, "-m", "hostir", "trace"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    merged, png = tmp_path / "all.json", tmp_path / "all.png"
    got = subprocess.run([*run, "merge", str(merged), *map(str, files)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    spans, _ = _spans(json.loads(merged.read_text()))
    assert {e["pid"] for _, e in spans} == {0, 1}
    assert min(e["ts"] for _, e in spans) == 0
    got = subprocess.run([*run, "plot", str(merged), str(png)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_trace_commands_reject_bad_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{\"no\": 1}")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    got = subprocess.run([sys.executable, "-m", "hostir", "trace", "plot", str(bad), str(tmp_path / "x.png")],
                         env=env, capture_output=True, text=True, timeout=120)
    assert got.returncode != 0 and "not a Chrome trace" in (got.stdout + got.stderr)
