"""The flat schedule of an outer reduction (spec.Variant.flat): a column sum
whose kept points are few (at most a block's threads) reads its contiguous
[reduced, kept] span in 16-byte vectors that run on across the rows'
boundaries, and the rules of when it runs (spec.py, at launch).

A block of m x C threads (C kept points, m rows of lanes) steps m x vec
rows at a time: its threads read the step's m x vec x C points, thread t
the vec points from t x vec. A step is a multiple of C points, so thread
t's vec points stay at the same kept points on every step (point j at
(t x vec + j) % C), each with its accumulator. At the end of its share the
block places them in shared memory (slot t x vec + j) and lane (tx, ty)
combines the slots tx + (ty x vec + j) x C, j = 0 .. vec - 1, in order:
the state of a wrapped tile (cuda_outer: lanes = C, a row of lanes each
m) after its stream, from which the wrapped tile's block combine, split
and epilogue go on. A block's last step where the rows run out is read a
point at a time. Fixed orders throughout: deterministic.

Tiles of lanes read a point a lane where C is no multiple of a vector (a
bf16 column sum of 855 columns: 2 bytes a load, 26 % of copy on an H100)
and leave lanes idle where C is no multiple of the tile."""
from __future__ import annotations

from .cuda import CTYPE, VEC_TYPE, index_deps
from .cuda_combine import _COMBINE, acc_bytes, acc_init, acc_type
from .cuda_outer import SHARED_BYTES, _OuterPrinter, outer_ok
from .kir import K, Kernel, row_nodes, split_stores
from .row_loads import closure_of

OUTER_FLAT = True
FLAT_ALWAYS = False    # ... also where tiles of lanes read whole vectors with no lane idle
FLAT_BLOCK = 1024      # threads a block aims at (m = FLAT_BLOCK // C rows of lanes, one at least)
"""H100 % of copy, same run, FLAT_BLOCK 512 / 1024 / 256 (tiles): column sum
fp16 335544x200 82.9 / 84.8 / 83.1 (72.8), 200000x300 79.6 / 82.1 / 81.5
(55.4), bf16 134217x500 83.8 / 85.7 / 83.9 (85.8), 111848x600 82.4 / 83.9 /
83.8 (81.4), fp32 223696x300 90.9 / 92.3 / 91.2 (91.1), 671088x100 93.5 / 94.2
/ 91.8 (91.0). Flat against tiles, another run: bf16 78489x855 82.2 / 71.3,
2000000x33 86.2 / 72.2, 3532045x19 88.0 / 78.6, fp32 1917396x35 93.6 / 86.6;
fp16 65601x1023 83.7 / 23.1. What the 2-byte cases miss is the launch's
fixed part: bf16 855 columns at 19622 / 78489 / 313956 rows 73 / 83 / 95."""
FLAT_MAX_KEPT = 1024   # kept points at most (a lane each)
FLAT_BATCH = 4
"""Steps a thread's loop takes a batch, their loads issued together (16-byte
loads in flight; 1: a step at a time). The loop had been `#pragma unroll 4`
over a step at a time: ptxas kept one load in flight (each step's load into
the same registers after the last step's adds: its trip count is the
launch's, each unrolled step guarded). H200 % of copy, same run, a step at
a time / batches of 4 / 8: column sum bf16 97541x688 77.3 / 83.5 / 82.7,
497102x135 79.9 / 82.6 / 82.4, 78489x855 76.3 / 79.6 / 78.1, 699050x96 83.8 /
88.1 / 89.0, 2000000x33 80.0 / 82.6 / 83.2, fp16 335544x200 79.2 / 79.3 /
77.2; fp32 182361x368 91.0 / 94.0 / 93.9, 1917396x35 95.3 / 97.0 / 96.5,
223696x300 92.5 / 94.5 / 95.4."""


