"""Codegen knobs side by side: each case of reduction_shapes.py timed under several settings of hostir's tuning constants and HOSTIR_DISABLE
features, beside torch.compile, contenders alternating in one run (% of the
copy bandwidth measured in the run). Each setting plans its own
FusionDefinition with the setting in force while its first call picks the
kernel variants, so one process compares them.

    python benchmarks/knobs.py --only "softmax bf16 .*x50257" \\
        --set "rows.CLUSTER_ONE_BLOCK=12,16" --set "disable=shifted_rows,"

`--set MODULE.NAME=V1,V2,...` sets a constant of hostir.codegen.MODULE (Python
literals); `--set disable=F1,...` HOSTIR_DISABLE features (an empty value: none
disabled). Contenders are every combination of the settings given. `--try
"A=1 B=2"` adds one contender of exactly those settings instead (repeatable;
"default" for none; a contender given twice gets two columns, "#2" the
second: a last `--try default` shows what the run's order alone moves), where
every combination would time settings that cannot differ:

    python benchmarks/knobs.py --only "softmax bf16 .*x131072" \
        --try default --try "rows.ROW_AHEAD=False" --try "rows.ROW_AHEAD=False rows.ROW_WAITS=False"

`--case NAME` (repeatable) times a case of any shape by its name too (`--case
"column sum fp32 1917396x35"`, or one of issue 11's other listed kinds: `--case
"sum over [0, 1] fp32 16x512x4096"`; reduction_shapes.by_name), after the
sweep's cases `--only` keeps.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import itertools
import re
import sys
from contextlib import ExitStack, contextmanager
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import copy_bandwidth, meta_for, time_interleaved, write_results  # noqa: E402
import reduction_shapes  # noqa: E402

from hostir import config  # noqa: E402


def parse_setting(text: str) -> tuple[str, list]:
    """`rows.X=1,2` -> ("rows.X", [1, 2]); `disable=a,` -> ("disable", ["a", ""])."""
    name, _, values = text.partition("=")
    if name == "disable":
        return name, values.split(",")
    return name, [ast.literal_eval(v) for v in _top_level(values)]


def _top_level(text: str) -> list[str]:
    """`text` split at its commas outside brackets: "1,(2,3)" -> ["1", "(2,3)"]."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and not depth:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


@contextmanager
def setting(name: str, value):
    if name == "disable":
        with config.override(disable=config.get().disable | ({value} if value else set())):
            yield
        return
    module, attr = name.rsplit(".", 1)
    mod = importlib.import_module(f"hostir.codegen.{module}")
    saved = getattr(mod, attr)
    setattr(mod, attr, value)
    try:
        yield
    finally:
        setattr(mod, attr, saved)


def parse_try(text: str) -> dict:
    """`"rows.X=1 disable=a"` -> {"rows.X": 1, "disable": "a"}; "default" -> {}."""
    out = {}
    for part in text.split():
        if part == "default":
            continue
        name, values = parse_setting(part)
        if len(values) != 1:
            raise SystemExit(f"--try {text!r}: one value a setting ({part!r} gives {len(values)})")
        out[name] = values[0]
    return out


def planned(make, settings: dict, inputs):
    """A fresh FusionDefinition of case maker `make`, its first call made under `settings`."""
    fd = make()[1]
    with ExitStack() as stack:
        for name, value in settings.items():
            stack.enter_context(setting(name, value))
        fd.execute(inputs)
    return lambda: fd.execute(inputs)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/out")
    ap.add_argument("--only", default=None, help="a regex: the cases whose name matches")
    ap.add_argument("--case", action="append", default=[],
                    help='a case by its name, any shape ("column sum fp32 1917396x35"; repeatable)')
    ap.add_argument("--set", action="append", default=[], help="MODULE.NAME=V1,V2 or disable=F1,F2")
    ap.add_argument("--try", dest="tries", action="append", default=[],
                    help='one contender: "MODULE.NAME=V disable=F ..." or "default"')
    ap.add_argument("--elements", type=int, default=1 << 26)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--suite", default="shapes", choices=["shapes", "indexing"],
                    help="the cases: reduction_shapes.py's sweep, or indexing.py's")
    args = ap.parse_args(argv)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    elements = args.elements if dev.type == "cuda" else 1 << 14
    grid = [parse_setting(s) for s in args.set]
    combos = [dict(zip([n for n, _ in grid], vals)) for vals in itertools.product(*[v for _, v in grid])]
    if args.tries:
        if args.set:
            raise SystemExit("--try and --set: give the contenders one way")
        combos = [parse_try(t) for t in args.tries]
    if args.only is None and not args.case:
        raise SystemExit("--only REGEX or --case NAME: which cases")
    for name in args.case:
        if reduction_shapes.by_name(name) is None:
            raise SystemExit(f"--case {name!r}: not KIND DTYPE RxC (kinds {sorted(reduction_shapes.KINDS)}; "
                             f"or one of {sorted(reduction_shapes.LISTED)} in its dtype and rank)")
    makers = []  # (maker, filtered by --only)
    if args.suite == "indexing" and args.only is not None:
        import indexing
        makers = [(m, True) for m in indexing.makers(dev.type != "cuda")]
    elif args.only is not None:
        makers = [(lambda make=make, c=c, dt=dt: make(max(1, elements // c), c, dt), True)
                  for make, dt, lengths in reduction_shapes.SWEEP for c in lengths]
    makers += [(lambda name=name: reduction_shapes.by_name(name), False) for name in args.case]
    bw = copy_bandwidth(dev)
    rows, seen = [], set()
    for make, filtered in makers:
        name, _, eager, make_inputs, nbytes = make()
        if filtered and not re.search(args.only, name) or name in seen:
            continue
        seen.add(name)
        inputs = make_inputs(dev)
        fns = [planned(make, s, inputs) for s in combos] + [lambda: eager(*inputs)]
        labels = _labels(combos) + ["eager"]
        if not args.no_compile:
            torch._dynamo.reset()
            compiled = torch.compile(eager, dynamic=False)
            compiled(*inputs)
            fns.append(lambda: compiled(*inputs))
            labels.append("compile")
        times = time_interleaved(fns, dev, rounds=args.rounds)
        row = {"case": name}
        # (3 significant digits, not one decimal: a CPU run's small figures stay above 0)
        row.update({label: float(f"{100 * nbytes / t / bw:.3g}") for label, t in zip(labels, times)})
        rows.append(row)
        print(row, flush=True)
    meta = meta_for(dev)
    meta["copy GB/s"] = round(bw / 1e9, 1)
    meta["unit"] = "% of copy"
    columns = ["case"] + [k for k in rows[0] if k != "case"] if rows else ["case"]
    write_results(Path(args.out), "knobs", meta, rows, columns)


def _labels(combos: list[dict]) -> list[str]:
    """Each contender's column: its settings ("default" for none); a setting
    given again (a second `--try default`, to see what the run's order alone
    moves) is numbered, not merged into the first's column."""
    out = []
    for s in combos:
        label = ", ".join(f"{k}={v!r}" for k, v in s.items()) or "default"
        n = sum(1 for x in out if x == label or x.startswith(label + " #"))
        out.append(f"{label} #{n + 1}" if n else label)
    return out


if __name__ == "__main__":
    main()
