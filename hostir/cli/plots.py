"""Figures of `hostir bench --plot` (matplotlib, imported only here and only then)."""
from __future__ import annotations

import re
from pathlib import Path


def require_matplotlib():
    """matplotlib.pyplot on the file-only backend, or an ImportError saying what to install."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError("hostir bench --plot needs matplotlib (pip install matplotlib); "
                          "the JSON and markdown results need nothing more") from None
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt
    return plt


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


SERIES = (("hostir GB/s", "hostir", "o-"), ("eager GB/s", "torch eager", "s--"),
          ("compile GB/s", "torch.compile", "^:"))


def plot_bandwidth(rows: list[dict], out: Path, suite: str, meta: dict) -> list[Path]:
    """One PNG per fusion: achieved GB/s against bytes moved, hostir beside torch
    eager and torch.compile (where measured), and the device's copy bandwidth."""
    plt = require_matplotlib()
    out.mkdir(parents=True, exist_ok=True)
    fusions: dict[str, list[dict]] = {}
    for r in rows:
        fusions.setdefault(r.get("fusion", r["case"]), []).append(r)
    paths = []
    for fusion, rs in fusions.items():
        rs = sorted(rs, key=lambda r: r["bytes"])
        fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
        x = [r["bytes"] for r in rs]
        for key, label, style in SERIES:
            pts = [(xi, r[key]) for xi, r in zip(x, rs) if isinstance(r.get(key), float)]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
        copy = meta.get("copy GB/s")
        if copy:
            ax.axhline(copy, color="gray", linewidth=0.8, label=f"copy {copy} GB/s")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("bytes moved per call")
        ax.set_ylabel("achieved GB/s")
        ax.set_title(f"{fusion} — {meta.get('device', '')}", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out / f"{suite}_{_slug(fusion)}.png"
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    return paths
