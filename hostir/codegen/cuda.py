"""CUDA C++ printer of kernel IR. The kernel's parameters are its `layout`
(kir.py: per input a data pointer and one stride per dim, per output the
same, the scalar parameters, the iteration extents and the slot count);
threads walk the iteration space with a grid-stride loop. Each op is spelled
by its record's `cuda` format (ir/ops/)."""
from __future__ import annotations

import math

from ..ir.dtypes import DataType
from ..ir.node import OPS, Op
from .kir import K, Kernel, KNode, layout, levels, passes, row_nodes

CTYPE = {
    DataType.Bool: "bool", DataType.Int32: "int", DataType.Int: "long long",
    DataType.Half: "hir_half", DataType.BFloat16: "hir_bf16", DataType.Float: "float",
    DataType.Double: "double",
}
# how a scalar parameter travels (a bool goes as a 4-byte int)
PARAM_CTYPE = {**CTYPE, DataType.Bool: "int", DataType.Half: "float", DataType.BFloat16: "float"}


def _literal(value, dtype: DataType) -> str:
    if dtype.is_bool:
        return "true" if value else "false"
    if dtype.is_int:
        return f"{int(value)}LL" if dtype is DataType.Int else str(int(value))
    v = float(value)
    suffix = "f" if dtype is not DataType.Double else ""
    if math.isnan(v):
        return "__int_as_float(0x7fc00000)" if suffix else "__longlong_as_double(0x7ff8000000000000LL)"
    if math.isinf(v):
        inf = "__int_as_float(0x7f800000)" if suffix else "__longlong_as_double(0x7ff0000000000000LL)"
        return inf if v > 0 else f"(-{inf})"
    return f"{v!r}{suffix}"


def _cast(x: str, src: DataType, dst: DataType) -> str:
    if dst is DataType.Half:
        return f"hir_f2h((float)({x}))" if src is not DataType.BFloat16 else f"hir_f2h(hir_bf2f({x}))"
    if dst is DataType.BFloat16:
        return f"hir_f2bf((float)({x}))" if src is not DataType.Half else f"hir_f2bf(hir_h2f({x}))"
    if src is DataType.Half:
        return f"({CTYPE[dst]})hir_h2f({x})"
    if src is DataType.BFloat16:
        return f"({CTYPE[dst]})hir_bf2f({x})"
    if dst is DataType.Bool:
        return f"(({x}) != 0)"
    return f"({CTYPE[dst]})({x})"


def _offset(indices, tensor: str) -> str:
    """Element offset of `tensor` (a kernel parameter with strides `<tensor>_s<d>`)."""
    return " + ".join(f"{i} * {tensor}_s{d}" for d, i in enumerate(indices)) or "0"


def _expr(n: KNode, name) -> str:
    op = n.op
    a = [name(s) for s in n.src]
    if op == K.CONST:
        return _literal(n.arg, n.dtype)
    if op == K.INDEX:
        return f"i{n.arg}"
    if op == K.PARAM:
        return f"({CTYPE[n.dtype]})p{n.arg}"
    if op == K.LOAD:
        k = n.arg
        off = _offset(a[1:], f"in{k}")
        return f"({a[0]} ? in{k}[{off}] : ({CTYPE[n.dtype]})0)"
    if op is Op.CAST:
        return _cast(a[0], n.src[0].dtype, n.dtype)
    return OPS[op].cuda.format(*a)


VEC_TYPE = {2: "unsigned short", 4: "unsigned int", 8: "uint2", 16: "uint4"}


def _inner_deps(kern: Kernel, inner: int) -> set[int]:
    """Nodes whose value depends on the innermost iteration index."""
    dep: set[int] = set()
    for n in kern.order:
        if (n.op == K.INDEX and n.arg == inner) or any(id(s) in dep for s in n.src):
            dep.add(id(n))
    return dep


def _affine(n: KNode, inner: int):
    """c if n is `i_inner + c` (c a constant), else None."""
    if n.op == K.INDEX and n.arg == inner:
        return 0
    if n.op is Op.ADD and n.src[0].op == K.INDEX and n.src[0].arg == inner and n.src[1].op == K.CONST:
        return n.src[1].arg
    return None


def _uniform(p: KNode, v: int, inner: int, dep: set[int]) -> bool:
    """Is predicate p the same for the v consecutive points of an aligned group?"""
    if id(p) not in dep:
        return True
    if p.op is Op.LOGICAL_AND:
        return all(_uniform(s, v, inner, dep) for s in p.src)
    if p.op in (Op.LT, Op.GE, Op.LE, Op.GT) and len(p.src) == 2:
        a, b = p.src
        c = _affine(a, inner)
        if c is None or b.op != K.CONST or id(b) in dep:
            return False
        k = b.arg + (1 if p.op in (Op.LE, Op.GT) else 0)
        return (k - c) % v == 0
    return False


