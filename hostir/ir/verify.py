"""The fusion verifier: well-formedness, and every node's type re-derived from
its op's rule (JAX's check_jaxpr). Runs around every stage when
HOSTIR_DEBUG=verify (the test suite sets it)."""
from __future__ import annotations

from .dtypes import DataType
from .errors import VerificationError
from .fusion import Fusion, toposort
from .node import OPS, AxisKind, Family, Op, Val
from .printer import type_text
from .rewrite import rebuild
from .scalar import same


def _fail(v: Val, msg: str):
    raise VerificationError(f"malformed fusion at {v!r} ({v.op.value}): {msg}")


def verify(fusion: Fusion, types: bool = True) -> None:
    """Check well-formedness; raise VerificationError naming the first problem.
    With `types`, every node's type is re-derived from its op's rule too (a
    fusion just built by the op constructors has them by construction)."""
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
        d = OPS.get(out.val.op)
        if not out.val.is_tensor or (d is not None and d.results is not None):
            _fail(out.val, "outputs must be tensors (a tuple of results is output by its result nodes)")
        if out.alias_input is not None:
            if id(out.alias_input) not in input_ids or not out.alias_input.is_tensor:
                _fail(out.val, "alias_input is not a tensor input of this fusion")
        if out.stride_order is not None and sorted(out.stride_order) != list(range(out.val.ndim)):
            _fail(out.val, f"stride_order {out.stride_order} is not a permutation")
    for v in toposort([o.val for o in fusion.outputs]):
        _verify_node(v, input_ids, len(fusion.inputs), types)


def _verify_node(v: Val, input_ids: set[int], n_inputs: int, types: bool) -> None:
    d = OPS.get(v.op)
    if d is None:
        _fail(v, "op has no definition")
    if not isinstance(v.dtype, DataType) or v.dtype is DataType.Null:
        _fail(v, f"bad dtype {v.dtype!r}")
    for s in v.src:
        if not isinstance(s, Val):
            _fail(v, f"source {s!r} is not a Val")
        several = OPS.get(s.op)
        if several is not None and several.results is not None and v.op is not Op.RESULT:
            _fail(v, f"reads {s!r} ({s.op.value}), a tuple of results, other than by a result node")
    lo, hi = d.arity
    if not (lo <= len(v.src) and (hi is None or len(v.src) <= hi)):
        _fail(v, f"{len(v.src)} sources, expected {lo}..{'' if hi is None else hi}")
    if d.family is Family.LEAF:
        _verify_leaf(v, input_ids, n_inputs)
        return
    if v.is_tensor:
        _verify_axes(v, d)
    if types:
        _verify_type(v)


def _verify_leaf(v: Val, input_ids: set[int], n_inputs: int) -> None:
    if v.op in (Op.TENSOR_INPUT, Op.SCALAR_INPUT) and id(v) not in input_ids:
        _fail(v, "input node that is not listed among the fusion's inputs")
    if v.op is Op.EXTENT and not (0 <= v.arg[0] < n_inputs):
        _fail(v, f"extent of input {v.arg[0]}, which does not exist")
    if v.op in (Op.EXTENT, Op.SCALAR_INPUT) and v.is_tensor:
        _fail(v, "leaf scalar with axes")


def _verify_axes(v: Val, d) -> None:
    for ax in v.axes:
        e = ax.extent
        if e.is_tensor or not e.dtype.is_int:
            _fail(v, f"axis extent {e!r} is not an Int scalar")
        if ax.kind is AxisKind.REDUCE and d.family not in (Family.REDUCTION, Family.MATMUL):
            _fail(v, "reduction axis on a non-reduction op")
    if d.family is Family.POINTWISE and not any(s.is_tensor for s in v.src):
        _fail(v, "tensor pointwise op without tensor operands")
    if v.refined:
        if d.family not in (Family.VIEW, Family.RESIZE, Family.FACTORY):
            _fail(v, f"refined to broadcasts at dims {list(v.refined)}, which only "
                     f"concretization of a shape-making op may do")
        for dim in v.refined:
            if not (0 <= dim < v.ndim and v.logical[dim].kind is AxisKind.BCAST):
                _fail(v, f"refined dim {dim} is not a broadcast axis")


def _verify_type(v: Val) -> None:
    """The op's rule applied to v's own sources must give v's dtype and axes."""
    try:
        expected = rebuild(v, v.src)
    except Exception as e:  # the rule rejects the sources
        _fail(v, f"its op rule rejects its sources: {e}")
    if expected.dtype is not v.dtype:
        _fail(v, f"dtype {v.dtype.short}, but its op rule gives {expected.dtype.short}")
    if v.is_scalar:
        return
    if expected.is_scalar or len(expected.axes) != len(v.axes) or not all(
            a.kind is b.kind and same(a.extent, b.extent) for a, b in zip(expected.axes, v.axes)):
        _fail(v, f"type {type_text(v)}, but its op rule gives {type_text(expected)}")
