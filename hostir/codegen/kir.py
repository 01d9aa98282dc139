"""Kernel IR: what one thread computes, as a hash-consed expression DAG.

A kernel iterates over an iteration space (one index per dim); each output
gets one value per point. Nodes are interned, so equal subexpressions (two
uses of an input at the same index) are one node and one load.

A reduction kernel (`Kernel.reduced` not empty) iterates over its reduction's
input space: a REDUCE node combines its source over the reduced dims, and
its value (and every node computed from it) is one per point of the kept
dims. Outputs of the kept shape are stored at the kept dims' indices; values
of the whole space (a prologue result) at every point.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir.dtypes import DataType, coerce
from ..ir.node import Op, Val
from ..ir.printer import Namer, scalar_text


class K:
    """Kernel-IR ops beyond the fusion IR's pointwise ops (which are reused)."""

    INDEX = "index"      # arg=d: the thread's index along iteration dim d
    CONST = "const"      # arg=value
    PARAM = "param"      # arg=k: scalar kernel parameter k (extent, scalar input)
    EXTENT = "extent"    # arg=d: the launch's iteration extent along dim d (its `e<d>` parameter;
                         # a symbolic paired kernel's pair distance)
    LOAD = "load"        # arg=k: tensor input k; src=(pred, *indices)
    REDUCE = "reduce"    # arg=op ("sum" | "max" | "min" | "prod"); src=(value,): over the reduced dims;
                         # arg="argmax": src=(value, index), the index of the first greatest value
                         # (NaN the greatest), combined as (value, index) pairs;
                         # arg="online_softmax": src=(a, c), the pair (max of a, sum of
                         # c * exp(a - max)) combined by the online rule (codegen/online.py),
                         # read only through PROJECT nodes
    PROJECT = "project"  # arg="max" | "sum", src=(an online_softmax REDUCE,): one part of its pair
    CHECK = "check"      # src=(ok, value, index, extent, pred), arg=message: `value` where `pred`
                         # implies `ok`; else an error naming the index (always on CPU, on GPUs
                         # when the kernel is built with HIR_CHECK_INDICES)
    RNG = "rng"          # src=(seed, offset, linear index), arg=("uniform" | "normal", stream):
                         # a Philox draw (hostir/ir/philox.py; hir_rng_* in kernels/hostir.cuh)
    SCAN = "scan"        # arg=op (as REDUCE); src=(value,): combined over the points of the
                         # scanned dim up to this one (Kernel.scanned), others fixed


@dataclass(frozen=True, slots=True, eq=False)
class KNode:
    op: Any              # a K constant or a fusion-IR Op (ADD, WHERE, CAST, ...)
    dtype: DataType
    src: tuple = ()
    arg: Any = None

    def __repr__(self) -> str:
        return f"K({self.op if isinstance(self.op, str) else self.op.value}, {self.dtype.short})"


@dataclass(frozen=True)
class TensorParam:
    """A tensor argument: data pointer plus one stride per dim."""

    val: Val             # the fusion-IR value it holds
    ndim: int
    dtype: DataType


@dataclass
class Kernel:
    name: str
    inputs: list[TensorParam] = field(default_factory=list)
    outputs: list[TensorParam] = field(default_factory=list)
    params: list[Val] = field(default_factory=list)       # scalar leaves (EXTENT / SCALAR_INPUT)
    extent_vals: list[Val] = field(default_factory=list)  # iteration space (scalar Vals)
    stores: list[tuple[int, KNode, tuple]] = field(default_factory=list)  # (output k, value, index)
    pairs: tuple = ()    # (dim, full extent) of every paired dim; the kernel iterates half of each
                         # (full extent None: any extent where `guards` hold)
    guards: tuple = ()   # Bool scalar Vals (of the call's extents and shape scalars) that must all
                         # hold for a launch of this kernel: a symbolic paired kernel's preconditions
    order: list[KNode] = field(default_factory=list)      # every node, producers first
    reduced: tuple = ()  # iteration dims a reduction kernel reduces (innermost-first order kept)
    scanned: int = -1    # the iteration dim a scan kernel's SCAN nodes run along (-1: none)
    guard: KNode | None = None  # stores happen only where it holds (None: everywhere): a scatter's
                                # write kernel stores where its index values are in range, at
                                # positions of outputs of another shape than its iteration space

    @property
    def kept(self) -> tuple:
        """The iteration dims a reduction kernel keeps (all dims of a pointwise one)."""
        return tuple(d for d in range(len(self.extent_vals)) if d not in self.reduced)


