"""Stacked rows (row_widths.WORD_ROWS): each group of a block's threads takes
`stack` rows at a time, every row's first loads issued before any row's uses,
so a thread has that many rows' bytes in flight (the compiler, given the rows
in an unrolled loop, issued each row's loads after the last row's stores).
The printer (cuda_schedules._ReductionPrinter) prints one row's body as for
a single row, marking where its first loads and each pass's combines end;
`stacked` prints it once a row, its names made the row's own, part by part:
the rows' loads first, then their uses. What every row reads alike (the
weights) is read once before the rows, into registers the rows share
(row_widths.WORD_ROWS_HOLD: cuda_row_shift._held_slots)."""
from __future__ import annotations

import re

# a declaration in a row's body: `const float v3 =`, `alignas(16) hir_bf16 v1[8];`, `for (int c = 0`, a
# lambda's `float x,`; its name is made each stacked row's own
_DECL = re.compile(r"(?:\b(?:bool|int|unsigned int|unsigned|long long|float|double|char|hir_\w+|u?int\d?|uint[24]))"
                   r"\s*\*?\s*(?:const\s+)?([A-Za-z_]\w*)\s*(?=[=\[;,)])")


def body_names(lines: list[str]) -> set[str]:
    """The names the lines declare (each a row's own where rows are stacked)."""
    return {m.group(1) for line in lines for m in _DECL.finditer(line)}


def stacked(body: list[str], splits: list[int], stack: int, groups: int) -> list[str]:
    """The row body `body` (lines; its first loads end at splits[0], each
    pass's combines of the row's threads at the splits after) for `stack`
    rows, row s at base + s * groups: each row's declared names suffixed
    `_s<s>` (a name after `.` is a member: threadIdx.x stays), every row's
    lines up to the first split, then every row's up to the next, and so on
    (the rows' combines too in turn, their shuffles in flight together)."""
    names = body_names(body)
    if not names:
        return body
    word = re.compile(r"(?<![.\w])(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r"|base)\b")

    def row(lines: list[str], s: int) -> list[str]:
        def name(m: re.Match) -> str:
            return f"(base + {s * groups})" if m.group(1) == "base" else f"{m.group(1)}_s{s}"
        return [word.sub(name, line) for line in lines]
    out, cuts = [], [0] + sorted(set(splits)) + [len(body)]
    for a, b in zip(cuts, cuts[1:]):
        for s in range(stack):
            out += row(body[a:b], s)
    return out
