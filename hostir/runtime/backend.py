"""Backends that run a `KernelSpec`'s kernels: CUDA (NVRTC cubin, launched with
arguments packed once in C storage) and, for CPU tensors, the kernel-IR
interpreter. Both pack the same argument list (the kernel's layout) and return
a `Prepared` launch that later calls with the same input signature reuse,
rewriting only data pointers and scalar-input values."""
from __future__ import annotations

import threading
import weakref

import torch

from .. import config
from ..codegen.interpret import interpret
from ..codegen.kir import Kernel, pack
from ..codegen.spec import KernelSpec, Variant
from ..ir.node import Op
from .launch import I32, I64, PTR, CompiledKernel, PackedArgs, arch_of, param_ctype, sm_count
from .nvrtc import prefetch as nvrtc_prefetch

_compiled: "weakref.WeakKeyDictionary[Variant, CompiledKernel]" = weakref.WeakKeyDictionary()
_compiled_lock = threading.Lock()


def compiled(variant: Variant) -> CompiledKernel:
    """The loadable kernel of `variant` (compiled with NVRTC on first use)."""
    got = _compiled.get(variant)
    if got is None:
        with _compiled_lock:
            got = _compiled.get(variant)
            if got is None:
                got = _compiled[variant] = CompiledKernel(variant.name, variant.source,
                                                         pdl=variant.options.pdl, smem=variant.smem,
                                                         cluster=variant.cluster)
    return got


class Prepared:
    """A kernel launch fixed at its signature's first call: the output shapes
    and the packed arguments, of which a call rewrites the data pointers and
    the values of `dyn` (scalar-input parameters, in `dyn`'s order)."""

    __slots__ = ("outs", "alloc", "dyn", "in_pos", "out_pos", "dyn_pos", "lock")

    def __init__(self, spec: KernelSpec, kernel: Kernel, outs: list):
        self.outs = [(kt.val, list(t.shape), t.dtype) for kt, t in zip(kernel.outputs, outs)]
        # new_empty on an empty tensor of the output's dtype and device: cheaper than
        # torch.empty(shape, dtype=, device=), whose keyword parsing costs more than the
        # allocation (a tuple shape parses faster than a list)
        self.alloc = [(t.new_empty(0), tuple(t.shape)) for t in outs]
        self.in_pos = spec.positions(kernel, "in")
        self.out_pos = spec.positions(kernel, "out")
        # scalar inputs may change between calls of one signature (extents may not)
        params = zip(spec.positions(kernel, "param"), kernel.params)
        dyn = [(i, v) for i, v in params if v.op is Op.SCALAR_INPUT]
        self.dyn = [v for _, v in dyn]
        self.dyn_pos = [i for i, _ in dyn]
        self.lock = threading.Lock()  # the packed arguments are shared: one launch at a time

    def empty_outputs(self) -> list:
        return [t.new_empty(shape) for t, shape in self.alloc]

    def run(self, ins: list, outs: list, scalars: list, stream) -> None:
        raise NotImplementedError


class CudaLaunch(Prepared):
    __slots__ = ("variant", "grid", "packed", "launcher", "in_objs", "out_objs", "dyn_objs",
                 "scratch", "scratch_objs", "scratch_bufs")

    def __init__(self, spec, kernel, outs, variant, grid, packed, launcher, scratch=None):
        super().__init__(spec, kernel, outs)
        self.variant, self.grid, self.packed, self.launcher = variant, grid, packed, launcher
        objs = packed.objs
        self.in_objs = [objs[i] for i in self.in_pos]
        self.out_objs = [objs[i] for i in self.out_pos]
        self.dyn_objs = [objs[i] for i in self.dyn_pos]
        # a split reduction's or chained scan's (workspace bytes, counters, device):
        # buffers kept per stream (launches on one stream are ordered; the kernel leaves
        # its counters ready for the next launch), so concurrent launches on other
        # streams never share them and no call pays a memset
        self.scratch = scratch
        self.scratch_bufs: dict = {}
        self.scratch_objs = [objs[i] for i in spec.positions(kernel, "ws") + spec.positions(kernel, "sem")]

    def run(self, ins: list, outs: list, scalars: list, stream) -> None:
        if self.launcher is None:  # nothing to compute (an empty iteration space)
            return
        with self.lock:
            for o, t in zip(self.in_objs, ins):
                o.value = t.data_ptr()
            for o, t in zip(self.out_objs, outs):
                o.value = t.data_ptr()
            for o, x in zip(self.dyn_objs, scalars):
                o.value = x
            if self.scratch is not None:
                self.bind_scratch(stream)
            self.launcher(stream, self.packed)

    def bind_scratch(self, stream) -> None:
        """Point the launch at `stream`'s scratch buffers (made, zeroed, at the
        stream's first launch). The caller holds the lock."""
        bufs = self.scratch_bufs.get(stream)
        if bufs is None:
            bufs = self.scratch_bufs[stream] = _scratch(*self.scratch)
        for o, t in zip(self.scratch_objs, bufs):
            o.value = t.data_ptr()