def linear(n: KNode) -> tuple[dict[int, tuple[KNode, int]], int]:
    """`n` as a sum of coefficient * atom terms and a constant: ({id(atom):
    (atom, coefficient)}, constant). Int additions, subtractions and products
    by a constant are looked through; every other node is an atom."""
    terms: dict[int, list] = {}
    const = 0
    stack = [(n, 1)]
    while stack:
        x, k = stack.pop()
        if x.op == K.CONST and isinstance(x.arg, int) and not isinstance(x.arg, bool):
            const += k * x.arg
        elif x.dtype is DataType.Int and x.op in (Op.ADD, Op.SUB):
            stack += [(x.src[0], k), (x.src[1], k if x.op is Op.ADD else -k)]
        elif x.dtype is DataType.Int and x.op is Op.MUL and any(s.op == K.CONST for s in x.src):
            c, y = (x.src[0], x.src[1]) if x.src[0].op == K.CONST else (x.src[1], x.src[0])
            stack.append((y, k * c.arg))
        else:
            terms.setdefault(id(x), [x, 0])[1] += k
    return {i: (a, c) for i, (a, c) in terms.items() if c}, const


class Builder:
    """Interns nodes and records them in creation (topological) order.

    Index arithmetic folds as it builds. Where a symbolic iteration extent
    (K.EXTENT: a symbolic paired kernel's pair distance H) takes part, sums
    are kept as canonical linear forms (`INDEX + k * EXTENT + c`, atoms in a
    fixed order), so that `(i + H) - H` is `i` and two lanes' equal indices are
    one node; `cmp` decides comparisons over the dims' ranges (`ranges`) for
    every value of the symbolic extents (each at least 1: a launch that runs a
    point has a nonempty iteration space)."""

    def __init__(self):
        self._table: dict[tuple, KNode] = {}
        self.order: list[KNode] = []
        self._pos: dict[int, int] = {}
        self._symbolic: set[int] = set()  # linear forms built with a K.EXTENT term
        self.ranges: dict[int, int | KNode] = {}  # INDEX dim -> its extent (K.EXTENT: symbolic)

    def mk(self, op, dtype: DataType, src=(), arg=None) -> KNode:
        key = (op, dtype, tuple(id(s) for s in src), arg if not isinstance(arg, float) else ("f", arg))
        node = self._table.get(key)
        if node is None:
            node = KNode(op, dtype, tuple(src), arg)
            self._table[key] = node
            self._pos[id(node)] = len(self.order)
            self.order.append(node)
        return node

    def const(self, value, dtype: DataType) -> KNode:
        return self.mk(K.CONST, dtype, arg=coerce(value, dtype))

    def i(self, value: int) -> KNode:
        return self.const(value, DataType.Int)

    def is_const(self, n: KNode, value=None) -> bool:
        return n.op == K.CONST and (value is None or n.arg == value)

    # index arithmetic with folding; affine forms are kept as `x + c` (c constant last)
    def add(self, a: KNode, b: KNode) -> KNode:
        if self._is_symbolic(a) or self._is_symbolic(b):
            return self._combine([(a, 1), (b, 1)])
        if self.is_const(a) and not self.is_const(b):
            a, b = b, a
        if self.is_const(b, 0):
            return a
        if self.is_const(a) and self.is_const(b):
            return self.i(a.arg + b.arg)
        if self.is_const(b) and a.op is Op.ADD and self.is_const(a.src[1]):
            return self.add(a.src[0], self.i(a.src[1].arg + b.arg))
        return self.mk(Op.ADD, DataType.Int, (a, b))

    def sub(self, a: KNode, b: KNode) -> KNode:
        if self._is_symbolic(a) or self._is_symbolic(b):
            return self._combine([(a, 1), (b, -1)])
        if self.is_const(b):
            return self.add(a, self.i(-b.arg))
        return self.mk(Op.SUB, DataType.Int, (a, b))

    def mul(self, a: KNode, b: KNode) -> KNode:
        if self.is_const(b, 1):
            return a
        if self.is_const(a, 1):
            return b
        if self.is_const(a, 0) or self.is_const(b, 0):
            return self.i(0)
        if self.is_const(a) and self.is_const(b):
            return self.i(a.arg * b.arg)
        if self.is_const(a) and self._is_symbolic(b):
            return self._combine([(b, a.arg)])
        if self.is_const(b) and self._is_symbolic(a):
            return self._combine([(a, b.arg)])
        return self.mk(Op.MUL, DataType.Int, (a, b))

    def floordiv(self, a: KNode, b: KNode) -> KNode:
        if self.is_const(b, 1):
            return a
        return self.mk(Op.DIV, DataType.Int, (a, b))

    def mod(self, a: KNode, b: KNode) -> KNode:
        if self.is_const(b, 1):
            return self.i(0)
        return self.mk(Op.REMAINDER, DataType.Int, (a, b))

    def _is_symbolic(self, n: KNode) -> bool:
        return n.op == K.EXTENT or id(n) in self._symbolic

    def _combine(self, parts: list[tuple[KNode, int]]) -> KNode:
        """The canonical node of sum(k * linear(x) for x, k in parts): index
        terms first (by dim), then other atoms by creation, extents last, and
        the constant at the end."""
        terms: dict[int, list] = {}
        const = 0
        for x, k in parts:
            ts, c = linear(x)
            const += k * c
            for i, (atom, coef) in ts.items():
                terms.setdefault(i, [atom, 0])[1] += k * coef
        items = sorted(((a, c) for a, c in terms.values() if c), key=self._rank)
        acc = None
        for atom, c in items:
            if acc is None:
                acc = atom if c == 1 else self.mk(Op.MUL, DataType.Int, (atom, self.i(c)))
            else:
                term = atom if abs(c) == 1 else self.mk(Op.MUL, DataType.Int, (atom, self.i(abs(c))))
                acc = self.mk(Op.ADD if c > 0 else Op.SUB, DataType.Int, (acc, term))
        if acc is None:
            return self.i(const)
        if const:
            acc = self.mk(Op.ADD, DataType.Int, (acc, self.i(const)))
        if any(a.op == K.EXTENT for a, _ in items):
            self._symbolic.add(id(acc))
        return acc

    def _rank(self, term) -> tuple:
        atom = term[0]
        if atom.op == K.INDEX:
            return (0, atom.arg)
        return (2, atom.arg) if atom.op == K.EXTENT else (1, self._pos.get(id(atom), -1))

    def land(self, a: KNode | None, b: KNode | None) -> KNode | None:
        """Conjunction of predicates; None means always true."""
        if a is not None and self.is_const(a):
            return b if a.arg else a
        if b is not None and self.is_const(b):
            return a if b.arg else b
        if a is None:
            return b
        if b is None or a is b:
            return a
        return self.mk(Op.LOGICAL_AND, DataType.Bool, (a, b))

    def _bounds(self, n: KNode):
        """(lo, hi) of an index expression over the dims' ranges, each a linear
        form in the symbolic extents ({id: coefficient}, constant); None where
        an atom's range is unknown."""
        terms, c = linear(n)
        lo, hi = [{}, c], [{}, c]
        for atom, k in terms.values():
            if atom.op == K.EXTENT:
                for form in (lo, hi):
                    form[0][id(atom)] = form[0].get(id(atom), 0) + k
                continue
            r = self.ranges.get(atom.arg) if atom.op == K.INDEX else None
            if r is None:
                return None
            form = hi if k > 0 else lo  # the index runs over [0, r - 1]: k * (r - 1) bounds one side
            if isinstance(r, int):
                form[1] += k * (r - 1)
            else:
                form[0][id(r)] = form[0].get(id(r), 0) + k
                form[1] -= k
        return lo, hi

    @staticmethod
    def _always(a, b, shift: int, nonneg: bool) -> bool:
        """Is form a - form b - shift >= 0 (nonneg) or < 0 for every value of
        the symbolic extents (each >= 1)?"""
        coefs = dict(a[0])
        for i, k in b[0].items():
            coefs[i] = coefs.get(i, 0) - k
        at_one = sum(coefs.values()) + a[1] - b[1] - shift
        if nonneg:
            return all(k >= 0 for k in coefs.values()) and at_one >= 0
        return all(k <= 0 for k in coefs.values()) and at_one < 0

    def cmp(self, op: Op, a: KNode, b: KNode) -> KNode:
        ra, rb = self._bounds(a), self._bounds(b)
        if ra is not None and rb is not None:
            (alo, ahi), (blo, bhi) = ra, rb
            lt = self._always(ahi, blo, 0, False)   # a < b everywhere
            ge = self._always(alo, bhi, 0, True)    # a >= b everywhere
            le = self._always(ahi, blo, 1, False)   # a <= b
            gt = self._always(alo, bhi, 1, True)    # a > b
            decided = {Op.LT: (lt, ge), Op.GE: (ge, lt), Op.LE: (le, gt), Op.GT: (gt, le)}.get(op)
            if decided is not None:
                if decided[0]:
                    return self.const(True, DataType.Bool)
                if decided[1]:
                    return self.const(False, DataType.Bool)
        return self.mk(op, DataType.Bool, (a, b))

    def where(self, c: KNode, a: KNode, b: KNode) -> KNode:
        if c is None:
            return a
        if self.is_const(c):
            return a if c.arg else b
        if a is b:
            return a
        return self.mk(Op.WHERE, a.dtype, (c, a, b))


