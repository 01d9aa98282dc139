"""HostProgram: write host IR by hand (DESIGN §1.3). Lowering makes the same IR."""
from __future__ import annotations

import itertools
from contextlib import contextmanager

import torch

from .. import config
from ..dist.communicator import Communicator
from ..ir import scalar as S
from ..ir.dtypes import DataType
from ..ir.errors import DefinitionError, ExecutionError, InputError
from ..ir.env import bind_inputs
from ..ir.fusion import TensorInputArg
from ..ir.inputs import check_scalar
from ..ir.node import Axis, AxisKind, Op, Val, const
from ..ir.rewrite import rebuild
from . import ir as H
from .builder_comm import CommunicationStatements, _scalar_arg
from .collectives import RankCheck, make_teams, world
from .context import RunContext
from .evaluator import Compiler, compile_scalar, run_block
from .graphs import GraphCache, graph_key, has_communication
from .verify import verify_program

_ids = itertools.count()


def min(a, b) -> Val:  # noqa: A001 - hostir.min, as DESIGN names it
    """Symbolic minimum of two scalars (loop bounds: `hostir.min(i + c, n)`)."""
    return S.smin(a, b)


def max(a, b) -> Val:  # noqa: A001
    return S.smax(a, b)


class _FusionLaunch:
    """A FusionDefinition as a launch target: it plans and caches per inputs itself."""

    def __init__(self, fd, name: str):
        self.fd = fd
        self.name = name
        self.fusion = fd.ir()

    def launch(self, ctx, args: list, out=None) -> list:
        return self.fd.execute(args, device=ctx.device, out=out)


