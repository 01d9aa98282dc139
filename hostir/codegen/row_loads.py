"""What the passes of a row kernel (a reduction or normalization) read: the
vector loads a persistent schedule keeps between passes and the registers or
shared memory they take, and the loads every row reads alike (a weight). The
row printer (cuda_schedules.py) and the launch rules (spec.py, launch_checks.py)
both ask these."""
from __future__ import annotations

from .cuda import vector_loads
from .kir import K, Kernel, KNode, levels, passes, row_nodes, split_stores, topological


def row_work(k: Kernel, rows: set, full_stores) -> list[tuple]:
    """Each pass over a row: (pass, its REDUCE nodes, its full stores, the row
    values it computes)."""
    level = levels(k)
    reduces = [n for n in k.order if n.op == K.REDUCE]
    work = []
    for p in passes(k):
        mine = [n for n in reduces if pass_of(n, level) == p]
        stores = [st for st in full_stores if level[id(st[1])] == p]
        roots = [s for n in mine for s in n.src] + [x for st in stores for x in (st[1], *st[2])]
        work.append((p, mine, stores, closure_of(roots, rows)))  # row values are named already
    return work


def cached_loads(k: Kernel, vec: int) -> list[KNode]:
    """The vector loads a persistent row schedule keeps (read in several passes)."""
    rows = row_nodes(k)
    vloads = vector_loads(k, vec, points=True)
    uses: dict[int, int] = {}
    work = row_work(k, rows, split_stores(k, rows)[0])
    for *_, body in work:
        for n in dict.fromkeys(n for n in body if id(n) in vloads):
            uses[id(n)] = uses.get(id(n), 0) + 1
    return list(dict.fromkeys(n for *_, body in work for n in body if uses.get(id(n), 0) > 1))


def row_cache_bytes(k: Kernel, vec: int, points: int) -> int:
    """Bytes a persistent schedule keeps of a row of `points` points (each
    cached load's elements)."""
    return sum(k.inputs[n.arg].dtype.itemsize for n in cached_loads(k, vec)) * points


def pass_of(n: KNode, level: dict) -> int:
    """The pass over the row that computes REDUCE node `n` (levels, kir.py)."""
    return level[id(n)] - 1


def rest_words(kern: Kernel, vec: int, chunks: int) -> int:
    """Registers (32-bit words) a thread takes to keep `chunks` vectors of each
    cached load."""
    return sum(kern.inputs[n.arg].dtype.itemsize * vec for n in cached_loads(kern, vec)) * chunks // 4


def held_words(kern: Kernel, vec: int, chunks: int) -> int:
    """Registers (32-bit words) the vectors a thread of a persistent row holds
    at once take: `chunks` of each cached load (rest_words), one of each other
    vector load."""
    kept = {id(n) for n in cached_loads(kern, vec)}
    return rest_words(kern, vec, chunks) + sum(
        vec * kern.inputs[n.arg].dtype.itemsize // 4
        for n in kern.order if id(n) in vector_loads(kern, vec, points=True) and id(n) not in kept)


def batch_words(kern: Kernel, vec: int, count: int) -> int:
    """Registers (32-bit words) `count` vectors of each vector load take (a
    one-pass row's batch: cuda_row_batches, spec.KernelSpec._long_batch)."""
    return count * sum(-(-vec * kern.inputs[n.arg].dtype.itemsize // 4)
                       for n in kern.order if id(n) in vector_loads(kern, vec, points=True))


def row_invariant_loads(kern: Kernel) -> set[int]:
    """LOAD nodes of a reduction kernel whose place depends on no kept index
    (the same for every row: a normalization's weight and bias)."""
    kept = set(kern.kept)
    dep: set[int] = set()
    for n in kern.order:
        if (n.op == K.INDEX and n.arg in kept) or any(id(x) in dep for x in n.src):
            dep.add(id(n))
    return {id(n) for n in kern.order if n.op == K.LOAD and id(n) not in dep}


def kept_weights(kern: Kernel, vec: int) -> list[KNode]:
    """The loads every row reads alike along the row (a weight, a bias: vector
    loads among row_invariant_loads) that a shifted variant keeping weights
    (spec.Variant.keep_weights, rows.KEEP_WEIGHTS) holds in shared memory."""
    vl, inv = vector_loads(kern, vec, points=True), row_invariant_loads(kern)
    return [n for n in kern.order if n.op == K.LOAD and id(n) in vl and id(n) in inv]


def kept_share(chunks: int, threads: int, vec: int) -> int:
    """The points of a kept weight a row's group holds in shared memory: its
    threads' vectors, and two more for the shifted row's head and tail (the
    row's point j at j + m_: cuda_row_shift._keep_weights)."""
    return (chunks * threads + 2) * vec


KEPT_BY_SHIFT = True  # (kept_by_shift)


def kept_by_shift(threads: int, vec: int, block: int, tiles: bool = False) -> bool:
    """Does a block keep a share of each weight for each shift a row may start
    at (`vec` shares, the groups whose rows start alike reading one), not one
    for each of its groups: rows of 2-byte points (vectors of 8) where it has
    more groups than a vector has points (short rows, many a block)? H200 %
    of copy, same run, a share a group / a shift: layernorm bf16 229040x293
    79.2 / 80.4, 77.1 / 77.9, fp16 600000x111 68.1 / 70.2, bf16 1000000x61
    56.9 / 57.2; but fp32 rows lost (layernorm fp32 721600x93, 4 threads x 6
    vectors: 71.4 / 66.0; 200000x333 91.1 / 83.8)."""
    return tiles or (KEPT_BY_SHIFT and vec >= 8 and block // threads > vec)  # (tiles: row_tiles)


def kept_block_points(chunks: int, threads: int, vec: int, block: int, tiles: bool = False) -> int:
    """The points of a kept weight a block holds: each of its groups' share
    (or each shift's: kept_by_shift)."""
    shares = vec if kept_by_shift(threads, vec, block, tiles) else block // threads
    return shares * kept_share(chunks, threads, vec)


def kept_weight_bytes(kern: Kernel, vec: int, points: int) -> int:
    """Shared memory a block keeping its weights takes for rows of `points` points
    (each kept weight's elements)."""
    return sum(kern.inputs[n.arg].dtype.itemsize for n in kept_weights(kern, vec)) * points


def invariant_bytes(kern: Kernel) -> int:
    """Bytes a point of a row reads of what every row reads (row_invariant_loads)."""
    invariant = row_invariant_loads(kern)
    return sum(kern.inputs[n.arg].dtype.itemsize for n in kern.order if id(n) in invariant)


def closure_of(roots, stop=frozenset()) -> list:
    """The dependence-ordered sub-DAG under `roots`, the roots included, not
    entering nodes in `stop` (ids)."""
    return topological(roots, stop=stop)