# ---------------------------------------------------------------- parameter layout

@dataclass(frozen=True, slots=True)
class Slot:
    """One kernel parameter, in launch order. `kind` is "in" or "out" (a
    tensor's data pointer), "in_stride" or "out_stride" (one of its strides),
    "param" (a scalar parameter), "extent" (an iteration extent) or "count"
    (iteration slots); `index` names the tensor, parameter or dim; `name` is
    the parameter's name in the CUDA source."""

    kind: str
    index: int
    dim: int
    name: str


def layout(kern: Kernel) -> tuple[Slot, ...]:
    """The one definition of a kernel's parameters: the CUDA printer declares
    them in this order and the launchers (CUDA and the interpreter) pack them so."""
    slots = []
    for kind, tensors in (("in", kern.inputs), ("out", kern.outputs)):
        for s, t in enumerate(tensors):
            slots.append(Slot(kind, s, 0, f"{kind}{s}"))
            slots += [Slot(f"{kind}_stride", s, d, f"{kind}{s}_s{d}") for d in range(t.ndim)]
    slots += [Slot("param", s, 0, f"p{s}") for s in range(len(kern.params))]
    slots += [Slot("extent", d, 0, f"e{d}") for d in range(len(kern.extent_vals))]
    if kern.reduced or kern.scanned >= 0:  # work split over blocks: its workspace, counters, split
        slots += [Slot("ws", 0, 0, "ws"), Slot("sem", 0, 0, "sem"), Slot("split", 0, 0, "split")]
    slots.append(Slot("count", 0, 0, "nslots"))
    return tuple(slots)