def vector_loads(kern: Kernel, v: int) -> set[int]:
    """LOAD nodes that read v consecutive, aligned elements per group of points."""
    n = len(kern.extent_vals)
    if v == 1 or n == 0:
        return set()
    inner = n - 1
    dep = _inner_deps(kern, inner)
    out = set()
    for node in kern.order:
        if node.op != K.LOAD or id(node) not in dep:
            continue
        idx = node.src[1:]
        c = _affine(idx[-1], inner) if idx else None
        if c is None or c % v or any(id(i) in dep for i in idx[:-1]):
            continue
        if _uniform(node.src[0], v, inner, dep):
            out.add(id(node))
    return out


class _Printer:
    def __init__(self, kern: Kernel, name: str, vec: int, idx: str, block: int = 128,
                 streaming: bool = False, pdl: bool = False):
        self.k = kern
        self.name = name
        self.block = block
        self.streaming = streaming
        self.pdl = pdl
        self.n = len(kern.extent_vals)
        self.vec = vec if self.n else 1
        self.idx = idx
        self.inner = self.n - 1
        self.dep = _inner_deps(kern, self.inner) if self.n else set()
        self.vloads = vector_loads(kern, self.vec)
        self.index_nodes = _index_nodes(kern)
        self.lines: list[str] = []
        self.count = 0

    def fresh(self) -> str:
        self.count += 1
        return f"v{self.count}"

    def emit_all(self, nodes, names: dict, ix_inner: str, indent: str):
        """SSA statements for `nodes` not named yet; names maps node id -> C text."""
        for node in nodes:
            if id(node) in names:
                continue
            if node.op == K.INDEX:
                names[id(node)] = ix_inner if node.arg == self.inner else f"i{node.arg}"
                continue
            is_index = id(node) in self.index_nodes
            if node.op == K.CONST:
                names[id(node)] = (str(int(node.arg)) if is_index and self.idx == "int"
                                   else _literal(node.arg, node.dtype))
                continue
            if node.op == K.PARAM and is_index:
                text = f"({self.idx})p{node.arg}"
            elif is_index and self.idx == "int":
                # 32-bit index math: a 64-bit operand shared with other uses (a constant,
                # say, also in a store offset) is narrowed here, so calls like hir_min see
                # one type (the variant is only chosen when every offset and index
                # parameter fits in 32 bits)
                text = _expr(node, lambda s: names[id(s)] if id(s) in self.index_nodes
                             or s.dtype is not DataType.Int or s.op == K.INDEX
                             else (str(int(s.arg)) if s.op == K.CONST else f"(int){names[id(s)]}"))
            else:
                text = _expr(node, lambda s: names[id(s)])
            var = self.fresh()
            ctype = self.idx if is_index else CTYPE[node.dtype]
            self.lines.append(f"{indent}const {ctype} {var} = {text};")
            names[id(node)] = var

    def params(self) -> list[str]:
        """The parameter declarations, in the kernel's layout."""
        k, idx, out = self.k, self.idx, []
        for slot in layout(k):
            if slot.kind == "in":
                out.append(f"const {CTYPE[k.inputs[slot.index].dtype]}* __restrict__ {slot.name}")
            elif slot.kind == "out":
                out.append(f"{CTYPE[k.outputs[slot.index].dtype]}* __restrict__ {slot.name}")
            elif slot.kind == "param":
                out.append(f"{PARAM_CTYPE[k.params[slot.index].dtype]} {slot.name}")
            elif slot.kind == "ws":
                out.append("char* __restrict__ ws")
            elif slot.kind == "sem":
                out.append("unsigned int* __restrict__ sem")
            else:
                out.append(f"{idx} {slot.name}")
        return out

    def loop_head(self) -> None:
        """The grid-stride loop over slots, and each slot's first point (i0, i1, ...)."""
        idx, L = self.idx, self.lines
        if self.pdl:  # launched early, behind the previous kernel of the stream: wait for
            # it to finish before touching memory; and let the next kernel launch early too
            L += ["#if __CUDA_ARCH__ >= 900",
                  '  asm volatile("griddepcontrol.wait;" ::: "memory");',
                  '  asm volatile("griddepcontrol.launch_dependents;");',
                  "#endif"]
        L.append(f"  for ({idx} j = ({idx})blockIdx.x * blockDim.x + threadIdx.x; j < nslots; "
                 f"j += ({idx})gridDim.x * blockDim.x) {{")
        if self.n:
            L.append(f"    {idx} rest = j * {self.vec};")
            for d in reversed(range(self.n)):
                if d == 0:
                    L.append("    const %s i0 = rest;" % idx)
                else:
                    L.append(f"    const {idx} i{d} = rest % e{d}; rest /= e{d};")

    def source(self) -> str:
        self.loop_head()
        names: dict[int, str] = {}
        self.emit_all([n for n in self.k.order if id(n) not in self.dep], names,
                      f"i{self.inner}", "    ")
        inner_nodes = [n for n in self.k.order if id(n) in self.dep]
        if self.vec == 1:
            self.point_body(inner_nodes, names)
        else:
            self.vector_body(inner_nodes, names)
        self.lines.append("  }")
        return self.wrap()

    def point_body(self, inner_nodes, names) -> None:
        """One point per slot: compute, then store each output."""
        self.emit_all(inner_nodes, names, f"i{self.inner}", "    ")
        for s, node, ix in self.k.stores:
            off = _offset([names[id(i)] for i in ix], f"out{s}")
            self.lines.append(f"    out{s}[{off}] = {names[id(node)]};")

    def vector_body(self, inner_nodes, names) -> None:
        """`vec` points per slot: vector loads, an unrolled loop, vector stores."""
        k, v, L = self.k, self.vec, self.lines
        base = dict(names)  # vector loads and store offsets are evaluated once, at u = 0
        needed = [node for node in inner_nodes if id(node) in self.vloads]
        store_ix = [i for _, _, ix in k.stores for i in ix if id(i) in self.dep]
        pre = _closure(needed, self.dep) + _closure(store_ix, self.dep) + store_ix
        self.emit_all([n for n in pre if n.op != K.LOAD], base, f"i{self.inner}", "    ")
        for node in needed:
            names[id(node)] = self.vector_load(node, base)
        outs = []
        for s, node, ix in k.stores:
            arr = self.fresh()
            L.append(f"    alignas(16) {CTYPE[k.outputs[s].dtype]} {arr}[{v}];")
            outs.append(arr)
        L.append("    #pragma unroll")
        L.append(f"    for (int u = 0; u < {v}; ++u) {{")
        L.append(f"      const {self.idx} ii = i{self.inner} + u;")
        self.emit_all(inner_nodes, names, "ii", "      ")
        for (s, node, ix), arr in zip(k.stores, outs):
            L.append(f"      {arr}[u] = {names[id(node)]};")
        L.append("    }")
        for (s, node, ix), arr in zip(k.stores, outs):
            self.vector_store(s, arr, _offset([base[id(i)] for i in ix], f"out{s}"))

    def vector_load(self, node: KNode, base: dict, into: str | None = None) -> str:
        """A vector load into a new array, or into `into` (an array expression:
        a slice of a register cache); returns the element at `u`."""
        t, v = self.k.inputs[node.arg], self.vec
        size = t.dtype.itemsize * v
        a = [base[id(s)] for s in node.src]
        off = _offset(a[1:], f"in{node.arg}")
        arr = into
        if arr is None:
            arr = self.fresh()
            self.lines.append(f"    alignas(16) {CTYPE[t.dtype]} {arr}[{v}];")
        self.lines += [
            f"    if ({a[0]}) *reinterpret_cast<{VEC_TYPE[size]}*>({arr}) = "
            f"*reinterpret_cast<const {VEC_TYPE[size]}*>(in{node.arg} + {off});",
            f"    else {{ for (int u = 0; u < {v}; ++u) ({arr})[u] = ({CTYPE[t.dtype]})0; }}"]
        return f"({arr})[u]"

    def vector_store(self, s: int, arr: str, off: str) -> None:
        size = self.k.outputs[s].dtype.itemsize * self.vec
        if self.streaming and size == 16:  # evict-first: the output is not read again soon
            self.lines.append(
                f"    {{ const uint4 w = *reinterpret_cast<const uint4*>({arr}); "
                f"asm volatile(\"st.global.cs.v4.u32 [%0], {{%1, %2, %3, %4}};\" :: "
                f"\"l\"(out{s} + {off}), \"r\"(w.x), \"r\"(w.y), \"r\"(w.z), \"r\"(w.w) : "
                f"\"memory\"); }}")
        else:
            self.lines.append(f"    *reinterpret_cast<{VEC_TYPE[size]}*>(out{s} + {off}) = "
                              f"*reinterpret_cast<const {VEC_TYPE[size]}*>({arr});")

    def wrap(self) -> str:
        head = ['#include "hostir.cuh"', *_op_definitions(self.k),
                f'extern "C" __global__ void __launch_bounds__({self.block}) {self.name}(',
                "    " + ",\n    ".join(self.params()) + ") {"]
        return "\n".join(head + self.lines + ["}"]) + "\n"


