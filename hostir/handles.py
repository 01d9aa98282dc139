"""Tensor and Scalar: the handles a FusionDefinition returns for the values
being defined (nvFuser's TensorView / Scalar), with Python operators and, on
Tensor, nvFuser's multi-GPU scheduling calls (recorded in the definition's
loop domains, see dist/sharding.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .ir.dtypes import DataType
from .dist.sharding import LoopDomain
from .ir.errors import DefinitionError, UnsupportedError
from .ir.node import AxisKind, Op, Val
from .ir.printer import type_text
from .multidevice import IterDomain
from .repro import recorded

if TYPE_CHECKING:
    from .frontend import FusionDefinition


class _Handle:
    """A value being defined in a FusionDefinition (nvFuser's Tensor / Scalar)."""

    __slots__ = ("val", "fd")

    def __init__(self, val: Val, fd: "FusionDefinition"):
        self.val = val
        self.fd = fd

    @property
    def name(self) -> str:
        return self.val.name

    @property
    def dtype(self) -> DataType:
        return self.val.dtype

    def __repr__(self) -> str:
        return f"{self.val.name}: {type_text(self.val)}"

    def is_tensor(self) -> bool:
        return self.val.is_tensor

    def _bin(self, op, other, reverse=False):
        a, b = (other, self) if reverse else (self, other)
        return self.fd.ops._pointwise(op, a, b)

    def __add__(self, o): return self._bin(Op.ADD, o)
    def __radd__(self, o): return self._bin(Op.ADD, o, True)
    def __sub__(self, o): return self._bin(Op.SUB, o)
    def __rsub__(self, o): return self._bin(Op.SUB, o, True)
    def __mul__(self, o): return self._bin(Op.MUL, o)
    def __rmul__(self, o): return self._bin(Op.MUL, o, True)
    def __truediv__(self, o): return self._bin(Op.DIV, o)
    def __rtruediv__(self, o): return self._bin(Op.DIV, o, True)
    def __pow__(self, o): return self._bin(Op.POW, o)
    def __rpow__(self, o): return self._bin(Op.POW, o, True)
    def __mod__(self, o): return self._bin(Op.REMAINDER, o)
    def __rmod__(self, o): return self._bin(Op.REMAINDER, o, True)
    def __and__(self, o): return self._bin(Op.BITWISE_AND, o)
    def __rand__(self, o): return self._bin(Op.BITWISE_AND, o, True)
    def __or__(self, o): return self._bin(Op.BITWISE_OR, o)
    def __ror__(self, o): return self._bin(Op.BITWISE_OR, o, True)
    def __xor__(self, o): return self._bin(Op.BITWISE_XOR, o)
    def __rxor__(self, o): return self._bin(Op.BITWISE_XOR, o, True)
    def __lshift__(self, o): return self._bin(Op.BITWISE_LEFT_SHIFT, o)
    def __rshift__(self, o): return self._bin(Op.BITWISE_RIGHT_SHIFT, o)
    def __lt__(self, o): return self._bin(Op.LT, o)
    def __le__(self, o): return self._bin(Op.LE, o)
    def __gt__(self, o): return self._bin(Op.GT, o)
    def __ge__(self, o): return self._bin(Op.GE, o)
    def __eq__(self, o): return self._bin(Op.EQ, o)  # nvFuser builds an eq op
    def __ne__(self, o): return self._bin(Op.NE, o)
    __hash__ = object.__hash__
    def __neg__(self): return self.fd.ops._pointwise(Op.NEG, self)
    def __abs__(self): return self.fd.ops._pointwise(Op.ABS, self)
    def __invert__(self): return self.fd.ops._pointwise(Op.BITWISE_NOT, self)


class Scalar(_Handle):
    __slots__ = ()


class Tensor(_Handle):
    __slots__ = ()

    @property
    def ndim(self) -> int:
        return self.val.ndim

    @recorded("{self}.shape")
    def shape(self) -> list[Scalar]:
        return [self.fd._scalar_handle(a.extent) for a in self.val.logical]

    def size(self, dim: int) -> Scalar:
        return self.fd.ops.size(self, dim)

    # multi-GPU scheduling, in nvFuser's vocabulary (see hostir.multidevice)
    def _loop_domain(self):
        return self.fd._domain(self.val)

    def set_device_mesh(self, mesh) -> None:
        self._loop_domain().mesh = mesh

    def split(self, axis: int, factor: int, inner_split: bool = True) -> None:
        """Split loop axis `axis`: the inner part has `factor` (the outer part with
        inner_split=False). A tensor's logical shape does not change."""
        self._loop_domain().split(axis, factor, inner_split)

    def outer_split(self, axis: int, factor: int) -> None:
        self.split(axis, factor, inner_split=False)

    def inner_split(self, axis: int, factor: int) -> None:
        self.split(axis, factor, inner_split=True)

    def axis(self, i: int):
        domain = self._loop_domain()
        return IterDomain(domain, domain.index(i, "axis"))

    def get_loop_domain(self) -> list:
        """The loop axes, as `axis(i)` gives them one at a time."""
        domain = self._loop_domain()
        return [IterDomain(domain, i) for i in range(len(domain.axes))]

    def reorder(self, old2new: dict) -> None:
        """Move loop axes: `{old position: new position}`."""
        domain = self._loop_domain()
        axes = list(domain.axes)
        moved = {domain.index(o, "reorder"): domain.index(n, "reorder") for o, n in old2new.items()}
        rest = [a for i, a in enumerate(axes) if i not in moved]
        out = [None] * len(axes)
        for o, n in moved.items():
            out[n] = axes[o]
        it = iter(rest)
        domain.axes = [a if a is not None else next(it) for a in out]

    def set_allocation_domain(self, axes, new_contiguity=None) -> None:
        """Accepted: hostir allocates a communicated dim outermost itself."""
        self._loop_domain()

    def merge(self, *args, **kwargs):
        raise UnsupportedError("merge of loop axes is not supported; split a dim instead (a dim "
                               "may be split several times)")

    def rfactor(self, axes) -> "Tensor":
        """nvFuser's rfactor of reduction loop axes: the tensor of partial results
        over those axes. hostir computes a reduction over a sharded dim so
        itself (local partial results, then a collective), so the handle this
        returns takes annotations (a mesh, parallelized axes) and checks them
        for sense but leaves the plan to hostir."""
        domain = self._loop_domain()
        picked = [domain.index(a, "rfactor") for a in (axes if isinstance(axes, (list, tuple)) else [axes])]
        for i in picked:
            if self.val.axes[domain.axes[i].source].kind is not AxisKind.REDUCE:
                raise DefinitionError(f"rfactor of {self.val!r}: loop axis {i} is not a reduction axis")
        return _Partials(self.val, self.fd, domain)

    @property
    def mesh(self):
        return self._loop_domain().mesh


class _Partials(Tensor):
    """What `rfactor` returns: the local partial results of a reduction. Its
    annotations go to a loop domain of its own, which the plan does not read
    (hostir makes and combines the partials itself)."""

    __slots__ = ("_own",)

    def __init__(self, val: Val, fd: "FusionDefinition", of):
        super().__init__(val, fd)
        self._own = LoopDomain(val, of.mesh)

    def _loop_domain(self):
        return self._own
