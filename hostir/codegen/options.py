"""The options a generated kernel is made with (KernelOptions, read from
config when a plan is made) and the macros they set in its source
(`defines`, which kernels/hostir.cuh reads)."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from .. import config
from .cuda import NARROW
from .kir import Kernel


@dataclass(frozen=True)
class KernelOptions:
    """Knobs of generated kernels, read from config when a plan is made."""

    block: int = 256           # threads per block
    streaming: bool = False    # evict-first 16-byte stores
    pdl: bool = True           # programmatic dependent launch (griddepcontrol)
    grid_stride: bool = False  # cap the grid at 32 blocks per SM and loop
    pairing: bool = True       # paired lanes where they read less
    fast_math: bool = False    # approximate exp, log and float division (HIR_FAST_MATH)
    narrow_math: bool = True   # approximate float exp and division where every output is narrow
    check_indices: bool = False  # gathers check their index values (HOSTIR_DEBUG=indices)
    online: bool = True        # an online-softmax kernel for rows the persistent one does not hold
    smem_rows: bool = True     # long rows of a normalization kept in shared memory
    clusters: bool = True      # ... and longer rows split over thread-block clusters
    shifted_rows: bool = True  # rows off vector boundaries read in vectors at the boundaries

    @classmethod
    def from_config(cls) -> "KernelOptions":
        c = config.get()
        return cls(block=c.block, streaming=c.streaming, pdl="pdl" not in c.disable,
                   grid_stride="grid_stride" in c.enable, pairing="paired_lanes" not in c.disable,
                   fast_math="fast_math" in c.enable, narrow_math="narrow_math" not in c.disable,
                   check_indices="indices" in c.debug,
                   online="online_softmax" not in c.disable, smem_rows="smem_rows" not in c.disable,
                   clusters="clusters" not in c.disable, shifted_rows="shifted_rows" not in c.disable)


def defines(o: KernelOptions, kernel: Kernel | None = None) -> str:
    """The macros a kernel's options set in its source (kernels/hostir.cuh reads
    them), and the float8 overflow rule of the torch this process runs with.
    HIR_NARROW_MATH where every output of `kernel` is a narrow float (half,
    bfloat16, float8): its float exp and division take the hardware's
    approximations (ex2.approx of x log2 e: relative error under 1e-5 up to
    |x| = 88; div.full: 2 ulp of float), a hundred times and more finer than
    the outputs' rounding, subnormals and the full range kept. H100 bf16
    softmax, % of copy, precise / narrow math (torch.compile), same run:
    32768x2560 84.5 / 92.7 (34.1), 16384x9216 83.0 / 92.1 (50.4), 2048x49152
    72.9 / 82.1 (62.2), 4096x65536 79.9 / 85.9 (60.0), 16384x16384 85.1 /
    89.0 (62.9), 65536x1024 85.8 / 94.7 (91.7); 32768x4096 93.8 / 92.1
    (57.4). The outputs' largest difference from torch eager is unchanged."""
    narrow = (o.narrow_math and kernel is not None and kernel.outputs
              and all(t.dtype in NARROW for t in kernel.outputs))
    return (("#define HIR_FAST_MATH 1\n" if o.fast_math else "")
            + ("#define HIR_NARROW_MATH 1\n" if narrow else "")
            + ("#define HIR_CHECK_INDICES 1\n" if o.check_indices else "")
            + ("#define HIR_FP8_E4M3_OVERFLOW_NAN 1\n" if e4m3_overflow_is_nan() else ""))


@functools.cache
def e4m3_overflow_is_nan() -> bool:
    """Does this torch turn a float past Float8_e4m3fn's range into NaN (torch
    before 2.12) rather than saturate it to 448 (later)? Kernels follow it."""
    import torch
    dt = getattr(torch, "float8_e4m3fn", None)
    return dt is not None and torch.tensor([470.0]).to(dt).view(torch.uint8).item() == 0x7F
