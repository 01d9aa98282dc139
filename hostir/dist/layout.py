"""How one sharded dim lies over the ranks: the blocks nvFuser's split chains make.

A logical dim of extent E split by `outer_split`/`inner_split` and with some
parts parallelized over mesh dims is, outermost first,

    o_0, n_1, o_1, n_2, ..., n_k, o_k        (E = product of all of them)

where n_j is the size of mesh dim `order[j-1]` and the o_j are local segments
(`locals`; at most one is None: the rest of the extent, known at run time).
A rank holds, at its coordinate along each of those mesh dims, the o's:
`outer_split(d, n)` + parallelize the outer part is (1, n, rest) — contiguous
blocks, the common case (`Layout.block`); `inner_split(d, n)` + parallelize
the inner part is (rest, n, 1) — a rank holds every n-th element; two mesh
dims on one dim nest their blocks.

Going from a rank's part to the whole dim, or back, is one step per mesh dim
(`steps`): with the dim viewed as [A, n, B] around that mesh dim, a gather
puts each rank's [A, B] at its index of n, a take keeps this rank's.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.errors import ExecutionError


def _prod(sizes) -> int | None:
    out = 1
    for s in sizes:
        if s is None:
            return None
        out *= s
    return out


@dataclass(frozen=True)
class Layout:
    order: tuple[int, ...]              # mesh dims, outermost first
    locals: tuple[int | None, ...]      # len(order) + 1 local segment sizes

    @staticmethod
    def block(m: int) -> "Layout":
        """Contiguous equal blocks over mesh dim m (outer_split by the mesh size)."""
        return Layout((m,), (1, None))

    @staticmethod
    def from_chain(chain: list[tuple[int | None, int | None]]) -> "Layout":
        """From a dim's segments outermost first, each (static size or None, mesh
        dim or None for a local segment)."""
        order, locals_, cur = [], [], 1
        for size, m in chain:
            if m is None:
                cur = None if cur is None or size is None else cur * size
                continue
            order.append(m)
            locals_.append(cur)
            cur = 1
        locals_.append(cur)
        if None not in locals_:  # a static extent: the innermost is what is left
            locals_[-1] = None
        return Layout(tuple(order), tuple(locals_))

    @property
    def is_block(self) -> bool:
        return len(self.order) == 1 and self.locals == (1, None)

    def steps(self, mesh_shape) -> list[tuple[int, int | None, int | None]]:
        """(mesh dim, A, B) per mesh dim, outermost first: around mesh dim
        order[j], with the outer mesh dims taken and the inner ones whole, the
        dim is [A, n, B]. One of A and B is an int, the other None (derived from
        the extent at run time). Takes go in this order, gathers in reverse."""
        out = []
        for j, m in enumerate(self.order):
            inner_mesh = _prod(mesh_shape[mm] for mm in self.order[j + 1:])
            a = _prod(self.locals[:j + 1])
            b = _prod(self.locals[j + 1:])
            out.append((m, a, None if b is None else b * inner_mesh))
        return out

    def describe(self, mesh_shape) -> str:
        parts = []
        for j, o in enumerate(self.locals):
            parts.append("rest" if o is None else str(o))
            if j < len(self.order):
                parts.append(f"{mesh_shape[self.order[j]]}(mesh dim {self.order[j]})")
        return "[" + ", ".join(parts) + "]"


def part_of(t, dim: int, layout: Layout, mesh_shape, coords):
    """This rank's part of the whole tensor `t` along `dim` (torch; a copy where
    the part is not one block)."""
    for m, a, b in layout.steps(mesh_shape):
        n = mesh_shape[m]
        t = take(t, dim, coords[m], n, a, b)
    return t


def split_sizes(size: int, n: int, a: int | None, b: int | None) -> tuple[int, int]:
    """(A, B) of a dim of `size` viewed as [A, n, B] (the one given None derived);
    ExecutionError where the sizes do not fit."""
    known = (a if a is not None else b) * n
    other = size // known if known else 0
    a, b = (other, b) if a is None else (a, other)
    if a * n * b != size:
        raise ExecutionError(f"a dim of extent {size} does not split into [{a}, {n}, {b}] "
                             f"(the blocks its sharding lays over the ranks)")
    return a, b


def take(t, dim: int, index: int, n: int, a: int | None, b: int | None):
    """Index `index` of the middle of `t`'s dim viewed as [a, n, b] (torch; a
    view where a or b is 1)."""
    a, b = split_sizes(t.shape[dim], n, a, b)
    if a == 1:
        return t.narrow(dim, index * b, b)
    return t.unflatten(dim, (a, n, b)).select(dim + 1, index).flatten(dim, dim + 1)


def interleave(gathered, n: int, a: int | None, b: int | None):
    """A gather's result (dim 0 is [n, A*B], rank-major) laid out as [A, n, B] (torch)."""
    a, b = split_sizes(gathered.shape[0], n, a, b)
    if a == 1:
        return gathered
    return gathered.unflatten(0, (n, a, b)).transpose(0, 1).flatten(0, 2)
