"""How a reduction kernel's kept row gets into shared memory (a mixin of
cuda_schedules._ReductionPrinter): copies by cp.async, a group a chunk, each
chunk of the first pass waiting for its own (rows.ROW_WAITS); the next row's
copies issued while this row is processed: into the slots the last pass has
just read (rows.ROW_AHEAD), or into a second buffer at the start of the row
(rows.ROW_DOUBLE). The kernels' helpers are in kernels/hostir.cuh
(hir_cp_async, hir_cp_async_after, hir_cp_async_commit,
hir_cp_async_wait_pending)."""
from __future__ import annotations

from . import rows
from .cuda import _closure, index_deps
from .kir import ONLINE, K, Kernel, KNode, row_nodes, split_stores
from .row_loads import cached_loads, rest_words, row_work

SMEM_ASYNC_THREADS = 512  # a row kept whole in shared memory by cp.async, in blocks this large or larger (_async_row)


class _RowCopies:
    """The row copies of a _ReductionPrinter (its k, vec, block, chunks,
    smem_chunks, rest_regs, shift, cluster, double, cache and lines)."""

    def _plan_ahead(self, work) -> None:
        """Does each chunk of an async row wait for its own copy (rows.ROW_WAITS),
        and does the last pass copy the block's next row into each slot it has
        just read (rows.ROW_AHEAD, copies_ahead)?"""
        self.waits = rows.ROW_WAITS and self.chunks > 0 and self.smem_row and self._async_row()
        if self.double:
            assert self._async_row(), "a double buffer is copied by cp.async (blocks of SMEM_ASYNC_THREADS)"
            self.waits = True
        self.ahead = not self.double and copies_ahead(self.k, self.vec, self.chunks, self.smem_chunks, self.block,
                                                      self.shift, self.cluster)
        if self.ahead or self.double:
            kept = set(self.k.kept)
            self._kept_index = [n for n in self.k.order if n.op == K.INDEX and n.arg in kept]
            self._kept_dep = index_deps(self.k, kept)

    def _next_row_names(self, names: dict) -> dict:
        """`names` for the block's next row: the kept dims' indices its n<d>,
        what depends on them left to be computed again."""
        nxt = {i: x for i, x in names.items() if i not in self._kept_dep}
        for x in self._kept_index:
            nxt[id(x)] = f"n{x.arg}"
        return nxt

    def _copy_next_row(self, names: dict) -> None:
        """The block's next row, copied into the other buffer (rows.ROW_DOUBLE)
        right after this row's copies: a group a chunk, in the chunks' order
        (the first pass's waits count them)."""
        L, v, k = self.lines, self.vec, self.k
        L.append("    if (nactive_) {  // the next row, into the other buffer")
        self._chunk_loop(self.smem_chunks)
        self._split("r", k.reduced, "      ")
        at = self._next_row_names(names)
        for n in [n for n in k.order if id(n) in self.cache]:
            self.emit_all([x for x in _closure([n], set()) if x.op != K.LOAD], at, f"i{self.inner}", "      ")
            self.vector_load(n, at, f"{self.cache[id(n)]}_o + (c * {self.block} + threadIdx.x) * {v}", copy=True)
        L.append("      }")
        L.append("      hir_cp_async_commit();")
        L.append("    }")
        L.append("    }")

    def _prefetch(self, n: KNode, cache: str, read: str, base: dict) -> None:
        """The block's next row's vector c of cached load `n`, into this thread's
        slot of it, which this pass has just read into `read` (the copy is issued
        after that read's first word is in a register): the next row's chunks fly
        while this row's last pass computes and stores (ROW_AHEAD)."""
        L, v, S = self.lines, self.vec, self.smem_chunks
        nxt = self._next_row_names(base)
        L.append("      if (nactive_) {")
        self.emit_all([x for x in _closure([n], set()) if x.op != K.LOAD], nxt, f"i{self.inner}", "        ")
        slot = f"{cache} + (c * {self.block} + threadIdx.x) * {v}"
        dep = f"reinterpret_cast<const unsigned*>({read})[0]"
        if self.rest_regs:
            L.append(f"      if (c < {S}) {{")
            self.vector_load(n, nxt, slot, copy=True, after=dep)
            L.append("      } else {")
            self.vector_load(n, nxt, f"{cache}_r + (c - {S}) * {v}")
            L.append("      }")
        else:
            self.vector_load(n, nxt, slot, copy=True, after=dep)
        L.append("      }")

    def _async_row(self) -> bool:
        """Is the row kept whole in shared memory by a block of SMEM_ASYNC_THREADS
        threads or more: its first pass copies it there by cp.async, every
        chunk at once, then reads it. H100 bf16 % of copy, same run: softmax
        2048x49152 84.4 -> 98.2; but rows kept in part (softmax 4096x65536 89.5
        -> 65.6, layernorm 2048x65536 90.3 -> 80.3) lost, and keep their loads.
        Blocks of 512 threads lost too (softmax 4096x32768 91.8 -> 88.5) until
        each chunk waited for its own copy (rows.ROW_WAITS); since then, H100,
        same run, 1024 / 512 threads or more: softmax bf16 2097x32001 81.2 /
        92.3, 2048x32768 89.9 / 91.4, log-softmax 2097x32001 79.8 / 91.6."""
        return async_row(self.k, self.vec, self.chunks, self.smem_chunks, self.block)