class HostProgram(CommunicationStatements):
    """Builder and runner of a host program.

    Statements are recorded in order; `for_loop` and `stream` open blocks.
    Asynchronous collectives return their output; a wait is inserted before
    its first use (or written with `wait`).
    """

    def __init__(self, rank_checks: bool | None = None):
        """`rank_checks`: compare the inputs' shapes across ranks before each run
        (None: when the program communicates)."""
        self._rank_checks = rank_checks
        self._check_ranks = RankCheck()
        self._inputs: list[Val] = []
        self._input_ranks: list = []     # per input: the ranks that hold it (None: every rank)
        self._outputs: list[Val] = []
        self._ranks: list = [None]        # per open block: the ranks it runs on (None: all)
        self._defined_on: dict[int, tuple] = {}  # tensor id -> the ranks it exists on (absent: all)
        self._blocks: list[list] = [[]]
        # output id (or ("into", buffer id)) -> its unwaited communication
        self._pending: dict = {}
        self._base: dict[int, Val] = {}  # view id -> the buffer it is a view of
        self._read_only: set[int] = set()  # rank parts: copies where not one block
        self._started: list[list] = [[]]  # per open block: communications started in it
        self._home: dict = {}  # id(communication) -> (the statements it started in, rank depth)
        self._launch_names: dict[int, _FusionLaunch] = {}
        self._stream_depth: list = []
        # open for_loop and stream blocks, innermost last: ("loop", streams to join
        # after it) or ("stream", its stream)
        self._open: list[tuple] = []
        self._made_on: dict[int, Val] = {}  # tensor id -> the stream a stream block made it on
        self._synced: set = set()            # (tensor id, stream id) already waited for
        self._compiled = None
        self._graphs: GraphCache | None = None
        self._world = Val(Op.SCALAR_INPUT, DataType.Int, arg=("world_size",), name="world_size")
        self._rank = Val(Op.SCALAR_INPUT, DataType.Int, arg=("rank",), name="rank")
        self._counter = itertools.count()

    # ------------------------------------------------------------ helpers
    def _emit(self, stmt) -> None:
        self._check_open()
        self._blocks[-1].append(stmt)

    def _check_open(self, what: str = "statements") -> None:
        if self._compiled is not None:
            raise DefinitionError(f"this HostProgram has run already; {what} can no longer be added")

    def _name(self, prefix="T") -> str:
        return f"{prefix}{next(self._counter)}"

    def _tensor(self, dtype: DataType, extents, name=None) -> Val:
        axes = tuple(Axis(e, AxisKind.BCAST if S.is_const(e, 1) else AxisKind.ITER) for e in extents)
        v = Val(Op.HOST_TENSOR, dtype, arg=next(_ids), axes=axes, name=name or self._name())
        if self._stream_depth:
            self._made_on[id(v)] = self._stream_depth[-1]
        if self._ranks[-1] is not None:
            self._defined_on[id(v)] = self._ranks[-1]
        return v

    def _current_stream(self) -> Val | None:
        return self._stream_depth[-1] if self._stream_depth else None

    def _use(self, v: Val, what: str) -> Val:
        if not isinstance(v, Val) or not v.is_tensor:
            raise DefinitionError(f"{what}: expected a tensor of this program, got {v!r}")
        comm = self._pending.get(id(v))
        if comm is not None:
            self._wait(comm)
        base = self._base.get(id(v), v)
        comm = self._pending.get(("into", id(base)))  # a collective writes into a view of it
        if comm is not None:
            self._wait(comm)
        made = self._made_on.get(id(v))
        if made is not None and not any(made is k for k in self._stream_depth):
            # made in a stream block that has ended, used on another stream: wait for it
            key = (id(v), id(self._current_stream()))
            if key not in self._synced:
                self._synced.add(key)
                self._emit(H.Synchronize(made))
        return v

    def _wait(self, comm: H.Communication) -> None:
        for out in comm.outputs:
            self._pending.pop(id(out), None)
            if comm.into:
                self._pending.pop(("into", id(self._base.get(id(out), out))), None)
        home = self._home.pop(id(comm), None)
        if home is not None and home[1] < len(self._ranks):
            home[0].append(H.Wait(comm))  # started outside the on_ranks block open now: wait there
        else:
            self._emit(H.Wait(comm))
        for started in self._started:
            if comm in started:
                started.remove(comm)

    def _close_block(self) -> None:
        """Wait, at the end of a block, for what the block started and nothing
        waited for (each loop iteration finishes its own communication)."""
        for comm in list(self._started[-1]):
            self._wait(comm)

    @property
    def world_size(self) -> Val:
        return self._world

    @property
    def rank(self) -> Val:
        return self._rank

    # ------------------------------------------------------------ definitions
    def define_tensor(self, shape, dtype: DataType = DataType.Float, contiguity=None,
                      ranks=None) -> Val:
        """A program input. shape entries: -1 symbolic, or a static extent. With
        `ranks`, only those ranks hold it: the others pass any tensor there (a
        placeholder, never read nor checked) and the program uses it only in
        `on_ranks` blocks within them."""
        self._check_open("inputs (define_tensor)")
        on = None if ranks is None else _rank_set(ranks, "define_tensor")
        index = len(self._inputs)
        axes = []
        for d, s in enumerate(shape):
            if not isinstance(s, int) or s < -1:
                raise DefinitionError(f"define_tensor: shape entries must be -1 or >= 0, got {list(shape)}")
            if s == -1:
                e = Val(Op.EXTENT, DataType.Int, arg=(index, d), name=f"n{index}_{d}")
                axes.append(Axis(e, AxisKind.ITER))
            else:
                axes.append(Axis(const(s), AxisKind.BCAST if s == 1 else AxisKind.ITER))
        contig = tuple(None if s == 1 else bool(contiguity) for s in shape)
        v = Val(Op.TENSOR_INPUT, dtype, arg=TensorInputArg(index, contig, None, False),
                axes=tuple(axes), name=self._name())
        self._inputs.append(v)
        self._input_ranks.append(on)
        if on is not None:
            self._defined_on[id(v)] = on
        return v

    def define_scalar(self, dtype: DataType = DataType.Int) -> Val:
        self._check_open("inputs (define_scalar)")
        v = Val(Op.SCALAR_INPUT, dtype, arg=len(self._inputs), name=self._name("s"))
        self._inputs.append(v)
        self._input_ranks.append(None)
        return v

    def allocate(self, shape, dtype: DataType = DataType.Float) -> Val:
        """A buffer the program owns, on the device the program runs on."""
        out = self._tensor(dtype, [_scalar_arg(e, "allocate") for e in shape])
        self._emit(H.Allocate(out))
        return out

    # ------------------------------------------------------------ control
    @contextmanager
    def for_loop(self, start, stop, step=1, name: str | None = None):
        """A host for-loop; yields the index, a symbolic scalar rebound each iteration."""
        index = Val(Op.LOOP_INDEX, DataType.Int, arg=next(_ids), name=name or self._name("i"))
        bounds = [_scalar_arg(x, "for_loop") for x in (start, stop, step)]
        joins: list = []
        with self._scope(self._open, ("loop", joins), []) as body:
            yield index
        self._emit(H.ForLoop(index, *bounds, body[0]))
        if joins:  # the enclosing stream waits for every iteration's streams, after the loop
            self._emit(H.ForLoop(index, *bounds, tuple(H.Synchronize(k) for k in joins)))
            inside = {id(k) for k in joins}
            self._made_on = {t: k for t, k in self._made_on.items() if id(k) not in inside}

    @contextmanager
    def stream(self, k):
        """Statements inside run on pool stream `k` (an expression of loop indices);
        the stream first waits for the enclosing stream. The enclosing stream
        waits for it where it uses a result made inside, and at the end: of the
        enclosing for_loop when there is one (so iterations on different streams
        overlap), else of this block. Communication started inside and not
        waited for inside is waited for on `k` at the end of the block."""
        k = _scalar_arg(k, "stream")
        parent = self._stream_depth[-1] if self._stream_depth else const(0)
        self._emit(H.SetCurrentStream(k))
        self._emit(H.Synchronize(parent))
        self._stream_depth.append(k)
        try:
            with self._scope(self._open, ("stream", k)):
                yield k
        finally:
            self._stream_depth.pop()
        self._emit(H.SetCurrentStream(parent))
        if self._open and self._open[-1][0] == "loop":
            self._open[-1][1].append(k)
        else:
            self._emit(H.Synchronize(k))
            self._made_on = {t: m for t, m in self._made_on.items() if m is not k}

    @contextmanager
    def on_ranks(self, ranks):
        """Statements inside run only on `ranks` (global ranks; inside another
        block, on those of them it runs on): a pipeline stage's work on its mesh.
        Every rank still builds the same program. A tensor made inside exists
        only there: later statements use it in blocks on ranks it exists on, or
        move it by communication; communication started inside is waited for
        inside. A block that follows one on the same ranks continues it."""
        want = _rank_set(ranks, "on_ranks")
        outer = self._ranks[-1]
        inner = want if outer is None else tuple(r for r in want if r in outer)
        if not inner:
            raise DefinitionError(f"on_ranks({list(want)}) inside a block on ranks {list(outer)}: "
                                  f"no rank would run it")
        last = self._blocks[-1][-1] if self._blocks[-1] else None
        if isinstance(last, H.OnRanks) and last.ranks == want:
            self._check_open()
            self._blocks[-1].pop()
            block = list(last.body)
        else:
            block = []
        with self._scope(self._ranks, inner, block) as body:
            yield inner
        self._emit(H.OnRanks(want, body[0]))

    @contextmanager
    def _scope(self, stack: list, entry, block: list | None = None):
        """A nested block's bookkeeping: its own list of started communication,
        `entry` pushed on `stack` (open loops and streams, or the ranks), and,
        given `block`, the statements it collects (yields a list that holds
        them, as a tuple, once the block is closed)."""
        if block is not None:
            self._blocks.append(block)
        self._started.append([])
        stack.append(entry)
        body: list = []
        try:
            yield body
            self._close_block()
        finally:
            if block is not None:
                body.append(tuple(self._blocks.pop()))
            self._started.pop()
            stack.pop()

    def synchronize(self, stream) -> None:
        """The current stream waits for the work queued so far on `stream`."""
        self._emit(H.Synchronize(_scalar_arg(stream, "synchronize")))

    # ------------------------------------------------------------ views
    def select(self, t: Val, dim: int, index) -> Val:
        t = self._use(t, "select")
        d = self._dim(t, dim, "select")
        out = self._tensor(t.dtype, [a.extent for i, a in enumerate(t.logical) if i != d])
        self._emit(H.Select(out, t, d, _scalar_arg(index, "select")))
        self._base[id(out)] = self._base.get(id(t), t)
        return out

    def slice(self, t: Val, dim: int, start, stop) -> Val:
        t = self._use(t, "slice")
        d = self._dim(t, dim, "slice")
        lo, hi = _scalar_arg(start, "slice"), _scalar_arg(stop, "slice")
        ext = [a.extent for a in t.logical]
        ext[d] = S.sub(hi, lo)
        out = self._tensor(t.dtype, ext)
        self._emit(H.Slice(out, t, d, lo, hi))
        self._base[id(out)] = self._base.get(id(t), t)
        return out

    def chunk(self, t: Val, dim: int, index, count) -> Val:
        """The `index`-th of `count` ceil-sized chunks of `t` along `dim` (a view)."""
        t = self._use(t, "chunk")
        d = self._dim(t, dim, "chunk")
        k, n = _scalar_arg(index, "chunk"), _scalar_arg(count, "chunk")
        ext = [a.extent for a in t.logical]
        size = S.ceildiv(ext[d], n)
        ext[d] = S.smin(size, S.smax(S.sub(ext[d], S.mul(k, size)), 0))
        out = self._tensor(t.dtype, ext)
        self._emit(H.Chunk(out, t, d, k, n))
        self._base[id(out)] = self._base.get(id(t), t)
        return out

    def rank_part(self, t: Val, dim: int, index, count: int, within: tuple) -> Val:
        """Rank `index`'s part of `t` along `dim` viewed as [A, count, B] (within =
        (A, B), one an int, the other None: the rest): the [A, B] at `index`,
        joined. For reading: a copy unless A or B is 1, so it takes no writes."""
        if within[0] == 1:
            return self.chunk(t, dim, index, count)
        t = self._use(t, "rank_part")
        d = self._dim(t, dim, "rank_part")
        k = _scalar_arg(index, "rank_part")
        ext = [a.extent for a in t.logical]
        ext[d] = S.floordiv(ext[d], count)
        out = self._tensor(t.dtype, ext)
        self._emit(H.Chunk(out, t, d, k, const(count), tuple(within)))
        self._base[id(out)] = self._base.get(id(t), t)
        self._read_only.add(id(out))
        return out

    def shard_by_stream(self, t: Val, dim: int, stream_index, num_streams) -> Val:
        """Stream `stream_index`'s chunk of `t` (one of `num_streams`) along `dim`."""
        return self.chunk(t, dim, stream_index, num_streams)

    @staticmethod
    def _dim(t: Val, dim: int, what: str) -> int:
        if not -t.ndim <= dim < t.ndim:
            raise DefinitionError(f"{what}: dim {dim} out of range for {t!r} with {t.ndim} dims")
        return dim % t.ndim

    # ------------------------------------------------------------ launches
    def launch(self, fusion, inputs, outputs=None) -> list[Val]:
        """Run a FusionDefinition on `inputs` (tensors and scalars of this program).
        With `outputs`, results are written into those buffers (views allowed)."""
        if not hasattr(fusion, "fusion_ir"):
            raise DefinitionError(f"launch: expected a FusionDefinition, got {type(fusion).__name__}")
        target = self._launch_names.get(id(fusion))
        if target is None:
            target = _FusionLaunch(fusion, f"fusion{len(self._launch_names)}")
            self._launch_names[id(fusion)] = target
        f = target.fusion
        if len(inputs) != len(f.inputs):
            raise DefinitionError(
                f"launch {target.name}: the fusion takes {len(f.inputs)} inputs, got {len(inputs)}")
        args = []
        for i, (x, spec) in enumerate(zip(inputs, f.inputs)):
            if spec.op is Op.TENSOR_INPUT:
                x = self._use(x, f"launch {target.name} input {i}")
                if x.dtype is not spec.dtype or x.ndim != spec.ndim:
                    raise DefinitionError(
                        f"launch {target.name}: input {i} ({spec.name}) expects {spec.dtype.short} with "
                        f"{spec.ndim} dims, got {x!r} ({x.dtype.short}, {x.ndim} dims)")
                args.append(x)
            else:
                args.append(_scalar_arg(x, f"launch {target.name} input {i}"))
        outs = [o.val for o in f.outputs if o.alias_input is None]
        if outputs is not None:
            outputs = [self._writable(self._use(o, f"launch {target.name} output")) for o in outputs]
            if len(outputs) != len(outs):
                raise DefinitionError(
                    f"launch {target.name}: the fusion has {len(outs)} outputs, got {len(outputs)} buffers")
            for o, spec in zip(outputs, outs):
                if o.dtype is not spec.dtype or o.ndim != spec.ndim:
                    raise DefinitionError(
                        f"launch {target.name}: output buffer {o!r} is {o.dtype.short} with {o.ndim} dims, "
                        f"the fusion produces {spec.dtype.short} with {spec.ndim} dims")
            self._emit(H.LaunchKernel(target, tuple(args), tuple(outputs), into=True))
            return list(outputs)
        results = [self._tensor(spec.dtype, _output_extents(spec, f, args)) for spec in outs]
        self._emit(H.LaunchKernel(target, tuple(args), tuple(results)))
        return results

    # ------------------------------------------------------------ outputs and running
    def add_output(self, t: Val) -> None:
        """An output: on ranks where `t` does not exist (it was made in an
        `on_ranks` block, or is an input held by other ranks), an empty tensor
        of its dtype and number of dims (shape [0, ...]) instead."""
        self._check_open("outputs (add_output)")
        self._outputs.append(self._use(t, "add_output"))

    def ir(self) -> H.HostIR:
        if len(self._blocks) != 1:
            raise DefinitionError("a for_loop, stream or on_ranks block is still open")
        self._close_block()
        return H.HostIR(tuple(self._inputs), tuple(self._blocks[0]), tuple(self._outputs),
                        tuple(self._input_ranks),
                        tuple(self._defined_on.get(id(o)) for o in self._outputs))

    def __str__(self) -> str:
        return str(self.ir())

    def execute(self, inputs, device=None) -> list[torch.Tensor]:
        """Run the program on `inputs`. On CUDA, a call whose inputs (pointers,
        layouts, scalar values) repeat a call made twice before runs as a CUDA
        graph replay (see hostir.host.graphs; HOSTIR_DISABLE=cuda_graphs)."""
        if self._compiled is None:
            self._program = self.ir()
            # a hand-written program is checked once: a value used outside where it is
            # defined is its author's error, named before anything runs
            verify_program(self._program, (self._world, self._rank), DefinitionError)
            self._compiled = Compiler().block(self._program.body)
            self._communicates = has_communication(self._program.body)
            if self._communicates:  # every rank makes every team, in the program's order
                make_teams(self._program.body, Communicator.instance())
            if not config.disabled("cuda_graphs"):
                self._graphs = GraphCache(self._program.body)
        env = self._bind(inputs, device)
        if self._rank_checks or (self._rank_checks is None and self._communicates):
            # (an input some ranks hold alone is not compared: the others pass placeholders)
            self._check_ranks(self._program, [None if self._program.ranks_of_input(i) else a
                                              for i, a in enumerate(inputs)])
        graphs = self._graphs
        if graphs is not None and graphs.enabled and env.device.type == "cuda":
            key = graph_key(self._program.inputs, inputs)
            got = graphs.replay(key, inputs)
            if got is not None:
                return got
            if graphs.wants_capture(key):
                got = graphs.capture(key, lambda: self._run(env), inputs)
                if got is not None:
                    return got
                env = self._bind(inputs, device)  # the capture failed: run it eagerly
        return self._run(env)

    def _bind(self, inputs, device) -> RunContext:
        prog = self._program
        if len(inputs) != len(prog.inputs):
            raise InputError(f"HostProgram: expected {len(prog.inputs)} inputs, got {len(inputs)}")
        dev = torch.device(device) if device is not None else None
        held = [i for i in range(len(inputs)) if not self._placeholder(i)]
        for i, (v, a) in enumerate(zip(prog.inputs, inputs)):
            if self._placeholder(i):
                continue
            if v.op is Op.TENSOR_INPUT:
                if not isinstance(a, torch.Tensor) or a.dtype != v.dtype.torch or a.ndim != v.ndim:
                    raise InputError(f"HostProgram input {v!r}: expected {v.dtype.short} tensor with "
                                     f"{v.ndim} dims, got {a!r:.60}")
                for d, ax in enumerate(v.axes):
                    if ax.extent.op is Op.CONST and a.shape[d] != ax.extent.arg:
                        raise InputError(f"HostProgram input {v!r}: dim {d} must be {ax.extent.arg}, "
                                         f"got {a.shape[d]}")
                dev = dev or a.device
            else:
                check_scalar(i, v, a)
        if dev is None and len(held) < len(inputs):  # only placeholders: the rank's own device
            dev = Communicator.instance().device
        env = bind_inputs([prog.inputs[i] for i in held], [inputs[i] for i in held],
                          RunContext(dev or torch.device("cpu")))
        for i in set(range(len(inputs))) - set(held):
            env[prog.inputs[i]] = inputs[i]  # (its extents stay unbound: a use is an error)
        size, rank = world()
        env[self._world] = size
        env[self._rank] = rank
        return env

    def _placeholder(self, i: int) -> bool:
        """Whether input i is one this rank does not hold (it passes any tensor)."""
        on = self._program.ranks_of_input(i)
        return on is not None and world()[1] not in on

    def _run(self, env: RunContext) -> list[torch.Tensor]:
        run_block(self._compiled, env)
        prog, rank = self._program, world()[1]
        outs = []
        for i, o in enumerate(prog.outputs):
            on = prog.ranks_of_output(i)
            if on is not None and rank not in on:
                outs.append(torch.empty((0,) * (o.ndim or 1), dtype=o.dtype.torch, device=env.device))
                continue
            try:
                outs.append(env[o])
            except KeyError:
                raise ExecutionError(f"HostProgram: output {o!r} was never computed") from None
        return outs


