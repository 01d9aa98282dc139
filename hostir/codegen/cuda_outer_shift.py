"""Outer reductions whose kept points are no multiple of a vector (spec.Variant
with `outer` and `shift`): a bf16 column sum of 41427 columns, each row
starting another way past a 16-byte boundary, read a 2-byte point a lane
(67 % of copy on an H200). Here a warp's 32 lanes read, at each reduced
point, the 32 aligned vectors from the one holding the tile's first kept
point, and lane tx takes the vector that starts at its own first point from
its aligned one and lane tx + 1's (a shuffle down, then a funnel shift: the
row's shift is the warp's, known at run time); so a tile is 31 lanes' points
wide, the 32nd lane reading only for its neighbour (Variant.tile_lanes). A
lane reads no aligned vector that holds none of the row's kept points, and
every one it reads holds one of them: no read leaves the row's 16 bytes. The
rest is the outer tile's (cuda_outer._OuterPrinter: accumulators, the block
combine, the split, the epilogue), guarded where a lane's points run past the
kept points; fixed orders throughout (deterministic)."""
from __future__ import annotations

from .cuda import VEC_TYPE, _offset, index_deps, vector_loads
from .cuda_outer import _OuterPrinter, outer_batch, outer_blocks, outer_ok, outer_split
from .kir import K, Kernel, split_stores

OUTER_SHIFTED = True
OUTER_SHIFT_SIZES = (1, 2)
"""Element sizes (bytes) whose shifted tiles a launch takes where the kept
points are off the vectors' boundaries (their tiles of lanes read a point a
load otherwise)."""
OUTER_SHIFT_NARROWER = True  # ... also where a narrower vector would be aligned
OUTER_SHIFT_AIM = True
"""Shifted tiles' splits aim at the full blocks an SM (cuda_outer.outer_split:
no OUTER_WIDE_SHARE): a lane's batch ends in its shuffles and shifts, no load
in flight, so the SM needs more lanes. H200 % of copy, same run, the full
aim / half (as aligned tiles) / tiles of a point a lane: column sum bf16
1619x41427 77.7 / 59.8 / 65.3, 6000x11111 80.7 / 66.5 / 57.1, 100000x1025 76.9
/ 70.1 / 76.2, fp16 16384x4097 78.7 / 72.9 / 78.2 (benchmarks/RESULTS.md)."""
OUTER_SHIFT_FILL = 0.75
"""... where its split fills this share of the full blocks an SM at least
(else tiles of a point a lane). H200 % of copy, same run, shifted / a point
a lane: column sum bf16 8192x4095 (17 tiles, split 16: 2 blocks an SM) 51.6 /
71.7, 1000x50257 (203 tiles, split 1) 62.4 / 67.6; filled: 6000x11111 81.7 /
57.2, 3000x22367 79.1 / 56.4, fp16 2500x26843 75.3 / 55.1, 16384x4097 77.6 /
79.7, bf16 100000x1025 77.4 / 78.9."""
OUTER_SHIFT_FIXED = True
"""A lane's rows step split x (its block's rows of lanes) rows apart: where
that moves the row's start by a multiple of the vector (any 2-byte column
sum of one reduced dim: 8 x split rows), every row the warp reads starts as
far past a boundary as its first, so the warp's loop is printed once for each
shift a constant (a switch on the first row's: the funnel's word selects and
shifts fixed, no shift per load; the shift 0 shuffles nothing), and once for
a shift per load, where not. SASS (sm_90, bf16 6000x11111, batches of 4):
38 instructions a load against 68 (the shift's address math, its five-way
branch of funnels). H200 % of copy, same run, fixed / a shift a load: at the
full aim within 1 (1619x41427 82.1 / 81.5, 6000x11111 81.6 / 81.4): not
issue-bound there (ncu, 6000x11111: 60 % issue active, DRAM bytes the
ideal); at the half aim, few lanes an SM, it gained: 2009x33403 58.9 / 49.1,
6000x11111 72.0 / 65.1, 1619x41427 66.8 / 62.2, bf16 12000x5555 76.9 / 70.6
(the full aim still ahead: benchmarks/RESULTS.md)."""
SHIFT_LANES = 31  # a tile's lanes that take kept points (the 32nd reads for its neighbour: Variant.tile_lanes)
_FUNNEL = {4: "hir_funnel4", 8: "hir_funnel8", 16: "hir_funnel16"}


