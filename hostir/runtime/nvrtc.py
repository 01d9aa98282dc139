"""`compile_cubin(source, arch) -> bytes`: a pure, cached function.

Cubin for the device's own sm_XX (never PTX: a newer NVRTC's PTX is refused
by an older driver). Cached in memory and on disk under HOSTIR_CACHE_DIR,
keyed by source, the kernels/ headers, arch, NVRTC version and options.
Disk entries carry a checksum; writes are atomic; a corrupt entry is
recompiled, never trusted. Compile errors print the NVRTC log and the path
of the kernel source written next to the cache.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from .. import config
from ..progress import Progress
from ..ir.errors import ExecutionError, UnsupportedError

HEADER_DIR = Path(__file__).resolve().parents[2] / "kernels"
OPTIONS = ("-std=c++17", "-default-device")
MAGIC = b"HIRCUBIN1"


class Stats:
    def __init__(self):
        self.nvrtc_calls = 0
        self.memory_hits = 0
        self.disk_hits = 0
        self.corrupt = 0
        self.prefetched = 0   # compiles started ahead, on the background pool


stats = Stats()
_memory: dict[str, bytes] = {}
_inflight: dict[str, Future] = {}   # key -> a compile running on the pool
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_bar: Progress | None = None        # over the background compiles running now (a terminal only)


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:  # pragma: no cover - depends on the install
        raise UnsupportedError(f"NVRTC is not available (pip install cuda-python nvidia-cuda-nvrtc): {e}")
    return nvrtc


def nvrtc_version() -> tuple[int, int]:
    nv = _nvrtc()
    err, major, minor = nv.nvrtcVersion()
    return (major, minor)


def _headers() -> list[tuple[bytes, bytes]]:
    return [(p.read_bytes(), p.name.encode()) for p in sorted(HEADER_DIR.glob("*.cuh"))]


def cache_key(source: str, arch: str, options=OPTIONS) -> str:
    h = hashlib.sha256()
    h.update(source.encode())
    for body, name in _headers():
        h.update(name)
        h.update(body)
    h.update(arch.encode())
    h.update(repr(nvrtc_version()).encode())
    h.update(repr(tuple(options)).encode())
    return h.hexdigest()


def _cache_dir() -> Path:
    return config.get().cache_dir / "kernels"


def _read_disk(key: str) -> bytes | None:
    path = _cache_dir() / f"{key}.cubin"
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    if blob.startswith(MAGIC) and len(blob) > len(MAGIC) + 32:
        digest, payload = blob[len(MAGIC):len(MAGIC) + 32], blob[len(MAGIC) + 32:]
        if hashlib.sha256(payload).digest() == digest:
            return payload
    stats.corrupt += 1
    return None


def _write_disk(key: str, cubin: bytes) -> None:
    d = _cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + hashlib.sha256(cubin).digest() + cubin)
        os.replace(tmp, d / f"{key}.cubin")
    except OSError:
        pass  # the cache is an optimization; a read-only disk must not fail a run


def _compile(source: str, arch: str, name: str, options) -> bytes:
    nv = _nvrtc()
    headers = _headers()
    err, prog = nv.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), len(headers),
                                      [h[0] for h in headers], [h[1] for h in headers])
    opts = [f"--gpu-architecture={arch}".encode()] + [o.encode() for o in options]
    try:
        (res,) = nv.nvrtcCompileProgram(prog, len(opts), opts)
        if res != nv.nvrtcResult.NVRTC_SUCCESS:
            _, size = nv.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nv.nvrtcGetProgramLog(prog, log)
            path = _dump_source(name, source)
            raise ExecutionError(f"NVRTC failed to compile {name} for {arch} (source: {path}):\n"
                                 f"{log.decode(errors='replace')}")
        _, size = nv.nvrtcGetCUBINSize(prog)
        cubin = b" " * size
        nv.nvrtcGetCUBIN(prog, cubin)
        stats.nvrtc_calls += 1
        return bytes(cubin)
    finally:
        nv.nvrtcDestroyProgram(prog)


def _dump_source(name: str, source: str) -> Path:
    d = _cache_dir() / "failed"
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{name}.cu"
    path.write_text(source)
    return path


def compile_cubin(source: str, arch: str, name: str = "kernel", options=OPTIONS) -> bytes:
    """Cubin bytes for `source` on `arch` (e.g. "sm_90"). Waits for a compile of
    the same key that `prefetch` started."""
    if not arch.startswith("sm_"):
        raise UnsupportedError(f"compile_cubin: arch must be sm_XX, got {arch!r}")
    key = cache_key(source, arch, options)
    with _lock:
        hit = _memory.get(key)
        fut = _inflight.get(key) if hit is None else None
    if hit is not None:
        stats.memory_hits += 1
        config.log("compile", lambda: f"{name} {arch}: memory hit")
        return hit
    if fut is not None:
        return fut.result()
    return _load_or_compile(key, source, arch, name, options)


def _load_or_compile(key, source, arch, name, options) -> bytes:
    t = time.perf_counter()
    cubin = _read_disk(key)
    if cubin is not None:
        stats.disk_hits += 1
        config.log("compile", lambda: f"{name} {arch}: disk hit {key[:12]} "
                   f"({time.perf_counter() - t:.3f} s)")
    else:
        cubin = _compile(source, arch, name, options)
        _write_disk(key, cubin)
        config.log("compile", lambda: f"{name} {arch}: cold NVRTC compile, {len(cubin)} bytes "
                   f"({time.perf_counter() - t:.2f} s), cached as {key[:12]}")
    with _lock:
        _memory[key] = cubin
    return cubin


def prefetch(source: str, arch: str, name: str = "kernel", options=OPTIONS) -> None:
    """Start compiling `source` on a background thread (NVRTC releases the GIL,
    so the kernels of a plan compile in parallel); `compile_cubin` of the same
    key waits for it. An error surfaces there, or never if the kernel is not used."""
    global _pool, _bar
    key = cache_key(source, arch, options)
    with _lock:
        if key in _memory or key in _inflight:
            return
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max(2, min(8, os.cpu_count() or 2)),
                                       thread_name_prefix="hostir-nvrtc")

        if _bar is None:
            _bar = Progress(0, "hostir: compiling kernels")
        bar = _bar
        bar.add_total(1)

        def job():
            global _bar
            try:
                return _load_or_compile(key, source, arch, name, options)
            finally:
                bar.update()
                with _lock:
                    _inflight.pop(key, None)
                    if not _inflight and _bar is bar:
                        _bar = None
                        bar.close()
        _inflight[key] = _pool.submit(job)
        stats.prefetched += 1


def wait_prefetches() -> None:
    """Block until every background compile started so far has finished."""
    with _lock:
        running = list(_inflight.values())
    for fut in running:
        fut.exception()  # waits; an error belongs to whoever compiles that kernel


def clear_memory_cache() -> None:
    with _lock:
        _memory.clear()


def disk_entries() -> list[Path]:
    """The cubins in the disk cache (HOSTIR_CACHE_DIR/kernels)."""
    try:
        return sorted(_cache_dir().glob("*.cubin"))
    except OSError:
        return []


def disk_usage() -> tuple[int, int]:
    """(cubins, bytes) in the disk cache."""
    entries = nbytes = 0
    for p in disk_entries():
        try:
            nbytes += p.stat().st_size
            entries += 1
        except OSError:  # removed meanwhile by another process
            pass
    return entries, nbytes


def clear_disk_cache() -> tuple[int, int]:
    """Remove the disk cache's cubins, left-over temporary files and dumped failed
    sources; nothing else in HOSTIR_CACHE_DIR is touched. Returns (files, bytes) removed.
    Safe while other processes run: a reader of a removed entry recompiles."""
    d = _cache_dir()
    removed = nbytes = 0
    paths = disk_entries()
    try:
        paths += sorted(d.glob("*.tmp")) + sorted((d / "failed").glob("*.cu"))
    except OSError:
        pass
    for p in paths:
        try:
            size = p.stat().st_size
            p.unlink()
        except OSError:
            continue
        removed += 1
        nbytes += size
    for sub in (d / "failed", d):
        try:
            sub.rmdir()  # only when empty
        except OSError:
            pass
    return removed, nbytes
