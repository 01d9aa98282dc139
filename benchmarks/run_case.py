"""Run one reduction_shapes.py case (by regex) a few times: a target for a
profiler (`ncu --kernel-name regex:hir_ python benchmarks/run_case.py REGEX`).
Settings as knobs.py's `--set` (one value each) follow the call count:

    python benchmarks/run_case.py "softmax bf16 512x131072" 5 rows.ROW_DOUBLE=True

`--info` (anywhere) prints each kernel the calls loaded: its registers, spill
bytes and static shared memory a thread block, and the blocks an SM the
launches found (the compiler on the GPU's machine decides these). `--compile`
(anywhere) runs torch.compile's kernels of the case instead, to profile the
contender (`ncu --kernel-name regex:triton_ ...`). The first call (compiling,
autotuning) runs before the others, which run in the NVTX range "case":
`ncu --nvtx --nvtx-include "case/" ...` profiles a timed call's kernel, not
an autotuning trial's."""
from __future__ import annotations

import gc
import re
import sys
import warnings
from contextlib import ExitStack
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import reduction_shapes  # noqa: E402
from knobs import parse_setting, setting  # noqa: E402


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    info, contender = "--info" in argv, "--compile" in argv
    argv = [a for a in argv if a not in ("--info", "--compile")]
    pattern, calls = argv[0], int(argv[1]) if len(argv) > 1 else 5
    settings = [parse_setting(a) for a in argv[2:]]
    case = next((c for c in reduction_shapes.cases(1 << 26, None) if re.search(pattern, c[0])), None)
    case = case or reduction_shapes.by_name(pattern)  # (any shape, by its name: "layernorm bf16 379146x177")
    if case is None:
        raise SystemExit(f"no case matches {pattern!r}")
    name, fd, eager, make_inputs, _ = case
    inputs = make_inputs(torch.device("cuda"))
    if contender:
        compiled = torch.compile(eager, dynamic=False)
        compiled(*inputs)  # (compiles and autotunes outside the profiled range)
        _calls(lambda: compiled(*inputs), calls)
        print(name, "(torch.compile)", flush=True)
        return
    with ExitStack() as stack:
        for key, values in settings:
            stack.enter_context(setting(key, values[0]))
        fd.execute(inputs)
        _calls(lambda: fd.execute(inputs), calls)
    print(name, flush=True)
    if info:
        kernel_info()


def _calls(call, n: int) -> None:
    """`n` calls after the first within the NVTX range "case" (a profiler's
    filter: `ncu --nvtx --nvtx-include "case/"` skips compiling and
    autotuning launches)."""
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("case")
    for _ in range(n):
        call()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


def kernel_info() -> None:
    """Registers, spills, static shared memory and blocks an SM of every loaded kernel."""
    from hostir.runtime.launch import CompiledKernel, _driver
    cu = _driver()
    A = cu.CUfunction_attribute
    with warnings.catch_warnings():  # (isinstance on every object wakes deprecated aliases)
        warnings.simplefilter("ignore")
        kernels = [o for o in gc.get_objects() if isinstance(o, CompiledKernel) and o._funcs]
    for k in kernels:
        for f in k._funcs.values():
            regs = cu.cuFuncGetAttribute(A.CU_FUNC_ATTRIBUTE_NUM_REGS, f)[1]
            local = cu.cuFuncGetAttribute(A.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f)[1]
            smem = cu.cuFuncGetAttribute(A.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f)[1]
            resident = {key[1]: n for key, n in k._resident.items()}
            print(f"  {k.name}: {regs} registers, {local} bytes local, {smem} bytes static shared "
                  f"+ {k.smem} dynamic; resident (block: blocks or clusters) {resident}", flush=True)


if __name__ == "__main__":
    main()
