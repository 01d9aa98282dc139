"""The session's NVRTC check (tests/conftest.py): every generated kernel the
tests recorded, compiled to sm_90 cubin once, in batches.

Kernels whose sources open alike (the #defines and the header include before
their `extern "C"`) are compiled together, up to BATCH a program, each renamed
apart: one NVRTC program spares the header's parse and the compiler's start a
kernel. A batch that fails is compiled a kernel at a time, so the failure
names its kernel. The batches run on a pool of processes (NVRTC in threads of
one process ran 1.5x, not 2x, on two cores). They compile for a fast compile
(--Ofast-compile=max, NVRTC 12.8 on; before it, unoptimized: -G): it proves
the source compiles to cubin, ptxas included; the GPU script
(scripts/gpu_check.sh) runs the kernels optimized. NVRTC 13.5 on two cores, a
kernel, one a program / batches: -G 174 / 103 ms (40 kernels); batches of 96
kernels drawn from the tests', -G 55 ms, --Ofast-compile=max 34 ms."""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

BATCH = 16
ARCH = "sm_90"


def _options():
    from hostir.runtime.nvrtc import OPTIONS, nvrtc_version
    return OPTIONS + (("--Ofast-compile=max",) if nvrtc_version() >= (12, 8) else ("-G",))


def _one(src: str, name: str) -> str | None:
    """Why `src` does not compile to cubin (None: it does)."""
    from hostir.runtime.nvrtc import _compile
    try:
        cubin = _compile(src, ARCH, name, _options())
    except Exception as e:
        return f"{e}\n{src}"
    return None if cubin.startswith(b"\x7fELF") else "not an ELF cubin"


def build(batch: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Compile a batch of (source, kernel name) sharing their opening as one
    program; [(name, why)] of those that fail (each compiled alone to tell)."""
    from hostir.runtime.nvrtc import _compile
    if len(batch) == 1:  # (alone: nothing to rename, whatever its form)
        return [(name, why) for src, name in batch if (why := _one(src, name)) is not None]
    head = batch[0][0].split('extern "C"', 1)[0]
    bodies = ['extern "C"' + src.split('extern "C"', 1)[1].replace(name, f"{name}__{j}")
              for j, (src, name) in enumerate(batch)]
    try:
        cubin = _compile(head + "\n".join(bodies), ARCH, "batch", _options())
        if cubin.startswith(b"\x7fELF"):
            return []
    except Exception:
        pass
    return [(name, why) for src, name in batch if (why := _one(src, name)) is not None]


def batches(sources: dict[str, str]) -> list[list[tuple[str, str]]]:
    """The recorded kernels (source -> name), grouped by their opening, BATCH a group."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for src, name in sources.items():
        if 'extern "C"' in src and src.count('extern "C"') == 1:
            groups.setdefault(src.split('extern "C"', 1)[0], []).append((src, name))
        else:  # (alone: a source of another form)
            groups.setdefault(src, []).append((src, name))
    out = []
    for group in groups.values():
        out += [group[j:j + BATCH] for j in range(0, len(group), BATCH)]
    return out


def compile_all(sources: dict[str, str], workers: int) -> tuple[int, list[tuple[str, str]]]:
    """(kernels compiled, [(name, why)] of those that failed); a source recorded
    with no name is a printer error (its text says which)."""
    failures = [(src, "printer error") for src, name in sources.items() if not name]
    named = {src: name for src, name in sources.items() if name}
    work = batches(named)
    if workers > 1 and len(work) > 1:
        with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
            for got in pool.map(build, work):
                failures += got
    else:
        for b in work:
            failures += build(b)
    return len(sources), failures


def workers() -> int:
    return max(1, int(os.environ.get("HOSTIR_TEST_WORKERS") or os.cpu_count() or 1))