def full_aim(variant) -> bool:
    """Does a variant's split aim at the full blocks an SM (OUTER_SHIFT_AIM)?"""
    return OUTER_SHIFT_AIM and variant.outer and variant.shift


def shifted_fills(kern: Kernel, vec: int, block: int, extents: list[int], sm_count: int) -> bool:
    """Does a shifted tiling's split reach OUTER_SHIFT_FILL of the full blocks
    an SM (tiles x split: few reduced points a tile, its lanes each combining
    cuda_outer.OUTER_MIN_POINTS, cap it)?"""
    kept = extents[-1]
    tiles = -(-kept // (SHIFT_LANES * vec))
    split = outer_split(kern, SHIFT_LANES, vec, block, extents, sm_count, shifted=OUTER_SHIFT_AIM)
    return tiles * split >= OUTER_SHIFT_FILL * outer_blocks(vec, block) * sm_count


def shifted_batch(kern: Kernel, vec: int, block: int, extents: list[int], sm_count: int) -> int:
    """A shifted tile lane's reduced points a batch (cuda_outer.outer_batch, of its split)."""
    return outer_batch(kern, vec, 0, block, extents, sm_count, shifted=OUTER_SHIFT_AIM)


def shifted_ok(kern: Kernel, vec: int) -> bool:
    """Can an outer reduction read in shifted lanes of `vec` points (what the
    kernel decides; the launch checks the tensors: shifted_fits)? One kept
    dim, the innermost; every load that moves with it a vector load at the
    point's own kept point (a predicate always true: no load that a lane past
    the kept points would take out of bounds), of 4, 8 or 16 bytes; no store
    at every point; no random numbers or index checks."""
    n = len(kern.extent_vals)
    if not (OUTER_SHIFTED and vec > 1 and outer_ok(kern) and list(kern.kept) == [n - 1] and kern.inputs):
        return False
    if split_stores(kern)[0] or any(x.op in (K.RNG, K.CHECK) for x in kern.order):
        return False
    vloads, moving = vector_loads(kern, vec), index_deps(kern, {n - 1})
    for x in kern.order:
        if x.op != K.LOAD or id(x) not in moving:
            continue
        pred, *ix = x.src
        size = kern.inputs[x.arg].dtype.itemsize
        if id(x) not in vloads or not (pred.op == K.CONST and pred.arg is True) or not ix or \
                ix[-1].op != K.INDEX or ix[-1].arg != n - 1 or size * vec not in _FUNNEL:
            return False
    return True


def shifted_fits(kern: Kernel, vec: int, ins: list, aligned_narrower: bool) -> bool:
    """Does a launch take shifted lanes of `vec` points (vec-point vectors
    refused, `aligned_narrower`: narrower ones would be aligned)? Its inputs'
    sizes in OUTER_SHIFT_SIZES, each contiguous along the kept points from a
    point's own boundary."""
    if aligned_narrower and not OUTER_SHIFT_NARROWER or not shifted_ok(kern, vec):
        return False
    return all(t.dtype.itemsize in OUTER_SHIFT_SIZES and t.ndim > 0 and t.stride(-1) == 1 and
               t.data_ptr() % t.element_size() == 0 for t in ins)


class _ShiftedOuterPrinter(_OuterPrinter):
    """The outer tile's printer (cuda_outer), its lanes' vectors shifted: a
    batch's aligned vectors are all read before any is shifted (a shuffle
    waits on its load: shifted as read, ptxas kept one load in flight)."""

    shifted = True
    _batched: list | None = None  # a batch's (array, shift) pairs while its loads are printed
    _fixed: str | None = None  # the warp's shift, a constant, while a fixed loop prints (OUTER_SHIFT_FIXED)

    def _loop(self, reduces, rows, names, acc) -> None:
        """The lane's loop once for each shift the warp's rows may share
        (OUTER_SHIFT_FIXED: a switch on its first row's), and once for a
        shift a load (the default: rows whose starts move off the shift)."""
        node = self._fixed_load(reduces, rows)
        if node is None:
            return super()._loop(reduces, rows, names, acc)
        L, v, d = self.lines, self.vec, self.k.reduced[0]
        first = _offset(["r0_" if i.arg == d else f"i{i.arg}" for i in node.src[1:]], f"in{node.arg}",
                        unit_last=True)
        moves = " + ".join(f"in{node.arg}_s{j}" for j, i in enumerate(node.src[1:]) if i.arg == d) or "0"  # 0: broadcast along the rows
        L.append(f"    {{ const {self.idx} r0_ = {self._start()};  // (OUTER_SHIFT_FIXED)")
        L.append(f"    const int mf_ = r0_ < R ? {self._shift_at(node, first)} : 0;")
        L.append(f"    switch ((long long)split * {self.block // self.lanes} * ({moves}) % {v} == 0 ? mf_ : {v}) {{")
        for m in range(v + 1):
            L.append(f"    {f'case {m}' if m < v else 'default'}: {{")
            self._fixed = str(m) if m < v else None
            super()._loop(reduces, rows, names, acc)
            L.append("    } break;")
        self._fixed = None
        L.append("    }")
        L.append("    }")

    def _fixed_load(self, reduces, rows):
        """The lane's one vector load, where its row's start moves along one
        reduced dim (its indices the iteration's own); else None."""
        loads = [n for n in self._body(reduces, rows) if id(n) in self.vloads]
        if not OUTER_SHIFT_FIXED or len(self.k.reduced) != 1 or len(loads) != 1 or \
                any(i.op != K.INDEX for i in loads[0].src[1:]):
            return None
        return loads[0]

    def _batch_loads(self, reduces, rows, names, batch: int, step: str) -> dict[int, str]:
        at, self._batched = len(self.lines), []
        arrays = super()._batch_loads(reduces, rows, names, batch, step)
        done, self._batched = self._batched, None
        if self._fixed is None:
            self.lines.insert(at, f"      int {', '.join(m for _, m, _ in done)};  // the vectors' shifts")
        for arr, m, node in done:
            self._shift(arr, m, node, "      ")
        return arrays

    def vector_load(self, node, base: dict, into: str | None = None, copy: bool = False,
                    after: str | None = None) -> str:
        """The aligned vector holding the lane's first kept point (the outer
        tile's load, its kept index moved back by the row's shift m; none past
        the row's kept points), then (at once, or after the batch's loads) the
        lane's `vec` points from it and lane + 1's."""
        a = [base[id(s)] for s in node.src]
        m = self._fixed or self.fresh()
        if self._fixed is None:
            self.lines.append(f"    {'' if self._batched is not None else 'const int '}{m} = "
                              f"{self._shift_at(node, _offset(a[1:], f'in{node.arg}', unit_last=True))};")
        back = {**base, id(node.src[-1]): f"({a[-1]} - {m})", id(node.src[0]): f"({a[-1]} - {m} < e{self.inner})"}
        got = super().vector_load(node, back, into)
        arr = got[1:-len(")[u]")]
        if self._batched is not None:
            self._batched.append((arr, m, node))
        else:
            self._shift(arr, m, node, "    ")
        return got

    def _shift_at(self, node, offset: str) -> str:
        """How many points past a vector boundary the load's point at `offset` lies."""
        return (f"(int)(reinterpret_cast<unsigned long long>(in{node.arg} + {offset}) / "
                f"{self.k.inputs[node.arg].dtype.itemsize} % {self.vec})")

    def _shift(self, arr: str, m: str, node, indent: str) -> None:
        """The lane's points from its aligned vector in `arr` and lane + 1's
        (none to take where the warp's shift is a fixed 0)."""
        if m == "0":
            return
        size = self.k.inputs[node.arg].dtype.itemsize
        word = VEC_TYPE[size * self.vec]
        self.lines.append(f"{indent}{{ const {word} w_ = *reinterpret_cast<const {word}*>({arr}); "
                          f"*reinterpret_cast<{word}*>({arr}) = {_FUNNEL[size * self.vec]}(w_, hir_shfl_down(w_), "
                          f"{m} * {size}); }}")