SCRATCH = ("ws", "sem", "split")


def pack(slots, ins, outs, params, extents, count, pointer, scratch=(None, None, 1)) -> list:
    """Argument values in `slots` order; `pointer(t)` is what a tensor passes as
    (its address on CUDA, the tensor itself in the interpreter); `scratch`: a
    split reduction's workspace, counters and split (SCRATCH)."""
    tensors = {"in": ins, "out": outs}
    values = []
    for s in slots:
        kind = s.kind
        if kind in ("in", "out"):
            values.append(pointer(tensors[kind][s.index]))
        elif kind == "in_stride" or kind == "out_stride":
            values.append(tensors[kind[:-7]][s.index].stride(s.dim))
        elif kind == "param":
            values.append(params[s.index])
        elif kind == "extent":
            values.append(extents[s.index])
        elif kind in SCRATCH:
            x = scratch[SCRATCH.index(kind)]
            values.append(x if kind == "split" else 0 if x is None else pointer(x))
        else:
            values.append(count)
    return values


# ---------------------------------------------------------------- verifier and printer

REDUCE_OPS = ("sum", "max", "min", "prod", "argmax", "online_softmax")
ONLINE = "online_softmax"


def partial_bytes(n: KNode) -> int:
    """Bytes of one partial result of REDUCE node `n` in a split reduction's
    workspace: 8, or 16 for argmax's (value, index) pair, an online softmax's
    pair of doubles and a complex double."""
    if n.arg == ONLINE:
        return max(8, 2 * n.dtype.itemsize)
    return 16 if n.arg == "argmax" else max(8, n.dtype.itemsize)