_COMBINE = {"sum": "x + y", "max": "hir_max(x, y)", "min": "hir_min(x, y)"}


def _reduce_init(op: str, dtype: DataType) -> str:
    if op == "sum":
        return _literal(0, dtype)
    if dtype.is_float:
        return _literal(float("-inf") if op == "max" else float("inf"), dtype)
    bits = 8 * dtype.itemsize
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if op == "max":
        return f"({_literal(lo + 1, dtype)} - 1)"
    return _literal(hi, dtype)


class _ReductionPrinter(_Printer):
    """A reduction or normalization kernel: each group of `threads` consecutive
    threads of a block takes one point of the kept dims (a row) at a time. A
    pass over the row's reduced points has each thread combine every
    `threads`-th point, then the group combines its threads' values
    (hir_group_reduce); values computed from those results start the next pass
    (a softmax: max, then the sum of exp(x - max), then the output), whose
    reads of the row hit the cache. The group's first thread stores values of
    the kept dims."""

    def __init__(self, kern: Kernel, name: str, idx: str, block: int, threads: int, pdl: bool,
                 vec: int = 1, chunks: int = 0):
        super().__init__(kern, name, vec, idx, block, False, pdl)
        if vec == 1:
            self.inner = -1  # every index is named i<d>
        self.threads = threads
        self.chunks = chunks if vec > 1 else 0  # persistent: each thread's vectors of a row
        self.cache: dict[int, str] = {}          # vector load -> its register array
        self.loaded: set[int] = set()            # cached loads a pass has filled

    def source(self) -> str:
        k, idx, L, T = self.k, self.idx, self.lines, self.threads
        groups = self.block // T
        rows, level = row_nodes(k), levels(k)
        reduces = [n for n in k.order if n.op == K.REDUCE]
        full_stores = [st for st in k.stores if any(id(i) not in rows for i in st[2])]
        row_stores = [st for st in k.stores if st not in full_stores]
        if self.pdl:
            L += ["#if __CUDA_ARCH__ >= 900",
                  '  asm volatile("griddepcontrol.wait;" ::: "memory");',
                  '  asm volatile("griddepcontrol.launch_dependents;");',
                  "#endif"]
        L.append(f"  const int lane = threadIdx.x % {T};")
        for j, n in enumerate(reduces):
            if T > 32:
                L.append(f"  __shared__ {CTYPE[n.dtype]} smem{j}[{self.block // 32}];")
        count = " * ".join(f"e{d}" for d in k.reduced)
        L.append(f"  const {idx} R = {count};")
        L.append(f"  for ({idx} base = ({idx})blockIdx.x * {groups}; base < nslots; "
                 f"base += ({idx})gridDim.x * {groups}) {{")
        # a group past the last row computes row 0 again (every thread must reach the
        # group reductions) and stores nothing
        L.append(f"    const bool active = base + threadIdx.x / {T} < nslots;")
        L.append(f"    const {idx} row = active ? base + threadIdx.x / {T} : 0;")
        self._split("row", k.kept, "    ")
        names: dict[int, str] = {}
        self.emit_all([n for n in k.order if id(n) in rows and level[id(n)] == 0], names, "", "    ")
        acc = {id(n): f"a{j}" for j, n in enumerate(reduces)}
        work = []
        for p in passes(k):
            mine = [n for n in reduces if level[id(n.src[0])] == p]
            stores = [st for st in full_stores if level[id(st[1])] == p]
            roots = [n.src[0] for n in mine] + [x for st in stores for x in (st[1], *st[2])]
            work.append((p, mine, stores, _closure_of(roots, rows)))  # row values are named already
        if self.chunks:  # the row's vectors stay in registers from the pass that loads them
            for n in dict.fromkeys(n for *_, body in work for n in body if id(n) in self.vloads):
                self.cache[id(n)] = name = self.fresh()
                L.append(f"    alignas(16) {CTYPE[n.dtype]} {name}[{self.chunks * self.vec}];")
        for p, mine, stores, body in work:
            for n in mine:
                L.append(f"    {CTYPE[n.dtype]} {acc[id(n)]} = {_reduce_init(n.arg, n.dtype)};")
            if self.vec == 1:
                self._scalar_pass(mine, stores, body, names, acc)
            else:
                self._vector_pass(mine, stores, body, names, acc)
            self._group_reduce(mine, [reduces.index(n) for n in mine], acc)
            for n in mine:
                names[id(n)] = acc[id(n)]
            self.emit_all([n for n in k.order if id(n) in rows and level[id(n)] == p + 1
                           and n.op != K.REDUCE], names, "", "    ")
        self.emit_all([n for n in k.order if id(n) in rows and n.op != K.REDUCE], names, "", "    ")
        if row_stores:
            L.append("    if (lane == 0 && active) {")
            for s, node, ix in row_stores:
                off = _offset([names[id(i)] for i in ix], f"out{s}")
                L.append(f"      out{s}[{off}] = {names[id(node)]};")
            L.append("    }")
        L.append("  }")
        return self.wrap()

    def _group_reduce(self, mine, slots, acc) -> None:
        """Combine each accumulator over the row's threads: shuffles in each warp,
        then (rows wider than a warp) one exchange through shared memory for
        all of a pass's accumulators together."""
        L, T = self.lines, self.threads
        for n in mine:
            ct, a = CTYPE[n.dtype], acc[id(n)]
            L.append(f"    {a} = hir_warp_reduce<{T}>({a}, []({ct} x, {ct} y) {{ return "
                     f"{_COMBINE[n.arg]}; }});")
        if T <= 32 or not mine:
            return
        L.append("    __syncthreads();  // the slots' previous readers are done")
        L.append("    if ((threadIdx.x & 31) == 0) {")
        for n, j in zip(mine, slots):
            L.append(f"      smem{j}[threadIdx.x / 32] = {acc[id(n)]};")
        L.append("    }")
        L.append("    __syncthreads();")
        L.append("    {")
        L.append(f"      const int first = (threadIdx.x / {T}) * {T // 32};")
        for n, j in zip(mine, slots):
            a, ct = acc[id(n)], CTYPE[n.dtype]
            L.append(f"      {a} = smem{j}[first];")
            L.append(f"      for (int w = 1; w < {T // 32}; ++w) {{ const {ct} x = {a}, "
                     f"y = smem{j}[first + w]; {a} = {_COMBINE[n.arg]}; }}")
        L.append("    }")

    def _scalar_pass(self, mine, stores, body, names, acc) -> None:
        """One point of the row per thread and iteration."""
        L, T, idx = self.lines, self.threads, self.idx
        L.append(f"    for ({idx} r = lane; r < R; r += {T}) {{")
        self._split("r", self.k.reduced, "      ")
        inner = dict(names)
        self.emit_all(body, inner, "", "      ")
        for n in mine:
            a = acc[id(n)]
            L.append(f"      {{ const {CTYPE[n.dtype]} x = {a}, y = {inner[id(n.src[0])]}; "
                     f"{a} = {_COMBINE[n.arg]}; }}")
        for s, node, ix in stores:
            off = _offset([inner[id(i)] for i in ix], f"out{s}")
            L.append(f"      if (active) out{s}[{off}] = {inner[id(node)]};")
        L.append("    }")

    def _vector_pass(self, mine, stores, body, names, acc) -> None:
        """`vec` consecutive points of the innermost dim per thread and iteration:
        vector loads, an unrolled loop, vector stores (the launch checked that
        the innermost extent and the tensors' alignment allow it)."""
        L, T, idx, v, k = self.lines, self.threads, self.idx, self.vec, self.k
        i = f"i{self.inner}"
        if self.chunks:  # persistent: the row's vectors are this thread's C vectors
            L.append("    #pragma unroll")
            L.append(f"    for (int c = 0; c < {self.chunks}; ++c) {{")
            L.append(f"      const {idx} r = (lane + c * {T}) * {v};")
            L.append("      if (r < R) {")
        else:
            L.append(f"    for ({idx} r = lane * {v}; r < R; r += {T * v}) {{")
        self._split("r", k.reduced, "      ")
        local = dict(names)  # what does not move along the innermost dim: once per vector
        self.emit_all([n for n in body if id(n) not in self.dep], local, i, "      ")
        base = dict(local)  # names at u = 0: vector addresses and store offsets only
        loads = [n for n in body if id(n) in self.vloads]
        store_ix = [x for _, _, ix in stores for x in ix if id(x) in self.dep]
        pre = _closure(loads, self.dep) + _closure(store_ix, self.dep) + store_ix
        self.emit_all([n for n in pre if n.op != K.LOAD], base, i, "      ")
        inner = dict(local)
        for n in loads:
            cache = self.cache.get(id(n))
            if cache is None:
                inner[id(n)] = self.vector_load(n, base)
            elif id(n) in self.loaded:
                inner[id(n)] = f"({cache} + c * {v})[u]"
            else:
                inner[id(n)] = self.vector_load(n, base, f"{cache} + c * {v}")
        self.loaded.update(self.cache.keys() & {id(n) for n in loads})
        arrs = []
        for s, node, ix in stores:
            arrs.append(self.fresh())
            L.append(f"      alignas(16) {CTYPE[k.outputs[s].dtype]} {arrs[-1]}[{v}];")
        L.append("      #pragma unroll")
        L.append(f"      for (int u = 0; u < {v}; ++u) {{")
        L.append(f"        const {idx} ii = {i} + u;")
        self.emit_all([n for n in body if id(n) in self.dep], inner, "ii", "        ")
        for n in mine:
            a = acc[id(n)]
            L.append(f"        {{ const {CTYPE[n.dtype]} x = {a}, y = {inner[id(n.src[0])]}; "
                     f"{a} = {_COMBINE[n.arg]}; }}")
        for (s, node, ix), arr in zip(stores, arrs):
            L.append(f"        {arr}[u] = {inner[id(node)]};")
        L.append("      }")
        for (s, node, ix), arr in zip(stores, arrs):
            L.append("      if (active)")
            self.vector_store(s, arr, _offset([base[id(x)] for x in ix], f"out{s}"))
        L.append("    }" if not self.chunks else "    }}")

    def _split(self, flat: str, dims, indent: str) -> None:
        """Declare i<d> for `dims` (row-major) from the flat index `flat`."""
        dims = list(dims)
        if not dims:
            return
        rest = f"{flat}_rest"
        self.lines.append(f"{indent}{self.idx} {rest} = {flat};")
        for pos in reversed(range(len(dims))):
            d = dims[pos]
            if pos == 0:
                self.lines.append(f"{indent}const {self.idx} i{d} = {rest};")
            else:
                self.lines.append(f"{indent}const {self.idx} i{d} = {rest} % e{d}; {rest} /= e{d};")


