"""Data types and type promotion (torch's rules, which nvFuser follows)."""
from __future__ import annotations

import enum

import torch

from .errors import DefinitionError


class DataType(enum.Enum):
    """Element types, named as in nvFuser's Python frontend."""

    Null = "null"
    Bool = "bool"
    Int32 = "int32"
    Int = "int64"
    Half = "float16"
    BFloat16 = "bfloat16"
    Float = "float32"
    Double = "float64"
    Float8_e4m3fn = "float8_e4m3fn"
    Float8_e5m2 = "float8_e5m2"
    ComplexFloat = "complex64"
    ComplexDouble = "complex128"

    def __repr__(self) -> str:
        return f"DataType.{self.name}"

    @property
    def short(self) -> str:
        return _SHORT[self]

    @property
    def is_float(self) -> bool:
        return self in (DataType.Half, DataType.BFloat16, DataType.Float, DataType.Double,
                        DataType.Float8_e4m3fn, DataType.Float8_e5m2)

    @property
    def is_float8(self) -> bool:
        return self in (DataType.Float8_e4m3fn, DataType.Float8_e5m2)

    @property
    def is_complex(self) -> bool:
        return self in (DataType.ComplexFloat, DataType.ComplexDouble)

    @property
    def is_inexact(self) -> bool:
        """Floating point, real or complex (what torch's true division and float ops keep)."""
        return self.is_float or self.is_complex

    @property
    def is_int(self) -> bool:
        return self in (DataType.Int32, DataType.Int)

    @property
    def is_bool(self) -> bool:
        return self is DataType.Bool

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self]

    @property
    def torch(self) -> torch.dtype:
        if self is DataType.Null:
            raise ValueError("DataType.Null has no torch dtype")
        return _TO_TORCH[self]

    @property
    def category(self) -> int:
        """0 bool, 1 integer, 2 floating point, 3 complex (torch's promotion categories)."""
        return 0 if self.is_bool else 1 if self.is_int else 3 if self.is_complex else 2


_SHORT = {
    DataType.Null: "null", DataType.Bool: "bool", DataType.Int32: "int32", DataType.Int: "int64",
    DataType.Half: "half", DataType.BFloat16: "bf16", DataType.Float: "float",
    DataType.Double: "double", DataType.Float8_e4m3fn: "f8e4m3", DataType.Float8_e5m2: "f8e5m2",
    DataType.ComplexFloat: "cfloat", DataType.ComplexDouble: "cdouble",
}
_ITEMSIZE = {
    DataType.Null: 0, DataType.Bool: 1, DataType.Int32: 4, DataType.Int: 8, DataType.Half: 2,
    DataType.BFloat16: 2, DataType.Float: 4, DataType.Double: 8, DataType.Float8_e4m3fn: 1,
    DataType.Float8_e5m2: 1, DataType.ComplexFloat: 8, DataType.ComplexDouble: 16,
}
_TO_TORCH = {
    DataType.Bool: torch.bool, DataType.Int32: torch.int32, DataType.Int: torch.int64,
    DataType.Half: torch.float16, DataType.BFloat16: torch.bfloat16,
    DataType.Float: torch.float32, DataType.Double: torch.float64,
    DataType.Float8_e4m3fn: torch.float8_e4m3fn, DataType.Float8_e5m2: torch.float8_e5m2,
    DataType.ComplexFloat: torch.complex64, DataType.ComplexDouble: torch.complex128,
}
_FROM_TORCH = {v: k for k, v in _TO_TORCH.items()}


def from_torch(dtype: torch.dtype) -> DataType | None:
    """The DataType of a torch dtype, or None when hostir does not support it."""
    return _FROM_TORCH.get(dtype)


def real_dtype(dtype: DataType) -> DataType:
    """The type of a complex type's parts (Float for ComplexFloat); other types are their own."""
    return {DataType.ComplexFloat: DataType.Float, DataType.ComplexDouble: DataType.Double}.get(
        dtype, dtype)


def complex_dtype(dtype: DataType) -> DataType:
    """The complex type whose parts are `dtype` (ComplexFloat for Float, ComplexDouble
    for Double); complex types are their own."""
    if dtype.is_complex:
        return dtype
    if dtype not in (DataType.Float, DataType.Double):
        raise ValueError(f"no complex type has {dtype.short} parts")
    return DataType.ComplexFloat if dtype is DataType.Float else DataType.ComplexDouble


def python_scalar_dtype(value) -> DataType:
    """The DataType a Python number is defined with (nvFuser: bool, Int, Double, ComplexDouble)."""
    if isinstance(value, bool):
        return DataType.Bool
    if isinstance(value, int):
        return DataType.Int
    if isinstance(value, float):
        return DataType.Double
    if isinstance(value, complex):
        return DataType.ComplexDouble
    raise TypeError(f"not a Python number: {value!r}")


def _dummy(dtype: DataType, is_tensor: bool):
    if is_tensor:
        return torch.empty((), dtype=dtype.torch)
    return {0: True, 1: 1, 2: 1.0}[dtype.category]


ZERO_DIM = "zero_dim"
"""Operand kind for `promote`: a 0-dim tensor. It ranks between tensors with
dims and scalars, as in torch.result_type and nvFuser (a Half tensor plus a
0-dim Float tensor stays Half)."""


