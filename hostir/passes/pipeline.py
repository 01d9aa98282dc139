"""The pre-segmentation pass pipeline: the one list of passes, run to a fixpoint."""
from __future__ import annotations

from typing import Callable

from ..ir.fusion import Fusion
from ..ir.verify import verify
from ..ir.rewrite import op_counts
from .simplify import drop_trivial_ops, fold_casts, remove_bcast_squeeze, remove_empty_tensors

Pass = Callable[[Fusion], Fusion]

PRESEG_PASSES: tuple[Pass, ...] = (
    remove_empty_tensors,
    drop_trivial_ops,
    remove_bcast_squeeze,
    fold_casts,
)

MAX_ROUNDS = 8


def _diff(before: dict[str, int], after: dict[str, int]) -> str:
    parts = []
    for op in sorted(set(before) | set(after)):
        d = after.get(op, 0) - before.get(op, 0)
        if d:
            parts.append(f"{d:+d} {op}")
    return ", ".join(parts)


def run_passes(fusion: Fusion, passes: tuple[Pass, ...] = PRESEG_PASSES,
               check: bool = False) -> tuple[Fusion, list[str]]:
    """Apply `passes` in order until none changes the fusion. Returns the new
    fusion and notes of what each pass changed ("remove_bcast_squeeze: -1
    broadcast, -1 squeeze"). With `check`, the verifier runs around every pass."""
    notes: list[str] = []
    if check:
        verify(fusion)
    for _ in range(MAX_ROUNDS):
        changed = False
        for p in passes:
            before = op_counts(fusion)
            new = p(fusion)
            if new is fusion:
                continue
            if check:
                verify(new)
            diff = _diff(before, op_counts(new))
            if diff:
                notes.append(f"{p.__name__}: {diff}")
            fusion, changed = new, True
        if not changed:
            break
    return fusion, notes
