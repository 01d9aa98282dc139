"""CUDA C++ printer of kernel IR. The kernel takes, in order: per input a
data pointer and one stride per dim, per output the same, the scalar
parameters, the iteration extents and the element count; threads walk the
iteration space with a grid-stride loop."""
from __future__ import annotations

import math

from ..ir.dtypes import DataType
from ..ir.node import Op
from .kir import K, Kernel, KNode

CTYPE = {
    DataType.Bool: "bool", DataType.Int32: "int", DataType.Int: "long long",
    DataType.Half: "hir_half", DataType.BFloat16: "hir_bf16", DataType.Float: "float",
    DataType.Double: "double",
}
# how a scalar parameter travels (a bool goes as a 4-byte int)
PARAM_CTYPE = {**CTYPE, DataType.Bool: "int", DataType.Half: "float", DataType.BFloat16: "float"}

_INFIX = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.LT: "<", Op.LE: "<=", Op.GT: ">",
          Op.GE: ">=", Op.EQ: "==", Op.NE: "!=", Op.LOGICAL_AND: "&&", Op.LOGICAL_OR: "||",
          Op.BITWISE_AND: "&", Op.BITWISE_OR: "|", Op.BITWISE_XOR: "^",
          Op.BITWISE_LEFT_SHIFT: "<<", Op.BITWISE_RIGHT_SHIFT: ">>", Op.TRUEDIV: "/"}
_CALL = {Op.DIV: "hir_div", Op.REMAINDER: "hir_remainder", Op.FMOD: "hir_fmod",
         Op.POW: "hir_pow", Op.ATAN2: "hir_atan2", Op.MAXIMUM: "hir_max", Op.MINIMUM: "hir_min",
         Op.CEILDIV: "hir_ceildiv"}


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
        off = " + ".join(f"{i} * in{k}_s{d}" for d, i in enumerate(a[1:])) or "0"
        return f"({a[0]} ? in{k}[{off}] : ({CTYPE[n.dtype]})0)"
    if op is Op.CAST:
        return _cast(a[0], n.src[0].dtype, n.dtype)
    if op is Op.WHERE:
        return f"({a[0]} ? {a[1]} : {a[2]})"
    if op is Op.NEG:
        return f"(-{a[0]})"
    if op is Op.LOGICAL_NOT:
        return f"(!{a[0]})"
    if op is Op.BITWISE_NOT:
        return f"(!{a[0]})" if n.dtype.is_bool else f"(~{a[0]})"
    if op is Op.LOGICAL_XOR:
        return f"((bool)({a[0]}) != (bool)({a[1]}))"
    if op in _INFIX:
        return f"({a[0]} {_INFIX[op]} {a[1]})"
    if op in _CALL:
        return f"{_CALL[op]}({a[0]}, {a[1]})"
    return f"hir_{op.value}({', '.join(a)})"


def kernel_source(kern: Kernel) -> str:
    params = []
    for k, t in enumerate(kern.inputs):
        params.append(f"const {CTYPE[t.dtype]}* __restrict__ in{k}")
        params += [f"long long in{k}_s{d}" for d in range(t.ndim)]
    for k, t in enumerate(kern.outputs):
        params.append(f"{CTYPE[t.dtype]}* __restrict__ out{k}")
        params += [f"long long out{k}_s{d}" for d in range(t.ndim)]
    params += [f"{PARAM_CTYPE[v.dtype]} p{k}" for k, v in enumerate(kern.params)]
    n = len(kern.extent_vals)
    params += [f"long long e{d}" for d in range(n)]
    params.append("long long numel")
    names: dict[int, str] = {}
    body = []
    for node in kern.order:
        if node.op in (K.CONST, K.INDEX):
            names[id(node)] = _expr(node, lambda s: names[id(s)])
            continue
        var = f"v{len(names)}"
        body.append(f"    const {CTYPE[node.dtype]} {var} = {_expr(node, lambda s: names[id(s)])};")
        names[id(node)] = var
    index = []
    if n:
        index.append("    long long rest = lin;")
        for d in reversed(range(n)):
            if d == 0:
                index.append("    const long long i0 = rest;")
            else:
                index.append(f"    const long long i{d} = rest % e{d}; rest /= e{d};")
    stores = []
    for k, node in kern.stores:
        off = " + ".join(f"i{d} * out{k}_s{d}" for d in range(kern.outputs[k].ndim)) or "0"
        stores.append(f"    out{k}[{off}] = {names[id(node)]};")
    lines = [
        '#include "hostir.cuh"',
        f'extern "C" __global__ void __launch_bounds__(256) {kern.name}(',
        "    " + ",\n    ".join(params) + ") {",
        "  const long long stride = (long long)gridDim.x * blockDim.x;",
        "  for (long long lin = (long long)blockIdx.x * blockDim.x + threadIdx.x; lin < numel; "
        "lin += stride) {",
        *index, *body, *stores,
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"