def tile_loads(kern: Kernel, t: int) -> list[KNode]:
    """Loads of a pointwise kernel whose innermost index is `i_t + c` (t not
    the innermost iteration dim) and whose other indices move along the
    innermost iteration dim: a transpose when the tensor is contiguous in its
    innermost dim (a value broadcast along the innermost dim is not one)."""
    n = len(kern.extent_vals)
    if kern.reduced or n < 2 or t == n - 1:
        return []
    dep = _inner_deps(kern, n - 1)
    return [node for node in kern.order
            if node.op == K.LOAD and len(node.src) > 2 and _affine(node.src[-1], t) is not None
            and any(id(x) in dep for x in node.src[1:-1])]


class _TilePrinter(_Printer):
    """A pointwise kernel that transposes: inputs read along iteration dim t
    (contiguous there) while the outputs run along the innermost dim. A block
    takes a 32 x 32 tile of (t, innermost): it reads the transposed inputs with
    consecutive threads along t into shared memory, then computes and stores
    with consecutive threads along the innermost dim; both sides coalesced."""

    def __init__(self, kern: Kernel, name: str, idx: str, pdl: bool, t: int):
        super().__init__(kern, name, 1, idx, 256, False, pdl)
        self.inner = -1  # every index is named i<d>
        self.t = t

    def source(self) -> str:
        k, idx, L, t = self.k, self.idx, self.lines, self.t
        last = len(k.extent_vals) - 1
        others = [d for d in range(last + 1) if d not in (t, last)]
        tiles = tile_loads(k, t)
        if self.pdl:
            L += ["#if __CUDA_ARCH__ >= 900",
                  '  asm volatile("griddepcontrol.wait;" ::: "memory");',
                  '  asm volatile("griddepcontrol.launch_dependents;");',
                  "#endif"]
        L.append("  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;")
        for j, n in enumerate(tiles):
            L.append(f"  __shared__ {CTYPE[n.dtype]} tile{j}[32][33];")
        L.append(f"  const {idx} nt = (e{t} + 31) / 32, nl = (e{last} + 31) / 32;")
        L.append(f"  for ({idx} b = blockIdx.x; b < nslots; b += gridDim.x) {{")
        L.append(f"    {idx} b_rest = b;")
        L.append(f"    const {idx} bl = b_rest % nl; b_rest /= nl;")
        L.append(f"    const {idx} bt = b_rest % nt; b_rest /= nt;")
        for pos in reversed(range(len(others))):
            d = others[pos]
            if pos == 0:
                L.append(f"    const {idx} i{d} = b_rest;")
            else:
                L.append(f"    const {idx} i{d} = b_rest % e{d}; b_rest /= e{d};")
        # phase 1: the transposed inputs' tile, consecutive threads along t
        L.append("    for (int k8 = 0; k8 < 32; k8 += 8) {")
        L.append(f"      const {idx} i{t} = bt * 32 + tx, i{last} = bl * 32 + ty + k8;")
        L.append(f"      if (i{t} < e{t} && i{last} < e{last}) {{")
        first: dict[int, str] = {}
        self.emit_all(_closure_of(tiles), first, "", "        ")
        for j, n in enumerate(tiles):
            L.append(f"        tile{j}[ty + k8][tx] = {first[id(n)]};")
        L.append("      }")
        L.append("    }")
        L.append("    __syncthreads();")
        # phase 2: everything else, consecutive threads along the innermost dim
        L.append("    for (int k8 = 0; k8 < 32; k8 += 8) {")
        L.append(f"      const {idx} i{t} = bt * 32 + ty + k8, i{last} = bl * 32 + tx;")
        L.append(f"      if (i{t} < e{t} && i{last} < e{last}) {{")
        names = {id(n): f"tile{j}[tx][ty + k8]" for j, n in enumerate(tiles)}
        roots = [x for _, v, ix in k.stores for x in (v, *ix)]
        self.emit_all(_closure_of(roots, set(names)), names, "", "        ")
        for s_, node, ix in k.stores:
            off = _offset([names[id(i)] for i in ix], f"out{s_}")
            L.append(f"        out{s_}[{off}] = {names[id(node)]};")
        L.append("      }")
        L.append("    }")
        L.append("    __syncthreads();  // the tile is reused by the next block's work")
        L.append("  }")
        return self.wrap()