class InterpretedLaunch(Prepared):
    __slots__ = ("kernel", "slots", "values")

    def __init__(self, spec, kernel, outs, values):
        super().__init__(spec, kernel, outs)
        self.kernel, self.slots, self.values = kernel, spec.layout(kernel), values

    def run(self, ins: list, outs: list, scalars: list, stream) -> None:
        with self.lock:
            values = self.values
            for i, t in zip(self.in_pos, ins):
                values[i] = t
            for i, t in zip(self.out_pos, outs):
                values[i] = t
            for i, x in zip(self.dyn_pos, scalars):
                values[i] = x
            interpret(self.kernel, self.slots, values)
            self.release()

    def release(self) -> None:
        """Drop the call's tensors (the packed list must not keep them alive)."""
        for i in (*self.in_pos, *self.out_pos):
            self.values[i] = None


def _types(slots, kernel: Kernel, idx: str) -> list:
    it = I32 if idx == "int" else I64
    return [PTR if s.kind in ("in", "out", "ws", "sem") else param_ctype(kernel.params[s.index].dtype)
            if s.kind == "param" else it for s in slots]


def _scratch(nbytes: int, counters: int, device) -> tuple:
    """A split reduction's workspace and its zeroed arrival counters (or drawn
    rows' ticket counter: KernelSpec.scratch_size)."""
    return (torch.empty(nbytes, dtype=torch.uint8, device=device),
            torch.zeros(counters, dtype=torch.int32, device=device))


def start(spec: KernelSpec, kernel: Kernel, extents: list[int], ins: list, outs: list,
          params: list, device: torch.device, stream) -> Prepared:
    """Launch `kernel` of `spec` over `extents` (on `stream`, a raw CUDA stream
    handle, for CUDA tensors; through the interpreter for CPU tensors) and
    return the prepared launch for later calls of the same signature."""
    slots = spec.layout(kernel)
    if device.type != "cuda":
        count = spec.count(kernel, extents, 1)
        values = pack(slots, ins, outs, params, extents, count, pointer=lambda t: t)
        prep = InterpretedLaunch(spec, kernel, outs, values)
        if count:
            interpret(kernel, slots, values)
        prep.release()
        return prep
    variant = spec.choose(kernel, extents, ins, outs, params)
    count = spec.count(kernel, extents, variant.vec, variant.tile)
    sms = sm_count(device)
    split = spec.split(variant, extents, sms)
    scratch = spec.scratch_size(variant, count, split)
    bufs = (None, None)
    if scratch is not None:
        scratch = (*scratch, device)
        bufs = _scratch(*scratch)
    values = pack(slots, ins, outs, params, extents, count, pointer=lambda t: t.data_ptr(),
                  scratch=(*bufs, split))
    packed = PackedArgs(values, _types(slots, kernel, variant.idx))
    launcher = None
    resident = 0
    if variant.cluster and count:
        resident = compiled(variant).resident_clusters(device, variant.block)
    elif (variant.held_rows or variant.drawn) and count:
        resident = compiled(variant).resident_blocks(device, variant.block) * sms
    grid = spec.grid(variant, count, sms, split, extents, resident)
    if count:
        launcher = compiled(variant).launcher(device, grid, variant.block)
        launcher(stream, packed)
        config.dump("launch", lambda: f"{spec.name}: {variant.name} grid={grid} "
                                      f"block={variant.block} extents={extents} "
                                      f"vector={variant.vec} index={variant.idx} split={split}")
    prep = CudaLaunch(spec, kernel, outs, variant, grid, packed, launcher, scratch)
    if scratch is not None:
        prep.scratch_bufs[stream] = bufs
    return prep


def prefetch(spec: KernelSpec, kernel: Kernel, extents: list[int], ins: list, params: list,
             device: torch.device) -> None:
    """Start compiling, on the background NVRTC pool, the variant a first launch
    of `kernel` (the spec's `kernel_for` choice) over `extents` with inputs
    `ins` will most likely use (the same rule as `start`), so that a plan's
    kernels compile in parallel."""
    if not spec.count(kernel, extents, 1):
        return
    variant = spec.choose(kernel, extents, ins, None, params)
    nvrtc_prefetch(variant.source, arch_of(device), variant.name)