def async_row(k: Kernel, vec: int, chunks: int, smem_chunks: int, block: int) -> bool:
    """Is a row of `chunks` vectors a thread, `smem_chunks` of them in shared
    memory, kept whole (the rest in registers) by a block of SMEM_ASYNC_THREADS
    threads or more (_ReductionPrinter._async_row)?"""
    if not (vec > 1 and chunks and smem_chunks) or block < SMEM_ASYNC_THREADS:
        return False
    return smem_chunks >= chunks or rest_words(k, vec, chunks - smem_chunks) <= rows.SMEM_REST_WORDS


def draws_rows(k: Kernel, vec: int, chunks: int, smem_chunks: int, block: int, shift: bool,
               cluster: int, double: bool) -> bool:
    """Do a cluster variant's resident clusters draw their rows from a ticket
    counter (rows.CLUSTER_DRAWN)? Not the online kernel's (a cluster a row),
    nor those that copy their next row ahead or keep it in a second buffer
    (rows b, b + clusters, ...). Rows a block keeps in shared memory, a block
    each, where rows.BLOCK_DRAWN."""
    if double:
        return False
    if cluster <= 1:  # (no copies ahead: those are a cluster's)
        return rows.BLOCK_DRAWN and smem_chunks > 0 and chunks > 0 and block >= 128 and vec > 1
    return rows.CLUSTER_DRAWN and not _online(k) and not copies_ahead(k, vec, chunks, smem_chunks, block,
                                                                      shift, cluster)


def _online(k: Kernel) -> bool:
    """Is `k` an online-softmax kernel (a REDUCE of (max, sum) pairs)?"""
    return any(n.op == K.REDUCE and n.arg == ONLINE for n in k.order)


def copies_ahead(k: Kernel, vec: int, chunks: int, smem_chunks: int, block: int, shift: bool,
                 cluster: int = 0) -> bool:
    """Does an async row's last pass copy the block's next row into the
    slots it has read (rows.ROW_AHEAD)? Where each chunk waits for its own copy
    (rows.ROW_WAITS), every cached load is read again in the last pass in
    16-byte vectors, the rows start on vector boundaries (a shifted row's
    start moves by row), and the row is split over a cluster's CTAs (blocks
    that each keep a whole row lost: rows.ROW_AHEAD). (spec.KernelSpec.grid then
    launches the clusters the device runs at once, each taking several rows.)
    Not the online kernel's kept rows (rows.ONLINE_KEPT; H100 % of copy, same
    run, ahead / not: softmax bf16 256x262144 66.6 / 80.7, fp16 447x150000
    59.4 / 70.5, fp32 671x100000 79.1 / 81.6; again on an H200 with a vector's
    pair, not / ahead: log-softmax fp16 458x146480 77.2 / 69.5, softmax fp32
    800x80000 80.4 / 64.3, fp16 447x150000 74.3 / 61.2)."""
    if not (rows.ROW_AHEAD and rows.ROW_WAITS and not shift and cluster > 1
            and async_row(k, vec, chunks, smem_chunks, block)) or _online(k):
        return False
    work = row_work(k, row_nodes(k), split_stores(k, row_nodes(k))[0])
    cached = cached_loads(k, vec)
    last = {id(n) for n in work[-1][3]} if work else set()
    return len(work) > 1 and bool(cached) and all(
        id(n) in last and k.inputs[n.arg].dtype.itemsize * vec == 16 for n in cached)
