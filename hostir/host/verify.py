"""Host-IR checks (HOSTIR_DEBUG=verify): every value is defined before it is
used and not used after it is deallocated, a loop index only inside its loop,
every Wait after its Communication's start and before any use of its output."""
from __future__ import annotations

from ..ir.errors import VerificationError
from ..ir.fusion import toposort
from ..ir.node import Op, Val
from ..ir.printer import Namer
from . import ir as H


class _Scope:
    def __init__(self, prog: H.HostIR, namer: Namer, extra_leaves=(), error=VerificationError):
        self.namer = namer
        self.error = error
        self.defined: set[int] = {id(v) for v in prog.inputs}
        self.leaves: set[int] = {id(v) for v in prog.inputs} | {id(v) for v in extra_leaves}
        for v in prog.inputs:
            if v.is_tensor:
                self.leaves.update(id(a.extent) for a in v.axes)
        self.freed: set[int] = set()
        self.pending: dict[int, H.Communication] = {}   # output id -> its started collective
        self.started: set[int] = set()                  # collectives started, not yet waited

    def fail(self, stmt, msg: str):
        text = "; ".join(H.stmt_lines(stmt, self.namer, ""))
        raise self.error(f"malformed host program at `{text}`: {msg}")

    def use(self, stmt, v) -> None:
        if not isinstance(v, Val):
            return
        if v.is_scalar:
            for leaf in toposort([v]):
                if not leaf.src and leaf.op is not Op.CONST and id(leaf) not in self.leaves:
                    self.fail(stmt, f"scalar {self.namer(leaf)} is not bound here")
            return
        if id(v) in self.freed:
            self.fail(stmt, f"{self.namer(v)} is used after it was deallocated")
        if id(v) in self.pending:
            self.fail(stmt, f"{self.namer(v)} is used before the Wait of its {self.pending[id(v)].kind}")
        if id(v) not in self.defined:
            self.fail(stmt, f"{self.namer(v)} is used before it is defined")
        for a in v.axes:
            self.use(stmt, a.extent)

    def define(self, v: Val) -> None:
        self.defined.add(id(v))
        self.freed.discard(id(v))


def verify_program(prog: H.HostIR, extra_leaves=(), error=VerificationError) -> None:
    """Raise `error` naming the first statement that breaks a rule (a lowered
    program's fault is hostir's: VerificationError; a hand-written one's is its
    author's: the builder passes DefinitionError). `extra_leaves`: scalars
    bound by the runner (world size, rank)."""
    scope = _Scope(prog, Namer(), extra_leaves, error)
    _block(prog.body, scope)
    for comm in list(scope.pending.values()):
        raise error(f"malformed host program: a {comm.kind} is never waited for")
    if scope.started:
        raise error("malformed host program: a communication is never waited for")
    for v in prog.outputs:
        if id(v) not in scope.defined or id(v) in scope.freed:
            raise error(f"malformed host program: output {scope.namer(v)} is not defined at the end")


def _block(stmts, scope: _Scope) -> None:
    for s in stmts:
        _stmt(s, scope)


def _stmt(s, scope: _Scope) -> None:
    if isinstance(s, H.ForLoop):
        for x in (s.start, s.stop, s.step):
            scope.use(s, x)
        scope.leaves.add(id(s.index))
        _block(s.body, scope)
        scope.leaves.discard(id(s.index))
    elif isinstance(s, H.Allocate):
        for a in s.out.axes:
            scope.use(s, a.extent)
        scope.define(s.out)
    elif isinstance(s, H.Deallocate):
        scope.use(s, s.tensor)
        scope.freed.add(id(s.tensor))
    elif isinstance(s, (H.SetCurrentStream, H.Synchronize)):
        scope.use(s, s.stream)
    elif isinstance(s, H.LaunchKernel):
        for v in s.inputs:
            scope.use(s, v)
        for o in s.outputs:
            if s.into:
                scope.use(s, o)
            else:
                scope.define(o)
    elif isinstance(s, (H.Select, H.Slice, H.Chunk)):
        _view(s, scope)
    elif isinstance(s, H.Communication):
        _start(s, scope)
    elif isinstance(s, H.PeerBlock):
        if id(s.comm) not in scope.started:
            scope.fail(s, f"reads a block of a {s.comm.kind} that is not running")
        scope.use(s, s.index)
        scope.define(s.out)
    elif isinstance(s, H.PushBlock):
        if id(s.comm) not in scope.started:
            scope.fail(s, f"pushes a block of a {s.comm.kind} that is not running")
        scope.use(s, s.index)
    elif isinstance(s, H.Wait):
        if id(s.comm) not in scope.started:
            scope.fail(s, f"waits for a {s.comm.kind} that was not started before it")
        scope.started.discard(id(s.comm))
        for out in s.comm.outputs:
            scope.pending.pop(id(out), None)
    else:
        scope.fail(s, f"unknown statement {type(s).__name__}")


def _view(s, scope: _Scope) -> None:
    scope.use(s, s.src)
    for x in (getattr(s, "index", None), getattr(s, "start", None), getattr(s, "stop", None),
              getattr(s, "count", None)):
        scope.use(s, x)
    scope.define(s.out)


def _start(s: H.Communication, scope: _Scope) -> None:
    scope.use(s, s.input)
    scope.use(s, s.peer)
    for t, peer in s.sends:
        scope.use(s, t)
        scope.use(s, peer)
    for out, peer in s.recvs:
        scope.use(s, peer)
        for a in out.axes:
            scope.use(s, a.extent)
    if s.kind == "reduce_scatter_blocks":
        for a in s.output.axes:
            scope.use(s, a.extent)
    scope.started.add(id(s))
    for out in s.outputs:
        if s.into:
            scope.use(s, out)
        scope.define(out)
        scope.pending[id(out)] = s
