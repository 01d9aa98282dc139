"""Host IR: a small typed instruction set, and its printer.

Values are fusion-IR `Val`s: tensors (program inputs, HOST_TENSOR results of
statements, or a lowered fusion's own nodes) and scalar expressions (of
input extents, scalar inputs and loop indices). Statements are frozen.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir.dtypes import DataType
from ..ir.node import Op, Val
from ..ir.printer import Namer, scalar_text, type_text


class Stmt:
    __slots__ = ()


def sized_extent(tensor_name: str, d: int) -> Val:
    """An extent that a communication `with_shape` binds from the shape it receives."""
    return Val(Op.SCALAR_INPUT, DataType.Int, arg=("sized", tensor_name, d), name=f"{tensor_name}_n{d}")


def sized_extents(t: Val) -> list[tuple[int, Val]]:
    """(dim, leaf) of each of `t`'s extents that is bound from a received shape."""
    return [(d, a.extent) for d, a in enumerate(t.logical) if a.extent.op is Op.SCALAR_INPUT
            and isinstance(a.extent.arg, tuple) and a.extent.arg[:1] == ("sized",)]


@dataclass(frozen=True, slots=True, eq=False)
class Allocate(Stmt):
    out: Val


@dataclass(frozen=True, slots=True, eq=False)
class Deallocate(Stmt):
    tensor: Val


@dataclass(frozen=True, slots=True, eq=False)
class ForLoop(Stmt):
    index: Val
    start: Val
    stop: Val
    step: Val
    body: tuple


@dataclass(frozen=True, slots=True, eq=False)
class OnRanks(Stmt):
    """`body` runs only on the ranks in `ranks` (sorted global ranks; other ranks
    skip it): a pipeline stage's work on its mesh. A value defined inside exists
    only on those ranks; communication started inside is waited for inside."""

    ranks: tuple
    body: tuple


@dataclass(frozen=True, slots=True, eq=False)
class SetCurrentStream(Stmt):
    stream: Val          # index into the program's stream pool; 0 is the main stream


@dataclass(frozen=True, slots=True, eq=False)
class Synchronize(Stmt):
    stream: Val          # the current stream waits for the work queued on `stream`


@dataclass(frozen=True, slots=True, eq=False)
class LaunchKernel(Stmt):
    target: Any          # .name, .launch(ctx, args, out) -> list of tensors (host/steps.py)
    inputs: tuple        # tensor and scalar Vals
    outputs: tuple       # tensor Vals the launch defines (or writes into, see `into`)
    into: bool = False   # outputs are existing buffers (views) the results are written to


@dataclass(frozen=True, slots=True, eq=False)
class Communication(Stmt):
    """Start of communication; its outputs may be used only after its Wait.
    kind: allgather | allreduce | reduce_scatter | broadcast | all_to_all (on
    `input`, giving `output`; all_to_all sends block r of `input` along `dim`
    to rank r and concatenates the blocks it receives along `gather_dim`, in
    rank order), allgather_blocks (every rank's `input`, read
    block by block with PeerBlock as each arrives: over peer memory with copy
    engines where it can), reduce_scatter_blocks (the reverse: this rank writes
    its contribution to rank r's block into PeerBlock r and sends it with
    PushBlock r as soon as it is computed; `output`, this rank's block of the
    sum, is ready after the Wait), or send_recv (a group of point-to-point
    transfers started together: `sends` are (tensor, peer rank) pairs, `recvs`
    (output tensor, peer rank) pairs)."""

    kind: str
    input: Val | None
    output: Val | None
    dim: int = 0
    op: str = "sum"
    peer: Val | None = None   # root of a broadcast
    gather_dim: int | None = None  # all_to_all: the dim received blocks are joined along (None: dim)
    within: tuple | None = None    # allgather: (A, B), the gathered dim laid out [A, n, B] (see Chunk)
    sends: tuple = ()
    recvs: tuple = ()
    team: tuple | None = None  # (mesh, mesh dim): among the ranks along it; None: all ranks
    into: bool = False         # `output` is an existing buffer (a view) the result is written to
    # the shape travels first (a broadcast's from its root, a send_recv's with each
    # transfer): the outputs' extents that are not constants are `sized` leaves bound
    # from it, and a broadcast's input is read on its root alone
    with_shape: bool = False

    @property
    def outputs(self) -> tuple:
        return (self.output,) if self.output is not None else tuple(o for o, _ in self.recvs)


