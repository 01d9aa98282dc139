"""CUDA C++ printer of kernel IR. The kernel's parameters are its `layout`
(kir.py: per input a data pointer and one stride per dim, per output the
same, the scalar parameters, the iteration extents and the slot count);
threads walk the iteration space with a grid-stride loop. Each op is spelled
by its record's `cuda` format (ir/ops/)."""
from __future__ import annotations

import math
import re

from ..ir.dtypes import DataType, real_dtype
from ..ir.node import OPS, Op
from .kir import K, Kernel, KNode, layout, linear

CTYPE = {
    DataType.Bool: "bool", DataType.Int32: "int", DataType.Int: "long long",
    DataType.Half: "hir_half", DataType.BFloat16: "hir_bf16", DataType.Float: "float",
    DataType.Double: "double", DataType.Float8_e4m3fn: "hir_e4m3", DataType.Float8_e5m2: "hir_e5m2",
    DataType.ComplexFloat: "hir_cfloat", DataType.ComplexDouble: "hir_cdouble",
}
# Floats stored as bits: (to float, from float), kernels/hostir.cuh
NARROW = {DataType.Half: ("hir_h2f", "hir_f2h"), DataType.BFloat16: ("hir_bf2f", "hir_f2bf"),
          DataType.Float8_e4m3fn: ("hir_e4m3_to_f", "hir_f_to_e4m3"),
          DataType.Float8_e5m2: ("hir_e5m2_to_f", "hir_f_to_e5m2")}
# how a scalar parameter travels (a bool goes as a 4-byte int, a narrow float as a float)
PARAM_CTYPE = {**CTYPE, DataType.Bool: "int", **{d: "float" for d in NARROW}}


def _literal(value, dtype: DataType) -> str:
    if dtype.is_complex:
        v, part = complex(value), real_dtype(dtype)
        return f"{CTYPE[dtype]}({_literal(v.real, part)}, {_literal(v.imag, part)})"
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
    """Narrow floats convert through float (as torch converts them); complex
    part by part."""
    if dst.is_complex:  # a real value is the real part; complex types convert part by part
        return f"{CTYPE[dst]}({x if src.is_complex else _cast(x, src, real_dtype(dst))})"
    if src.is_complex:  # as torch: the real part (to bool: nonzero)
        return f"(bool)({x})" if dst.is_bool else _cast(f"({x}).re", real_dtype(src), dst)
    if dst in NARROW:
        from_float = NARROW[dst][1]
        return f"{from_float}({NARROW[src][0]}({x}))" if src in NARROW else f"{from_float}((float)({x}))"
    if src in NARROW:
        return f"({CTYPE[dst]}){NARROW[src][0]}({x})"
    if dst is DataType.Bool:
        return f"(({x}) != 0)"
    return f"({CTYPE[dst]})({x})"


UNIT_STRIDE_VECTORS = True
"""A vector load's or store's offset leaves its innermost stride out (the
launch checked it is 1: a vector reads consecutive points), so the compiler
keeps one address a row and steps its vectors by immediate offsets, not 64-bit
arithmetic of both indices a vector (sm_90 var_mean bf16 1048576x64: 728 ->
664 SASS instructions, its spill gone). H200 % of copy, same run, off / on:
var_mean bf16 1048576x64 73.5 / 80.7, fp16 664444x101 67.1 / 76.5, bf16
400000x160 70.6 / 75.4, 164482x408 78.4 / 83.6, fp16 25731x2608 78.8 / 84.9;
row max fp32 919299x73 81.2 / 98.7; softmax, layernorm, rmsnorm bf16
16384x8192 within 1.1."""


SCALAR_LOADS_32 = True
"""A point's load in a variant of 32-bit indices takes its offset in 32 bits
(the variant is chosen where every offset fits), not widened to 64 bits first
(a shifted row's head and tail points, what every row reads a point at a
time). H200 % of copy, same run, off / on: var_mean fp16 664444x101 73.0 /
77.4, 2000000x50 64.2 / 72.3, bf16 2000000x45 58.4 / 64.6, row max bf16
1000000x33 66.5 / 71.7; but var_mean fp32 203978x329 92.9 / 89.6, column sum
fp32 1048x64005 87.7 / 85.4."""