class _OuterPrinter(_ReductionPrinter):
    """A one-pass reduction that keeps the innermost dim (an outer reduction:
    sum over the rows of a matrix). A block takes a tile of 32 consecutive kept
    points (threadIdx.x % 32: coalesced along the innermost dim) and a share of
    the reduced points (threadIdx.x / 32 strides over it); the block combines
    its lanes in shared memory. With `split` > 1, `split` blocks share a tile,
    each writing its partial result to `ws`; the last to arrive (counted in
    `sem`, which it resets) combines the partials in block order (deterministic)
    and runs the epilogue."""

    def __init__(self, kern: Kernel, name: str, idx: str, block: int, pdl: bool):
        super().__init__(kern, name, idx, block, 32, pdl)

    def source(self) -> str:
        k, idx, L = self.k, self.idx, self.lines
        ty_n = self.block // 32
        rows = row_nodes(k)
        reduces = [n for n in k.order if n.op == K.REDUCE]
        full_stores = [st for st in k.stores if any(id(i) not in rows for i in st[2])]
        row_stores = [st for st in k.stores if st not in full_stores]
        if self.pdl:
            L += ["#if __CUDA_ARCH__ >= 900",
                  '  asm volatile("griddepcontrol.wait;" ::: "memory");',
                  '  asm volatile("griddepcontrol.launch_dependents;");',
                  "#endif"]
        L.append("  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;")
        for j, n in enumerate(reduces):
            L.append(f"  __shared__ {CTYPE[n.dtype]} red{j}[{ty_n}][33];")
        L.append("  __shared__ bool last;")
        L.append(f"  const {idx} R = {' * '.join(f'e{d}' for d in k.reduced)};")
        L.append(f"  const {idx} tiles = (nslots + 31) / 32, per = (R + split - 1) / split;")
        L.append(f"  for ({idx} b = blockIdx.x; b < tiles * split; b += gridDim.x) {{")
        L.append(f"    const {idx} tile = b / split, g = b % split;")
        L.append("    const bool active = tile * 32 + tx < nslots;")
        L.append(f"    const {idx} row = active ? tile * 32 + tx : 0;")
        self._split("row", k.kept, "    ")
        level = levels(k)
        names: dict[int, str] = {}
        self.emit_all([n for n in k.order if id(n) in rows and level[id(n)] == 0], names, "", "    ")
        for j, n in enumerate(reduces):
            L.append(f"    {CTYPE[n.dtype]} a{j} = {_reduce_init(n.arg, n.dtype)};")
        L.append(f"    const {idx} hi = (g + 1) * per < R ? (g + 1) * per : R;")
        L.append(f"    for ({idx} r = g * per + ty; r < hi; r += {ty_n}) {{")
        self._split("r", k.reduced, "      ")
        inner = dict(names)
        roots = [n.src[0] for n in reduces] + [x for st in full_stores for x in (st[1], *st[2])]
        self.emit_all(_closure_of(roots, rows), inner, "", "      ")
        for j, n in enumerate(reduces):
            L.append(f"      {{ const {CTYPE[n.dtype]} x = a{j}, y = {inner[id(n.src[0])]}; "
                     f"a{j} = {_COMBINE[n.arg]}; }}")
        for s, node, ix in full_stores:
            off = _offset([inner[id(i)] for i in ix], f"out{s}")
            L.append(f"      if (active) out{s}[{off}] = {inner[id(node)]};")
        L.append("    }")
        for j, n in enumerate(reduces):
            L.append(f"    red{j}[ty][tx] = a{j};")
        L.append("    __syncthreads();")
        L.append("    if (ty == 0) {")
        for j, n in enumerate(reduces):
            L.append(f"      for (int w = 1; w < {ty_n}; ++w) {{ const {CTYPE[n.dtype]} x = a{j}, "
                     f"y = red{j}[w][tx]; a{j} = {_COMBINE[n.arg]}; }}")
        L.append("    }")
        L.append("    __syncthreads();  // red is reused by the next tile")
        L.append("    if (split > 1) {")
        for j, n in enumerate(reduces):
            L.append(f"      {CTYPE[n.dtype]}* ws{j} = reinterpret_cast<{CTYPE[n.dtype]}*>("
                     f"ws + (size_t){j} * split * nslots * 8);")
        L.append("      if (ty == 0 && active) {")
        for j in range(len(reduces)):
            L.append(f"        ws{j}[g * nslots + row] = a{j};")
        L.append("      }")
        L.append("      __threadfence();")
        L.append("      __syncthreads();")
        L.append("      if (threadIdx.x == 0) last = atomicAdd(&sem[tile], 1u) == (unsigned int)(split - 1);")
        L.append("      __syncthreads();")
        L.append("      if (!last) continue;")
        L.append("      __threadfence();")
        L.append("      if (ty == 0 && active) {")
        for j, n in enumerate(reduces):
            ct = CTYPE[n.dtype]
            L.append(f"        a{j} = ((volatile {ct}*)ws{j})[row];")
            L.append(f"        for ({idx} w = 1; w < split; ++w) {{ const {ct} x = a{j}, "
                     f"y = ((volatile {ct}*)ws{j})[w * nslots + row]; a{j} = {_COMBINE[n.arg]}; }}")
        L.append("      }")
        L.append("      if (threadIdx.x == 0) sem[tile] = 0u;  // ready for the next launch")
        L.append("    }")
        L.append("    if (ty == 0) {")
        for j, n in enumerate(reduces):
            names[id(n)] = f"a{j}"
        self.emit_all([n for n in k.order if id(n) in rows and n.op != K.REDUCE], names, "", "      ")
        for s, node, ix in row_stores:
            off = _offset([names[id(i)] for i in ix], f"out{s}")
            L.append(f"      if (active) out{s}[{off}] = {names[id(node)]};")
        L.append("    }")
        L.append("  }")
        return self.wrap()


