"""Scatter kernels: a scatter segment (segment/segmenter.py) runs as two
launches of generated kernels on one buffer.

- fill: pointwise over the result's shape, it stores the scatter's input (its
  prologue computed in the kernel, indexed per use);
- write: over the index's shape, each point stores its src value where the
  op's `write` rule says (ir/ops/indexing.py: at the index value along the
  scattered dim), guarded by that position being in range.

Two launches, because a write may land anywhere: no thread could know that
the copy of the position it overwrites is done without a grid-wide sync. The
write kernel stores one point a thread (its store positions are data) and
always takes the plain schedule."""
from __future__ import annotations

from ..ir.errors import UnsupportedError
from ..ir.node import OPS, Family
from ..segment import Segment
from .kir import K, Kernel, TensorParam
from .lower import INT, PointwiseLowering, _reachable
from .spec import KernelOptions, KernelSpec, Variant, _made, index_type


class ScatterLowering(PointwiseLowering):
    """One of a scatter segment's two kernels; its one output is the scatter."""

    def __init__(self, seg: Segment, name: str):
        super().__init__(seg, name)
        scatters = [v for v in seg.exprs if OPS[v.op].family is Family.SCATTER]
        if len(scatters) != 1 or tuple(seg.outputs) != (scatters[0],):
            raise UnsupportedError(f"a scatter segment makes one scatter, its only output "
                                   f"(has {scatters}, outputs {list(seg.outputs)})")
        self.v = scatters[0]

    def _space(self, t) -> tuple:
        """Iterate over `t`'s logical dims; the scatter is the output."""
        b, k, v = self.b, self.k, self.v
        k.extent_vals = [a.extent for a in t.logical]
        k.outputs.append(TensorParam(v, v.ndim, v.dtype))
        return tuple(b.mk(K.INDEX, INT, arg=d) for d in range(t.ndim))

    def fill(self) -> Kernel:
        v, k = self.v, self.k
        ix = self._space(v)
        k.stores.append((0, self.cast(self.value(v.src[0], ix, None), v.dtype), ix))
        k.order = _reachable(self.b.order, [n for _, x, at in k.stores for n in (x, *at)])
        return k

    def write(self) -> Kernel:
        v, k, b = self.v, self.k, self.b
        ix = self._space(v.src[1])
        at, value, ok = OPS[v.op].write(v, ix, self)
        k.stores.append((0, self.cast(value, v.dtype), at))
        k.guard = None if b.is_const(ok, True) else ok
        roots = [n for _, x, at in k.stores for n in (x, *at)] + ([k.guard] if k.guard is not None else [])
        k.order = _reachable(b.order, roots)
        return k


class ScatterSpec(KernelSpec):
    """The write kernel's launch rule: one point a thread, the plain schedule
    (no vectors, tiles or staging: its stores go where its index says)."""

    def choose(self, kernel: Kernel, extents: list[int], ins: list, outs, params: list) -> Variant:
        return self.variant(kernel, 1, index_type(extents, ins, outs, params))

    def typical_variants(self) -> list[Variant]:
        return [self.variant(self.plain, 1, "long long"), self.variant(self.plain, 1, "int")]


def scatter_specs(seg: Segment, name: str, options: KernelOptions) -> tuple[KernelSpec, KernelSpec]:
    """The (fill, write) specs of a scatter segment (UnsupportedError where a
    prologue op has no kernel rule)."""
    fill = KernelSpec(f"{name}_fill", ScatterLowering(seg, f"{name}_fill").fill(), None, options)
    kern = ScatterLowering(seg, f"{name}_write").write()
    return _made(fill), _made(ScatterSpec(f"{name}_write", kern, None, options))