@dataclass(frozen=True, slots=True, eq=False)
class Wait(Stmt):
    comm: Communication


@dataclass(frozen=True, slots=True, eq=False)
class PeerBlock(Stmt):
    """Block `index` of the "allgather_blocks" communication `comm`, once it has
    arrived (the current stream waits for that block alone): a view."""

    out: Val
    comm: "Communication"
    index: Val


@dataclass(frozen=True, slots=True, eq=False)
class PushBlock(Stmt):
    """This rank's contribution to block `index` of the "reduce_scatter_blocks"
    communication `comm` (written into its PeerBlock) is complete: send it to
    rank `index` once the current stream's work so far is done."""

    comm: "Communication"
    index: Val


@dataclass(frozen=True, slots=True, eq=False)
class Select(Stmt):
    out: Val
    src: Val
    dim: int
    index: Val


@dataclass(frozen=True, slots=True, eq=False)
class Slice(Stmt):
    out: Val
    src: Val
    dim: int
    start: Val
    stop: Val


@dataclass(frozen=True, slots=True, eq=False)
class Chunk(Stmt):
    """The `index`-th of `count` chunks of `src` along `dim` (ceil-sized; the
    last may be shorter): a stream's chunk in a pipelined loop, or a rank's
    block of a whole tensor. A view, no copy. With `within` = (A, B), one an
    int and the other None (the rest): `dim` is [A, count, B] and the result is
    the [A, B] at `index`, joined (a rank's part of a dim not in contiguous
    blocks): a view where A or B is 1, else a copy."""

    out: Val
    src: Val
    dim: int
    index: Val
    count: Val
    within: tuple | None = None


@dataclass(frozen=True, eq=False)
class HostIR:
    inputs: tuple
    body: tuple
    outputs: tuple
    # per input / output, the ranks that hold it (None: every rank); a rank outside
    # an input's passes any tensor there, and gets an empty one for such an output
    input_ranks: tuple = ()
    output_ranks: tuple = ()

    def ranks_of_input(self, i: int):
        return self.input_ranks[i] if self.input_ranks else None

    def ranks_of_output(self, i: int):
        return self.output_ranks[i] if self.output_ranks else None

    def __str__(self) -> str:
        return program_text(self)


def _s(v, namer) -> str:
    return scalar_text(v, namer) if isinstance(v, Val) else repr(v)


def _args(vals, namer) -> str:
    return ", ".join(namer(v) if v.is_tensor else _s(v, namer) for v in vals)


def stmt_lines(stmt: Stmt, namer: Namer, indent: str) -> list[str]:
    n = namer
    if isinstance(stmt, Allocate):
        return [f"{indent}{n(stmt.out)} {type_text(stmt.out, n)} = allocate()"]
    if isinstance(stmt, Deallocate):
        return [f"{indent}deallocate {n(stmt.tensor)}"]
    if isinstance(stmt, ForLoop):
        step = "" if stmt.step.const == 1 else f", {_s(stmt.step, n)}"
        head = f"{indent}for {n(stmt.index)} in range({_s(stmt.start, n)}, {_s(stmt.stop, n)}{step}):"
        body = [line for s in stmt.body for line in stmt_lines(s, n, indent + "  ")]
        return [head] + (body or [f"{indent}  pass"])
    if isinstance(stmt, OnRanks):
        body = [line for s in stmt.body for line in stmt_lines(s, n, indent + "  ")]
        return [f"{indent}on ranks {list(stmt.ranks)}:"] + (body or [f"{indent}  pass"])
    if isinstance(stmt, SetCurrentStream):
        return [f"{indent}set_current_stream({_s(stmt.stream, n)})"]
    if isinstance(stmt, Synchronize):
        return [f"{indent}synchronize(stream={_s(stmt.stream, n)})"]
    if isinstance(stmt, LaunchKernel):
        outs = ", ".join(f"{n(o)} {type_text(o, n)}" for o in stmt.outputs)
        if stmt.into:
            return [f"{indent}launch {stmt.target.name}({_args(stmt.inputs, n)}) -> into {outs}"]
        return [f"{indent}{outs} = launch {stmt.target.name}({_args(stmt.inputs, n)})"]
    if isinstance(stmt, Communication):
        return [f"{indent}{_comm_text(stmt, n)}"]
    if isinstance(stmt, Wait):
        targets = stmt.comm.outputs or tuple(t for t, _ in stmt.comm.sends) or (stmt.comm.input,)
        return [f"{indent}wait {stmt.comm.kind} -> {', '.join(n(t) for t in targets)}"]
    if isinstance(stmt, PeerBlock):
        return [f"{indent}{n(stmt.out)} {type_text(stmt.out, n)} = peer_block({_comm_name(stmt.comm, n)}, "
                f"index={_s(stmt.index, n)})"]
    if isinstance(stmt, PushBlock):
        return [f"{indent}push_block({_comm_name(stmt.comm, n)}, index={_s(stmt.index, n)})"]
    if isinstance(stmt, Select):
        return [f"{indent}{n(stmt.out)} {type_text(stmt.out, n)} = select({n(stmt.src)}, "
                f"dim={stmt.dim}, index={_s(stmt.index, n)})"]
    if isinstance(stmt, Slice):
        return [f"{indent}{n(stmt.out)} {type_text(stmt.out, n)} = slice({n(stmt.src)}, "
                f"dim={stmt.dim}, start={_s(stmt.start, n)}, stop={_s(stmt.stop, n)})"]
    if isinstance(stmt, Chunk):
        within = "" if stmt.within is None else f", within={_within(stmt.within)}"
        return [f"{indent}{n(stmt.out)} {type_text(stmt.out, n)} = chunk({n(stmt.src)}, "
                f"dim={stmt.dim}, index={_s(stmt.index, n)}, of={_s(stmt.count, n)}{within})"]
    raise TypeError(f"unknown host statement {stmt!r}")