def outer_ok(kern: Kernel) -> bool:
    """Can the outer schedule run this reduction kernel: one pass, and the
    innermost dim kept (coalesced across a tile of kept points)."""
    n = len(kern.extent_vals)
    return bool(kern.reduced) and n - 1 not in kern.reduced and passes(kern) == [0]


def _op_definitions(kern: Kernel) -> list[str]:
    """C++ that ops used by the kernel define beyond kernels/hostir.cuh (`cuda_def`)."""
    out = []
    for n in kern.order:
        d = OPS.get(n.op) if isinstance(n.op, Op) else None
        if d is not None and d.cuda_def and d.cuda_def not in out:
            out.append(d.cuda_def)
    return out


def _index_nodes(kern: Kernel) -> set[int]:
    """Int nodes that only compute indices and predicates (load offsets), never
    data: these may use 32-bit arithmetic when the launch's offsets fit."""
    data: set[int] = set()
    for n in kern.order:
        if n.op == K.LOAD or any(id(s) in data for s in n.src):
            data.add(id(n))
    roots = []
    for n in kern.order:
        if n.op == K.LOAD:
            roots.extend(n.src)
    reach: set[int] = set()
    stack = list(roots)
    while stack:
        n = stack.pop()
        if id(n) in reach or id(n) in data:
            continue
        if n.dtype is DataType.Int or n.op in (Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE,
                                                 Op.LOGICAL_AND):
            reach.add(id(n))
            stack.extend(n.src)
    # a node also used to compute data keeps its 64-bit type
    shared: set[int] = set()
    for n in kern.order:
        if id(n) not in reach and n.op != K.LOAD:
            shared.update(id(s) for s in n.src)
    return {id(n) for n in kern.order
            if id(n) in reach and id(n) not in shared and n.dtype is DataType.Int}


