"""Data types and type promotion (torch's rules, which nvFuser follows)."""
from __future__ import annotations

import enum

import torch


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

    def __repr__(self) -> str:
        return f"DataType.{self.name}"

    @property
    def short(self) -> str:
        return _SHORT[self]

    @property
    def is_float(self) -> bool:
        return self in (DataType.Half, DataType.BFloat16, DataType.Float, DataType.Double)

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
        """0 bool, 1 integer, 2 floating point (torch's promotion categories)."""
        return 0 if self.is_bool else 1 if self.is_int else 2


_SHORT = {
    DataType.Null: "null", DataType.Bool: "bool", DataType.Int32: "int32", DataType.Int: "int64",
    DataType.Half: "half", DataType.BFloat16: "bf16", DataType.Float: "float",
    DataType.Double: "double",
}
_ITEMSIZE = {
    DataType.Null: 0, DataType.Bool: 1, DataType.Int32: 4, DataType.Int: 8, DataType.Half: 2,
    DataType.BFloat16: 2, DataType.Float: 4, DataType.Double: 8,
}
_TO_TORCH = {
    DataType.Bool: torch.bool, DataType.Int32: torch.int32, DataType.Int: torch.int64,
    DataType.Half: torch.float16, DataType.BFloat16: torch.bfloat16,
    DataType.Float: torch.float32, DataType.Double: torch.float64,
}
_FROM_TORCH = {v: k for k, v in _TO_TORCH.items()}


def from_torch(dtype: torch.dtype) -> DataType | None:
    """The DataType of a torch dtype, or None when hostir does not support it."""
    return _FROM_TORCH.get(dtype)


def python_scalar_dtype(value) -> DataType:
    """The DataType a Python number is defined with (nvFuser: bool, Int, Double)."""
    if isinstance(value, bool):
        return DataType.Bool
    if isinstance(value, int):
        return DataType.Int
    if isinstance(value, float):
        return DataType.Double
    raise TypeError(f"not a Python number: {value!r}")


def _dummy(dtype: DataType, is_tensor: bool):
    if is_tensor:
        return torch.empty((), dtype=dtype.torch)
    return {0: True, 1: 1, 2: 1.0}[dtype.category]


def promote(operands: list[tuple[DataType, bool]]) -> DataType:
    """Result type of a pointwise op, given (dtype, is_tensor) of each operand.

    Follows torch.result_type: tensors decide within their category; a scalar
    only promotes the result when it is of a higher category (a Double scalar
    times a BFloat16 tensor stays BFloat16, times an Int tensor becomes Float).
    With no tensor operands the scalars promote among themselves.
    """
    tensors = [d for d, t in operands if t]
    scalars = [d for d, t in operands if not t]
    if not tensors:
        best = max(scalars, key=lambda d: (d.category, d.itemsize))
        if best.category == 2:
            return DataType.Double
        return DataType.Int if best.category == 1 else DataType.Bool
    result = tensors[0]
    for d in tensors[1:]:
        result = from_torch(torch.promote_types(result.torch, d.torch))
    top = max((d.category for d in scalars), default=-1)
    if top > result.category:
        result = DataType.Float if top == 2 else DataType.Int
    return result


def float_of(dtype: DataType) -> DataType:
    """Integers and bools become Float for transcendental ops (torch's int-to-float)."""
    return dtype if dtype.is_float else DataType.Float


def compute_dtype(dtype: DataType) -> DataType:
    """The type arithmetic runs in: reduced-precision floats compute in Float."""
    return DataType.Float if dtype in (DataType.Half, DataType.BFloat16) else dtype