BF16_PAIRS = True
"""A bf16 point of a vector (an `(array)[u]` a vector loop reads) converts to
float from its 32-bit pair word (kernels/hostir.cuh, hir_bf2f_at): one
instruction a point, where the compiler took two for each odd point (a PRMT
to move it down, a shift back up). sm_90, the same registers: SASS
instructions of rmsnorm bf16 16384x8192 432 -> 360, softmax 32768x4096 744 ->
664, layernorm 259x258968 1560 -> 1432, rmsnorm 400000x150 568 -> 528. H200
% of copy, same run, on / off: rmsnorm bf16 400000x150 78.5 / 76.8 (compile
76.7), layernorm 87267x769 83.3 / 81.2, softmax 536870x125 90.2 / 88.9,
var_mean 181866x369 82.8 / 81.9, log-softmax 403x166184 76.8 / 76.2; within
0.8 either way on rows at memory speed (softmax 32768x4096 96.9 / 97.4,
rmsnorm 16384x8192 97.3 / 97.7, layernorm 259x258968 67.0 / 67.8). (A 16-bit
point's mov.b32 {0, b} took 2 registers more: kernels/hostir.cuh.)"""
_POINT = re.compile(r"\((.+)\)\[u\]|(\w+)\[u\]")


def _offset(indices, tensor: str, unit_last: bool = False) -> str:
    """Element offset of `tensor` (a kernel parameter with strides `<tensor>_s<d>`);
    `unit_last`: a vector's offset, whose innermost stride the launch checked
    is 1 (launch_checks.vector_ok, shift_ok), not multiplied by it."""
    n, unit_last = len(indices), unit_last and UNIT_STRIDE_VECTORS
    return " + ".join(i if unit_last and d == n - 1 else f"{i} * {tensor}_s{d}"
                      for d, i in enumerate(indices)) or "0"


def _expr(n: KNode, name) -> str:
    op = n.op
    a = [name(s) for s in n.src]
    if op == K.CONST:
        return _literal(n.arg, n.dtype)
    if op == K.INDEX:
        return f"i{n.arg}"
    if op == K.PARAM:
        if n.dtype in NARROW:  # (it travels as a float)
            return _cast(f"p{n.arg}", DataType.Float, n.dtype)
        return f"({CTYPE[n.dtype]})p{n.arg}"
    if op == K.EXTENT:
        return f"({CTYPE[n.dtype]})e{n.arg}"
    if op == K.LOAD:
        k = n.arg
        off = _offset(a[1:], f"in{k}")
        return f"({a[0]} ? in{k}[{off}] : ({CTYPE[n.dtype]})0)"
    if op is Op.CAST:
        return _cast(a[0], n.src[0].dtype, n.dtype)
    if op == K.PROJECT:  # a part of an online_softmax pair (hir_ms, kernels/hostir.cuh)
        return f"hir_online_{n.arg}({a[0]})"
    return OPS[op].cuda.format(*a)


VEC_TYPE = {2: "unsigned short", 4: "unsigned int", 8: "uint2", 16: "uint4"}


def _inner_deps(kern: Kernel, inner: int) -> set[int]:
    """Nodes whose value depends on the innermost iteration index."""
    return index_deps(kern, {inner})


def index_deps(kern: Kernel, dims) -> set[int]:
    """Nodes whose value depends on the iteration index of any of `dims`."""
    dep: set[int] = set()
    for n in kern.order:
        if (n.op == K.INDEX and n.arg in dims) or any(id(s) in dep for s in n.src):
            dep.add(id(n))
    return dep


