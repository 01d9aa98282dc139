"""Where a long-row kernel's time goes, from timestamps its CTAs write
(codegen rows.STAMPS: each row's start, first barrier and end by %globaltimer,
and its SM), for one call alone and for the last of `--calls` back to back:
the SMs in use, each phase's time, the slots left idle between rows, how many
rows run at once over the call, the tail after most rows have ended.

    python benchmarks/timeline.py "log-softmax fp16 458x146480" [--calls 20] [rows.CLUSTER_DRAWN=False ...]

Settings as knobs.py's `--set` (one value each) follow the case. Only kernels
whose rows take a block or a cluster each stamp (the long rows' kernels). The
stamps are extra stores and another variant's source: time kernels without
them (knobs.py); these times are for the shape of the call, not its speed."""
from __future__ import annotations

import argparse
import gc
import re
import statistics
import sys
import warnings
from contextlib import ExitStack
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import reduction_shapes  # noqa: E402
from knobs import parse_setting, setting  # noqa: E402


def summarize(records: list[tuple[int, int, int, int, int]], bins: int = 24) -> list[str]:
    """Lines describing a call from its rows' records (start, first barrier,
    end in ns, SM, block; barrier 0 where the row had none)."""
    if not records:
        return ["no stamps (no kernel of this call takes a block or a cluster a row)"]
    t0 = min(r[0] for r in records)
    us = [((s - t0) / 1e3, ((b - t0) / 1e3 if b else None), (e - t0) / 1e3, sm, blk)
          for s, b, e, sm, blk in records]
    span = max(u[2] for u in us)
    ends = sorted(u[2] for u in us)
    life = [e - s for s, _, e, _, _ in us]
    out = [f"{len(us)} rows' CTAs over {span:.1f} us on {len({u[3] for u in us})} SMs "
           f"({len({u[4] for u in us})} blocks); {sum(life) / span:.1f} at once on average"]
    split = [(b - s, e - b) for s, b, e, _, _ in us if b is not None]
    if split:
        out.append(f"a row: start to first barrier {statistics.median(a for a, _ in split):.2f} us, "
                   f"first barrier to end {statistics.median(b for _, b in split):.2f} us (medians)")
    out.append(f"a row's CTA: {statistics.median(life):.2f} us (median), {max(life):.2f} at most")
    out.append(f"the last row ended {span - ends[int(0.9 * (len(ends) - 1))]:.2f} us after 90 % of them")
    by_block: dict[int, list] = {}
    by_sm: dict[int, list] = {}
    for s, _, e, sm, blk in us:
        by_block.setdefault(blk, []).append((s, e))
        by_sm.setdefault(sm, []).append((s, e))
    between = [b[0] - a[1] for rows in by_block.values() for a, b in zip(sorted(rows), sorted(rows)[1:])]
    if between:
        out.append(f"a block's next row started {statistics.median(between):.2f} us after its last "
                   f"ended (median; blocks that take several rows)")
    refill, busy = [], []
    for rows in by_sm.values():
        rows.sort()
        covered, reach = 0.0, 0.0
        for s, e in rows:  # (the union of the SM's rows)
            covered += max(0.0, e - max(s, reach))
            reach = max(reach, e)
        busy.append(covered / span)
        for s, e in rows:  # the next row to start on this SM after this one ended
            later = [s2 for s2, _ in rows if s2 >= e]
            if later:
                refill.append(min(later) - e)
    out.append(f"an SM busy {100 * statistics.median(busy):.0f} % of the call (median; least "
               f"{100 * min(busy):.0f} %)")
    if refill:
        q = sorted(refill)
        out.append(f"an SM's next row started {statistics.median(q):.2f} us after one ended "
                   f"(median; 90th percentile {q[int(0.9 * (len(q) - 1))]:.2f})")
    width = span / bins
    counts = [sum(1 for s, _, e, _, _ in us if s < (i + 1) * width and e > i * width) for i in range(bins)]
    out.append(f"rows at once, {bins} steps of {width:.1f} us: " + " ".join(map(str, counts)))
    return out


def stamped_kernels() -> list:
    """The loaded kernels whose source writes stamps."""
    from hostir.runtime.launch import CompiledKernel
    with warnings.catch_warnings():  # (isinstance on every object wakes deprecated aliases)
        warnings.simplefilter("ignore")
        return [o for o in gc.get_objects()
                if isinstance(o, CompiledKernel) and o._modules and "HIR_STAMPS" in o.source]


def read_stamps(kernel, clear: bool = False) -> list[tuple[int, int, int, int, int]]:
    """A stamped kernel's records (those a launch wrote), or zero them."""
    from hostir.runtime.launch import _driver, check
    cu = _driver()
    module = kernel._modules[torch.cuda.current_device()]
    ptr, size = check(cu.cuModuleGetGlobal(module, b"hir_stamps"), "cuModuleGetGlobal(hir_stamps)")
    if clear:
        check(cu.cuMemsetD8(ptr, 0, size), "cuMemsetD8(hir_stamps)")
        return []
    words = torch.empty(size // 8, dtype=torch.int64)
    check(cu.cuMemcpyDtoH(words.data_ptr(), ptr, size), "cuMemcpyDtoH(hir_stamps)")
    w = words.view(-1, 4).tolist()
    return [(s, b, e, info >> 32, info & 0xffffffff) for s, b, e, info in w if e]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("case", help='a case by name ("softmax fp32 671x100000") or a regex of the sweep\'s')
    ap.add_argument("settings", nargs="*", help="MODULE.NAME=V (as knobs.py's --set, one value)")
    ap.add_argument("--calls", type=int, default=20, help="calls back to back before the second read")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("timeline.py reads stamps that kernels write on a GPU")
    case = reduction_shapes.by_name(args.case) or next(
        (c for c in reduction_shapes.cases(1 << 26, None) if re.search(args.case, c[0])), None)
    if case is None:
        raise SystemExit(f"no case matches {args.case!r}")
    name, fd, _, make_inputs, _ = case
    inputs = make_inputs(torch.device("cuda"))
    with ExitStack() as stack:
        stack.enter_context(setting("rows.STAMPS", True))
        for key, values in (parse_setting(a) for a in args.settings):
            stack.enter_context(setting(key, values[0]))
        fd.execute(inputs)  # (the plan's first call picks the variants: stamped)
    torch.cuda.synchronize()
    kernels = stamped_kernels()
    for mode, calls in (("one call alone", 1), (f"the last of {args.calls} back to back", args.calls)):
        for k in kernels:
            read_stamps(k, clear=True)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            fd.execute(inputs)
        b.record()
        b.synchronize()
        print(f"## {name}, {mode}: {a.elapsed_time(b) * 1e3 / calls:.1f} us a call (events)", flush=True)
        for k in kernels:
            print(f"{k.name}:")
            for line in summarize(read_stamps(k)):
                print("  " + line)
        if not kernels:
            print("  " + summarize([])[0])


if __name__ == "__main__":
    main()
