"""Scan kernels (cumsum, cumprod, cummax, cummin): lowering of a scan segment
to kernel IR and its launch rule.

A scan kernel iterates over the scan's shape like a pointwise kernel; its
SCAN nodes combine their source over the points of the scanned dim up to the
current one (`Kernel.scanned`). The prologue (what feeds a scan) is indexed
per use as in a pointwise kernel; the epilogue reads the scans at its own
point. Three schedules print it (cuda_scan.py): along the innermost dim, a
group of threads per row with warp-shuffle scans and a running carry across
tiles of the row; along an outer dim, a thread per column point walking the
scanned dim, coalesced across the innermost dim; few long rows in tiles of a
block each, chained by a look-back (cuda_chained_scan.py). All combine in a
fixed order: results are deterministic.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from ..ir.dtypes import DataType
from ..ir.errors import UnsupportedError
from ..ir.node import OPS, Family
from ..segment import Segment
from .cuda import vector_width
from .kir import K, Kernel
from .lower import INT, PointwiseLowering
from .launch_checks import vector_ok, vector_slots
from .options import KernelOptions, defines
from .spec import KernelSpec, Variant, _made, index_type


class ScanLowering(PointwiseLowering):
    """A scan segment: the iteration space is its outputs' shape (the scans'),
    the scanned dim that of its scans (all along one dim)."""

    def __init__(self, seg: Segment, name: str):
        super().__init__(seg, name)
        scans = [v for v in seg.exprs if OPS[v.op].family is Family.SCAN]
        if not scans:
            raise UnsupportedError("a scan kernel without a scan")
        dims = {v.arg.dim for v in scans}
        if len(dims) > 1 or any(v.ndim != seg.outputs[0].ndim for v in scans):
            raise UnsupportedError(f"scans along different dims or of different ranks in one kernel "
                                   f"({', '.join(map(repr, scans))})")
        self.k.scanned = dims.pop()

    def scan(self, op: str, value, ix: tuple, pred):
        """A SCAN node of `value` read at index `ix`, which must be the kernel's
        own point (an epilogue reads a scan where it computes)."""
        b, d = self.b, self.k.scanned
        here = b.mk(K.INDEX, INT, arg=d)
        if pred is not None or len(ix) <= d or ix[d] is not here or any(
                _moves(i, here) for j, i in enumerate(ix) if j != d):
            raise UnsupportedError("a scan read at another point than its own (an epilogue reads "
                                   "it pointwise)")
        if value.dtype is DataType.Bool:  # cummax/cummin of bools combine 0/1
            value = self.cast(value, DataType.Int32)
        return b.mk(K.SCAN, value.dtype, (value,), arg=op)


def _moves(n, index) -> bool:
    """Does index expression `n` depend on INDEX node `index`?"""
    stack, seen = [n], set()
    while stack:
        x = stack.pop()
        if x is index:
            return True
        if id(x) not in seen:
            seen.add(id(x))
            stack.extend(x.src)
    return False


# ---------------------------------------------------------------- launch rule

SCAN_CHUNKS = 4
"""Vectors of a row each thread of a row scan loads before scanning them (a
tile of the row is threads x chunks vectors): 64 bytes in flight per thread."""
SCAN_BLOCK = 256
CHAIN_CHUNKS = 16  # vectors a thread keeps of a chained tile (larger tiles: fewer look-backs;
                   # H100, 1-D cumsum fp32 2^26: 8 72 %, 16 80.8 %, 32 80.4 % of copy (255
                   # registers); 2^28: 75, 83.1, 83.3 %; bf16 2^26: 63-65 % at 8 to 32; with the
                   # cache hints (cuda_scan) 16 83.2 %, 32 82.4 %; with the tile's totals
                   # scanned in shared memory, 8 / 16 / 32: bf16 77.7 / 81.0 / 78.5, fp16 78.4 /
                   # 81.5 / 79.6, int32 -> int64 72.0 / 69.1 / (16: shared memory))
CHAIN_ROWS = 4096  # fewer rows than this, each longer than two block tiles: a block per tile
COLUMN_WARPS = 16  # an outer scan's block: 32 column points x 16 warps along the scanned dim
COLUMN_ROWS = 16   # ... each thread holding 16 consecutive points of its column per tile (64 bytes
                   # of fp32 in flight per thread: 8192 columns keep about 8 MB in flight)
CHAIN_PREFETCH = 44  # a chained tile's block prefetches the tile of the block this many later (cuda_chained_scan)
CHAIN_SHARED = 40 << 10  # bytes of a chained tile's vector totals in shared memory, at most


def chain_chunks(kernel: Kernel) -> int:
    """Vectors a thread takes of a chained tile: CHAIN_CHUNKS, halved while the
    tile's vector totals (every scan's, padded: cuda_chained_scan) pass CHAIN_SHARED."""
    per = sum(n.dtype.itemsize for n in kernel.order if n.op == K.SCAN) * SCAN_BLOCK * 33 // 32
    c = CHAIN_CHUNKS
    while c > 1 and c * per > CHAIN_SHARED:
        c //= 2
    return c


def chain_words(kernel: Kernel) -> list[int]:
    """Per SCAN node, the 64-bit words a chained tile publishes its total (and
    its inclusive prefix) in: 32 bits of the value each, the flag in the upper
    half (hir_chain_put)."""
    return [max(1, -(-n.dtype.itemsize // 4)) for n in kernel.order if n.op == K.SCAN]


def scan_threads(vectors: int) -> int:
    """Threads of a row scan per row of `vectors` vectors: a power of two up to
    a warp, enough that each takes about SCAN_CHUNKS vectors per tile (short
    rows: several rows per warp)."""
    t = 1
    while t < 32 and t * SCAN_CHUNKS < vectors:
        t *= 2
    return t


@dataclass(eq=False)
class ScanVariant(Variant):
    """A scan kernel's compiled form: a row scan (`threads` per row, `chunks`
    vectors each per tile) or an outer scan (`outer`)."""

    @property
    def block(self) -> int:
        return 32 * COLUMN_WARPS if self.outer else SCAN_BLOCK

    @property
    def chained(self) -> bool:
        """A block per tile of a row, chained by decoupled look-back."""
        return self.threads > 32

    @cached_property
    def source(self) -> str:
        from .cuda_scan import scan_source
        return defines(self.options, self.kernel) + scan_source(
            self.kernel, self.vec, self.idx, self.block, self.options.pdl, self.name, self.threads,
            self.chunks, self.outer)


class ScanSpec(KernelSpec):
    """The launch rule of a scan kernel: the row schedule when the scanned dim
    is the innermost iteration dim, else the outer (column) schedule."""

    @staticmethod
    def is_rows(kernel: Kernel) -> bool:
        return kernel.scanned == len(kernel.extent_vals) - 1

    def choose(self, kernel: Kernel, extents: list[int], ins: list, outs, params: list) -> Variant:
        idx = index_type(extents, ins, outs, params)
        if not self.is_rows(kernel):
            return self.variant(kernel, 1, idx, outer=True)
        vec = self._vec[id(kernel)]
        rows, length = self.count(kernel, extents, vec), extents[-1]

        def chained(vec: int) -> bool:
            return rows < CHAIN_ROWS and length > 2 * SCAN_BLOCK * SCAN_CHUNKS * vec
        # one chained row takes vectors up to its last whole one (its points after
        # it are scanned one by one): H100 1-D cumsum fp32 of 10^6 + 3 points
        whole = extents[:-1] + [length - length % vec] if rows == 1 and chained(vec) else extents
        if vec > 1 and not vector_ok(vec, [ins[s] for s in vector_slots(kernel, vec)] + list(outs or ()), whole):
            vec = 1
        if chained(vec):
            return self.variant(kernel, vec, idx, SCAN_BLOCK, chain_chunks(kernel))
        return self.variant(kernel, vec, idx, scan_threads(-(-length // vec)), SCAN_CHUNKS)

    @staticmethod
    def split(variant: Variant, extents: list[int], sm_count: int) -> int:
        """Tiles per row of a chained row scan (1 otherwise)."""
        if not variant.chained:
            return 1
        return -(-extents[-1] // (variant.threads * variant.chunks * variant.vec))

    @staticmethod
    def scratch_size(variant, count: int, split: int) -> tuple[int, int] | None:
        """A chained scan's counters (zeroed when allocated, never again): the
        64-bit ticket counter (hir_chain_epoch), then per scan the tiles' totals
        and inclusive prefixes as 64-bit words (chain_words each). No workspace.
        None for a launch of one tile a row (it takes none)."""
        if split <= 1:
            return None
        return 0, 2 + 4 * count * split * sum(chain_words(variant.kernel))

    @staticmethod
    def count(kernel: Kernel, extents: list[int], vec: int, tile: int = -1) -> int:
        """Launch slots: the rows (points of the other dims) of a non-empty space."""
        if not math.prod(extents):
            return 0
        return math.prod(e for d, e in enumerate(extents) if d != kernel.scanned)

    def grid(self, variant: Variant, count: int, sm_count: int, split: int = 1,
             extents: list[int] | None = None, resident: int = 0) -> int:
        if variant.chained:  # a block per tile (no grid-stride loop: tiles are drawn in order)
            return count * split
        per_block = 32 if variant.outer else SCAN_BLOCK // variant.threads
        blocks = -(-count // per_block)
        return max(1, min(blocks, sm_count * 32 if self.options.grid_stride else 2 ** 31 - 1))

    def variant(self, kernel: Kernel, vec: int, idx: str, threads: int = 0, chunks: int = 0,
                outer: bool = False, tile: int = -1) -> Variant:
        key = (id(kernel), vec, idx, threads, chunks, outer)
        got = self._variants.get(key)
        if got is None:
            o = self.options
            shape = "_outer" if outer else f"_t{threads}_c{chunks}"
            name = (f"{kernel.name}_v{vec}_{'i32' if idx == 'int' else 'i64'}{shape}"
                    f"{'_pdl' if o.pdl else ''}{'_fm' if o.fast_math else ''}"
                    f"{'_chk' if o.check_indices else ''}")
            got = self._variants[key] = ScanVariant(kernel, vec, idx, o, name, vector_slots(kernel, vec),
                                                    threads, chunks, outer)
        return got

    def typical_variants(self) -> list[Variant]:
        k = self.plain
        if not self.is_rows(k):
            return [self.variant(k, 1, "long long", outer=True), self.variant(k, 1, "int", outer=True)]
        vec = self._vec[id(k)]
        return [self.variant(k, 1, "long long", 32, SCAN_CHUNKS),
                self.variant(k, vec, "int", 32, SCAN_CHUNKS),
                self.variant(k, vec, "int", 4, SCAN_CHUNKS),
                self.variant(k, 1, "int", 1, SCAN_CHUNKS),
                self.variant(k, vec, "int", SCAN_BLOCK, chain_chunks(k)),
                self.variant(k, 1, "long long", SCAN_BLOCK, chain_chunks(k))]

    @property
    def source(self) -> str:
        k = self.plain
        if not self.is_rows(k):
            return self.variant(k, 1, "long long", outer=True).source
        return self.variant(k, 1, "long long", 32, SCAN_CHUNKS).source


def scan_spec(seg: Segment, name: str, options: KernelOptions) -> KernelSpec:
    """The spec of a scan segment (UnsupportedError where it has no kernel)."""
    kern = ScanLowering(seg, name).run()
    spec = ScanSpec(name, kern, None, options)
    spec._vec[id(kern)] = vector_width(kern) if ScanSpec.is_rows(kern) else 1
    return _made(spec)