def _offset_along(n: KNode, inner: int, index: bool):
    """c where n is `i_inner + c` (`index`) or `c` plus multiples of the
    inner dim's extent (a symbolic paired kernel's pair distance: a launch
    vectorizes only where that extent is a multiple of the vector width, so the
    multiples keep a group aligned); else None."""
    if n.op == K.INDEX and n.arg == inner:
        return 0 if index else None
    if n.op == K.CONST:
        return None if index else n.arg
    if n.op is Op.ADD and n.src[0].op == K.INDEX and n.src[0].arg == inner and n.src[1].op == K.CONST:
        return n.src[1].arg if index else None
    terms, c = linear(n)
    want = {(K.INDEX, 1)} if index else set()
    got = {(a.op, k) for a, k in terms.values() if not (a.op == K.EXTENT and a.arg == inner)}
    if got != want or any(a.op == K.INDEX and a.arg != inner for a, _ in terms.values()):
        return None
    return c


def _affine(n: KNode, inner: int):
    """c if n is `i_inner + c` (c a constant, plus multiples of the inner
    extent where that is symbolic), else None."""
    return _offset_along(n, inner, True)


def _uniform(p: KNode, v: int, inner: int, dep: set[int]) -> bool:
    """Is predicate p the same for the v consecutive points of an aligned group?"""
    if id(p) not in dep:
        return True
    if p.op is Op.LOGICAL_AND:
        return all(_uniform(s, v, inner, dep) for s in p.src)
    if p.op in (Op.LT, Op.GE, Op.LE, Op.GT) and len(p.src) == 2:
        a, b = p.src
        c = _affine(a, inner)
        bound = _offset_along(b, inner, False)
        if c is None or bound is None or id(b) in dep:
            return False
        k = bound + (1 if p.op in (Op.LE, Op.GT) else 0)
        return (k - c) % v == 0
    return False


