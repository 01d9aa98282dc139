"""The one node type of the fusion IR, its op enum, and the op records.

A `Val` is a scalar or a tensor, defined by an `Op` applied to source `Val`s.
Symbolic extents are `Val`s of the same graph (scalar expressions of input
sizes and scalar inputs). Nodes are frozen; identity is node identity.

Everything hostir knows about an op sits in one `OpDef` record, registered in
`OPS` by the module of `ir/ops/` that defines the op (its constructor, shape
rule, reference evaluation, printing, index map and CUDA spelling are all
there). The rest of hostir asks the record; nothing else switches on ops.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Any, Callable, NamedTuple

from .dtypes import DataType, coerce, complex_dtype, python_scalar_dtype, real_dtype


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
    SIGNBIT = "signbit"; ACOSH = "acosh"; ASINH = "asinh"; ATANH = "atanh"; ERFINV = "erfinv"
    LGAMMA = "lgamma"; FRAC = "frac"; SILU = "silu"; ISNEGINF = "isneginf"; ISPOSINF = "isposinf"
    ERFCINV = "erfcinv"
    REAL = "real"; IMAG = "imag"; ISREAL = "isreal"
    # binary pointwise
    ADD = "add"; SUB = "sub"; MUL = "mul"; DIV = "div"; TRUEDIV = "truediv"
    FMOD = "fmod"; REMAINDER = "remainder"; POW = "pow"; ATAN2 = "atan2"
    MAXIMUM = "maximum"; MINIMUM = "minimum"; CEILDIV = "ceilDiv"
    LT = "lt"; LE = "le"; GT = "gt"; GE = "ge"; EQ = "eq"; NE = "ne"
    LOGICAL_AND = "logical_and"; LOGICAL_OR = "logical_or"; LOGICAL_XOR = "logical_xor"
    BITWISE_AND = "bitwise_and"; BITWISE_OR = "bitwise_or"; BITWISE_XOR = "bitwise_xor"
    BITWISE_LEFT_SHIFT = "bitwise_left_shift"; BITWISE_RIGHT_SHIFT = "bitwise_right_shift"
    GCD = "gcd"; NEXTAFTER = "nextafter"; LOGICAL_RIGHT_SHIFT = "logical_right_shift"
    COMPLEX = "complex"          # a complex value of a real part and an imaginary part
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
    # reductions: arg=ReductionArg (reduced dims of the input's logical dims)
    SUM = "sum"; MAX = "max"; MIN = "min"; VAR = "var"; MEAN = "mean"; PROD = "prod"
    ARGMAX = "argmax"            # the Int index of the first greatest value (row-major over dims)
    # scans: arg=ScanArg (the scanned dim); the result has the input's shape
    CUMSUM = "cumsum"; CUMPROD = "cumprod"; CUMMAX = "cummax"; CUMMIN = "cummin"
    # indexing: src=(input, index), arg=dim (the input's dim the index values address)
    INDEX_SELECT = "index_select"; GATHER = "gather"; TAKE_ALONG_AXIS = "take_along_axis"
    SCATTER = "scatter"          # src=(input, index, src), arg=dim: input with src written where
                                 # index says along dim
    # matmul family (reduction axis K last in the output's domain)
    MATMUL = "matmul"
    LINEAR = "linear"            # src=(a, w) or (a, w, bias)
    # through ATen (torch ops), each call a segment of its own
    SDPFA_FWD = "sdpfa_fwd"      # src=(q, k, v, dropout_p, is_causal[, scale]); 4 results
    SDPFA_BWD = "sdpfa_bwd"      # src=(grad, q, k, v, out, lse, dropout_p, is_causal, seed,
                                 # offset[, scale]); 3 results
    TOPK = "topk"                # src=(input, k), arg=(dim, largest, sorted); 2 results
    ARGSORT = "argsort"          # src=(input,), arg=(dim, descending, stable)
    INDEX_PUT_ACCUMULATE = "index_put_accumulate"  # src=(acc, index, value): acc with value's rows
                                 # added at the rows index lists (dim 0)
    GROUPED_MM = "grouped_mm"    # src=(mat1, mat2, offsets): matmuls of groups offsets bounds
    RESULT = "result"            # src=(node,), arg=i: result i of a several-result node
    # factories
    FULL = "full"                # src=(fill, *extents)
    IOTA = "iota"                # src=(length, start, step)
    UNIFORM = "uniform"          # src=(low, high, seed, offset, *extents), arg=stream
    NORMAL = "normal"            # src=(mean, std, seed, offset, *extents), arg=stream


class Family(enum.Enum):
    """What an op is, for the stages that treat ops by kind."""

    LEAF = "leaf"
    POINTWISE = "pointwise"      # elementwise on tensors or scalars
    VIEW = "view"                # reindexes its input (broadcast, squeeze, permute, ...)
    RESIZE = "resize"            # slice, pad, cat: bounds concretization may specialize
    REDUCTION = "reduction"
    SCAN = "scan"                # inclusive prefix combine along one dim (cumsum, ...)
    INDEXING = "indexing"        # reads its input where an index tensor says (gather, ...)
    SCATTER = "scatter"          # its first source, with values written where an index tensor
                                 # says (a segment of its own: the writes land at data-dependent places)
    MATMUL = "matmul"
    ATEN = "aten"                # runs through ATen (torch ops) in a segment of its own
    FACTORY = "factory"          # makes a tensor from scalars


class Kind(enum.Enum):
    """Type rule of a pointwise op."""

    KEEP = "keep"          # promoted operand type
    REAL = "real"          # promoted operand type, complex made real (abs, real, imag)
    FLOAT = "float"        # promoted, ints and bools become Float
    BOOL = "bool"          # result is Bool
    INTEGRAL = "integral"  # operands must be Int/Bool, result promoted
    COMPLEX = "complex"    # float operands, result the complex type of their parts (complex)

    def result(self, compute: DataType) -> DataType:
        """The type an op of this kind gives when it computes in `compute`."""
        if self is Kind.BOOL:
            return DataType.Bool
        if self is Kind.COMPLEX:
            return complex_dtype(compute)
        return real_dtype(compute) if self is Kind.REAL else compute


@dataclass(frozen=True, slots=True)
class OpDef:
    """One op's rules. `build` is the constructor with the frontend's arguments
    (checks them, names the op and operands in errors; None for ops only made
    by other constructors). The other callables take the node `v` first:

    - `rebuild(v, src)`: `v`'s op applied to new, normalized sources (the
      shape and dtype rule; passes and the verifier re-derive types with it)
    - `reference(v, args, env)`: the value, with torch (`args`: the values of
      `v.src`, tensors or Python numbers; `env` evaluates scalars); `into(v,
      args, out)`, where given, writes it into tensor `out` instead (True) or
      declines (False), saving a copy
    - `text(v, namer)`: the printed call, `op(args)` when None
    - `kernel(v, ix, pred, L)`: the value at iteration index `ix` of `v`'s
      logical dims, built with the kernel lowering `L` (codegen/lower.py);
      None when generated kernels do not compute this op
    - `view(v, t, env)`: `t` viewed as `v` without a copy (view ops only;
      raises RuntimeError where the layout does not allow it)
    - `identity(v)`: does `v` return its first source unchanged?
    - `bounds(v)`: scalar sources that concretization may compile in
    - `check(v)`: None, or a function of an Env that raises ExecutionError
      when the run-time extents disagree (checks symbolic shapes per call)
    - `write(v, ix, L)`: a scatter's write at point `ix` of its index's
      iteration space: (the result's index written, the value, the predicate
      under which it is written), built with the lowering `L` (codegen/scatter.py)
    - `dims(v, k)`: for each logical dim of tensor operand k, the logical dim
      of `v` it becomes, REDUCED where the op combines values along it (a
      reduction's or a contraction's dim: `partial` says how partial results
      combine, "sum", "max", "min" or "avg"; None: they cannot be), or None
      where it has no counterpart (sharding propagation reads this)
    - `results(v)`: for an op that makes several tensors in one call (one
      ATen call for sdpfa_fwd's output, log-sum-exp and rng state), the
      `ResultType` of each, `v`'s own type first. Such a node's value is the
      tuple of them; RESULT nodes read it (ir/ops/results.py), nothing else

    Pointwise ops also carry `kind` (type rule), `py` (evaluation on Python
    numbers), `torch` (on tensors), `cuda` (a format string over operand
    texts, e.g. "hir_exp({0})") and `sym` (how printed scalar expressions spell
    it: an infix symbol such as "+", a call name such as "min", or a function of
    the result's dtype giving one);
    `cuda_def` is C++ the kernel source needs for `cuda` beyond kernels/hostir.cuh.
    """

    op: Op
    family: Family
    arity: tuple[int, int | None] = (1, 1)   # (min, max) sources; max None: any number
    build: Callable | None = None
    rebuild: Callable | None = None
    reference: Callable | None = None
    into: Callable | None = None
    text: Callable | None = None
    kernel: Callable | None = None
    view: Callable | None = None
    identity: Callable | None = None
    bounds: Callable | None = None
    check: Callable | None = None
    write: Callable | None = None
    dims: Callable | None = None
    results: Callable | None = None
    partial: str | None = None
    kind: Kind | None = None
    py: Callable | None = None
    torch: Callable | None = None
    cuda: str | None = None
    cuda_def: str | None = None
    sym: str | Callable | None = None

    @property
    def name(self) -> str:
        return self.op.value


OPS: dict[Op, OpDef] = {}

REDUCED = "reduced"
"""`OpDef.dims` entry of an operand dim the op combines values along."""


class ResultType(NamedTuple):
    """One result of a several-result node (`OpDef.results`): its dtype and
    axes, and for each logical dim of the node the result's dim it is (None
    where the result has no such dim: sharding propagation reads this)."""

    dtype: DataType
    axes: tuple
    dims: tuple


def define(record: OpDef) -> OpDef:
    """Register an op's record (once per op). A view op without its own
    reference rule is evaluated by its view rule."""
    if record.op in OPS:
        raise AssertionError(f"op {record.op} is defined twice")
    if record.reference is None and record.view is not None:
        view = record.view
        record = replace(record, reference=lambda v, args, env: view(v, args[0], env))
    OPS[record.op] = record
    return record


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
    """A scalar (axes is None) or a tensor (axes is a tuple of Axis).

    `refined` lists logical dims that concretization found to be of extent 1
    at run time: its op rule gives them as iteration axes, the node holds them
    as broadcasts (see `refine`)."""

    op: Op
    dtype: DataType
    src: tuple["Val", ...] = ()
    arg: Any = None
    axes: tuple[Axis, ...] | None = None
    name: str | None = field(default=None)
    refined: tuple[int, ...] = ()

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
        return sum(1 for a in self.axes if a.kind is not AxisKind.REDUCE)

    @property
    def const(self):
        """The Python value of a constant scalar, else None."""
        return self.arg if self.op is Op.CONST else None

    @property
    def opdef(self) -> OpDef:
        return OPS[self.op]

    def renamed(self, name: str | None) -> "Val":
        return replace(self, name=name)

    # Scalar arithmetic builds symbolic expressions (host loop bounds, slice bounds)
    # through the ops' own constructors, which fold constants.
    def _scalar(self, op: Op, *operands) -> "Val":
        if any(isinstance(o, Val) and o.axes is not None for o in operands):
            raise TypeError("arithmetic operators on Vals are for scalars; use fd.ops for tensors")
        return OPS[op].build(*operands)

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
    dtype = dtype or python_scalar_dtype(value)
    return Val(Op.CONST, dtype, arg=coerce(value, dtype))


ONE = const(1)
ZERO = const(0)


def refine(v: Val, dims) -> Val:
    """`v` with logical dims `dims` made broadcasts of extent 1: concretization's
    one change of a node's type, recorded in `v.refined` so that the op rule
    (`rebuild`) and the verifier re-derive it."""
    dims = tuple(sorted(set(v.refined) | set(dims)))
    if not dims:
        return v
    logical = 0
    axes = []
    for ax in v.axes:
        if ax.kind is AxisKind.REDUCE:
            axes.append(ax)
            continue
        if logical in dims and ax.kind is AxisKind.ITER:
            ax = Axis(ONE, AxisKind.BCAST)
        axes.append(ax)
        logical += 1
    return replace(v, axes=tuple(axes), refined=dims)
