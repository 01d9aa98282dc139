"""Text of the fusion IR: one line per expression, with dtypes and extents.

    T4 float[i0, i1] = mul(T2, 0.5)
    T5 float[i0, r(i1)] = sum(T4, dims=[1])

Axis notation: `i0` or `8` iteration, `b1` broadcast, `bx(i3)` broadcast
expanded to i3, `r(i1)` reduction.
"""
from __future__ import annotations

from .node import OPS, AxisKind, Op, Val


class Namer:
    """Stable names: a node's own name when it has one, else T<k> / S<k>."""

    def __init__(self):
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.counter = {"T": 0, "S": 0, "i": 0}

    def __call__(self, v: Val) -> str:
        got = self.names.get(id(v))
        if got is not None:
            return got
        name = v.name
        if not name or name in self.used:
            prefix = "T" if v.is_tensor else ("i" if v.op is Op.EXTENT else "S")
            base = name
            while True:
                name = f"{base}_{self.counter[prefix]}" if base else f"{prefix}{self.counter[prefix]}"
                self.counter[prefix] += 1
                if name not in self.used:
                    break
        self.names[id(v)] = name
        self.used.add(name)
        return name

    def reserve(self, vals) -> None:
        """Give named nodes their own names before any fresh name is made, so an
        unnamed intermediate never takes a user's name (which would then print as T1_2)."""
        for v in vals:
            if v.name and id(v) not in self.names and v.name not in self.used:
                self.names[id(v)] = v.name
                self.used.add(v.name)
                prefix, num = v.name[:1], v.name[1:]
                if prefix in self.counter and num.isdigit():  # fresh names come after
                    self.counter[prefix] = max(self.counter[prefix], int(num) + 1)


def _namer(namer):
    return namer if namer is not None else Namer()


def scalar_text(v: Val, namer: Namer | None = None) -> str:
    namer = _namer(namer)
    if v.op is Op.CONST:
        return repr(v.arg)
    if not v.src or v.is_tensor:
        return namer(v)
    args = [scalar_text(s, namer) for s in v.src]
    if v.op is Op.CAST:
        return f"{v.dtype.short}({args[0]})"
    sym = OPS[v.op].sym
    if callable(sym):
        sym = sym(v.dtype)
    if sym is not None and not sym.isalpha() and len(args) == 2:
        return f"({args[0]} {sym} {args[1]})"
    return f"{sym or v.op.value}({', '.join(args)})"


def axis_text(ax, namer: Namer | None = None) -> str:
    e = scalar_text(ax.extent, namer)
    if ax.kind is AxisKind.REDUCE:
        return f"r({e})"
    if ax.kind is AxisKind.BCAST:
        return "b1" if e == "1" else f"bx({e})"
    return e


def type_text(v: Val, namer: Namer | None = None) -> str:
    if v.is_scalar:
        return v.dtype.short
    namer = _namer(namer)
    several = OPS[v.op].results
    if several is not None:  # a tuple: the type of each result
        return f"({', '.join(_tensor_type(r.dtype, r.axes, namer) for r in several(v))})"
    return _tensor_type(v.dtype, v.axes, namer)


def _tensor_type(dtype, axes, namer: Namer) -> str:
    return f"{dtype.short}[{', '.join(axis_text(a, namer) for a in axes)}]"


def operand_text(s: Val, namer: Namer) -> str:
    return namer(s) if s.is_tensor else scalar_text(s, namer)


def expr_text(v: Val, namer: Namer) -> str:
    """`name type = op(args)` for one node."""
    text = OPS[v.op].text
    if text is not None:
        call = text(v, namer)
    else:
        call = f"{v.op.value}({', '.join(operand_text(s, namer) for s in v.src)})"
    return f"{namer(v)} {type_text(v, namer)} = {call}"


def _input_text(v: Val, namer: Namer) -> str:
    if v.op is Op.SCALAR_INPUT:
        return f"{namer(v)} {v.dtype.short}"
    arg = v.arg
    contig = "".join("n" if c is None else ("t" if c else "f") for c in arg.contiguity)
    extra = f" contiguity={contig}" if arg.contiguity else ""
    if arg.stride_order is not None:
        extra += f" stride_order={list(arg.stride_order)}"
    if arg.is_cpu:
        extra += " cpu"
    return f"{namer(v)} {type_text(v, namer)}{extra}"


def fusion_text(fusion, namer: Namer | None = None, tags: dict | None = None) -> str:
    """The whole fusion. `tags` maps a node to a suffix such as `  # seg 1 (pointwise)`."""
    namer = _namer(namer)
    namer.reserve([*fusion.inputs,
                   *(a.extent for v in fusion.inputs if v.is_tensor for a in v.axes),
                   *(o.val for o in fusion.outputs), *fusion.exprs()])
    lines = ["Inputs:"]
    lines += [f"  {_input_text(v, namer)}" for v in fusion.inputs]
    lines.append("Outputs:")
    for out in fusion.outputs:
        note = ""
        if out.alias_input is not None:
            note += f"  (updates {namer(out.alias_input)} in place)"
        if out.stride_order is not None:
            note += f"  stride_order={list(out.stride_order)}"
        lines.append(f"  {namer(out.val)} {type_text(out.val, namer)}{note}")
    lines.append("%fusion {")
    for v in fusion.exprs():
        if v.is_scalar:
            continue
        tag = (tags or {}).get(v, "")
        lines.append(f"  {expr_text(v, namer)}{tag}")
    lines.append("}")
    return "\n".join(lines)
