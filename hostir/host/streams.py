"""The stream pool a host program runs on. On CPU every operation is a no-op
(ordering is program order); on CUDA stream 0 is the stream current when the
program starts, and others are created on first use."""
from __future__ import annotations

import torch

from ..runtime.launch import current_stream_handle


class StreamPool:
    def __init__(self, device: torch.device):
        self.active = device.type == "cuda"
        self.device = device
        self.current = 0
        self._handle = None
        self.streams = None  # made on the first stream switch; most programs never switch

    @property
    def handle(self) -> int | None:
        """Raw handle of the stream launches go to now (None on CPU)."""
        if self._handle is None and self.active:
            self._handle = current_stream_handle(self.device)
        return self._handle

    def _ensure(self) -> None:
        if self.streams is None:
            self.main = torch.cuda.current_stream(self.device)
            self.streams = {0: self.main}

    def _get(self, k: int):
        s = self.streams.get(k)
        if s is None:
            s = torch.cuda.Stream(self.device)
            # work queued before the program (e.g. what made its inputs) comes first
            s.wait_stream(self.main)
            self.streams[k] = s
        return s

    def set_current(self, k: int) -> None:
        if not self.active:
            return
        self._ensure()
        s = self._get(k)
        torch.cuda.set_stream(s)
        self.current = k
        self._handle = s.cuda_stream

    def wait_for(self, k: int) -> None:
        """The current stream waits for everything queued so far on stream k."""
        if not self.active or k == self.current:
            return
        self._ensure()
        ev = torch.cuda.Event()
        ev.record(self._get(k))
        self.streams[self.current].wait_event(ev)

    def record_inputs(self, args) -> None:
        """Tensors used on a side stream must not be reused by the allocator early."""
        if self.current == 0 or self.streams is None:
            return
        s = self.streams[self.current]
        for a in args:
            if isinstance(a, torch.Tensor) and a.is_cuda:
                a.record_stream(s)

    def finish(self) -> None:
        """Back on the main stream, which waits for every other stream."""
        if not self.active or self.streams is None:
            return
        torch.cuda.set_stream(self.main)
        self.current = 0
        self._handle = None
        for k in list(self.streams):
            if k != 0:
                self.wait_for(k)
