"""CUDA-graph replay of host programs whose calls repeat exactly.

A host program is deterministic in its inputs: the same input pointers,
layouts and scalar values give the same launches with the same arguments, in
every loop iteration included. So after a key (those inputs) has run eagerly
twice (plans made, kernels compiled, direct runners built), its third call is
captured into a CUDA graph, and every later call with that key replays the
graph: one graph launch instead of one Python launch per kernel.

What a replay returns is what an eager call would: an output that is an
input is the caller's tensor; a view of an input is a new view of the same
memory; an output the program allocated is copied out of the graph's memory
pool into a fresh tensor (a later replay writes the pool again).

Programs with collectives are captured only on NCCL; programs that failed to
capture once are not captured again (the error is kept in `error`). HOSTIR_DISABLE=cuda_graphs turns
replay off.

A capture (once per key, a few milliseconds) uses thread-local capture mode, so
other threads' CUDA work goes on meanwhile; but torch refuses CUDA random
numbers drawn by another thread while any graph is being captured. A program
whose process draws GPU random numbers from several threads should turn
replay off.
"""
from __future__ import annotations

import torch

from .. import config
from ..dist.communicator import Communicator
from ..ir.node import Op
from . import ir as H
from . import tracing

CAPTURE_AFTER = 2   # eager runs of a key before its next call is captured
MAX_GRAPHS = 4      # graphs kept per program (each holds its memory pool)
MAX_SEEN = 64       # keys counted per program
CLONE_LIMIT = 64 << 20  # bytes of allocated outputs a replay may copy out


def has_communication(body) -> bool:
    for s in body:
        if isinstance(s, (H.Communication, H.Wait)):
            return True
        if isinstance(s, (H.ForLoop, H.OnRanks)) and has_communication(s.body):
            return True
    return False


def _shapes_travel(body) -> bool:
    return any((isinstance(s, H.Communication) and s.with_shape) or _shapes_travel(getattr(s, "body", ()))
               for s in body)


def capturable(body) -> bool:
    """Can a CUDA graph hold these statements? Collectives only on NCCL (their
    kernels go into the graph, and every rank replays its own in the same order
    as an eager call would run them); gloo and MPI wait on the host, and so
    does a rank that receives a shape (`with_shape`) before the data."""
    if not has_communication(body):
        return True
    return Communicator.instance().name == "nccl" and not _shapes_travel(body)


def graph_key(params, inputs) -> tuple:
    """What a call's launches depend on: each tensor input's memory and layout,
    each scalar input's value (a 0-d tensor given for a scalar counts by value)."""
    key = []
    for v, a in zip(params, inputs):
        if v.op is Op.TENSOR_INPUT:
            key.append((a.data_ptr(), a.shape, a.stride(), a.dtype, a.device))
        else:
            key.append((type(a), a.item() if isinstance(a, torch.Tensor) else a))
    return tuple(key)


def work_items(body) -> int:
    """Launches and collectives a call runs (a loop counts as many)."""
    n = 0
    for s in body:
        if isinstance(s, (H.LaunchKernel, H.Communication)):
            n += 1
        elif isinstance(s, H.ForLoop):
            n += 2
        elif isinstance(s, H.OnRanks):
            n += work_items(s.body)
    return n


class GraphCache:
    def __init__(self, body):
        # one launch or collective: a replay saves no host time, yet copies the output
        # (and under HOSTIR_TRACE each launch is traced as it runs: no replay)
        self.enabled = capturable(body) and work_items(body) > 1 and tracing.tracer() is None
        self.nvtx = config.enabled("nvtx")
        self.error: BaseException | None = None
        self.seen: dict[tuple, int] = {}
        self.graphs: dict[tuple, tuple] = {}
        self.too_big: set = set()  # keys whose outputs cost more to copy out than a replay saves
        self.replays = 0

    def replay(self, key: tuple, inputs) -> list | None:
        got = self.graphs.get(key)
        if got is None:
            return None
        graph, outs = got
        if self.nvtx:
            torch.cuda.nvtx.range_push("hostir: graph replay")
        try:
            graph.replay()
        finally:
            if self.nvtx:
                torch.cuda.nvtx.range_pop()
        self.replays += 1
        return [_result(kind, x, inputs) for kind, x in outs]

    def wants_capture(self, key: tuple) -> bool:
        """Counts an eager run of `key`; True when this call should be captured."""
        if not self.enabled or len(self.graphs) >= MAX_GRAPHS or key in self.too_big:
            return False
        n = self.seen.get(key, 0)
        if n >= CAPTURE_AFTER:
            return True
        if len(self.seen) >= MAX_SEEN:
            self.seen.clear()
        self.seen[key] = n + 1
        return False

    def note_outputs(self, key: tuple, outputs, inputs) -> None:
        """After an eager run: a replay copies the outputs the program allocated out
        of the graph's pool; where that copy would take longer than a replay saves
        on the host (CLONE_LIMIT bytes, about 40 us at H100/H200 bandwidth), the
        key is never captured."""
        ptrs = {a.untyped_storage().data_ptr() for a in inputs if isinstance(a, torch.Tensor)}
        size = sum(o.numel() * o.element_size() for o in outputs
                   if o.untyped_storage().data_ptr() not in ptrs)
        if size > CLONE_LIMIT:
            if len(self.too_big) >= MAX_SEEN:
                self.too_big.clear()
            self.too_big.add(key)

    def capture(self, key: tuple, run, inputs) -> list | None:
        """Capture run() (which returns the output tensors) and replay it once;
        None (and replay off for good) when the program cannot be captured."""
        graph = torch.cuda.CUDAGraph()
        try:
            # thread_local: other threads' CUDA calls stay legal while this one captures
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                static = run()
        except Exception as e:  # e.g. an op that synchronizes with the host
            self.enabled = False
            self.error = e
            self.seen.clear()
            return None
        self.seen.pop(key, None)
        outs = [_classify(o, inputs) for o in static]
        self.graphs[key] = (graph, outs)
        return self.replay(key, inputs)


def _classify(o: torch.Tensor, inputs) -> tuple:
    for i, a in enumerate(inputs):
        if o is a:
            return ("input", i)
    ptr = o.untyped_storage().data_ptr()
    for i, a in enumerate(inputs):
        if isinstance(a, torch.Tensor) and a.untyped_storage().data_ptr() == ptr:
            return ("view", (i, tuple(o.shape), tuple(o.stride()),
                             o.storage_offset() - a.storage_offset()))
    return ("pool", o)


def _result(kind: str, x, inputs) -> torch.Tensor:
    if kind == "input":
        return inputs[x]
    if kind == "view":
        i, shape, stride, offset = x
        a = inputs[i]
        return a.as_strided(shape, stride, a.storage_offset() + offset)
    return x.clone()