def flat_width(kern: Kernel) -> int:
    """Points a thread reads a step: 16 bytes of the widest input."""
    return max(1, 16 // max(t.dtype.itemsize for t in kern.inputs)) if kern.inputs else 1


def flat_block(kept: int) -> int:
    """The block of a flat schedule over `kept` kept points: m rows of
    `kept` lanes (m = FLAT_BLOCK // kept, one at least), whole warps."""
    m = max(1, FLAT_BLOCK // max(1, kept))
    return -(-m * kept // 32) * 32


def flat_ok(kern: Kernel) -> bool:
    """Can this outer reduction run flat (what the kernel decides; the launch
    checks the tensors: flat_fits)? One pass; the reduced dims lead, the kept
    dims follow; each reduction reads its inputs where it reduces, every
    load's place the point's own (indices the iteration's, in order; a
    predicate always true), nothing else moving with the indices; no store at
    every point."""
    if not (OUTER_FLAT and outer_ok(kern) and kern.inputs):
        return False
    n = len(kern.extent_vals)
    nr = len(kern.reduced)
    if list(kern.reduced) != list(range(nr)) or split_stores(kern)[0]:
        return False
    reduces = [x for x in kern.order if x.op == K.REDUCE]
    if any(x.arg == "argmax" for x in reduces):
        return False
    moves: set[int] = set()  # nodes that move with the indices other than through a load
    for x in kern.order:
        if x.op == K.INDEX or (x.op != K.LOAD and any(id(s) in moves for s in x.src)):
            moves.add(id(x))
    for x in _body(kern, reduces):
        if x.op == K.LOAD:
            pred, *ix = x.src
            if not (pred.op == K.CONST and pred.arg is True) or len(ix) != n or any(
                    i.op != K.INDEX or i.arg != d for d, i in enumerate(ix)):
                return False
        elif x.op in (K.RNG, K.CHECK) or (x.op != K.INDEX and id(x) in moves):
            return False
    return True


def flat_bytes(kern: Kernel, kept: int) -> int:
    """The shared memory of a flat schedule's block over `kept` kept points:
    a slot a thread's point, and the wrapped tile's combine rows."""
    per = sum(acc_bytes(x) for x in kern.order if x.op == K.REDUCE)
    m = flat_block(kept) // kept
    return (m * kept * flat_width(kern) + m * (kept + 1)) * per + 64


def _body(kern: Kernel, reduces) -> list:
    """What the reductions take in at each point: their sources' sub-DAG, not
    entering the kept dims' values that no index moves (the printer names
    those once)."""
    moving = index_deps(kern, range(len(kern.extent_vals)))
    return closure_of([s for x in reduces for s in x.src], row_nodes(kern) - moving)


def flat_over(vec: int, widest: int, lanes: int, kept: int) -> bool:
    """Would tiles of `lanes` lanes of `vec` points (`widest`: the kernel's
    widest vector) read narrow vectors or leave lanes idle over `kept` kept
    points, where the flat schedule need not (or FLAT_ALWAYS)?"""
    return FLAT_ALWAYS or vec < widest or kept % (lanes * vec) != 0


def flat_fits(kern: Kernel, extents: list[int], ins: list) -> bool:
    """Does this launch run flat: few kept points (FLAT_MAX_KEPT), some
    reduced, its block's shared arrays within SHARED_BYTES, and each input the kernel reads contiguous in the iteration's
    shape from a 16-byte boundary?"""
    kept = 1
    for d in kern.kept:
        kept *= extents[d]
    if not (0 < kept <= FLAT_MAX_KEPT) or not all(extents[d] for d in kern.reduced) or \
            flat_bytes(kern, kept) > SHARED_BYTES:
        return False
    shape = tuple(extents)
    for t in (ins[a] for a in {x.arg for x in kern.order if x.op == K.LOAD}):
        if tuple(t.shape) != shape or not t.is_contiguous() or t.data_ptr() % 16:
            return False
    return True


class _FlatPrinter(_OuterPrinter):
    """An outer reduction read flat (the module's docstring): a wrapped tile of
    `lanes` = C lanes whose stream reads `flat` points a thread a step."""

    def __init__(self, kern: Kernel, name: str, idx: str, block: int, pdl: bool, flat: int, lanes: int):
        super().__init__(kern, name, idx, block, pdl, 1, lanes)
        self.flat = flat
        self.wrapped = True
        self.idle = block % lanes != 0

    def _shared(self, reduces) -> None:
        for j, n in enumerate(reduces):
            self.lines.append(f"  __shared__ {acc_type(n)} flat{j}[{(self.block // self.lanes) * self.lanes * self.flat}];")

    def _stream(self, reduces, rows, names) -> None:
        k, idx, L, F, X = self.k, self.idx, self.lines, self.flat, self.lanes
        ty_n = self.block // X
        body = [n for n in _body(k, reduces) if n.op != K.INDEX]
        loads = [n for n in body if n.op == K.LOAD]
        for j, n in enumerate(reduces):
            L.append(f"    {acc_type(n)} a{j}[{F}];")
            L.append(f"    #pragma unroll\n    for (int u = 0; u < {F}; ++u) a{j}[u] = {acc_init(n)};")
        acc = {id(n): f"a{j}[u]" for j, n in enumerate(reduces)}
        T = ty_n * X
        L.append(f"    const long long total = (long long)R * nslots;  // the span's points")
        L.append(f"    const {idx} full = ({idx})(total / {T * F});  // whole steps")
        mine = f"ty < {ty_n}" if self.idle else "true"  # (a thread in the block's rows of lanes)
        L.append(f"    if ({mine}) {{")
        L.append(f"      {idx} s = g;")
        self._batch_loop("s", "full", "split", FLAT_BATCH,
                      lambda batch: self._steps(body, loads, reduces, acc, names, T, batch), "      ")
        # the last, partial step (rows past the whole steps), a point at a time
        L.append(f"      if (full % split == g) {{")
        L.append(f"        const long long f = ((long long)full * {T} + threadIdx.x) * {F};")
        L.append("        #pragma unroll")
        L.append(f"        for (int u = 0; u < {F}; ++u) {{")
        L.append("          if (f + u < total) {")
        point = dict(names)
        for n in loads:
            point[id(n)] = f"in{n.arg}[f + u]"
        self.emit_all([n for n in body if n.op != K.LOAD], point, "", "            ")
        self._combine(reduces, acc, point, "            ")
        L.append("          }")
        L.append("        }")
        L.append("      }")
        L.append("    }")
        # the thread's points to its kept points: slot t * F + u holds point
        # (t * F + u) % X; lane (tx, ty) combines slots tx + (ty * F + u) * X in order
        L.append(f"    if ({mine}) {{")
        L.append("      #pragma unroll")
        L.append(f"      for (int u = 0; u < {F}; ++u) {{")
        for j in range(len(reduces)):
            L.append(f"        flat{j}[threadIdx.x * {F} + u] = a{j}[u];")
        L.append("      }")
        L.append("    }")
        L.append("    __syncthreads();")
        L.append(f"    if ({mine}) {{")
        for j, n in enumerate(reduces):
            L.append(f"      a{j}[0] = flat{j}[tx + ty * {F * X}];")
            L.append(f"      #pragma unroll")
            L.append(f"      for (int u = 1; u < {F}; ++u) {{ const {acc_type(n)} x = a{j}[0], "
                     f"y = flat{j}[tx + (ty * {F} + u) * {X}]; a{j}[0] = {_COMBINE[n.arg]}; }}")
        L.append("    }")
        self._block_combine(reduces, "    ")

    def _steps(self, body, loads, reduces, acc, names, T: int, batch: int) -> None:
        """`batch` whole steps of T threads from step s on (s, s + split, ...):
        every load of each step first, into arrays of the batch, then each
        step's points combined in the steps' order (as a step at a time)."""
        k, idx, L, F = self.k, self.idx, self.lines, self.flat
        arrs = {}
        for n in loads:
            t = k.inputs[n.arg]
            arrs[id(n)] = arr = self.fresh()
            L.append(f"        alignas(16) {CTYPE[t.dtype]} {arr}[{batch}][{F}];")
        L.append("        #pragma unroll")
        L.append(f"        for (int b_ = 0; b_ < {batch}; ++b_) {{")
        L.append(f"          const {idx} f = ((s + b_ * split) * {T} + threadIdx.x) * {F};")
        for n in loads:
            t = k.inputs[n.arg]
            size, arr = t.dtype.itemsize * F, arrs[id(n)]
            if size == 16:
                L.append(f"          *reinterpret_cast<uint4*>({arr}[b_]) = "
                         f"__ldcs(reinterpret_cast<const uint4*>(in{n.arg} + f));")
            else:
                L.append(f"          *reinterpret_cast<{VEC_TYPE[size]}*>({arr}[b_]) = "
                         f"*reinterpret_cast<const {VEC_TYPE[size]}*>(in{n.arg} + f);")
        L.append("        }")
        inner = dict(names)
        for n in loads:
            inner[id(n)] = f"{arrs[id(n)]}[b_][u]"
        L.append("        #pragma unroll")
        L.append(f"        for (int b_ = 0; b_ < {batch}; ++b_) {{")
        L.append("          #pragma unroll")
        L.append(f"          for (int u = 0; u < {F}; ++u) {{")
        self.emit_all([n for n in body if n.op != K.LOAD], inner, "", "            ")
        self._combine(reduces, acc, inner, "            ")
        L.append("          }")
        L.append("        }")

    def bounds(self) -> str:
        return f"{self.block}, {max(1, 2048 // self.block)}"
