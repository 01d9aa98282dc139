"""HOSTIR_TRACE: a Chrome/Perfetto trace of host program execution.

Each rank records spans of its host programs' statements: a kernel launch on
the track of the stream it was issued to, a collective from its start to its
completion (the wait that ends it) on the rank's communication track, a wait
on the stream that waits. On CUDA a span's ends are CUDA events recorded on
the stream (resolved when the trace is written, so tracing adds no
synchronization while the program runs); on CPU, the wall clock. Times are
microseconds since the epoch (ranks of one host share a clock), so `hostir
trace merge` can lay several ranks' files side by side.

The trace is written at process exit (or by `flush()`), one file per rank
when the job has several: `trace.json` becomes `trace.rank1.json`.
"""
from __future__ import annotations

import atexit
import json
import os
import threading
import time
from pathlib import Path

import torch

from .. import config


class _Tracer:
    def __init__(self, path: str):
        self.path = path
        self.lock = threading.Lock()
        self.spans: list = []       # (name, cat, track, start, end): floats (us) or CUDA events
        self.open: dict = {}        # key -> (name, cat, track, start) of a span not yet ended
        self.tracks: dict = {}      # track name -> tid
        self.streams: dict = {}     # CUDA stream handle -> track name
        self.anchor: dict = {}      # device index -> (base CUDA event, wall-clock us at it)
        self.flushed = False

    # ---------------------------------------------------------------- clocks
    def _now(self, device: torch.device, stream=None):
        if device.type != "cuda":
            return time.time_ns() / 1e3
        idx = device.index if device.index is not None else torch.cuda.current_device()
        if idx not in self.anchor:
            torch.cuda.synchronize(idx)
            base = torch.cuda.Event(enable_timing=True)
            base.record(torch.cuda.current_stream(idx))
            torch.cuda.synchronize(idx)
            self.anchor[idx] = (base, time.time_ns() / 1e3)
        ev = torch.cuda.Event(enable_timing=True)
        ev.record(stream if stream is not None else torch.cuda.current_stream(idx))
        return (idx, ev)

    def stream_track(self, env) -> str:
        """The track of the stream work goes to now: on CUDA named by the stream
        itself (in order of first use: a fusion called from a host program's
        pool stream lands on that stream's track), on CPU by the pool index."""
        if env.device.type != "cuda":
            return f"stream {env.pool.current}"
        handle = torch.cuda.current_stream(env.device).cuda_stream
        with self.lock:
            name = self.streams.get(handle)
            if name is None:
                name = self.streams[handle] = f"CUDA stream {len(self.streams)}"
        return name

    def _tid(self, track: str) -> int:
        tid = self.tracks.get(track)
        if tid is None:
            tid = self.tracks[track] = len(self.tracks)
        return tid

    # ---------------------------------------------------------------- spans
    def begin(self, key, name: str, cat: str, track: str, device: torch.device) -> None:
        with self.lock:
            self.open[key] = (name, cat, track, self._now(device))

    def end(self, key, device: torch.device) -> None:
        with self.lock:
            got = self.open.pop(key, None)
            if got is not None:
                self.spans.append((*got, self._now(device)))

    def span(self, name: str, cat: str, track: str, device: torch.device, run, env) -> None:
        start = self._now(device)
        try:
            run(env)
        finally:
            end = self._now(device)
            with self.lock:
                self.spans.append((name, cat, track, start, end))

    # ---------------------------------------------------------------- output
    def _us(self, t) -> float:
        if isinstance(t, float):
            return t
        idx, ev = t
        base, wall = self.anchor[idx]
        return wall + base.elapsed_time(ev) * 1e3

    def events(self, rank: int) -> list[dict]:
        if torch.cuda.is_available() and self.anchor:
            for idx in self.anchor:
                torch.cuda.synchronize(idx)
        out = [{"name": "process_name", "ph": "M", "pid": rank, "args": {"name": f"rank {rank}"}}]
        for track, tid in self.tracks.items():
            out.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": tid, "args": {"name": track}})
            out.append({"name": "thread_sort_index", "ph": "M", "pid": rank, "tid": tid,
                        "args": {"sort_index": tid}})
        for name, cat, track, start, end in self.spans:
            a, b = self._us(start), self._us(end)
            out.append({"name": name, "cat": cat, "ph": "X", "pid": rank, "tid": self._tid(track),
                        "ts": a, "dur": max(b - a, 0.0)})
        return out

    def flush(self) -> Path | None:
        with self.lock:
            if self.flushed or not (self.spans or self.open):
                return None
            self.flushed = True
        launch = config.launch()
        rank, size = launch.rank, launch.size
        path = Path(self.path)
        if size > 1:
            path = path.with_name(f"{path.stem}.rank{rank}{path.suffix or '.json'}")
        for name, cat, track, _, _ in self.spans:
            self._tid(track)
        events = self.events(rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms",
                                    "otherData": {"rank": rank, "world_size": size,
                                                  "pid": os.getpid()}}))
        return path


_tracer: _Tracer | None = None
_made = False


def tracer() -> _Tracer | None:
    """The process's tracer when HOSTIR_TRACE asks for one (else None)."""
    global _tracer, _made
    if not _made:
        _made = True
        path = config.get().trace
        if path:
            _tracer = _Tracer(path)
            atexit.register(flush)
    return _tracer


def flush() -> Path | None:
    """Write the trace now (it is written at exit otherwise); returns its path."""
    return _tracer.flush() if _tracer is not None else None
