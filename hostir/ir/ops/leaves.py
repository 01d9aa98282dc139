"""Leaves: constants, inputs, input extents, and the host program's own
tensors and loop indices. Their values are bound, not computed."""
from __future__ import annotations

from ..node import Family, Op, OpDef, define

for _op in (Op.CONST, Op.SCALAR_INPUT, Op.TENSOR_INPUT, Op.EXTENT, Op.HOST_TENSOR, Op.LOOP_INDEX):
    define(OpDef(_op, Family.LEAF, (0, 0), rebuild=lambda v, src: v))