def _closure_of(roots, stop=frozenset()) -> list:
    """The dependence-ordered sub-DAG under `roots`, the roots included, not
    entering nodes in `stop` (ids)."""
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
        stack.extend((s, False) for s in reversed(n.src))
    return order


def _closure(roots, dep) -> list:
    """The dependence-ordered sub-DAG under `roots` (the roots' own sources only)."""
    seen, order = set(), []

    def visit(n):
        if id(n) in seen:
            return
        seen.add(id(n))
        for s in n.src:
            visit(s)
        order.append(n)
    for r in roots:
        for s in r.src:
            visit(s)
    return order


def vector_width(kern: Kernel) -> int:
    """Elements per thread group: 16 bytes of the widest element type, or 1
    when a store is not at an aligned, innermost-contiguous position."""
    sizes = [t.dtype.itemsize for t in kern.inputs + kern.outputs] or [4]
    v = max(1, 16 // max(sizes))
    n = len(kern.extent_vals)
    if v == 1 or n == 0 or (kern.reduced and n - 1 not in kern.reduced):
        return 1  # a reduction kernel's vectors run along its innermost dim, when it reduces it
    dep = _inner_deps(kern, n - 1)
    for _, _, ix in kern.stores:
        if kern.reduced and not any(id(i) in dep for i in ix):
            continue  # a store of the kept dims: one per row
        c = _affine(ix[-1], n - 1)
        if c is None or c % v or any(id(i) in dep for i in ix[:-1]):
            return 1
    return v


def kernel_source(kern: Kernel, vec: int = 1, idx: str = "long long", block: int = 128,
                  streaming: bool = False, pdl: bool = False, name: str | None = None,
                  threads: int = 32, chunks: int = 0, outer: bool = False, tile: int = -1) -> str:
    """CUDA C++ for `kern`, as the `extern "C"` function `name` (default: the
    kernel's): `vec` points per thread iteration (vector loads and stores where
    aligned), `idx` the index type ("int" when offsets fit), `pdl` for a launch
    with programmatic stream serialization (programmatic dependent launch: the
    kernel waits on griddepcontrol before any access); a reduction kernel
    combines each row over `threads` threads, each holding its `chunks`
    vectors of the row in registers (0: a loop that reads them in every pass)."""
    if tile >= 0:
        return _TilePrinter(kern, name or kern.name, idx, pdl, tile).source()
    if outer:
        return _OuterPrinter(kern, name or kern.name, idx, block, pdl).source()
    if kern.reduced:
        return _ReductionPrinter(kern, name or kern.name, idx, block, threads, pdl, vec,
                                 chunks).source()
    return _Printer(kern, name or kern.name, vec, idx, block, streaming, pdl).source()
