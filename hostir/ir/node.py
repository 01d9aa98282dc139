"""The one node type of the fusion IR.

A `Val` is a scalar or a tensor, defined by an `Op` applied to source `Val`s.
Symbolic extents are `Val`s of the same graph (scalar expressions of input
sizes and scalar inputs). Nodes are frozen; identity is node identity.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Any

from .dtypes import DataType


class Op(enum.Enum):
    # leaves
    CONST = "const"
    SCALAR_INPUT = "scalar_input"
    TENSOR_INPUT = "tensor_input"
    EXTENT = "extent"            # arg=(input index, dim): the size of an input tensor's dim
    HOST_TENSOR = "host_tensor"  # a tensor defined by a host-program statement; arg=unique id
    LOOP_INDEX = "loop_index"    # a host for-loop's index; arg=unique id
    # unary pointwise (tensors or scalars)
    NEG = "neg"; ABS = "abs"; EXP = "exp"; EXP2 = "exp2"; EXPM1 = "expm1"; LOG = "log"
    LOG2 = "log2"; LOG10 = "log10"; LOG1P = "log1p"; SQRT = "sqrt"; RSQRT = "rsqrt"
    RECIPROCAL = "reciprocal"; TANH = "tanh"; SIGMOID = "sigmoid"; RELU = "relu"
    SIN = "sin"; COS = "cos"; TAN = "tan"; ASIN = "asin"; ACOS = "acos"; ATAN = "atan"
    SINH = "sinh"; COSH = "cosh"; ERF = "erf"; ERFC = "erfc"; FLOOR = "floor"; CEIL = "ceil"
    ROUND = "round"; TRUNC = "trunc"; SIGN = "sign"; ISNAN = "isnan"; ISINF = "isinf"
    ISFINITE = "isfinite"; LOGICAL_NOT = "logical_not"; BITWISE_NOT = "bitwise_not"
    # binary pointwise
    ADD = "add"; SUB = "sub"; MUL = "mul"; DIV = "div"; TRUEDIV = "truediv"
    FMOD = "fmod"; REMAINDER = "remainder"; POW = "pow"; ATAN2 = "atan2"
    MAXIMUM = "maximum"; MINIMUM = "minimum"; CEILDIV = "ceilDiv"
    LT = "lt"; LE = "le"; GT = "gt"; GE = "ge"; EQ = "eq"; NE = "ne"
    LOGICAL_AND = "logical_and"; LOGICAL_OR = "logical_or"; LOGICAL_XOR = "logical_xor"
    BITWISE_AND = "bitwise_and"; BITWISE_OR = "bitwise_or"; BITWISE_XOR = "bitwise_xor"
    BITWISE_LEFT_SHIFT = "bitwise_left_shift"; BITWISE_RIGHT_SHIFT = "bitwise_right_shift"
    # ternary pointwise
    WHERE = "where"
    # type and data movement
    CAST = "cast"                # arg=DataType
    SET = "set"                  # a copy
    BROADCAST = "broadcast"      # arg=tuple[bool] per output dim (True: new broadcast axis)
    SQUEEZE = "squeeze"          # arg=tuple[int] of removed dims
    EXPAND = "expand"            # src=(t, *extents)
    RESHAPE = "reshape"          # src=(t, *extents)
    PERMUTE = "permute"          # arg=tuple[int]: output dim i is input dim arg[i]
    SLICE = "slice"              # src=(t, *starts, *stops), arg=tuple[int] steps
    PAD = "pad"                  # src=(t, value, *(left, right) per dim from dim 0)
    CAT = "cat"                  # src=tensors, arg=dim
    # reductions: arg=tuple of reduced dims (of the input's logical dims)
    SUM = "sum"; MAX = "max"; MIN = "min"
    VAR = "var"                  # arg=(dims, correction)
    MEAN = "mean"
    # matmul family (reduction axis K last in the output's domain)
    MATMUL = "matmul"
    LINEAR = "linear"            # src=(a, w) or (a, w, bias)
    # factories
    FULL = "full"                # src=(fill, *extents)
    IOTA = "iota"                # src=(length, start, step)


class Kind(enum.Enum):
    """Type rule of a pointwise op."""

    KEEP = "keep"          # promoted operand type
    FLOAT = "float"        # promoted, ints and bools become Float
    BOOL = "bool"          # result is Bool
    INTEGRAL = "integral"  # operands must be Int/Bool, result promoted


UNARY: dict[Op, Kind] = {
    Op.NEG: Kind.KEEP, Op.ABS: Kind.KEEP, Op.RELU: Kind.KEEP, Op.SIGN: Kind.KEEP,
    Op.FLOOR: Kind.KEEP, Op.CEIL: Kind.KEEP, Op.ROUND: Kind.KEEP, Op.TRUNC: Kind.KEEP,
    Op.EXP: Kind.FLOAT, Op.EXP2: Kind.FLOAT, Op.EXPM1: Kind.FLOAT, Op.LOG: Kind.FLOAT,
    Op.LOG2: Kind.FLOAT, Op.LOG10: Kind.FLOAT, Op.LOG1P: Kind.FLOAT, Op.SQRT: Kind.FLOAT,
    Op.RSQRT: Kind.FLOAT, Op.RECIPROCAL: Kind.FLOAT, Op.TANH: Kind.FLOAT,
    Op.SIGMOID: Kind.FLOAT, Op.SIN: Kind.FLOAT, Op.COS: Kind.FLOAT, Op.TAN: Kind.FLOAT,
    Op.ASIN: Kind.FLOAT, Op.ACOS: Kind.FLOAT, Op.ATAN: Kind.FLOAT, Op.SINH: Kind.FLOAT,
    Op.COSH: Kind.FLOAT, Op.ERF: Kind.FLOAT, Op.ERFC: Kind.FLOAT,
    Op.ISNAN: Kind.BOOL, Op.ISINF: Kind.BOOL, Op.ISFINITE: Kind.BOOL,
    Op.LOGICAL_NOT: Kind.BOOL, Op.BITWISE_NOT: Kind.INTEGRAL,
}
BINARY: dict[Op, Kind] = {
    Op.ADD: Kind.KEEP, Op.SUB: Kind.KEEP, Op.MUL: Kind.KEEP, Op.DIV: Kind.KEEP,
    Op.TRUEDIV: Kind.FLOAT, Op.FMOD: Kind.KEEP, Op.REMAINDER: Kind.KEEP, Op.POW: Kind.KEEP,
    Op.ATAN2: Kind.FLOAT, Op.MAXIMUM: Kind.KEEP, Op.MINIMUM: Kind.KEEP,
    Op.CEILDIV: Kind.INTEGRAL,
    Op.LT: Kind.BOOL, Op.LE: Kind.BOOL, Op.GT: Kind.BOOL, Op.GE: Kind.BOOL,
    Op.EQ: Kind.BOOL, Op.NE: Kind.BOOL,
    Op.LOGICAL_AND: Kind.BOOL, Op.LOGICAL_OR: Kind.BOOL, Op.LOGICAL_XOR: Kind.BOOL,
    Op.BITWISE_AND: Kind.INTEGRAL, Op.BITWISE_OR: Kind.INTEGRAL,
    Op.BITWISE_XOR: Kind.INTEGRAL, Op.BITWISE_LEFT_SHIFT: Kind.INTEGRAL,
    Op.BITWISE_RIGHT_SHIFT: Kind.INTEGRAL,
}
POINTWISE = frozenset(UNARY) | frozenset(BINARY) | {Op.WHERE, Op.CAST, Op.SET}
REDUCTIONS = frozenset({Op.SUM, Op.MAX, Op.MIN, Op.VAR, Op.MEAN})


class AxisKind(enum.Enum):
    ITER = "i"
    BCAST = "b"      # extent 1, or the expanded extent (stride 0)
    REDUCE = "r"


@dataclass(frozen=True, slots=True)
class Axis:
    """One dimension of a tensor: a symbolic extent and its kind."""

    extent: "Val"
    kind: AxisKind = AxisKind.ITER

    @property
    def is_broadcast(self) -> bool:
        return self.kind is AxisKind.BCAST

    @property
    def is_reduction(self) -> bool:
        return self.kind is AxisKind.REDUCE

    @property
    def is_expanded(self) -> bool:
        return self.kind is AxisKind.BCAST and not (
            self.extent.op is Op.CONST and self.extent.arg == 1)


@dataclass(frozen=True, slots=True, eq=False)
class Val:
    """A scalar (axes is None) or a tensor (axes is a tuple of Axis)."""

    op: Op
    dtype: DataType
    src: tuple["Val", ...] = ()
    arg: Any = None
    axes: tuple[Axis, ...] | None = None
    name: str | None = field(default=None)

    @property
    def is_tensor(self) -> bool:
        return self.axes is not None

    @property
    def is_scalar(self) -> bool:
        return self.axes is None

    @property
    def logical(self) -> tuple[Axis, ...]:
        """The tensor's logical axes: its domain without reduction axes."""
        return tuple(a for a in self.axes if a.kind is not AxisKind.REDUCE)

    @property
    def ndim(self) -> int:
        return len(self.logical)

    @property
    def const(self):
        """The Python value of a constant scalar, else None."""
        return self.arg if self.op is Op.CONST else None

    def renamed(self, name: str | None) -> "Val":
        return replace(self, name=name)

    # Scalar arithmetic builds symbolic expressions (host loop bounds, slice bounds).
    def _scalar(self, op: "Op", *others) -> "Val":
        from .scalar import scalar_op
        if self.axes is not None or any(isinstance(o, Val) and o.axes is not None for o in others):
            raise TypeError("arithmetic operators on Vals are for scalars; use fd.ops for tensors")
        return scalar_op(op, *others)

    def __add__(self, o): return self._scalar(Op.ADD, self, o)
    def __radd__(self, o): return self._scalar(Op.ADD, o, self)
    def __sub__(self, o): return self._scalar(Op.SUB, self, o)
    def __rsub__(self, o): return self._scalar(Op.SUB, o, self)
    def __mul__(self, o): return self._scalar(Op.MUL, self, o)
    def __rmul__(self, o): return self._scalar(Op.MUL, o, self)
    def __floordiv__(self, o): return self._scalar(Op.DIV, self, o)
    def __rfloordiv__(self, o): return self._scalar(Op.DIV, o, self)
    def __mod__(self, o): return self._scalar(Op.REMAINDER, self, o)
    def __rmod__(self, o): return self._scalar(Op.REMAINDER, o, self)
    def __neg__(self): return self._scalar(Op.NEG, self)

    __hash__ = object.__hash__

    def __repr__(self) -> str:  # short, for error messages and debugging
        if self.name:
            return self.name
        if self.op is Op.CONST:
            return repr(self.arg)
        return f"<{self.op.value} {self.dtype.short}>"


def const(value, dtype: DataType | None = None) -> Val:
    from .dtypes import python_scalar_dtype
    dtype = dtype or python_scalar_dtype(value)
    if dtype.is_bool:
        value = bool(value)
    elif dtype.is_int:
        value = int(value)
    else:
        value = float(value)
    return Val(Op.CONST, dtype, arg=value)
