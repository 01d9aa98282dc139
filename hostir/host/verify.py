"""Host-IR checks (HOSTIR_DEBUG=verify): every value is defined before it is
used and not used after it is deallocated, a loop index only inside its loop,
every Wait after its Communication's start and before any use of its output.
Ranks: a value defined in an `on ranks` block (or an input held by some
ranks) is used only on ranks it exists on (it reaches others by communication:
a broadcast `with_shape` reads its input on its root alone), and what a block
starts it waits for."""
from __future__ import annotations

from ..ir.errors import VerificationError
from ..ir.fusion import toposort
from ..ir.node import Op, Val
from ..ir.printer import Namer
from . import ir as H


_HERE = object()  # (a use on the ranks of the current block)


def _ranks_text(ranks) -> str:
    return "every rank" if ranks is None else f"ranks {sorted(ranks)}"


class _Scope:
    def __init__(self, prog: H.HostIR, namer: Namer, extra_leaves=(), error=VerificationError):
        self.namer = namer
        self.error = error
        self.ranks: frozenset | None = None   # the ranks the current block runs on (None: all)
        # value / scalar leaf id -> the ranks it exists on (None: all)
        self.defined: dict[int, frozenset | None] = {}
        self.leaves: dict[int, frozenset | None] = {id(v): None for v in extra_leaves}
        for i, v in enumerate(prog.inputs):
            on = prog.ranks_of_input(i)
            on = None if on is None else frozenset(on)
            self.defined[id(v)] = self.leaves[id(v)] = on
            if v.is_tensor:
                self.leaves.update((id(a.extent), on) for a in v.axes)
        self.freed: set[int] = set()
        self.pending: dict[int, H.Communication] = {}   # output id -> its started collective
        self.started: dict[int, H.Communication] = {}   # collectives started, not yet waited
        self.started_on: dict[int, frozenset | None] = {}  # ... and the ranks that started them

    def fail(self, stmt, msg: str):
        text = "; ".join(H.stmt_lines(stmt, self.namer, "")[:1])
        raise self.error(f"malformed host program at `{text}`: {msg}")

    def _reaches(self, stmt, what: str, on, ranks) -> None:
        if on is not None and (ranks is None or not ranks <= on):
            self.fail(stmt, f"{what} exists only on {_ranks_text(on)} but is used on "
                            f"{_ranks_text(ranks)} (move it by communication)")

    def use(self, stmt, v, ranks=_HERE) -> None:
        """`v` used on the current block's ranks (or on `ranks`: a broadcast's root)."""
        if not isinstance(v, Val):
            return
        ranks = self.ranks if ranks is _HERE else ranks
        if v.is_scalar:
            for leaf in toposort([v]):
                if not leaf.src and leaf.op is not Op.CONST:
                    if id(leaf) not in self.leaves:
                        self.fail(stmt, f"scalar {self.namer(leaf)} is not bound here")
                    self._reaches(stmt, f"scalar {self.namer(leaf)}", self.leaves[id(leaf)], ranks)
            return
        if id(v) in self.freed:
            self.fail(stmt, f"{self.namer(v)} is used after it was deallocated")
        if id(v) in self.pending:
            self.fail(stmt, f"{self.namer(v)} is used before the Wait of its {self.pending[id(v)].kind}")
        if id(v) not in self.defined:
            self.fail(stmt, f"{self.namer(v)} is used before it is defined")
        self._reaches(stmt, self.namer(v), self.defined[id(v)], ranks)
        for a in v.axes:
            self.use(stmt, a.extent, ranks)

    def define(self, v: Val) -> None:
        self.defined[id(v)] = self.ranks
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
    for i, v in enumerate(prog.outputs):
        if id(v) not in scope.defined or id(v) in scope.freed:
            raise error(f"malformed host program: output {scope.namer(v)} is not defined at the end")
        on, said = scope.defined[id(v)], prog.ranks_of_output(i)
        if (None if said is None else frozenset(said)) != on:
            raise error(f"malformed host program: output {scope.namer(v)} exists on "
                        f"{_ranks_text(on)}, but the program returns it on {_ranks_text(said)}")


def _block(stmts, scope: _Scope) -> None:
    for s in stmts:
        _stmt(s, scope)


def _on_ranks(s: H.OnRanks, scope: _Scope) -> None:
    outer = scope.ranks
    inner = frozenset(s.ranks) if outer is None else outer & frozenset(s.ranks)
    if not inner:
        scope.fail(s, f"no rank runs it (inside a block on {_ranks_text(outer)})")
    before = set(scope.started)
    scope.ranks = inner
    _block(s.body, scope)
    scope.ranks = outer
    for key in set(scope.started) - before:
        scope.fail(s, f"a {scope.started[key].kind} started inside is not waited for inside it")


def _stmt(s, scope: _Scope) -> None:
    if isinstance(s, H.OnRanks):
        _on_ranks(s, scope)
    elif isinstance(s, H.ForLoop):
        for x in (s.start, s.stop, s.step):
            scope.use(s, x)
        scope.leaves[id(s.index)] = scope.ranks
        _block(s.body, scope)
        scope.leaves.pop(id(s.index), None)
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
        if scope.started_on.get(id(s.comm), scope.ranks) != scope.ranks:
            scope.fail(s, f"the {s.comm.kind} started on {_ranks_text(scope.started_on[id(s.comm)])}: "
                          f"wait for it there")
        scope.started.pop(id(s.comm), None)
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


def _root(s: H.Communication):
    """The ranks a broadcast `with_shape` reads its input on, where the program
    says which (its root: a constant index into all ranks or a 1-D team), else _HERE."""
    if s.kind != "broadcast" or not s.with_shape or s.peer is None or s.peer.op is not Op.CONST:
        return _HERE
    if s.team is None:
        return frozenset({s.peer.arg})
    mesh = s.team[0]
    return frozenset({mesh.ranks[s.peer.arg]}) if mesh.ndim == 1 else _HERE


def _start(s: H.Communication, scope: _Scope) -> None:
    scope.use(s, s.input, _root(s))
    scope.use(s, s.peer)
    for t, peer in s.sends:
        scope.use(s, t)
        scope.use(s, peer)
    sized = {id(leaf) for out in s.outputs for _, leaf in H.sized_extents(out)} if s.with_shape else set()
    scope.leaves.update((k, scope.ranks) for k in sized)
    for out, peer in s.recvs:
        scope.use(s, peer)
        for a in out.axes:
            scope.use(s, a.extent)
    if s.kind == "reduce_scatter_blocks" or (s.kind == "broadcast" and s.with_shape):
        for a in s.output.axes:
            scope.use(s, a.extent)
    scope.started[id(s)] = s
    scope.started_on[id(s)] = scope.ranks
    for out in s.outputs:
        if s.into:
            scope.use(s, out)
        scope.define(out)
        scope.pending[id(out)] = s
