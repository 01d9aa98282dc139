"""`fd.ops`: the op namespace of a FusionDefinition (frontend.py), with
nvFuser's names and argument conventions. Most methods are made from the
constructors the op modules register (`hostir.ir.ops.FRONTEND`); the ones
here need the definition itself (random numbers' seed and offset inputs,
stride orders, extents as Scalars)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .handles import Scalar
from .ir import ops as O
from .ir.ops import norms
from .ir.dtypes import DataType
from .ir.errors import DefinitionError
from .ir.fusion import Output
from .ir.node import Op, Val
from .repro import recorded

if TYPE_CHECKING:
    from .frontend import FusionDefinition


class Ops:
    """`fd.ops`: every op of the frontend, with nvFuser's argument conventions.
    The methods are made from the constructors the op modules register
    (`hostir.ir.ops.FRONTEND`); `size` reads an extent."""

    def __init__(self, fd: "FusionDefinition"):
        self._fd = fd

    def _call(self, opname: str, fn, *args, **kwargs):
        fd = self._fd
        fd._check_defining(f"fd.ops.{opname}")
        given, given_kw = args, kwargs
        args = [fd._unwrap(a, opname) for a in args]
        kwargs = {k: fd._unwrap(v, opname) for k, v in kwargs.items()}
        out = fn(*args, **kwargs)
        out = tuple(fd._wrap(v) for v in out) if isinstance(out, tuple) else fd._wrap(out)
        if fd._script.depth == 0:
            if given and isinstance(given[0], Op):  # _pointwise: the op is the method's name
                given = given[1:]
            fd._script.record(f"fd.ops.{opname}", given, given_kw, out)
        return out

    def _pointwise(self, op: Op, *args):
        return self._call(op.value, O.pointwise, op, *args)

    def _random(self, op: Op, name: str, a, b, shape, dtype, rng_seed, rng_offset):
        fd = self._fd
        if rng_seed is None and rng_offset is None:
            fd._check_defining(f"fd.ops.{name}")
            seed, offset, stream = fd._rng_inputs()

            def make(a_, b_, shape_, dtype_, _s, _o):
                return O.random(op, a_, b_, shape_, dtype_, seed, offset, stream)
        else:
            def make(a_, b_, shape_, dtype_, s_, o_):
                return O.random(op, a_, b_, shape_, dtype_, s_, o_)
        return self._call(name, make, a, b, shape, dtype, rng_seed, rng_offset)

    def stride_order(self, t, stride_order):
        """nvFuser's fd.ops.stride_order: `t` with its memory laid out in
        `stride_order` (as define_tensor's and add_output's keyword: the order of
        each dim among the strides). The values are t's; the layout is applied
        where the result is a fusion output (intermediates live in registers)."""
        fd = self._fd
        val = fd._unwrap(t, "stride_order")
        if not isinstance(val, Val) or not val.is_tensor:
            raise DefinitionError(f"stride_order: expected a tensor, got {t!r}")
        order = tuple(stride_order)
        if sorted(order) != list(range(val.ndim)):
            raise DefinitionError(f"stride_order: {list(order)} for {t!r} is not a permutation of "
                                  f"0..{val.ndim - 1}")
        out = self._call("stride_order", lambda x, _o: O.set_(x), t, list(order))
        fd._stride_orders[id(out.val)] = order
        return out

    def uniform(self, minval, maxval, shape, dtype: DataType = DataType.Float, rng_seed=None,
                rng_offset=None):
        """Uniform random numbers in [minval, maxval) of `shape` (hostir.ir.ops.random)."""
        return self._random(Op.UNIFORM, "uniform", minval, maxval, shape, dtype, rng_seed, rng_offset)

    def normal(self, mean, std, shape, dtype: DataType = DataType.Float, rng_seed=None,
               rng_offset=None):
        """Normal random numbers of `mean` and `std` of `shape` (hostir.ir.ops.random)."""
        return self._random(Op.NORMAL, "normal", mean, std, shape, dtype, rng_seed, rng_offset)

    def rand_like(self, t, rng_seed=None, rng_offset=None):
        """uniform(0, 1) of t's shape and dtype."""
        val = self._fd._unwrap(t, "rand_like")
        return self.uniform(0.0, 1.0, self.shape(t) if isinstance(val, Val) and val.is_tensor else t,
                            val.dtype if isinstance(val, Val) else DataType.Float, rng_seed, rng_offset)

    def randn_like(self, t, rng_seed=None, rng_offset=None):
        """normal(0, 1) of t's shape and dtype."""
        val = self._fd._unwrap(t, "randn_like")
        return self.normal(0.0, 1.0, self.shape(t) if isinstance(val, Val) and val.is_tensor else t,
                           val.dtype if isinstance(val, Val) else DataType.Float, rng_seed, rng_offset)

    @recorded("fd.ops.size")
    def size(self, t, dim: int):
        self._fd._check_defining("fd.ops.size")
        val = self._fd._unwrap(t, "size")
        if not isinstance(val, Val) or not val.is_tensor:
            raise DefinitionError(f"size: expected a tensor, got {t!r}")
        return Scalar(val.logical[O.norm_dim("size", val, dim)].extent, self._fd)

    @recorded("fd.ops.shape")
    def shape(self, t) -> list:
        """Every extent of `t`, a vector of Scalars usable as a shape (nvFuser's fd.ops.shape)."""
        self._fd._check_defining("fd.ops.shape")
        val = self._fd._unwrap(t, "shape")
        if not isinstance(val, Val) or not val.is_tensor:
            raise DefinitionError(f"shape: expected a tensor, got {t!r}")
        return [Scalar(a.extent, self._fd) for a in val.logical]

    def tensor_sizes(self, t) -> list:
        """nvFuser's tensor_sizes: every extent of `t`, one Scalar each (as shape)."""
        return self.shape(t)

    @recorded("fd.ops.at")
    def at(self, vector, index: int):
        """nvFuser's at: entry `index` of a vector of Scalars (define_vector, shape)."""
        self._fd._check_defining("fd.ops.at")
        if not isinstance(vector, (list, tuple)) or not all(isinstance(x, Scalar) for x in vector):
            raise DefinitionError(f"at: expected a vector of Scalars (define_vector, fd.ops.shape), got "
                                  f"{vector!r}")
        if isinstance(index, bool) or not isinstance(index, int) or not -len(vector) <= index < len(vector):
            raise DefinitionError(f"at: index {index!r} is out of range for a vector of {len(vector)} "
                                  f"entries")
        return vector[index]

    def batch_norm(self, arg, weight, bias, running_mean, running_var, momentum, eps, training: bool,
                   channels_last: bool = False):
        """nvFuser's batch_norm -> (output, mean, invstd) (hostir.ir.ops.norms).
        With training and running statistics, the new running_mean and
        running_var are written into those inputs after the call (hidden
        outputs aliasing them, as nvFuser's), which must be inputs of the
        fusion (define_tensor)."""
        fd = self._fd
        for what, t in (("running_mean", running_mean), ("running_var", running_var)):
            if training and t is not None and fd._unwrap(t, "batch_norm").op is not Op.TENSOR_INPUT:
                raise DefinitionError(f"batch_norm: {what} {t!r} is updated in place, so it must be an input "
                                      f"of the fusion (define_tensor)")

        def build(*args):
            y, mean, invstd, updates = norms.batch_norm(*args)
            for new, run in updates:
                fd._outputs.append(Output(new, run, None))
            return y, mean, invstd
        return self._call("batch_norm", build, arg, weight, bias, running_mean, running_var, momentum,
                          eps, training, channels_last)


def _op_method(name: str, fn):
    def method(self, *args, **kwargs):
        return self._call(name, fn, *args, **kwargs)
    method.__name__ = name
    method.__doc__ = fn.__doc__
    return method


for _name, _fn in O.FRONTEND.items():
    setattr(Ops, _name, _op_method(_name, _fn))
