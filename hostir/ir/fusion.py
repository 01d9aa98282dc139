"""A fusion: inputs, outputs and the graph between them, and its traversal."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterator, NamedTuple

from .node import OPS, Family, Op, Val
from .printer import fusion_text


class TensorInputArg(NamedTuple):
    """`arg` of a TENSOR_INPUT node."""

    index: int
    contiguity: tuple  # per dim: True, False or None (broadcast)
    stride_order: tuple | None  # nvFuser order: entry i is dim i's stride rank, 0 fastest
    is_cpu: bool


@dataclass(frozen=True, slots=True)
class Output:
    val: Val
    alias_input: Val | None = None
    stride_order: tuple[int, ...] | None = None


@dataclass(frozen=True, eq=False)
class Fusion:
    inputs: tuple[Val, ...]
    outputs: tuple[Output, ...]

    @cached_property
    def _exprs(self) -> tuple[Val, ...]:
        return tuple(v for v in toposort([o.val for o in self.outputs]) if v.op not in LEAVES)

    def exprs(self) -> list[Val]:
        """Non-leaf nodes reachable from the outputs, producers first."""
        return list(self._exprs)

    def tensor_exprs(self) -> list[Val]:
        return [v for v in self._exprs if v.is_tensor]

    def __str__(self) -> str:
        return fusion_text(self)


LEAVES = frozenset(op for op, d in OPS.items() if d.family is Family.LEAF)


def toposort(roots: list[Val]) -> list[Val]:
    """Every node reachable from `roots` (through src and axis extents), producers first."""
    order: list[Val] = []
    seen: set[int] = set()
    for root in roots:
        stack: list[tuple[Val, Iterator[Val] | None]] = [(root, None)]
        while stack:
            v, it = stack[-1]
            if it is None:
                if id(v) in seen:
                    stack.pop()
                    continue
                seen.add(id(v))
                deps = list(v.src)
                if v.axes is not None and v.op is not Op.TENSOR_INPUT:
                    deps += [a.extent for a in v.axes]
                it = iter(deps)
                stack[-1] = (v, it)
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                order.append(v)
            elif id(nxt) not in seen:
                stack.append((nxt, None))
    return order
