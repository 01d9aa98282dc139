"""A fusion: inputs, outputs and the graph between them; traversal and verifier."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, NamedTuple

from .dtypes import DataType
from .errors import VerificationError
from .node import BINARY, UNARY, AxisKind, Op, Val


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


@dataclass(frozen=True, slots=True, eq=False)
class Fusion:
    inputs: tuple[Val, ...]
    outputs: tuple[Output, ...]

    def exprs(self) -> list[Val]:
        """Non-leaf nodes reachable from the outputs, producers first."""
        return [v for v in toposort([o.val for o in self.outputs]) if v.op not in LEAVES]

    def tensor_exprs(self) -> list[Val]:
        return [v for v in self.exprs() if v.is_tensor]

    def __str__(self) -> str:
        from .printer import fusion_text
        return fusion_text(self)


LEAVES = frozenset({Op.CONST, Op.SCALAR_INPUT, Op.TENSOR_INPUT, Op.EXTENT, Op.HOST_TENSOR,
                    Op.LOOP_INDEX})


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


def consumers(fusion: Fusion) -> dict[Val, list[Val]]:
    uses: dict[Val, list[Val]] = {}
    for v in fusion.exprs():
        for s in v.src:
            uses.setdefault(s, []).append(v)
    return uses


def _fail(v: Val, msg: str):
    raise VerificationError(f"malformed fusion at {v!r} ({v.op.value}): {msg}")


def _arity(v: Val) -> tuple[int, int] | None:
    """Allowed (min, max) number of sources."""
    if v.op in UNARY or v.op in (Op.CAST, Op.SET):
        return (1, 1)
    if v.op in BINARY:
        return (2, 2)
    if v.op is Op.WHERE:
        return (3, 3)
    if v.op in (Op.BROADCAST, Op.SQUEEZE, Op.PERMUTE, Op.SUM, Op.MAX, Op.MIN, Op.VAR, Op.MEAN):
        return (1, 1)
    if v.op is Op.MATMUL:
        return (2, 2)
    if v.op is Op.LINEAR:
        return (2, 3)
    if v.op is Op.IOTA:
        return (3, 3)
    return None


def verify(fusion: Fusion) -> None:
    """Check well-formedness; raise VerificationError naming the first problem."""
    input_ids = {id(v) for v in fusion.inputs}
    if len(input_ids) != len(fusion.inputs):
        raise VerificationError("an input is listed twice")
    for i, v in enumerate(fusion.inputs):
        if v.op not in (Op.TENSOR_INPUT, Op.SCALAR_INPUT):
            _fail(v, "listed as an input but is not an input node")
        index = v.arg.index if v.op is Op.TENSOR_INPUT else v.arg
        if index != i:
            _fail(v, f"input index {index} but position {i}")
    if not fusion.outputs:
        raise VerificationError("the fusion has no outputs")
    for out in fusion.outputs:
        if not out.val.is_tensor:
            _fail(out.val, "outputs must be tensors")
        if out.alias_input is not None:
            if id(out.alias_input) not in input_ids or not out.alias_input.is_tensor:
                _fail(out.val, "alias_input is not a tensor input of this fusion")
        if out.stride_order is not None and sorted(out.stride_order) != list(range(out.val.ndim)):
            _fail(out.val, f"stride_order {out.stride_order} is not a permutation")
    for v in toposort([o.val for o in fusion.outputs]):
        _verify_node(v, input_ids, len(fusion.inputs))


def _verify_node(v: Val, input_ids: set[int], n_inputs: int) -> None:
    if not isinstance(v.dtype, DataType) or v.dtype is DataType.Null:
        _fail(v, f"bad dtype {v.dtype!r}")
    if v.op in (Op.TENSOR_INPUT, Op.SCALAR_INPUT) and id(v) not in input_ids:
        _fail(v, "input node that is not listed among the fusion's inputs")
    if v.op is Op.EXTENT and not (0 <= v.arg[0] < n_inputs):
        _fail(v, f"extent of input {v.arg[0]}, which does not exist")
    if v.op in (Op.EXTENT, Op.SCALAR_INPUT, Op.CONST) and v.is_tensor and v.op is not Op.CONST:
        _fail(v, "leaf scalar with axes")
    if v.is_tensor:
        for ax in v.axes:
            e = ax.extent
            if e.is_tensor or not e.dtype.is_int:
                _fail(v, f"axis extent {e!r} is not an Int scalar")
            if ax.kind is AxisKind.REDUCE and v.op not in (
                    Op.SUM, Op.MAX, Op.MIN, Op.VAR, Op.MEAN, Op.MATMUL, Op.LINEAR):
                _fail(v, "reduction axis on a non-reduction op")
    arity = _arity(v)
    if arity and not arity[0] <= len(v.src) <= arity[1]:
        _fail(v, f"{len(v.src)} sources, expected {arity[0]}..{arity[1]}")
    if v.op is Op.CAST and v.arg is not v.dtype:
        _fail(v, f"cast arg {v.arg!r} differs from dtype {v.dtype!r}")
    if v.op in (Op.RESHAPE, Op.EXPAND) and len(v.src) != 1 + len(v.axes):
        _fail(v, "needs one extent per output dim")
    if v.op is Op.SLICE and len(v.src) != 1 + 2 * v.src[0].ndim:
        _fail(v, "needs a start and a stop per input dim")
    if v.op is Op.PAD and len(v.src) != 2 + 2 * v.src[0].ndim:
        _fail(v, "needs a value and two widths per input dim")
    for s in v.src:
        if not isinstance(s, Val):
            _fail(v, f"source {s!r} is not a Val")
    if v.op in UNARY or v.op in BINARY or v.op in (Op.WHERE, Op.CAST, Op.SET):
        if v.is_tensor and not any(s.is_tensor for s in v.src):
            _fail(v, "tensor pointwise op without tensor operands")
