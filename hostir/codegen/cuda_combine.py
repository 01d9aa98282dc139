"""How REDUCE (and SCAN) nodes combine in CUDA: each combine's expression of
`x` and `y` and its identity, and the accumulator a REDUCE keeps: a value of
its type, for argmax a (value, index) pair (hir_vi, kernels/hostir.cuh)
whose index is the node's value, for online_softmax a (max, sum) pair
(hir_ms) that is the node's value (PROJECT nodes read its parts), which a
pass in vectors combines a vector at a time (online_vector); and how a pass
prints a softmax's exp(a - max) terms (shifted_exps)."""
from __future__ import annotations

from ..ir.dtypes import DataType
from .cuda import CTYPE, _literal
from .kir import ONLINE, K, KNode
from .online import shifted_exp

_COMBINE = {"sum": "x + y", "max": "hir_max(x, y)", "min": "hir_min(x, y)", "prod": "x * y",
            "argmax": "hir_argmax(x, y)", ONLINE: "hir_online(x, y)"}


def _reduce_init(op: str, dtype: DataType) -> str:
    if op in ("sum", "prod"):
        return _literal(0 if op == "sum" else 1, dtype)
    if dtype.is_float:
        return _literal(float("-inf") if op == "max" else float("inf"), dtype)
    bits = 8 * dtype.itemsize
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if op == "max":
        return f"({_literal(lo + 1, dtype)} - 1)"
    return _literal(hi, dtype)


def acc_type(n: KNode) -> str:
    if n.arg == ONLINE:
        return f"hir_ms<{CTYPE[n.dtype]}>"
    return f"hir_vi<{CTYPE[n.src[0].dtype]}>" if n.arg == "argmax" else CTYPE[n.dtype]


def acc_bytes(n: KNode) -> int:
    """The accumulator's size (argmax's pair: 16, the index's alignment padding the value)."""
    if n.arg == ONLINE:
        return 2 * n.dtype.itemsize
    return 16 if n.arg == "argmax" else n.dtype.itemsize


def acc_init(n: KNode) -> str:
    """The combine's identity (argmax: the lowest value at an index past every
    point; online_softmax: a max of -inf and a sum of 0)."""
    if n.arg == "argmax":
        return f"{acc_type(n)}{{{_reduce_init('max', n.src[0].dtype)}, 9223372036854775807LL}}"
    if n.arg == ONLINE:
        return f"{acc_type(n)}{{{_reduce_init('max', n.dtype)}, {_literal(0, n.dtype)}}}"
    return _reduce_init(n.arg, n.dtype)


def acc_point(n: KNode, names: dict) -> str:
    """What one point brings to the accumulator (`names`: node id -> C text):
    argmax's (value, index), online_softmax's (a, c) (a max a, a sum c)."""
    if n.arg == "argmax":
        value, index = (names[id(s)] for s in n.src)
        return f"{acc_type(n)}{{{value}, (long long)({index})}}"
    if n.arg == ONLINE:
        a, c = (names[id(s)] for s in n.src)
        return f"{acc_type(n)}{{{a}, {c}}}"
    return names[id(n.src[0])]


def acc_value(n: KNode, acc: str) -> str:
    """The node's value from its accumulator."""
    return f"{acc}.i" if n.arg == "argmax" else acc


ONLINE_VECTORS = True
"""A pass in vectors takes an online_softmax pair into its accumulator a
vector at a time (online_vector): the vector's max, its points' terms scaled
to it, one hir_online; a point at a time costs a pair combine a point (two
compares, four selects and the exp). Off: a point at a time."""


def online_point(arrays: tuple[str, str], values: tuple[str, str], indent: str) -> list[str]:
    """Lines that keep point u's (a, c) of an online_softmax REDUCE for online_vector."""
    return [f"{indent}{arr}[u] = {x};" for arr, x in zip(arrays, values)]


def online_vector(n: KNode, acc: str, a: str, c: str, vec: int, indent: str) -> list[str]:
    """Lines that take the `vec` points (a[u], c[u]) of online_softmax REDUCE
    `n` into accumulator `acc` as one pair (m, s): m the points' max, s the sum
    of c[u] * exp(a[u] - m). Where m is infinite (every point -inf, or a +inf)
    the points equal to m add their c and the others nothing, as a point at a
    time gives (hir_online: equal maxima scale by 1; exp(x - inf) is 0); a NaN
    makes m NaN (hir_max), and so the pair."""
    t, i = CTYPE[n.dtype], indent
    return [f"{i}{{ {t} m_ = {a}[0];",
            f"{i}  #pragma unroll",
            f"{i}  for (int u = 1; u < {vec}; ++u) m_ = hir_max(m_, {a}[u]);",
            f"{i}  {t} s_ = {_literal(0, n.dtype)};",
            f"{i}  if (isinf(m_)) {{",
            f"{i}    #pragma unroll",
            f"{i}    for (int u = 0; u < {vec}; ++u) if ({a}[u] == m_) s_ += {c}[u];",
            f"{i}  }} else {{",
            f"{i}    #pragma unroll",
            f"{i}    for (int u = 0; u < {vec}; ++u) s_ += {c}[u] * hir_exp_scale({a}[u] - m_);",
            f"{i}  }}",
            f"{i}  const {acc_type(n)} x = {acc}, y = {{m_, s_}}; {acc} = hir_online(x, y); }}"]


def shifted_exps(reduces, stores, body) -> dict[int, str]:
    """The exp(a - M) nodes of a pass over a row, M the row's max of a
    (online.shifted_exp): their argument is 0 or less.
    Those only sum reductions of the pass take print as hir_exp_scale: such a
    sum is 1 or more (the max's own term), so under narrow math their
    subnormals flush (moving the sum by under 2^-100 of it); the others (the
    outputs') as hir_exp_shifted, subnormals kept (kernels/hostir.cuh)."""
    users: dict[int, list] = {}
    for n in [*body, *reduces, *(x for _, v, ix in stores for x in (v, *ix))]:
        for s in n.src:
            users.setdefault(id(s), []).append(n)
    stored = {id(v) for _, v, _ in stores}
    forms = {}
    for n in body:
        if shifted_exp(n) is None:
            continue
        summed = id(n) not in stored and all(u.op == K.REDUCE and u.arg == "sum"
                                              for u in users.get(id(n), ()))
        forms[id(n)] = "hir_exp_scale" if summed else "hir_exp_shifted"
    return forms
