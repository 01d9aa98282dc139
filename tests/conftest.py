import os

# The suite runs with every verifier on (fusion IR around each pass and stage,
# kernel IR, host IR): HOSTIR_DEBUG=verify, unless the caller chose otherwise.
os.environ.setdefault("HOSTIR_DEBUG", "verify")

import pytest
import torch

from hostir.ir.verify import verify


def _set_knobs(text: str) -> None:
    """HOSTIR_TEST_KNOBS="rows.X=4 cuda_outer.Y=True": codegen constants
    (hostir.codegen.MODULE.NAME, Python literals; or disable=FEATURE) set for
    the whole session, as benchmarks/knobs.py's `--try` sets them, to check a
    setting's kernels against torch on a GPU before it becomes the default
    (tests that assert the default's schedules may then fail)."""
    if not text:
        return
    import sys
    from contextlib import ExitStack
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from knobs import parse_try, setting
    global _KNOBS
    _KNOBS = ExitStack()  # (held for the session: never closed, and referenced, so never collected)
    for name, value in parse_try(text).items():
        _KNOBS.enter_context(setting(name, value))


_set_knobs(os.environ.get("HOSTIR_TEST_KNOBS", ""))


def pytest_collection_modifyitems(config, items):
    has_gpu = torch.cuda.is_available()
    n_gpu = torch.cuda.device_count() if has_gpu else 0
    for item in items:
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if "multigpu" in item.keywords and n_gpu < 2:
            item.add_marker(pytest.mark.skip(reason="needs two CUDA GPUs"))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def run_and_verify(fd, inputs):
    """Execute `fd` after checking its fusion with the verifier."""
    out = fd.execute(inputs)
    verify(fd._fusion)
    return out


# ---------------------------------------------------------------- nvrtc: compile every generated kernel
# Every kernel any test generates (each spec's typical variants, and the variants
# tests add) is compiled to sm_90 cubin at the end of the session, so CI proves the
# CUDA printer's output compiles without a GPU. Each xdist worker hands its
# kernels to the controller, which compiles them once, in batches, on a pool of
# processes (tests/nvrtc_batches.py). HOSTIR_TEST_NVRTC=0 skips it.


from hostir.codegen import spec as _spec

_KERNEL_SOURCES: dict[str, str] = {}


def _record(spec):
    try:  # the general variant and the vectorized 32-bit-index one of each kernel
        variants = spec.typical_variants()
        for v in variants:
            _KERNEL_SOURCES.setdefault(v.source, v.name)
    except Exception as e:  # a printer bug is a test failure too (with what to replay it from)
        import traceback
        from hostir.codegen.kir import kernel_text
        where = "".join(traceback.format_exception(e)[-3:])
        kernels = "\n".join(kernel_text(k) for k in spec.kernels)
        _KERNEL_SOURCES[f"<printer error {e!r} in {spec.name}>\n{where}\n{kernels}"] = ""


_spec.observers.append(_record)


def _nvrtc_available() -> bool:
    try:
        from hostir.runtime.nvrtc import nvrtc_version
        nvrtc_version()
        return True
    except Exception:
        return False


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        import tempfile
        os.environ["HOSTIR_NVRTC_REPORT_DIR"] = tempfile.mkdtemp(prefix="hostir-nvrtc-")


def pytest_sessionfinish(session, exitstatus):
    import pickle
    import shutil
    report_dir = os.environ.get("HOSTIR_NVRTC_REPORT_DIR")
    worker = getattr(session.config, "workerinput", None)
    if os.environ.get("HOSTIR_TEST_NVRTC", "1") == "0" or not report_dir:
        if worker is None and report_dir:
            shutil.rmtree(report_dir, ignore_errors=True)
        return
    if worker is not None:  # an xdist worker: its kernels go to the controller
        path = os.path.join(report_dir, f"{worker['workerid']}.pkl")
        with open(path + ".tmp", "wb") as f:
            pickle.dump(_KERNEL_SOURCES, f)
        os.replace(path + ".tmp", path)
        return
    sources = dict(_KERNEL_SOURCES)
    if os.path.isdir(report_dir):
        for name in sorted(os.listdir(report_dir)):
            if name.endswith(".pkl"):
                with open(os.path.join(report_dir, name), "rb") as f:
                    for src, kernel in pickle.load(f).items():
                        sources.setdefault(src, kernel)
        shutil.rmtree(report_dir, ignore_errors=True)
    if not sources:
        return
    if not _nvrtc_available():
        print("\nnvrtc: NVRTC not available; generated kernels were not compiled")
        return
    import nvrtc_batches
    n, failures = nvrtc_batches.compile_all(sources, nvrtc_batches.workers())
    print(f"\nnvrtc: compiled {n} generated kernels to sm_90 cubin, {len(failures)} failed")
    for name, why in failures[:5]:
        print(f"nvrtc FAILED {name}: {why[:3000]}")
    if failures:
        session.exitstatus = 1
