"""Text of the fusion IR: one line per expression, with dtypes and extents.

    T4 float[i0, i1] = mul(T2, 0.5)
    T5 float[i0, r(i1)] = sum(T4, dims=[1])

Axis notation: `i0` or `8` iteration, `b1` broadcast, `bx(i3)` broadcast
expanded to i3, `r(i1)` reduction.
"""
from __future__ import annotations

from .node import AxisKind, Op, Val

_INFIX = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.DIV: "/", Op.REMAINDER: "%",
          Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">=", Op.EQ: "==", Op.NE: "!="}
_CALL = {Op.MINIMUM: "min", Op.MAXIMUM: "max", Op.CEILDIV: "ceilDiv"}


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
    if v.op in (Op.EXTENT, Op.SCALAR_INPUT, Op.LOOP_INDEX) or v.is_tensor:
        return namer(v)
    args = [scalar_text(s, namer) for s in v.src]
    if v.op in _INFIX and len(args) == 2:
        sym = "//" if v.op is Op.DIV and not v.dtype.is_float else _INFIX[v.op]
        return f"({args[0]} {sym} {args[1]})"
    if v.op is Op.CAST:
        return f"{v.dtype.short}({args[0]})"
    return f"{_CALL.get(v.op, v.op.value)}({', '.join(args)})"


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
    return f"{v.dtype.short}[{', '.join(axis_text(a, namer) for a in v.axes)}]"


def _operand(s: Val, namer: Namer) -> str:
    return namer(s) if s.is_tensor else scalar_text(s, namer)


def _list(vals, namer) -> str:
    return "[" + ", ".join(scalar_text(v, namer) for v in vals) + "]"


def expr_text(v: Val, namer: Namer) -> str:
    """`name type = op(args)` for one node."""
    op = v.op
    src = v.src
    if op is Op.CAST:
        call = f"cast({_operand(src[0], namer)}, dtype={v.dtype.short})"
    elif op is Op.BROADCAST:
        call = f"broadcast({namer(src[0])}, is_broadcast_dim={list(v.arg)})"
    elif op in (Op.SQUEEZE, Op.PERMUTE):
        call = f"{op.value}({namer(src[0])}, dims={list(v.arg)})"
    elif op in (Op.EXPAND, Op.RESHAPE):
        call = f"{op.value}({namer(src[0])}, shape={_list(src[1:], namer)})"
    elif op is Op.SLICE:
        n = src[0].ndim
        call = (f"slice({namer(src[0])}, starts={_list(src[1:1 + n], namer)}, "
                f"stops={_list(src[1 + n:], namer)}, strides={list(v.arg)})")
    elif op is Op.PAD:
        w = src[2:]
        pairs = ", ".join(f"({scalar_text(w[2 * i], namer)}, {scalar_text(w[2 * i + 1], namer)})"
                          for i in range(len(w) // 2))
        call = f"pad({namer(src[0])}, widths=[{pairs}], value={scalar_text(src[1], namer)})"
    elif op is Op.CAT:
        call = f"cat({', '.join(namer(s) for s in src)}, dim={v.arg})"
    elif op in (Op.SUM, Op.MAX, Op.MIN, Op.MEAN):
        call = f"{op.value}({namer(src[0])}, dims={list(v.arg)})"
    elif op is Op.VAR:
        call = f"var({namer(src[0])}, dims={list(v.arg[0])}, correction={v.arg[1]})"
    elif op is Op.FULL:
        call = f"full(shape={_list(src[1:], namer)}, fill={scalar_text(src[0], namer)})"
    else:
        call = f"{op.value}({', '.join(_operand(s, namer) for s in src)})"
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