def _within(w: tuple) -> str:
    a, b = w
    return f"[{'rest' if a is None else a}, n, {'rest' if b is None else b}]"


def _comm_name(c: Communication, n) -> str:
    """A blocks communication named by what it gathers or gives."""
    return f"{c.kind} of {n(c.input)}" if c.kind == "allgather_blocks" else f"{c.kind} -> {n(c.output)}"


def _comm_text(c: Communication, n) -> str:
    if c.kind == "send_recv":
        sends = ", ".join(f"{n(t)} to {_s(p, n)}" for t, p in c.sends)
        recvs = ", ".join(f"{n(o)} {type_text(o, n)} from {_s(p, n)}" for o, p in c.recvs)
        shape = ", with shapes" if c.with_shape else ""
        return f"start send_recv(send [{sends}], recv [{recvs}]{shape})"
    extra = []
    if c.kind in ("allgather", "reduce_scatter", "all_to_all") or (
            c.kind == "reduce_scatter_blocks" and c.input is not None):
        extra.append(f"dim={c.dim}")
    if c.gather_dim is not None and c.gather_dim != c.dim:
        extra.append(f"gather_dim={c.gather_dim}")
    if c.within is not None:
        extra.append(f"within={_within(c.within)}")
    if c.kind in ("allreduce", "reduce_scatter", "reduce_scatter_blocks"):
        extra.append(f"op={c.op}")
    if c.peer is not None:
        extra.append(f"root={_s(c.peer, n)}")
    if c.team is not None:
        extra.append(f"team={c.team[0]!r}[dim {c.team[1]}]")
    if c.with_shape:
        extra.append("with shape")
    args = ", ".join(([f"blocks of {n(c.input)}" if c.kind == "reduce_scatter_blocks" else n(c.input)]
                      if c.input is not None else []) + extra)
    if c.into:
        return f"start {c.kind}({args}) -> into {n(c.output)} {type_text(c.output, n)}"
    lhs = f"{n(c.output)} {type_text(c.output, n)} = " if c.output is not None else ""
    return f"{lhs}start {c.kind}({args})"


def _on(ranks) -> str:
    return "" if ranks is None else f" on ranks {list(ranks)}"


def program_text(prog: HostIR, namer: Namer | None = None) -> str:
    namer = namer or Namer()
    ins = ", ".join(f"{namer(v)} {type_text(v, namer)}{_on(prog.ranks_of_input(i))}"
                    for i, v in enumerate(prog.inputs))
    lines = [f"host_program({ins}) {{"]
    for s in prog.body:
        lines += stmt_lines(s, namer, "  ")
    outs = ", ".join(f"{namer(v)}{_on(prog.ranks_of_output(i))}" for i, v in enumerate(prog.outputs))
    lines.append(f"  return {outs}")
    lines.append("}")
    return "\n".join(lines)
