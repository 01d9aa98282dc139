"""The `hostir` command (run, dump, bench, cache), HOSTIR_LOGS lines, the cache's
recompile reasons, fd.cache_info() and progress bars."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

from hostir import DataType, FusionDefinition, config
from hostir.cli import main
from hostir.cli.launch import mpirun_command, ranks_command
from hostir.progress import Progress, wanted
from hostir.runtime import nvrtc

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = '''
import sys, torch
from hostir import FusionDefinition, DataType
with FusionDefinition() as fd:
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    t1 = fd.ops.mul(fd.ops.tanh(t0), 0.5)
    fd.add_output(fd.ops.sum(t1, dims=[1]))
x = torch.randn(4, 8)
(out,) = fd.execute([x])
torch.testing.assert_close(out, (torch.tanh(x) * 0.5).sum(1))
print("script ok", sys.argv[1:], flush=True)
'''

RANKS_SCRIPT = '''
import torch
from hostir import DataType, FusionDefinition
from hostir.multidevice import Communicator
comm = Communicator.instance()
with FusionDefinition() as fd:
    t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
    fd.add_output(fd.ops.add(t0, 1.0))
x = torch.randn(16)
torch.testing.assert_close(fd.execute([x])[0], x + 1)
print(f"rank {comm.rank()} of {comm.size()} ok", flush=True)
'''


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(SCRIPT)
    return path


@pytest.fixture
def logs(monkeypatch):
    """Set HOSTIR_* variables for this test; the configuration is re-read."""
    def set_env(**env):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        config.reload()
    yield set_env
    monkeypatch.undo()
    config.reload()


def _env():
    return dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")


# ---------------------------------------------------------------- hostir run / dump

def test_run_in_one_process_passes_arguments_and_exit_status(script, tmp_path, capfd):
    assert main(["run", str(script), "--", "a", "--b"]) == 0
    assert "script ok ['a', '--b']" in capfd.readouterr().out
    bad = tmp_path / "bad.py"
    bad.write_text("raise SystemExit(3)\n")
    assert main(["run", str(bad)]) == 3
    assert main(["run", str(tmp_path / "missing.py")]) == 2
    assert "no such script" in capfd.readouterr().err


@pytest.mark.mpi
def test_run_on_two_ranks_with_rank_tagged_logs(tmp_path):
    if mpirun_command() is None:
        pytest.skip("mpirun not found (pip install mpi4py mpich)")
    path = tmp_path / "ranks.py"
    path.write_text(RANKS_SCRIPT)
    env = _env()
    env.update(HOSTIR_LOGS="dist,cache,segments", PYTHONUNBUFFERED="1")
    env.pop("HOSTIR_LOG_RANKS", None)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    proc = subprocess.run([sys.executable, "-m", "hostir", "run", str(path), "--ranks", "2"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "rank 0 of 2 ok" in out and "rank 1 of 2 ok" in out, out[-3000:]
    assert "[hostir rank 0/2] dist: communicator: gloo backend, rank 0 of 2" in out, out[-3000:]
    assert "[hostir rank 0/2] cache: FusionDefinition: compiling (plan 1): first call" in out
    assert "[hostir rank 0/2] segments: 1 segment(s): seg0 pointwise [add]" in out
    assert "[hostir rank 1/2]" not in out  # rank 0 only, unless HOSTIR_LOG_RANKS asks


def test_launch_commands():
    cmd = ranks_command(3, ["prog.py", "x"], "torchrun", python="/py/bin/python")
    assert cmd == ["/py/bin/python", "-m", "torch.distributed.run", "--nproc_per_node=3", "prog.py", "x"]
    if mpirun_command() is not None:
        cmd = ranks_command(2, ["python", "prog.py"])
        assert cmd[-4:] == ["-np", "2", "python", "prog.py"] and cmd[0].endswith("mpirun")
    with pytest.raises(ValueError, match="unknown launcher 'srun'"):
        ranks_command(2, ["p"], "srun")


def test_dump_prints_the_stage(script, capfd):
    assert main(["dump", str(script), "--stage", "fusion,segments"]) == 0
    out = capfd.readouterr().out
    assert "===== hostir fusion_ir =====" in out and "===== hostir segments =====" in out
    assert "seg0 reduction" in out and "script ok" in out
    assert "===== hostir host_ir =====" not in out
    assert main(["dump", str(script), "--stage", "nonsense"]) == 2
    assert "unknown stage 'nonsense'" in capfd.readouterr().err


def test_the_console_script_is_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["hostir"] == "hostir.cli:main"


# ---------------------------------------------------------------- hostir bench

def test_bench_writes_json_markdown_and_plots(tmp_path, capsys):
    pytest.importorskip("matplotlib")  # scripts/env.sh installs it
    out = tmp_path / "out"
    assert main(["bench", "pointwise", "--tiny", "--plot", "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| case | hostir us | hostir GB/s |" in table and "rotation+residual fp32" in table
    rows = json.loads((out / "pointwise.json").read_text())["rows"]
    assert len(rows) == 6 and all(r["rel err"] < 1e-5 and r["hostir GB/s"] > 0 for r in rows)
    assert (out / "pointwise.md").read_text().startswith("### pointwise")
    sweep = json.loads((out / "pointwise_sweep.json").read_text())["rows"]
    fusions = {r["fusion"] for r in sweep}
    assert fusions == {"rotation+residual fp32", "broadcast add fp32", "RoPE bf16"}
    pngs = sorted(out.glob("pointwise_*.png"))
    assert len(pngs) == len(fusions)
    for p in pngs:
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, p


def test_bench_refuses_unknown_suites_and_a_missing_folder(tmp_path, capsys):
    assert main(["bench", "nonsense", "--out", str(tmp_path)]) == 2
    assert "unknown suite(s) nonsense" in capsys.readouterr().err
    assert main(["bench", "--benchmarks", str(tmp_path), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "needs the benchmarks/ folder of a hostir checkout" in err and "--benchmarks DIR" in err


# ---------------------------------------------------------------- hostir cache, fd.cache_info()

SOURCE = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n'


def test_cache_info_and_clear_on_a_temporary_dir(tmp_path, logs, capsys):
    logs(HOSTIR_CACHE_DIR=str(tmp_path / "cache"), HOSTIR_LOGS="compile")
    assert main(["cache", "info"]) == 0
    assert "cubins: 0" in capsys.readouterr().out
    nvrtc.clear_memory_cache()
    cubin = nvrtc.compile_cubin(SOURCE + f"// {tmp_path}\n", "sm_90", "k")
    nvrtc.clear_memory_cache()
    assert nvrtc.compile_cubin(SOURCE + f"// {tmp_path}\n", "sm_90", "k") == cubin
    err = capsys.readouterr().err
    assert "[hostir rank 0/1] compile: k sm_90: cold NVRTC compile" in err
    assert "[hostir rank 0/1] compile: k sm_90: disk hit" in err
    keep = tmp_path / "cache" / "notes.txt"
    keep.write_text("not a cache entry")
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path / "cache" / "kernels") in out and "cubins: 1" in out
    assert f"bytes:  {len(cubin) + len(nvrtc.MAGIC) + 32} " in out
    assert main(["cache", "clear"]) == 0
    assert "removed 1 file(s)" in capsys.readouterr().out
    assert main(["cache", "info"]) == 0
    assert "cubins: 0" in capsys.readouterr().out
    assert keep.read_text() == "not a cache entry"  # clear removes cache entries only


def test_fd_cache_info_prints_itself(tmp_path, logs):
    logs(HOSTIR_CACHE_DIR=str(tmp_path))
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.exp(t0))
    fd.execute([torch.randn(8)])
    fd.execute([torch.randn(8)])
    info = fd.cache_info()
    assert (info.plans, info.misses, info.disk_entries, info.disk_bytes) == (1, 1, 0, 0)
    assert info.kernels_compiled == nvrtc.stats.nvrtc_calls
    text = str(info)
    assert text.startswith("plans 1 (calls:") and "disk cache 0 cubins, 0 B" in text


# ---------------------------------------------------------------- HOSTIR_LOGS=cache: why a recompile

def _slice_fd():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        s = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.mul(fd.ops.slice(t0, [s], [fd.ops.size(t0, 0)]), 2.0))
    return fd


def test_recompile_log_names_the_specialized_bound_and_the_scalar(logs, capsys):
    logs(HOSTIR_LOGS="cache")
    fd = _slice_fd()
    x = torch.randn(10)
    fd.execute([x, 2])
    out, = fd.execute([x, 3])
    torch.testing.assert_close(out, x[3:] * 2)
    err = capsys.readouterr().err
    assert "[hostir rank 0/1] cache: FusionDefinition: compiling (plan 1): first call" in err
    line = next(s for s in err.splitlines() if "recompiling (plan 2)" in s)
    assert "specialized bounds of slice" in line and "[2, 10] -> [3, 10]" in line, line
    assert "input 1 (S1) scalar value 2 -> 3" in line and "bounds now symbolic" in line, line


def test_recompile_log_names_an_axis_that_became_a_broadcast(logs, capsys):
    logs(HOSTIR_LOGS="cache", HOSTIR_DISABLE="concretize_resize")
    fd = _slice_fd()
    fd.execute([torch.randn(10), 2])
    fd.execute([torch.randn(10), 3])    # symbolic bounds: same plan
    x = torch.randn(10)
    out, = fd.execute([x, 9])             # a one-element slice: a broadcast axis
    torch.testing.assert_close(out, x[9:] * 2)
    lines = capsys.readouterr().err.splitlines()
    reused = [s for s in lines if "plan reused" in s]
    assert len(reused) == 1 and "input 1 (S1) scalar value 2 -> 3" in reused[0], lines
    line = next(s for s in lines if "recompiling (plan 2)" in s)
    assert "axis 0 became size 1 (broadcast)" in line and "scalar value 3 -> 9" in line, line


def test_new_shape_reuses_the_plan_and_says_which_input_changed(logs, capsys):
    logs(HOSTIR_LOGS="cache,segments")
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(fd.ops.relu(t0), [1]))
    fd.execute([torch.randn(4, 8)])
    fd.execute([torch.randn(4, 16)])
    err = capsys.readouterr().err
    assert "segments: 1 segment(s): seg0 reduction [relu, sum]" in err
    assert "input 0 (T0) shape [4, 8] -> [4, 16]" in err and "plan reused" in err
    logs(HOSTIR_LOGS="")
    fd.execute([torch.randn(4, 32)])
    assert capsys.readouterr().err == ""  # nothing unless asked


def test_unknown_log_subsystems_are_named(logs, capsys):
    logs(HOSTIR_LOGS="cache,bogus")
    assert "ignoring unknown HOSTIR_LOGS subsystems ['bogus']" in capsys.readouterr().err
    assert config.logging("cache") and not config.logging("bogus")
    logs(HOSTIR_LOGS="all")
    assert config.get().logs == config.LOG_SUBSYSTEMS


# ---------------------------------------------------------------- progress bars

def test_progress_bar_draws_only_where_asked():
    assert not wanted(io.StringIO())  # not a terminal: quiet
    quiet = io.StringIO()
    with Progress(3, "work", stream=quiet) as bar:
        for _ in range(3):
            bar.update()
    assert quiet.getvalue() == ""
    loud = io.StringIO()
    bar = Progress(2, "work", delay=0, stream=loud, force=True)
    bar.add_total(1)
    for _ in range(3):
        bar.update()
    bar.close()
    text = loud.getvalue()
    assert "3/3" in text and "work" in text, text


def test_background_compiles_advance_a_bar(tmp_path, logs, monkeypatch):
    logs(HOSTIR_CACHE_DIR=str(tmp_path))
    stream = io.StringIO()

    class Shown(Progress):  # as on a terminal
        def __init__(self, total=0, desc=""):
            super().__init__(total, desc, delay=0, stream=stream, force=True)
    monkeypatch.setattr(nvrtc, "Progress", Shown)
    nvrtc.clear_memory_cache()
    for i in range(2):
        nvrtc.prefetch(SOURCE + f"// {tmp_path} {i}\n", "sm_90", f"k{i}")
    nvrtc.wait_prefetches()
    for i in range(2):  # compiled by the pool: now in memory
        before = nvrtc.stats.nvrtc_calls
        nvrtc.compile_cubin(SOURCE + f"// {tmp_path} {i}\n", "sm_90", f"k{i}")
        assert nvrtc.stats.nvrtc_calls == before
    text = stream.getvalue()
    assert "hostir: compiling kernels" in text and ("2/2" in text or text.count("1/1") == 2), text
    assert nvrtc._bar is None  # closed when the last compile finished


def test_knobs_times_the_contenders_it_is_given(tmp_path):
    """benchmarks/knobs.py on CPU (tiny cases): `--try` contenders side by side,
    each a column of the table (one given twice: two columns, the second
    numbered); `--try` and `--set` together are refused."""
    bench = ROOT / "benchmarks"
    sys.path.insert(0, str(bench))
    try:
        import knobs
        knobs.main(["--only", "^row sum fp32 .*x20$", "--try", "default", "--try", "rows.SHORT_ROWS=False",
                    "--try", "default", "--no-compile", "--rounds", "1", "--out", str(tmp_path)])
        (row,) = json.loads((tmp_path / "knobs.json").read_text())["rows"]
        assert list(row) == ["case", "default", "rows.SHORT_ROWS=False", "default #2", "eager"]
        assert row["default"] > 0 and row["rows.SHORT_ROWS=False"] > 0 and row["default #2"] > 0
        with pytest.raises(SystemExit):
            knobs.main(["--only", "x", "--try", "default", "--set", "rows.SHORT_ROWS=False,True"])
        with pytest.raises(SystemExit, match="one value"):
            knobs.main(["--only", "x", "--try", "rows.SHORT_ROWS=False,True"])
        # cases of any shape by name, after the sweep's that --only keeps
        knobs.main(["--only", "^row sum fp32 .*x20$", "--case", "column sum fp32 40x35", "--case",
                    "layernorm bf16 9x177", "--try", "default", "--no-compile", "--rounds", "1", "--out", str(tmp_path)])
        rows = json.loads((tmp_path / "knobs.json").read_text())["rows"]
        assert [r["case"] for r in rows][1:] == ["column sum fp32 40x35", "layernorm bf16 9x177"]
        assert rows[0]["case"].startswith("row sum fp32 ") and all(list(r) == ["case", "default", "eager"]
                                                                   for r in rows)
        # issue 11's other listed kinds by name too (benchmarks/reduction.py's)
        listed = ["mean of squares bf16 64x256", "sum over [0, 1] fp32 4x16x256", "transpose fp32 128x128"]
        knobs.main([a for name in listed for a in ("--case", name)] +
                   ["--try", "default", "--no-compile", "--rounds", "1", "--out", str(tmp_path)])
        rows = json.loads((tmp_path / "knobs.json").read_text())["rows"]
        assert [r["case"] for r in rows] == listed and all(r["default"] > 0 for r in rows)
        for bad in ("column sum fp64 40x35", "mean of squares fp32 9x40", "transpose fp32 4x5x6"):
            with pytest.raises(SystemExit, match="KIND DTYPE RxC"):
                knobs.main(["--case", bad, "--try", "default"])
        with pytest.raises(SystemExit, match="which cases"):
            knobs.main(["--try", "default"])
    finally:
        sys.path.remove(str(bench))


def test_reduction_shapes_draws_cases_a_seed_replays(tmp_path, capsys):
    """benchmarks/reduction_shapes.py --draw: random cases (kinds, dtypes,
    rows of 64 to 262144 points, half of them odd), the same again for the
    same seed, which the run prints and its table records."""
    bench = ROOT / "benchmarks"
    sys.path.insert(0, str(bench))
    try:
        import reduction_shapes as rs
        names = [c[0] for c in rs.drawn(40, 11, 1 << 26)]
        assert names == [c[0] for c in rs.drawn(40, 11, 1 << 26)] != [c[0] for c in rs.drawn(40, 12, 1 << 26)]
        lengths = [int(n.rsplit("x", 1)[1]) for n in names if not n.startswith("column")]
        assert lengths and all(64 <= c <= 262144 for c in lengths) and any(c % 2 for c in lengths)
        assert all(rs.by_name(n)[0] == n for n in names[:5])  # (a name stands for its case)
        rs.main(["--draw", "2", "--seed", "11", "--no-compile", "--rounds", "1", "--out", str(tmp_path)])
        assert "--draw 2 --seed 11" in capsys.readouterr().out
        got = json.loads((tmp_path / "reduction_shapes.json").read_text())
        assert got["meta"]["cases"] == "drawn at random (--draw 2 --seed 11)" and len(got["rows"]) == 2
    finally:
        sys.path.remove(str(bench))


def test_timeline_summarizes_rows_stamps():
    """benchmarks/timeline.py: a call's rows' stamps (start, first barrier,
    end, SM, block) summarized: rows at once, each phase, the tail, a block's
    and an SM's idle time between rows. Two SMs of one block each here, two
    rows each: 0-10 and 12-22 us on SM 0, 0-10 and 11-21 on SM 1, each row's
    barrier 4 us in. Without a GPU the script refuses (it reads stamps a GPU
    wrote)."""
    bench = ROOT / "benchmarks"
    sys.path.insert(0, str(bench))
    try:
        import timeline
        us = 1000
        rows = [(0, 4 * us, 10 * us, 0, 0), (12 * us, 16 * us, 22 * us, 0, 0),
                (0, 4 * us, 10 * us, 1, 1), (11 * us, 15 * us, 21 * us, 1, 1)]
        lines = timeline.summarize([(s + 5000, b + 5000, e + 5000, sm, blk) for s, b, e, sm, blk in rows], bins=11)
        assert lines[0] == "4 rows' CTAs over 22.0 us on 2 SMs (2 blocks); 1.8 at once on average"
        assert "start to first barrier 4.00 us, first barrier to end 6.00 us" in lines[1]
        assert lines[2].startswith("a row's CTA: 10.00 us (median), 10.00 at most")
        assert lines[3] == "the last row ended 1.00 us after 90 % of them"
        assert lines[4].startswith("a block's next row started 1.50 us after its last ended")
        assert lines[5].startswith("an SM busy 91 % of the call") and lines[6].startswith(
            "an SM's next row started 1.50 us after one ended")
        assert lines[7] == "rows at once, 11 steps of 2.0 us: 2 2 2 2 2 1 2 2 2 2 2"  # (10-12: one)
        assert timeline.summarize([])[0].startswith("no stamps")
        if not torch.cuda.is_available():
            with pytest.raises(SystemExit, match="GPU"):
                timeline.main(["softmax fp32 7x100000"])
    finally:
        sys.path.remove(str(bench))
