"""CUDA-graph replay of host programs whose calls repeat exactly.

A host program is deterministic in its inputs: the same input pointers,
layouts and scalar values give the same launches with the same arguments, in
every loop iteration included. So after a key (those inputs) has run eagerly
twice (plans made, kernels compiled, direct runners built), its third call is
captured into a CUDA graph, and every later call with that key replays the
graph: one graph launch instead of one Python launch per kernel.

What a replay returns is what an eager call would: an output that is an
input is the caller's tensor; a view of an input is a new view of the same
memory; an output the program allocated is a new tensor on the graph's memory
pool, which a later replay of that graph writes again. So a graph is replayed
only once the caller has let go of what its last replay returned (no tensor
or view of it alive: the storage's use count tells); while the caller holds
it, another graph of the same key is captured (up to ROTATION a key) or the
call runs eagerly. Nothing is copied out of a pool: a training loop that
drops each step's outputs replays one graph; one that keeps the last step's
alternates between two.

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
MAX_GRAPHS = 6      # graphs kept per program (each holds its memory pool)
ROTATION = 3        # graphs per key (a replay needs one whose outputs the caller let go)
MAX_SEEN = 64       # keys counted per program
_use_count = getattr(torch._C, "_storage_Use_Count", None)  # torch's: tensors on a storage


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
        # a program of one launch: a replay saves no host time; a single collective's
        # replay does (its Python call costs more than a graph launch). Under
        # HOSTIR_TRACE each launch is traced as it runs: no replay.
        self.enabled = (capturable(body) and (work_items(body) > 1 or has_communication(body))
                        and tracing.tracer() is None)
        self.nvtx = config.enabled("nvtx")
        self.error: BaseException | None = None
        self.seen: dict[tuple, int] = {}
        self.graphs: dict[tuple, list] = {}  # key -> [(graph, outputs)], ROTATION at most
        self.count = 0
        self.replays = 0

    def replay(self, key: tuple, inputs) -> list | None:
        """Replay a graph of `key` whose last outputs nobody holds; None when
        there is none (the caller captures another or runs eagerly)."""
        for graph, outs in self.graphs.get(key, ()):
            if _released(outs):
                return self._replay(graph, outs, inputs)
        return None

    def _replay(self, graph, outs, inputs) -> list:
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
        """Counts an eager run of `key`; True when this call should be captured
        (its third, or a call whose graphs all have outputs still held)."""
        if not self.enabled or self.count >= MAX_GRAPHS:
            return False
        held = self.graphs.get(key)
        if held:
            return len(held) < ROTATION
        n = self.seen.get(key, 0)
        if n >= CAPTURE_AFTER:
            return True
        if len(self.seen) >= MAX_SEEN:
            self.seen.clear()
        self.seen[key] = n + 1
        return False

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
        del static
        self.graphs.setdefault(key, []).append((graph, outs))
        self.count += 1
        # (the call's own environment still holds the outputs: replayed as captured)
        return self._replay(graph, outs, inputs)


def _released(outs) -> bool:
    """Whether no tensor but ours uses the storage of a pool output (the
    caller dropped what the last replay returned, views of it included)."""
    if _use_count is None:  # no way to tell: every replay copies its outputs out
        return True
    ours: dict[int, int] = {}
    for kind, x in outs:
        if kind == "pool":
            ptr = x.untyped_storage().data_ptr()
            ours[ptr] = ours.get(ptr, 0) + 1
    for kind, x in outs:
        if kind == "pool":
            storage = x.untyped_storage()  # (this handle counts once too)
            if _use_count(storage._cdata) > ours[storage.data_ptr()] + 1:
                return False
    return True


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
    if _use_count is None:
        return x.clone()
    return x.as_strided(x.shape, x.stride(), x.storage_offset())  # a new tensor on the pool
