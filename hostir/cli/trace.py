"""`hostir trace merge|plot`: HOSTIR_TRACE files of several ranks in one, and a
timeline picture of one (matplotlib)."""
from __future__ import annotations

import json
from pathlib import Path

from .plots import require_matplotlib

COLORS = {"launch": "tab:blue", "collective": "tab:orange", "wait": "tab:gray"}


def load(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"hostir trace: cannot read {path}: {e}")
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data.get("traceEvents"), list):
        raise SystemExit(f"hostir trace: {path} is not a Chrome trace (no traceEvents list)")
    return data


def merge(out: Path, inputs: list[Path]) -> Path:
    """All ranks' events in one file (a process per rank), times shifted so the
    earliest span of any rank starts at 0."""
    events = []
    for p in inputs:
        events += load(p)["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X"]
    t0 = min((e["ts"] for e in spans), default=0.0)
    for e in spans:
        e["ts"] -= t0
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    return out


def plot(trace: Path, out: Path, title: str | None = None, last_ms: float | None = None) -> Path:
    """A timeline: a row per (rank, track), a bar per span coloured by kind
    (launches, collectives from start to completion, waits), so that a
    communication overlapping compute on another stream shows at a glance."""
    plt = require_matplotlib()
    events = load(trace)["traceEvents"]
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    spans = [e for e in events if e.get("ph") == "X"]
    if not spans:
        raise SystemExit(f"hostir trace plot: {trace} has no spans")
    if last_ms is not None:  # the steady state: the spans of the trace's last `last_ms`
        t_end = max(e["ts"] + e["dur"] for e in spans)
        spans = [e for e in spans if e["ts"] >= t_end - last_ms * 1e3]
    t0 = min(e["ts"] for e in spans)
    rows = sorted({(e["pid"], e["tid"]) for e in spans})
    fig, ax = plt.subplots(figsize=(11, 0.55 * len(rows) + 1.6), dpi=110)
    for y, row in enumerate(rows):
        for cat, color in COLORS.items():
            bars = [((e["ts"] - t0) / 1e3, max(e["dur"] / 1e3, 1e-4)) for e in spans
                    if (e["pid"], e["tid"]) == row and e.get("cat", "launch") == cat]
            if bars:
                ax.broken_barh(bars, (y - 0.38, 0.76), facecolors=color, edgecolors="black",
                               linewidth=0.3, alpha=0.85)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"rank {p}: {names.get((p, t), f'track {t}')}" for p, t in rows])
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(title or f"host program timeline: {Path(trace).name}")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()]
    ax.legend(handles, ["kernel launch", "collective (start to completion)", "wait"],
              loc="upper right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def trace_command(args) -> int:
    if args.action == "merge":
        if len(args.files) < 2:
            print("hostir trace merge: OUT.json IN.json [IN.json ...]")
            return 2
        out = merge(Path(args.files[0]), [Path(p) for p in args.files[1:]])
        print(f"hostir trace merge: {len(args.files) - 1} file(s) -> {out}")
        return 0
    if len(args.files) != 2:
        print("hostir trace plot: TRACE.json OUT.png")
        return 2
    out = plot(Path(args.files[0]), Path(args.files[1]), last_ms=args.last)
    print(f"hostir trace plot: {out}")
    return 0
