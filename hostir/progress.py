"""Progress bars for long work (benchmarks, first-call compiles of many kernels).

tqdm draws them where it is installed, else a one-line bar of our own. Both are
quiet unless stderr is a terminal and this is rank 0, and neither draws before
`delay` seconds have passed (a fast job leaves no trace). Thread-safe: kernels
compiling on the background pool advance the bar as they finish.
"""
from __future__ import annotations

import sys
import threading
import time

from . import config


def wanted(stream=None) -> bool:
    """Draw bars here? Only on a terminal, and only on rank 0."""
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and config.launch().rank == 0


class Progress:
    """`bar = Progress(total, "hostir: compiling"); bar.update(); bar.close()`.
    `total` may grow (`add_total`) while work is added."""

    def __init__(self, total: int = 0, desc: str = "", delay: float = 0.5, stream=None,
                 force: bool | None = None):
        self.total, self.done, self.desc, self.delay = total, 0, desc, delay
        self.stream = stream if stream is not None else sys.stderr
        self.active = wanted(self.stream) if force is None else force
        self.started = time.perf_counter()
        self._lock = threading.Lock()
        self._tqdm = None
        self._drawn = False
        if self.active:
            try:
                from tqdm import tqdm
            except ImportError:
                return
            self._tqdm = tqdm(total=total, desc=desc, file=self.stream, delay=delay, leave=False,
                              dynamic_ncols=True)

    def add_total(self, n: int = 1) -> None:
        with self._lock:
            self.total += n
            if self._tqdm is not None:
                self._tqdm.total = self.total
                self._tqdm.refresh()

    def set_description(self, desc: str) -> None:
        with self._lock:
            self.desc = desc
            if self._tqdm is not None:
                self._tqdm.set_description(desc)

    def update(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            if self._tqdm is not None:
                self._tqdm.update(n)
            elif self.active:
                self._draw()

    def _draw(self) -> None:
        elapsed = time.perf_counter() - self.started
        if elapsed < self.delay:
            return
        width = 24
        filled = width * self.done // self.total if self.total else 0
        bar = "#" * filled + "." * (width - filled)
        self.stream.write(f"\r{self.desc} [{bar}] {self.done}/{self.total} {elapsed:.1f}s\x1b[K")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        with self._lock:
            if self._tqdm is not None:
                self._tqdm.close()
                self._tqdm = None
            elif self._drawn:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
            self.active = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def track(items, desc: str = "", total: int | None = None, **kwargs):
    """Iterate over `items`, advancing a bar."""
    items = list(items) if total is None and not hasattr(items, "__len__") else items
    bar = Progress(len(items) if total is None else total, desc, **kwargs)
    try:
        for item in items:
            yield item
            bar.update()
    finally:
        bar.close()
