"""Run one reduction_shapes.py case (by regex) a few times: a target for a
profiler (`ncu --kernel-name regex:hir_ python benchmarks/run_case.py REGEX`).
Settings as knobs.py's `--set` (one value each) follow the call count:

    python benchmarks/run_case.py "softmax bf16 512x131072" 5 rows.ROW_DOUBLE=True"""
from __future__ import annotations

import re
import sys
from contextlib import ExitStack
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import reduction_shapes  # noqa: E402
from knobs import parse_setting, setting  # noqa: E402


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    pattern, calls = argv[0], int(argv[1]) if len(argv) > 1 else 5
    settings = [parse_setting(a) for a in argv[2:]]
    for name, fd, _, make_inputs, _ in reduction_shapes.cases(1 << 26, None):
        if re.search(pattern, name):
            inputs = make_inputs(torch.device("cuda"))
            with ExitStack() as stack:
                for key, values in settings:
                    stack.enter_context(setting(key, values[0]))
                for _ in range(calls):
                    fd.execute(inputs)
            torch.cuda.synchronize()
            print(name, flush=True)
            return
    raise SystemExit(f"no case matches {pattern!r}")


if __name__ == "__main__":
    main()
