"""The run context of a host program: an Env (the values bound so far) with
what running needs besides the IR, owned by the host layer."""
from __future__ import annotations

import torch

from .. import config
from ..ir.env import Env


class RunContext(Env):
    """Values of one run, plus its stream pool (`pool`), the buffers the caller
    wants results written into (`out_buffers`: output Val -> tensor) and the
    bound plan whose prepared launches this run uses (`bound`, or None).
    Index values are checked on CPU always, on GPUs with HOSTIR_DEBUG=indices
    (as generated kernels check them)."""

    __slots__ = ("pool", "out_buffers", "bound")

    def __init__(self, device: torch.device, bound=None):
        super().__init__(device, device.type != "cuda" or config.debugging("indices"))
        self.pool = None
        self.out_buffers = None
        self.bound = bound

    def output(self, val, shape: list, dtype: torch.dtype) -> torch.Tensor:
        """The tensor a kernel writes `val` into: the caller's buffer when one was
        given for it (any strides; the kernel indexes through them), else a new one."""
        bufs = self.out_buffers
        if bufs:
            buf = bufs.get(val)
            if buf is not None and list(buf.shape) == shape and buf.dtype == dtype \
                    and buf.device == self.device:
                return buf
        return torch.empty(shape, dtype=dtype, device=self.device)