def _rank_set(ranks, what: str) -> tuple[int, ...]:
    """Ranks as a sorted tuple of distinct non-negative ints."""
    ranks = getattr(ranks, "ranks", ranks)  # a DeviceMesh: its ranks
    try:
        got = tuple(sorted({int(r) for r in ranks}))
    except (TypeError, ValueError):
        got = ()
    if not got or got[0] < 0:
        raise DefinitionError(f"{what}: expected a non-empty list of ranks, got {ranks!r}")
    return got


def _output_extents(spec: Val, fusion, args: list[Val]) -> list[Val]:
    """The launch's output extents in terms of the program's values."""
    mapping = {}
    for f_in, a in zip(fusion.inputs, args):
        if f_in.op is Op.TENSOR_INPUT:
            for fa, aa in zip(f_in.axes, a.logical):
                if fa.extent.op is Op.EXTENT:
                    mapping[id(fa.extent)] = aa.extent
        else:
            mapping[id(f_in)] = a
    return [_subst(ax.extent, mapping) for ax in spec.logical]


def _subst(v: Val, mapping) -> Val:
    if id(v) in mapping:
        return mapping[id(v)]
    return rebuild(v, tuple(_subst(s, mapping) for s in v.src))


__all__ = ["HostProgram", "min", "max", "compile_scalar"]