def ws_slot(kern: Kernel) -> int:
    """Bytes a split reduction's workspace gives every partial result: the
    widest of its REDUCE nodes' (so each one's array starts aligned for it)."""
    return max([8] + [partial_bytes(n) for n in kern.order if n.op == K.REDUCE])


def row_nodes(kern: Kernel) -> set[int]:
    """Nodes of a reduction kernel whose value is one per point of the kept
    dims: those that depend on no reduced index, or only through a REDUCE."""
    full: set[int] = set()
    for n in kern.order:
        if n.op == K.INDEX:
            if n.arg in kern.reduced:
                full.add(id(n))
        elif n.op != K.REDUCE and any(id(s) in full for s in n.src):
            full.add(id(n))
    return {id(n) for n in kern.order if id(n) not in full}


def split_stores(kern: Kernel, rows: set[int] | None = None) -> tuple[list, list]:
    """A reduction kernel's stores: (at every point of its space, at its kept dims)."""
    rows = row_nodes(kern) if rows is None else rows
    full = [st for st in kern.stores if any(id(i) not in rows for i in st[2])]
    return full, [st for st in kern.stores if st not in full]


def levels(kern: Kernel) -> dict[int, int]:
    """Per node of a reduction kernel, how many reductions precede its value: a
    REDUCE of a level-l value is computed in pass l (a softmax: max in pass 0,
    the sum of exp(x - max) in pass 1, the output in pass 2)."""
    level: dict[int, int] = {}
    for n in kern.order:
        below = max((level[id(s)] for s in n.src), default=0)
        level[id(n)] = below + 1 if n.op == K.REDUCE else below
    return level


def reductions(kern: Kernel) -> int:
    """The values a reduction kernel reduces (a var_mean's two sums: 2)."""
    return sum(1 for n in kern.order if n.op == K.REDUCE)


def passes(kern: Kernel) -> list[int]:
    """The passes over each row a reduction kernel makes (levels with work)."""
    level = levels(kern)
    return sorted({level[id(n)] - 1 for n in kern.order if n.op == K.REDUCE}
                  | {level[id(v)] for _, v, _ in split_stores(kern)[0]})


class KernelVerificationError(AssertionError):
    pass


