"""Kernel IR: what one thread computes, as a hash-consed expression DAG.

A kernel iterates over an iteration space (one index per dim); each output
gets one value per point. Nodes are interned, so equal subexpressions (two
uses of an input at the same index) are one node and one load.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir.dtypes import DataType
from ..ir.node import Op, Val


class K:
    """Kernel-IR ops beyond the fusion IR's pointwise ops (which are reused)."""

    INDEX = "index"      # arg=d: the thread's index along iteration dim d
    CONST = "const"      # arg=value
    PARAM = "param"      # arg=k: scalar kernel parameter k (extent, scalar input)
    LOAD = "load"        # arg=k: tensor input k; src=(pred, *indices)


@dataclass(frozen=True, slots=True, eq=False)
class KNode:
    op: Any              # a K constant or a fusion-IR Op (ADD, WHERE, CAST, ...)
    dtype: DataType
    src: tuple = ()
    arg: Any = None

    def __repr__(self) -> str:
        return f"K({self.op if isinstance(self.op, str) else self.op.value}, {self.dtype.short})"


@dataclass(frozen=True)
class TensorParam:
    """A tensor argument: data pointer plus one stride per dim."""

    val: Val             # the fusion-IR value it holds
    ndim: int
    dtype: DataType


@dataclass
class Kernel:
    name: str
    inputs: list[TensorParam] = field(default_factory=list)
    outputs: list[TensorParam] = field(default_factory=list)
    params: list[Val] = field(default_factory=list)       # scalar leaves (EXTENT / SCALAR_INPUT)
    extent_vals: list[Val] = field(default_factory=list)  # iteration space (scalar Vals)
    stores: list[tuple[int, KNode, tuple]] = field(default_factory=list)  # (output k, value, index)
    lanes: tuple = (0,)  # offsets along `lane_dim` computed by each thread (shared reads)
    lane_dim: int | None = None
    pairs: tuple = ()    # (dim, full extent) of every paired dim; the kernel iterates half of each
    order: list[KNode] = field(default_factory=list)      # every node, producers first


class Builder:
    """Interns nodes and records them in creation (topological) order."""

    def __init__(self):
        self._table: dict[tuple, KNode] = {}
        self.order: list[KNode] = []
        self.ranges: dict[int, int] = {}  # INDEX dim -> static extent, for folding compares

    def mk(self, op, dtype: DataType, src=(), arg=None) -> KNode:
        key = (op, dtype, tuple(id(s) for s in src), arg if not isinstance(arg, float) else ("f", arg))
        node = self._table.get(key)
        if node is None:
            node = KNode(op, dtype, tuple(src), arg)
            self._table[key] = node
            self.order.append(node)
        return node

    def const(self, value, dtype: DataType) -> KNode:
        if dtype.is_bool:
            value = bool(value)
        elif dtype.is_int:
            value = int(value)
        else:
            value = float(value)
        return self.mk(K.CONST, dtype, arg=value)

    def i(self, value: int) -> KNode:
        return self.const(value, DataType.Int)

    def is_const(self, n: KNode, value=None) -> bool:
        return n.op == K.CONST and (value is None or n.arg == value)

    # index arithmetic with folding; affine forms are kept as `x + c` (c constant last)
    def add(self, a: KNode, b: KNode) -> KNode:
        if self.is_const(a) and not self.is_const(b):
            a, b = b, a
        if self.is_const(b, 0):
            return a
        if self.is_const(a) and self.is_const(b):
            return self.i(a.arg + b.arg)
        if self.is_const(b) and a.op is Op.ADD and self.is_const(a.src[1]):
            return self.add(a.src[0], self.i(a.src[1].arg + b.arg))
        return self.mk(Op.ADD, DataType.Int, (a, b))

    def sub(self, a: KNode, b: KNode) -> KNode:
        if self.is_const(b):
            return self.add(a, self.i(-b.arg))
        return self.mk(Op.SUB, DataType.Int, (a, b))

    def mul(self, a: KNode, b: KNode) -> KNode:
        if self.is_const(b, 1):
            return a
        if self.is_const(a, 1):
            return b
        if self.is_const(a, 0) or self.is_const(b, 0):
            return self.i(0)
        if self.is_const(a) and self.is_const(b):
            return self.i(a.arg * b.arg)
        return self.mk(Op.MUL, DataType.Int, (a, b))

    def floordiv(self, a: KNode, b: KNode) -> KNode:
        if self.is_const(b, 1):
            return a
        return self.mk(Op.DIV, DataType.Int, (a, b))

    def mod(self, a: KNode, b: KNode) -> KNode:
        if self.is_const(b, 1):
            return self.i(0)
        return self.mk(Op.REMAINDER, DataType.Int, (a, b))

    def land(self, a: KNode | None, b: KNode | None) -> KNode | None:
        """Conjunction of predicates; None means always true."""
        if a is not None and self.is_const(a):
            return b if a.arg else a
        if b is not None and self.is_const(b):
            return a if b.arg else b
        if a is None:
            return b
        if b is None or a is b:
            return a
        return self.mk(Op.LOGICAL_AND, DataType.Bool, (a, b))

    def _bounds(self, n: KNode):
        """[lo, hi] of an index expression `INDEX(d) + c` or a constant, else None."""
        if self.is_const(n):
            return (n.arg, n.arg)
        c = 0
        if n.op is Op.ADD and self.is_const(n.src[1]):
            n, c = n.src[0], n.src[1].arg
        if n.op == K.INDEX and n.arg in self.ranges:
            return (c, self.ranges[n.arg] - 1 + c)
        return None

    def cmp(self, op: Op, a: KNode, b: KNode) -> KNode:
        ra, rb = self._bounds(a), self._bounds(b)
        if ra is not None and rb is not None:
            decided = {
                Op.LT: (ra[1] < rb[0], ra[0] >= rb[1]), Op.GE: (ra[0] >= rb[1], ra[1] < rb[0]),
                Op.LE: (ra[1] <= rb[0], ra[0] > rb[1]), Op.GT: (ra[0] > rb[1], ra[1] <= rb[0]),
            }.get(op)
            if decided is not None:
                if decided[0]:
                    return self.const(True, DataType.Bool)
                if decided[1]:
                    return self.const(False, DataType.Bool)
        return self.mk(op, DataType.Bool, (a, b))

    def where(self, c: KNode, a: KNode, b: KNode) -> KNode:
        if c is None:
            return a
        if self.is_const(c):
            return a if c.arg else b
        if a is b:
            return a
        return self.mk(Op.WHERE, a.dtype, (c, a, b))