def promote(operands: list[tuple[DataType, bool | str]]) -> DataType:
    """Result type of a pointwise op, given (dtype, kind) of each operand; kind
    is True (a tensor with dims), ZERO_DIM (a 0-dim tensor) or False (a scalar).

    Follows torch.result_type: tensors with dims decide within their category,
    then 0-dim tensors, then scalars, each only promoting the result when of a
    higher category (a Double scalar times a BFloat16 tensor stays BFloat16,
    times an Int tensor becomes Float; a scalar counts as Bool, Int, Float or
    ComplexFloat; a complex operand of a higher category keeps a float tensor's
    precision: Double times a complex scalar is ComplexDouble). With no tensor
    operands the scalars promote among themselves.

    Float8 operands count as Float: arithmetic on them computes in, and
    returns, Float (torch refuses to promote float8; nvFuser upcasts it).
    """
    operands = [(DataType.Float if d.is_float8 else d, t) for d, t in operands]
    dims = [d for d, t in operands if t and t != ZERO_DIM]
    zeros = [d for d, t in operands if t == ZERO_DIM]
    scalars = [d for d, t in operands if not t]
    if not dims and not zeros:
        best = max(scalars, key=lambda d: (d.category, d.itemsize))
        return (DataType.Bool, DataType.Int, DataType.Double, DataType.ComplexDouble)[best.category]
    wrapped = None
    if scalars:
        wrapped = (DataType.Bool, DataType.Int, DataType.Float,
                   DataType.ComplexFloat)[max(d.category for d in scalars)]
    return _combine(_promote_all(dims), _combine(_promote_all(zeros), wrapped))


def _promote_all(dtypes: list[DataType]) -> DataType | None:
    result = None
    for d in dtypes:
        result = d if result is None else from_torch(torch.promote_types(result.torch, d.torch))
    return result


def _combine(higher: DataType | None, lower: DataType | None) -> DataType | None:
    """torch's combine_categories: `lower` (0-dim tensors or scalars) only
    matters when of a higher category than `higher`."""
    if higher is None:
        return lower
    if lower is None or lower.category <= higher.category:
        return higher
    if lower.is_complex:  # (torch's own rule: a Half tensor would give complex32)
        got = torch.result_type(torch.empty(1, dtype=higher.torch), torch.empty((), dtype=lower.torch))
        if from_torch(got) is None:
            raise DefinitionError(
                f"type promotion of a {higher.short} tensor with a complex operand gives {got} "
                f"in torch, which hostir (as nvFuser) does not support; cast the tensor to Float "
                f"first")
        return from_torch(got)
    return from_torch(torch.promote_types(higher.torch, lower.torch))


def coerce(value, dtype: DataType):
    """A Python value converted to the Python type that represents `dtype`. A
    complex value converted to a real type keeps its real part (to Bool: whether
    it is nonzero), as torch's casts."""
    if dtype.is_complex:
        return complex(value)
    if isinstance(value, complex) and not dtype.is_bool:
        value = value.real
    if dtype.is_bool:
        return bool(value)
    if dtype.is_int:
        return int(value)
    return float(value)


def cast_tensor(x: torch.Tensor, dtype: DataType) -> torch.Tensor:
    """`x` converted to `dtype` as torch's `.to` converts it, without torch's
    warning for complex to real (the real part is kept; to Bool: nonzero)."""
    if x.is_complex() and not dtype.is_complex:
        return (x != 0) if dtype.is_bool else x.real.to(dtype.torch, copy=True)
    return x.to(dtype.torch)


_CF, _CD = DataType.ComplexFloat, DataType.ComplexDouble
_EXACT = {
    DataType.Bool: frozenset(DataType) - {DataType.Null},
    DataType.Int32: frozenset({DataType.Int32, DataType.Int, DataType.Double, _CD}),
    DataType.Int: frozenset({DataType.Int}),
    DataType.Half: frozenset({DataType.Half, DataType.Float, DataType.Double, _CF, _CD}),
    DataType.BFloat16: frozenset({DataType.BFloat16, DataType.Float, DataType.Double, _CF, _CD}),
    DataType.Float: frozenset({DataType.Float, DataType.Double, _CF, _CD}),
    DataType.Double: frozenset({DataType.Double, _CD}),
    DataType.Float8_e4m3fn: frozenset({DataType.Float8_e4m3fn, DataType.Half, DataType.BFloat16,
                                       DataType.Float, DataType.Double, _CF, _CD}),
    DataType.Float8_e5m2: frozenset({DataType.Float8_e5m2, DataType.Half, DataType.BFloat16,
                                     DataType.Float, DataType.Double, _CF, _CD}),
    _CF: frozenset({_CF, _CD}),
    _CD: frozenset({_CD}),
}


def exact_cast(src: DataType, dst: DataType) -> bool:
    """Every value of `src` is represented exactly in `dst` (so src -> dst -> src
    is the identity: bf16 -> float -> bf16 folds, float -> bf16 -> float does not)."""
    return dst in _EXACT.get(src, ())


def compute_dtype(dtype: DataType) -> DataType:
    """The type arithmetic runs in: reduced-precision floats compute in Float."""
    return DataType.Float if dtype in (DataType.Half, DataType.BFloat16) or dtype.is_float8 else dtype