def verify_kernel(kern: Kernel) -> None:
    """Kernel IR checks: producers before uses, loads and parameters in range of
    the kernel's tensors and scalars, index dims in range of the iteration
    space, every output stored with one index per dim."""
    n = len(kern.extent_vals)
    seen: set[int] = set()

    def fail(msg):
        raise KernelVerificationError(f"malformed kernel {kern.name}: {msg}")
    for node in kern.order:
        if any(id(s) not in seen for s in node.src):
            fail(f"{node!r} uses a node defined after it")
        seen.add(id(node))
        if node.op in (K.INDEX, K.EXTENT) and not 0 <= node.arg < n:
            fail(f"{node.op} of dim {node.arg}, but the kernel iterates over {n} dims")
        if node.op == K.REDUCE and (not kern.reduced or node.arg not in REDUCE_OPS):
            fail(f"{node!r} ({node.arg}) in a kernel that reduces dims {list(kern.reduced)}")
        if node.op == K.REDUCE and len(node.src) != (2 if node.arg in ("argmax", ONLINE) else 1):
            fail(f"{node!r} ({node.arg}) with {len(node.src)} sources")
        if node.op == K.REDUCE and node.arg == ONLINE and (node.dtype not in (
                DataType.Float, DataType.Double) or any(x.dtype is not node.dtype for x in node.src)):
            fail(f"{node!r} (online_softmax) of {[x.dtype.short for x in node.src]}")
        if any(x.op == K.REDUCE and x.arg == ONLINE for x in node.src) and node.op != K.PROJECT:
            fail(f"{node!r} reads an online_softmax pair (only PROJECT nodes do)")
        if node.op == K.PROJECT and (len(node.src) != 1 or node.src[0].op != K.REDUCE or
                                     node.src[0].arg != ONLINE or node.arg not in ("max", "sum")):
            fail(f"{node!r} ({node.arg}) projects what is not an online_softmax pair")
        if node.op == K.SCAN and (not 0 <= kern.scanned < n or node.arg not in REDUCE_OPS):
            fail(f"{node!r} ({node.arg}) in a kernel that scans dim {kern.scanned}")
        if node.op == K.PARAM and not 0 <= node.arg < len(kern.params):
            fail(f"parameter {node.arg} of {len(kern.params)}")
        if node.op == K.LOAD:
            if not 0 <= node.arg < len(kern.inputs):
                fail(f"load of input {node.arg} of {len(kern.inputs)}")
            t = kern.inputs[node.arg]
            if len(node.src) != 1 + t.ndim or node.dtype is not t.dtype:
                fail(f"load of input {node.arg} ({t.dtype.short}, {t.ndim} dims) with "
                     f"{len(node.src) - 1} indices as {node.dtype.short}")
    if kern.guard is not None and (id(kern.guard) not in seen or kern.guard.dtype is not DataType.Bool
                                   or kern.reduced or kern.scanned >= 0):
        fail("a store guard that is not a Bool node of a pointwise kernel's order")
    stored = set()
    for slot, value, ix in kern.stores:
        if not 0 <= slot < len(kern.outputs) or len(ix) != kern.outputs[slot].ndim:
            fail(f"store to output {slot} with {len(ix)} indices")
        if any(id(x) not in seen for x in (value, *ix)):
            fail(f"store to output {slot} of a value not in the kernel's order")
        if value.op == K.REDUCE and value.arg == ONLINE:
            fail(f"store to output {slot} of an online_softmax pair")
        stored.add(slot)
    if stored != set(range(len(kern.outputs))):
        fail(f"outputs {sorted(set(range(len(kern.outputs))) - stored)} are never stored")


def kernel_text(kern: Kernel) -> str:
    """Kernel IR as SSA lines, for dumps and debugging."""
    names: dict[int, str] = {}
    namer = Namer()  # one naming of the guards' leaves
    lines = [f"kernel {kern.name}: {len(kern.inputs)} inputs, {len(kern.outputs)} outputs, "
             f"{len(kern.extent_vals)} dims" + (f", paired {list(kern.pairs)}" if kern.pairs else "")
             + (f" where {' and '.join(scalar_text(g, namer) for g in kern.guards)}" if kern.guards else "")
             + (f", reduces dims {list(kern.reduced)}" if kern.reduced else "")
             + (f", scans dim {kern.scanned}" if kern.scanned >= 0 else "")]
    for k, node in enumerate(kern.order):
        names[id(node)] = f"%{k}"
        op = node.op if isinstance(node.op, str) else node.op.value
        args = ", ".join(names[id(s)] for s in node.src)
        arg = "" if node.arg is None else f" [{node.arg}]"
        lines.append(f"  %{k} {node.dtype.short} = {op}{arg}({args})")
    where = f" where {names[id(kern.guard)]}" if kern.guard is not None else ""
    for slot, value, ix in kern.stores:
        lines.append(f"  out{slot}[{', '.join(names[id(i)] for i in ix)}] = {names[id(value)]}{where}")
    return "\n".join(lines)


def topological(roots, deps=lambda n: n.src, stop=frozenset()) -> list:
    """The nodes under `roots` along `deps` (default: their sources), each
    after its deps, the roots included, not entering nodes whose id is in
    `stop` (iterative: kernels may be deep)."""
    seen, order = set(), []
    stack = [(r, False) for r in reversed(roots)]
    while stack:
        n, done = stack.pop()
        if done:
            order.append(n)
            continue
        if id(n) in seen or id(n) in stop:
            continue
        seen.add(id(n))
        stack.append((n, True))
        stack.extend((x, False) for x in reversed(deps(n)))
    return order
