"""What a launch's tensors allow a kernel's variant: vectors (aligned, or
shifted to the boundaries of rows that start off them), thread-block
clusters. spec.py's launch rules ask these at a launch, never per call."""
from __future__ import annotations

import functools

from . import rows
from .cuda import vector_loads
from .kir import Kernel
from .row_loads import cached_loads, kept_weights, row_invariant_loads


def _cuda_index(tensors) -> int | None:
    """The index of the CUDA device the first CUDA tensor of these is on (the
    current device where it names none); None where none is on CUDA."""
    for t in tensors:
        dev = getattr(t, "device", None)
        if dev is not None and dev.type == "cuda":
            if dev.index is not None:
                return dev.index
            import torch
            return torch.cuda.current_device()
    return None


@functools.cache
def _device_clusters(index: int) -> bool:
    import torch
    return torch.cuda.get_device_capability(index)[0] >= 9


@functools.cache
def device_sms(index: int) -> int:
    """The SMs of CUDA device `index` (runtime.launch.sm_count asks here too)."""
    import torch
    return torch.cuda.get_device_properties(index).multi_processor_count


def launches_clusters(tensors) -> bool:
    """Does the CUDA device these tensors are on launch thread-block clusters
    (compute capability 9.0 and later)? False off CUDA."""
    index = _cuda_index(tensors)
    return index is not None and _device_clusters(index)


def launch_sms(tensors, default: int = 132) -> int:
    """The SMs of the CUDA device these tensors are on (`default` off CUDA:
    an H100's, so a CPU run picks the variants an H100 would)."""
    index = _cuda_index(tensors)
    return default if index is None else device_sms(index)


def vector_slots(kernel: Kernel, vec: int, moving: bool = False, points: bool = False) -> frozenset:
    """The inputs a kernel reads with vector loads of `vec` points (`moving`:
    only loads whose place moves with the kept dims, not a weight every row
    reads; `points`: at width 1 too, cuda.vector_loads)."""
    loads = vector_loads(kernel, vec, points)
    if moving:
        loads = loads - row_invariant_loads(kernel)
    return frozenset(n.arg for n in kernel.order if id(n) in loads)


def _starts_aligned(t, vec: int) -> bool:
    """Is tensor `t` contiguous along its innermost dim from a boundary of
    vectors of `vec` points?"""
    return t.ndim > 0 and t.stride(-1) == 1 and t.data_ptr() % (vec * t.element_size()) == 0


def keep_weights_ok(kernel: Kernel, vec: int, ins: list) -> bool:
    """Can a shifted variant keep what every row reads in shared memory
    (rows.KEEP_WEIGHTS): is each such weight contiguous along the row from a
    vector boundary (placed from aligned vector loads; the last vector stays
    within the 16-byte line of the weight's last point)?"""
    return all(_starts_aligned(ins[n.arg], vec) for n in kept_weights(kernel, vec))


def vector_ok(vec: int, tensors: list, extents: list[int]) -> bool:
    """Can every point of a launch's rows be read and written in vectors of
    `vec` (the innermost extent and every stepped stride a multiple of it,
    each tensor contiguous along the row from a boundary)?"""
    if not extents or extents[-1] % vec:
        return False
    for t in tensors:
        if not _starts_aligned(t, vec):
            return False
        if any(st % vec for st, n in zip(t.stride()[:-1], t.shape[:-1]) if n > 1):  # (size 1: never stepped)
            return False
    return True


def funnel_load(kernel: Kernel, node, vec: int) -> bool:
    """Is this load every row reads alike read in 16-byte vectors of `vec`
    points, or 8-byte ones (row_widths.HALF_SHIFT_POINTS), so a shifted row can take
    it funnel-shifted from two aligned ones (cuda_row_shift, rows.FUNNEL_WEIGHTS)?"""
    return kernel.inputs[node.arg].dtype.itemsize * vec in (8, 16)


def funnel_slots(kernel: Kernel, vec: int) -> frozenset:
    """The inputs a shifted variant would read funnel-shifted (rows.FUNNEL_WEIGHTS,
    spec.Variant.funnel: where their vectors start at boundaries)."""
    loads = vector_loads(kernel, vec) & row_invariant_loads(kernel)
    return frozenset(n.arg for n in kernel.order if id(n) in loads and funnel_load(kernel, n, vec))


def shift_possible(kernel: Kernel, vec: int, extents: list[int], enabled: bool = True) -> bool:
    """shift_ok's rules that the kernel and the extents decide (the tensors'
    strides and alignment aside): one reduced dim, the innermost; rows not
    empty (a vector before the start would be read); a vector load of the rows
    to read the shift off; what every row reads alike read a point at a time."""
    if not enabled or vec == 1 or list(kernel.reduced) != [len(kernel.extent_vals) - 1] or not extents[-1]:
        return False
    loads, invariant = vector_loads(kernel, vec), row_invariant_loads(kernel)
    if not loads - invariant:
        return False
    return not (loads & invariant) or (rows.SHIFTED_WEIGHTS and
                                       not invariant & {id(n) for n in cached_loads(kernel, vec)})


def shift_ok(kernel: Kernel, vec: int, tensors: list, extents: list[int], enabled: bool = True) -> bool:
    """Can rows of one reduced (innermost) dim that start off a vector boundary,
    or whose length is no multiple of `vec`, be read in vectors at the
    boundaries (a shifted variant: cuda_schedules, `shift`)? Every row-moving
    vector tensor is contiguous along the row, starts at a boundary, and steps
    the kept dims by the same strides in points (so every row starts equally
    far past a boundary in each: `tensors` are those, vector_slots(moving=True),
    and the outputs); some vector load reads the rows. A load every row reads
    alike (a weight) would be read off its boundaries: such kernels are refused,
    unless rows.SHIFTED_WEIGHTS reads those a point at a time (where no pass
    keeps them; funnel-shifted where their vectors start at boundaries:
    spec.Variant.funnel). A vector past a row's ends stays within the 16-byte line of a
    point of the row (never past a page). H100 % of copy, same run, a point at a time ->
    shifted: softmax bf16 4096x50257 55.3 -> 85.7, log-softmax 57.3 -> 91.0,
    softmax fp32 59.6 -> 78.3, softmax bf16 16384x1027 46.3 -> 55.1."""
    if not tensors or not shift_possible(kernel, vec, extents, enabled):
        return False
    strides = None
    for t in tensors:
        if not _starts_aligned(t, vec):
            return False
        kept = tuple(st for st, n in zip(t.stride()[:-1], t.shape[:-1]) if n > 1)
        if strides is not None and kept != strides:
            return False
        strides = kept
    return True
