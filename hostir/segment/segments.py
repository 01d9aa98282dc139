"""Segments as data, and the segmented-fusion dump (seed 003): one IR, every
expression tagged with its segment and scheduler, then the segments with
their cut reasons, then what the pre-segmentation passes removed."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.fusion import Fusion
from ..ir.node import Val
from ..ir.printer import Namer, fusion_text
from ..passes.alias import AliasPlan


@dataclass(frozen=True)
class Segment:
    id: int
    scheduler: str
    exprs: tuple[Val, ...]
    inputs: tuple[Val, ...]
    outputs: tuple[Val, ...]
    reasons: tuple[str, ...] = ()

    @property
    def ops(self) -> list[str]:
        return [v.op.value for v in self.exprs]

    @property
    def launches(self) -> bool:
        return self.scheduler != "alias"


@dataclass(frozen=True)
class SegmentedFusion:
    fusion: Fusion                 # after the pre-segmentation passes, concrete
    segments: tuple[Segment, ...]  # in execution order
    notes: tuple[str, ...] = ()    # what the passes changed
    aliases: AliasPlan | None = None

    def __str__(self) -> str:
        return segmented_text(self)


def segmented_text(sf: SegmentedFusion) -> str:
    namer = Namer()
    tags = {}
    for seg in sf.segments:
        for v in seg.exprs:
            tags.setdefault(v, f"  # seg{seg.id} {seg.scheduler}")
    lines = ["Segmented fusion (IR after pre-segmentation passes):",
             fusion_text(sf.fusion, namer, tags), "Segments:"]
    for seg in sf.segments:
        ins = ", ".join(namer(v) for v in seg.inputs) or "-"
        outs = ", ".join(namer(v) for v in seg.outputs) or "-"
        launch = "" if seg.launches else "  (no kernel)"
        lines.append(f"  seg{seg.id} {seg.scheduler}: inputs {ins} -> outputs {outs}; "
                     f"ops {seg.ops}{launch}")
        for r in seg.reasons:
            lines.append(f"    cut: {r}")
    lines.append("Pre-segmentation passes:")
    lines += [f"  {n}" for n in sf.notes] or ["  (nothing removed)"]
    return "\n".join(lines)