def vector_loads(kern: Kernel, v: int, points: bool = False) -> set[int]:
    """LOAD nodes that read v consecutive, aligned elements per group of points
    (at v = 1 only where asked, `points`: a row held a point a load, row_widths.POINT_ROWS)."""
    n = len(kern.extent_vals)
    if (v == 1 and not points) or n == 0:
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
        self.prelude: list[str] = []  # lines before the #include (macros hostir.cuh reads)
        self.count = 0
        self.exp_forms: dict[int, str] = {}  # EXP nodes printed by another function (a printer sets them)

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
            if node.op == K.CHECK:  # debug builds check the index; the value is the source's
                ok, value, index, extent, pred = (names[id(s)] for s in node.src)
                msg = node.arg.replace("\\", "\\\\").replace('"', "'").replace("%", "%%")
                self.lines += ["#ifdef HIR_CHECK_INDICES",
                               f"{indent}if (({pred}) && !({ok})) {{ printf(\"hostir: {msg}: index %lld "
                               f"is out of range for extent %lld\\n\", (long long)({index}), "
                               f"(long long)({extent})); __trap(); }}",
                               "#endif"]
                names[id(node)] = value
                continue
            if node.op == K.RNG:  # a Philox draw (kernels/hostir.cuh), kept per thread
                seed, offset, index = (names[id(x)] for x in node.src)
                kind, stream = node.arg
                text = (f"hir_rng_{kind}_{'d' if node.dtype is DataType.Double else 'f'}"
                        f"({seed}, {offset}, {stream}, (long long)({index}), {self.rng_state(node)})")
            elif id(node) in self.exp_forms:  # exp(a - max a): cuda_combine.shifted_exps
                text = f"{self.exp_forms[id(node)]}({names[id(node.src[0])]})"
            elif node.op is Op.CAST and (pair := self._pair_cast(node, names[id(node.src[0])])):
                text = pair
            elif node.op in (K.PARAM, K.EXTENT) and is_index:
                text = f"({self.idx}){'p' if node.op == K.PARAM else 'e'}{node.arg}"
            elif is_index and self.idx == "int":
                # 32-bit index math: a 64-bit operand shared with other uses (a constant,
                # say, also in a store offset) is narrowed here, so calls like hir_min see
                # one type (the variant is only chosen when every offset and index
                # parameter fits in 32 bits)
                text = _expr(node, lambda s: names[id(s)] if id(s) in self.index_nodes
                             or s.dtype is not DataType.Int or s.op == K.INDEX
                             else (str(int(s.arg)) if s.op == K.CONST else f"(int){names[id(s)]}"))
            elif self.idx == "int" and not (node.op == K.LOAD and SCALAR_LOADS_32):
                # a 64-bit value computed from a 32-bit index (a constant shared with
                # index math is named as an int): widened, so calls like hir_min see one type
                text = _expr(node, lambda s: f"(long long){names[id(s)]}"
                             if id(s) in self.index_nodes and s.dtype is DataType.Int else names[id(s)])
            else:
                text = _expr(node, lambda s: names[id(s)])
            var = self.fresh()
            ctype = self.idx if is_index else CTYPE[node.dtype]
            self.lines.append(f"{indent}const {ctype} {var} = {text};")
            names[id(node)] = var

    def _pair_cast(self, node: KNode, x: str) -> str | None:
        """A bf16 point `x` of a vector cast to float from its pair word
        (BF16_PAIRS): where the printer's vectors hold 2 points or more (a
        vector loop's arrays start at vector boundaries, so pairs are 4-byte
        aligned); None for any other cast."""
        m = _POINT.fullmatch(x)
        if not (BF16_PAIRS and m and node.src[0].dtype is DataType.BFloat16
                and node.dtype is DataType.Float and self.vec >= 2):
            return None
        return f"hir_bf2f_at({m.group(1) or m.group(2)}, u)"

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

    def rng_state(self, node: KNode) -> str:
        """The per-thread draw a K.RNG node keeps (declared at the kernel's top)."""
        states = self.__dict__.setdefault("_rng_states", {})
        name = states.get(id(node))
        if name is None:
            name = states[id(node)] = f"rng{len(states)}"
            self.lines.insert(getattr(self, "top", 0), f"  hir_rng_state {name} = {{}};")
        return name

    def pdl_wait(self) -> None:
        """With programmatic dependent launch the kernel starts early, behind the
        previous kernel of the stream: it waits for it to finish before touching
        memory, and lets the next kernel launch early too."""
        if self.pdl:
            self.lines.extend(["#if __CUDA_ARCH__ >= 900",
                               '  asm volatile("griddepcontrol.wait;" ::: "memory");',
                               '  asm volatile("griddepcontrol.launch_dependents;");',
                               "#endif"])
        self.top = len(self.lines)  # where per-thread state (rng_state) is declared

    def loop_head(self) -> None:
        """The grid-stride loop over slots, and each slot's first point (i0, i1, ...)."""
        idx, L = self.idx, self.lines
        self.pdl_wait()
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
        guard = self.k.guard
        when = f"if ({names[id(guard)]}) " if guard is not None else ""
        for s, node, ix in self.k.stores:
            off = _offset([names[id(i)] for i in ix], f"out{s}")
            self.lines.append(f"    {when}out{s}[{off}] = {names[id(node)]};")

    def vector_body(self, inner_nodes, names) -> None:
        """`vec` points per slot: vector loads, an unrolled loop, vector stores."""
        k, v, L = self.k, self.vec, self.lines
        if k.guard is not None:
            raise AssertionError(f"{k.name}: guarded stores are scalar (vector_width gives 1)")
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
            self.vector_store(s, arr, _offset([base[id(i)] for i in ix], f"out{s}", unit_last=True))

    def vector_load(self, node: KNode, base: dict, into: str | None = None, copy: bool = False,
                    after: str | None = None) -> str:
        """A vector load into a new array, or into `into` (an array expression:
        a slice of a register cache); returns the element at `u`. `copy`: into
        shared memory at `into` by cp.async (hir_cp_async), no register holding it;
        `after`: ... issued once that word (the slot's last read) is in a register."""
        t, v = self.k.inputs[node.arg], self.vec
        size = t.dtype.itemsize * v
        a = [base[id(s)] for s in node.src]
        off = _offset(a[1:], f"in{node.arg}", unit_last=True)
        arr = into
        if arr is None:
            arr = self.fresh()
            self.lines.append(f"    alignas(16) {CTYPE[t.dtype]} {arr}[{v}];")
        def text(hint: str | None) -> str:
            if hint:  # a cache-eviction hint: `ld.global<hint>.v4.u32`
                return (f"{{ uint4 w; asm(\"ld.global{hint}.v4.u32 {{%0, %1, %2, %3}}, [%4];\" "
                        f": \"=r\"(w.x), \"=r\"(w.y), \"=r\"(w.z), \"=r\"(w.w) : "
                        f"\"l\"(in{node.arg} + {off})); *reinterpret_cast<uint4*>({arr}) = w; }}")
            return (f"*reinterpret_cast<{VEC_TYPE[size]}*>({arr}) = "
                    f"*reinterpret_cast<const {VEC_TYPE[size]}*>(in{node.arg} + {off});")
        hint = self.load_hint(node) if size == 16 and not copy else None
        if copy and after:
            load = f"hir_cp_async_after<{size}>({arr}, in{node.arg} + {off}, {after});"
        elif copy:
            load = f"hir_cp_async<{size}>({arr}, in{node.arg} + {off});"
        elif isinstance(hint, tuple):  # (condition, its hint, the other hint): chosen at run time
            load = f"{{ if ({hint[0]}) {text(hint[1])} else {text(hint[2])} }}"
        else:
            load = text(hint)
        self.lines += [
            f"    if ({a[0]}) {load}",
            f"    else {{ for (int u = 0; u < {v}; ++u) ({arr})[u] = ({CTYPE[t.dtype]})0; }}"]
        return f"({arr})[u]"

    def load_hint(self, node: KNode) -> str | tuple | None:
        """A PTX cache qualifier for a 16-byte load of `node` (none: a plain load),
        or (a condition, the qualifier where it holds, the one where not)."""
        return None

    def vector_store(self, s: int, arr: str, off: str) -> None:
        size = self.k.outputs[s].dtype.itemsize * self.vec
        if self.streaming and size == 16:  # evict-first: the output is not read again soon
            # (__stcs, not asm with a memory clobber: loads may still move above it)
            self.lines.append(f"    __stcs(reinterpret_cast<uint4*>(out{s} + {off}), "
                              f"*reinterpret_cast<const uint4*>({arr}));")
        else:
            self.lines.append(f"    *reinterpret_cast<{VEC_TYPE[size]}*>(out{s} + {off}) = "
                              f"*reinterpret_cast<const {VEC_TYPE[size]}*>({arr});")

    def bounds(self) -> str:
        """`__launch_bounds__` arguments: the block size (and, where a schedule
        asks, the blocks an SM must hold, which caps the registers)."""
        return str(self.block)

    def wrap(self) -> str:
        head = [*self.prelude, '#include "hostir.cuh"', *_op_definitions(self.k),
                f'extern "C" __global__ void __launch_bounds__({self.bounds()}) {self.name}(',
                "    " + ",\n    ".join(self.params()) + ") {"]
        return "\n".join(head + self.lines + ["}"]) + "\n"


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
    n = len(kern.extent_vals)
    if n == 0 or kern.guard is not None or (kern.reduced and n - 1 not in kern.reduced):
        return 1  # a reduction kernel's vectors run along its innermost dim, when it reduces it
    dep = _inner_deps(kern, n - 1)
    # inputs read once per vector (a gather's index, a row's scale) do not bound it
    moving = {node.arg for node in kern.order if node.op == K.LOAD and id(node) in dep}
    sizes = [t.dtype.itemsize for k, t in enumerate(kern.inputs) if k in moving]
    # nor do a reduction's outputs of the kept dims (one store per row: argmax's Int64)
    per_point = {s for s, _, ix in kern.stores if not kern.reduced or any(id(i) in dep for i in ix)}
    sizes += [t.dtype.itemsize for s, t in enumerate(kern.outputs) if s in per_point]
    v = max(1, 16 // max(sizes or [4]))
    if v == 1:
        return 1
    for _, _, ix in kern.stores:
        if kern.reduced and not any(id(i) in dep for i in ix):
            continue  # a store of the kept dims: one per row
        c = _affine(ix[-1], n - 1)
        if c is None or c % v or any(id(i) in dep for i in ix[:-1]):
            return 1
    return v


def kernel_source(kern: Kernel, vec: int = 1, idx: str = "long long", block: int = 128,
                  streaming: bool = False, pdl: bool = False, name: str | None = None,
                  threads: int = 32, chunks: int = 0, outer: bool = False, tile: int = -1,
                  smem_row: int = 0, cluster: int = 0, shift: bool = False, double: bool = False,
                  keep_weights: bool = False, funnel: bool = False, flat: bool = False,
                  few: bool = False, batch: int = 0, drawn: bool = False, parts: bool = False,
                  hold: bool = False, stack: int = 0, tiles: bool = False, period: bool = False) -> str:
    """CUDA C++ for `kern`, as the `extern "C"` function `name` (default: the
    kernel's): `vec` points per thread iteration (vector loads and stores where
    aligned), `idx` the index type ("int" when offsets fit), `pdl` for a launch
    with programmatic stream serialization (programmatic dependent launch: the
    kernel waits on griddepcontrol before any access); a reduction kernel
    combines each row over `threads` threads, each holding its `chunks`
    vectors of the row in registers (0: a loop that reads them in every pass;
    `smem_row` > 0: that many of them in dynamic shared memory, the rest read
    again in each pass; row_loads.row_cache_bytes); `cluster` > 1 splits
    each row over that many CTAs of a thread-block cluster; `shift` reads rows
    that start off a vector boundary in vectors at the boundaries; `double`
    keeps the row in one of two buffers, the next row copied into the other;
    `keep_weights` (shifted rows) keeps what every row reads in shared memory,
    `funnel` reads it funnel-shifted from its aligned vectors; `flat`: an outer
    reduction read flat, `vec` points a thread a step (cuda_flat), `period`: in
    virtual rows of `vec` x its kept points (cuda_period); `few`: an
    outer reduction's blocks ask for OUTER_FEW_BLOCKS an SM (cuda_outer.outer_few);
    `batch`, `drawn`, `parts`, `hold`, `stack`, `tiles`: as spec.Variant's fields say."""
    name = name or kern.name
    if tile != -1:  # a transpose's tiles, or (tile -2) a staged gather
        from .cuda_tiles import STAGED, _StagePrinter, _TilePrinter, staged_gather
        if tile == STAGED:
            g, extent = staged_gather(kern)
            return _StagePrinter(kern, name, idx, pdl, g, extent).source()
        return _TilePrinter(kern, name, idx, pdl, tile).source()
    if period:
        from .cuda_period import _PeriodPrinter
        return _PeriodPrinter(kern, name, idx, pdl, vec).source()
    if flat:
        from .cuda_flat import _FlatPrinter
        return _FlatPrinter(kern, name, idx, block, pdl, vec, threads).source()
    if outer:
        from .cuda_outer_shift import _OuterPrinter, _ShiftedOuterPrinter
        return (_ShiftedOuterPrinter if shift else _OuterPrinter)(kern, name, idx, block, pdl, vec, threads or 32,
                                                                  few, batch).source()
    if kern.reduced:
        from .cuda_schedules import _ReductionPrinter
        return _ReductionPrinter(kern, name, idx, block, threads, pdl, vec, chunks, smem_row,
                                 cluster, shift, double, keep_weights, funnel, batch, drawn, parts,
                                 hold, stack, tiles).source()
    return _Printer(kern, name, vec, idx, block, streaming, pdl).source()
