"""Rows staged a warp's tile at a time (a mixin of
cuda_schedules._ReductionPrinter, `tiles`: row_tiles): a thread a row, each
warp's 32 rows copied into shared memory by cp.async while the warp computes
the tile before (two buffers: _tile_open, _tile_row), the row tensor and the
full output read and written there as a shifted row's (the names in<a> and
out<s> stand for the tile inside the row loop), the tile copied back out
once its rows are done (_tile_close); what every row reads alike kept in
shared memory at each shift a row may start at, placed once (_place_kept)."""
from __future__ import annotations

from .cuda import CTYPE, _closure
from . import row_tiles
from .row_loads import kept_share, kept_weights
from .row_tiles import TILE_BLOCK, tile_bytes, tile_pieces, tile_slots


class _RowTiles:
    """The tiles of a _ReductionPrinter (its k, vec, chunks, block, lines)."""

    def _tile_init(self, tiles: bool) -> bool:
        """Does this printer stage its rows in tiles (a thread a row, blocks of
        TILE_BLOCK)? Sets the staged input and the output computed in place."""
        if not tiles:
            return False
        self.tile_in, self.tile_out = tile_slots(self.k)
        assert self.threads == 1 and self.block == TILE_BLOCK and self.shift and self.chunks, \
            "tiled rows: a thread a row, shifted, held in registers"
        return True

    def _tile_open(self) -> None:
        """Before the row loop: the warp's buffers, the tensors' own pointers,
        and the copy of the warp's first tile."""
        L, k, a, s = self.lines, self.k, self.tile_in, self.tile_out
        L.append("  extern __shared__ __align__(16) unsigned char hir_dsmem[];")
        L.append("  const int wl_ = threadIdx.x % 32;  // this thread's row of its warp's tile")
        L.append(f"  unsigned char* const tiles_ = hir_dsmem + threadIdx.x / 32 * {2 * tile_bytes(self.chunks)};")
        L.append(f"  const {CTYPE[k.inputs[a].dtype]}* const in{a}_g_ = in{a};")
        L.append(f"  {CTYPE[k.outputs[s].dtype]}* const out{s}_g_ = out{s};")
        L.append("  int tpar_ = 0;  // the buffer this tile is in")
        L.append(f"  hir_tile_in<{self._pieces()}>(tiles_, in{a}_g_, "
                 f"(long long)blockIdx.x * {self.block} + threadIdx.x / 32 * 32, nslots, (int)R, wl_);")

    def _tile_row(self) -> None:
        """As a row starts: the warp's next tile copied into the other buffer,
        this one waited for, and the names of the row tensor and the output
        pointing into it (an idle lane's row 0 at the tile's start)."""
        L, k, a, s, tb = self.lines, self.k, self.tile_in, self.tile_out, tile_bytes(self.chunks)
        L.append("    const long long trow_ = (long long)base + threadIdx.x / 32 * 32;  // the tile's first row")
        L.append(f"    hir_tile_in<{self._pieces()}>(tiles_ + (tpar_ ^ 1) * {tb}, in{a}_g_, "
                 f"trow_ + (long long)gridDim.x * {self.block}, nslots, (int)R, wl_);")
        L.append("    hir_cp_async_wait_pending(1);")
        L.append("    __syncwarp();")
        at = f"tiles_ + tpar_ * {tb}) - (active ? trow_ * R : 0LL)"
        L.append(f"    const {CTYPE[k.inputs[a].dtype]}* const in{a} = "
                 f"reinterpret_cast<const {CTYPE[k.inputs[a].dtype]}*>({at};")
        L.append(f"    {CTYPE[k.outputs[s].dtype]}* const out{s} = "
                 f"reinterpret_cast<{CTYPE[k.outputs[s].dtype]}*>({at};")

    def _tile_close(self) -> None:
        """As a row ends: the tile's outputs copied out, the buffer free."""
        L, s = self.lines, self.tile_out
        L.append("    __syncwarp();")
        L.append(f"    hir_tile_out<{self._pieces()}>(out{s}_g_, tiles_ + tpar_ * {tile_bytes(self.chunks)}, trow_, "
                 "nslots, (int)R, wl_);")
        L.append("    __syncwarp();")
        L.append("    tpar_ ^= 1;")

    def _pieces(self) -> int:
        """The copies' 16-byte pieces a lane, unrolled (TILE_UNROLL); 0: a loop."""
        return tile_pieces(self.chunks) if row_tiles.TILE_UNROLL else 0

    def _place_kept(self) -> None:
        """What every row reads alike, placed once before the rows at each
        shift m a row may start at (point j at m x share + j + m), read a point
        at a time (once a block)."""
        L, k, v = self.lines, self.k, self.vec
        share = kept_share(self.chunks, self.threads, v)
        L.append(f"  for (int j_ = threadIdx.x; j_ < {v} * (int)R; j_ += blockDim.x) {{")
        L.append("    const int s_ = j_ / (int)R, p_ = j_ % (int)R;")
        for n in kept_weights(k, v):
            point: dict = {}
            self.emit_all(_closure([n], set()) + [n], point, "p_", "    ")
            L.append(f"    {self.kept_w[id(n)]}[s_ * {share} + p_ + s_] = {point[id(n)]};")
        L.append("  }")
        L.append("  __syncthreads();")

