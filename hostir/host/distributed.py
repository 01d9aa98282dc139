"""Lowering a sharded fusion to a host program that every rank runs.

Propagation (dist/propagate.py) gives each tensor its sharding; the fusion is
cut into local pieces (dist/local.py) where an operand must be resharded.
The host program, written with the same builder users write host programs
with, takes each rank's local shards, launches the pieces in order and puts
the communication between them: allgather, allreduce, reduce-scatter over
the ranks along a mesh dimension, and a rank's block of a whole tensor as a
view (`chunk`). It returns each output as this rank's shard. Tensors on
several meshes (pipeline stages): host/meshes.py.
"""
from __future__ import annotations

from .. import config
from ..dist.communicator import Communicator
from ..dist.local import Piece, build_piece, levels
from ..dist.mesh import DeviceMesh
from ..dist.propagate import Propagation, propagate, reshard_steps
from ..dist.sharding import Sharding
from ..dist.stream_axis import StreamAxis, stream_axis
from ..ir import ops as O
from ..ir import scalar as S
from ..ir.errors import UnsupportedError
from ..ir.fusion import Fusion
from ..ir.node import OPS, Op, Val
from ..ir.printer import Namer, fusion_text, type_text
from ..ir.rewrite import substitute
from .builder import HostProgram, _output_extents, _subst
from .cache import FusionCache
from .meshes import MeshLowering


class PieceLaunch:
    """A piece as something a host program launches (it plans and caches per inputs)."""

    def __init__(self, piece: Piece, name: str):
        self.piece = piece
        self.name = name
        self._cache = FusionCache(piece.fusion, name)

    def ir(self) -> Fusion:
        return self.piece.fusion

    def fusion_ir(self) -> str:
        return fusion_text(self.piece.fusion)

    def execute(self, args, device=None, out=None):
        return self._cache.execute(args, device, out)


def _coordinate(mesh: DeviceMesh, m: int, rank: Val) -> Val:
    """This rank's index along mesh dim m (the mesh's ranks are consecutive in
    row-major order, from its first)."""
    stride = 1
    for n in mesh.shape[m + 1:]:
        stride *= n
    if mesh.first:
        rank = S.sub(rank, mesh.first)
    return S.scalar_op(Op.REMAINDER, S.floordiv(rank, stride), mesh.shape[m])


def _bias_after_partial(fusion: Fusion, annotated: dict) -> tuple[Fusion, Propagation, dict]:
    """A linear whose result is partial (its K sharded: row parallel) adds its
    bias after the partial results are combined, not on every rank: it becomes
    linear without bias, then add. Returns the fusion, its propagation and the
    annotations on its tensors."""
    prop = propagate(fusion, annotated)
    split = {id(v) for v in fusion.tensor_exprs()
             if v.op is Op.LINEAR and len(v.src) == 3 and prop.computed[v].partial}
    if not split:
        return fusion, prop, annotated

    def rule(v, ctx):
        if id(ctx["old"].get(id(v), v)) in split and v.op is Op.LINEAR:
            return O.pointwise(Op.ADD, O.linear(v.src[0], v.src[1]), v.src[2]).renamed(v.name)
        return None
    mapping: dict = {}
    new = substitute(fusion, rule, once=True, mapping=mapping)
    moved = {mapping.get(id(v), v): s for v, s in annotated.items()}
    return new, propagate(new, moved), moved


def _through(piece: Piece, slot: int, dim: int) -> list | None:
    """Each output's dim that tensor input `slot`'s dim `dim` becomes, when it
    goes through every op of the piece as one dim (None where it does not)."""
    pos = next(k for k, (kind, i) in enumerate(piece.input_order) if kind == "tensor" and i == slot)
    cls = {id(piece.fusion.inputs[pos]): dim}
    for v in piece.fusion.exprs():
        if v.is_scalar:
            continue
        got = {OPS[v.op].dims(v, k)[cls[id(s)]] for k, s in enumerate(v.src) if id(s) in cls}
        if not got:
            continue
        if len(got) != 1 or not isinstance(next(iter(got)), int):
            return None
        cls[id(v)] = got.pop()
    outs = [cls.get(id(o.val)) for o in piece.fusion.outputs]
    return None if any(d is None for d in outs) else outs


STREAMS = 2
"""Pool streams a pipelined loop rotates its chunks over (1..STREAMS; stream 0
is the caller's): chunk i's communication overlaps chunk i-1's compute, and
each stream's allocations are reused by every second chunk and every call."""


class DistributedFusion(MeshLowering):
    """A fusion whose tensors are sharded over meshes: propagation, the pieces
    and the host program, made once; `execute` runs the program on local shards."""

    def __init__(self, fusion: Fusion, annotated: dict, name: str = "fusion"):
        random = [v for v in fusion.exprs() if v.op in (Op.UNIFORM, Op.NORMAL)]
        if random:  # each rank would draw its shard from the same (local) element indices
            raise UnsupportedError(f"{random[0].op.value} -> {random[0]!r} in a sharded fusion: each "
                                   f"rank would draw the same numbers for its shard; not supported yet "
                                   f"(draw the numbers outside the sharded fusion)")
        self.fusion, self.prop, annotated = _bias_after_partial(fusion, annotated)
        self.stream = stream_axis(self.fusion, annotated)
        if self.stream is not None and self._stream_axis_sharded():
            self.stream = None  # the chunks are the ranks' blocks: the ring pipelines them
            self._wants_ring = True
        else:
            self._wants_ring = False
        self.comm = Communicator.instance()
        self._start_meshes()
        if self.stream is not None and len(self.prop.meshes) > 1:
            raise UnsupportedError("a stream-parallel axis in a fusion on several meshes "
                                   f"({', '.join(map(repr, self.prop.meshes))}); not supported yet")
        self.pieces: list[PieceLaunch] = []
        self._rings = 0
        self._copies: dict = {}
        self.program = self._lower(name)
        if self._wants_ring and not self._rings:
            config.note_once("stream_axis", "the stream-parallel axis is also device-parallel and "
                                            "no allgather ring covers it: the fusion runs "
                                            "unpipelined (results are the same)")
        config.dump("sharding", self.sharding_text)
        config.dump("host_ir", lambda: str(self.program))
        config.log("dist", lambda: _plan_line(name, self))

    def execute(self, args) -> list:
        return self.program.execute(args)

    def output_shardings(self) -> list[Sharding]:
        return list(self.prop.outputs)

    def _stream_axis_sharded(self) -> bool:
        """Whether some tensor is sharded over ranks along the stream axis."""
        prop, axis = self.prop, self.stream
        shardings = [*((v, s) for v, s in prop.computed.items()), *((v, s) for v, s in prop.final.items()),
                     *((v.src[k], s) for (v, k), s in prop.needs.items()),
                     *((o.val, s) for o, s in zip(self.fusion.outputs, prop.outputs))]
        return any(axis.dim(v) is not None and any(d == axis.dim(v) for d, _ in s.dims)
                   for v, s in shardings)

    # ------------------------------------------------------------ lowering
    def _lower(self, name: str) -> HostProgram:
        hp = HostProgram(rank_checks=True)  # even shards: every rank's inputs alike
        self.hp = hp
        self.avail: dict = {}
        self.leaf_value: dict = {}
        for v in self.fusion.inputs:
            self._input(hp, v)
        # one mesh of some of the job's ranks: everything in one block on them
        with self._on(self._ranks(self.prop.mesh)):
            outs = self._body(name) if self.stream is None else self._pipelined(name, self.stream)
        for o in outs:
            hp.add_output(o)
        return hp

    def _pipelined(self, name: str, axis: StreamAxis) -> list:
        """The fusion chunk by chunk along the stream axis: a host for-loop whose
        iteration i runs, on pool stream 1 + i % STREAMS, the whole program on
        chunk i of every input that has the axis, writing chunk i of every output."""
        hp, fusion, prop = self.hp, self.fusion, self.prop
        full = []
        for o, sh in zip(fusion.outputs, prop.outputs):
            ext = [S.floordiv(_subst(a.extent, self.leaf_value), self._split(sh, d))
                   for d, a in enumerate(o.val.logical)]
            full.append(hp.allocate(ext, o.val.dtype))
        whole = [(v, (id(v), prop.final[v])) for v in fusion.inputs if v.is_tensor]
        whole = [(v, key, self.avail[key]) for v, key in whole]
        n = axis.chunks
        with hp.for_loop(0, n) as i:
            with hp.stream(S.add(S.scalar_op(Op.REMAINDER, i, STREAMS), 1)):
                for v, key, hv in whole:
                    d = axis.dim(v)
                    if d is None:
                        continue
                    self.avail[key] = part = hp.chunk(hv, d, i, n)
                    if v.logical[d].extent.op is Op.EXTENT:  # the chunk's own extent
                        self.leaf_value[id(v.logical[d].extent)] = part.logical[d].extent
                self._body(name, [hp.chunk(f, axis.dim(o.val), i, n)
                                  for f, o in zip(full, fusion.outputs)])
        return full

    def _body(self, name: str, dests: list | None = None) -> list:
        """Launch the pieces with the communication between them; returns each
        output in its output sharding, or (with `dests`) writes it there."""
        fusion, prop = self.fusion, self.prop
        self.dest: dict = {}  # (id(tensor), sharding) -> the buffer its piece writes into
        for j, (o, sh) in enumerate(zip(fusion.outputs, prop.outputs)):
            if o.alias_input is not None:
                raise UnsupportedError("alias_input (in-place updates) in a sharded fusion")
            if dests is None or o.val.op is Op.TENSOR_INPUT:
                continue
            c = prop.computed[o.val]
            if c == sh or [st[0] for st in reshard_steps(c, sh)] == ["allreduce"]:
                self.dest.setdefault((id(o.val), c), dests[j])  # an allreduce then runs in place
        lvl = levels(fusion, prop)
        order = fusion.tensor_exprs()
        wanted = self._wanted(order, lvl)
        groups = []  # per level, a piece per mesh (in the order the level first uses them)
        for level in range(max(lvl.values(), default=-1) + 1):
            nodes = [v for v in order if lvl[id(v)] == level]
            meshes = list(dict.fromkeys(prop.computed[v].mesh for v in nodes))
            groups += [[v for v in nodes if prop.computed[v].mesh == m] for m in meshes]
        for k, nodes in enumerate(groups):
            piece = build_piece(nodes, prop, wanted)
            target = PieceLaunch(piece, f"{name}_piece{k}")
            self.pieces.append(target)
            ring = self._ring_input(piece) if dests is None else None
            scatter = self._scatter_ring(piece) if dests is None and ring is None else None
            if ring is not None:
                outs = self._launch_ring(piece, target, *ring)
            elif scatter is not None:
                out, want = self._launch_scatter_ring(piece, target, *scatter)
                self.avail[(id(piece.outputs[0][0]), want)] = out
                continue
            else:
                outs = self._launch(piece, target)
            for key, o in zip(piece.outputs, outs):
                self.avail[(id(key[0]), key[1])] = o
        if dests is None:
            return [self._obtain(o.val, sh) for o, sh in zip(fusion.outputs, prop.outputs)]
        for o, sh, dest in zip(fusion.outputs, prop.outputs, dests):
            self._obtain(o.val, sh, into=dest)
        return dests

    def _launch(self, piece: Piece, target: PieceLaunch) -> list:
        args = self._piece_args(piece)  # (moved and resharded first, each on its ranks)
        keys = [(id(g), sh) for g, sh in piece.outputs]
        with self._on(self._ranks(piece.mesh)):
            if not any(k in self.dest for k in keys):
                return self.hp.launch(target, args)
            bufs = [self.dest.get(k) for k in keys]
            for j, spec in enumerate(o.val for o in piece.fusion.outputs):
                if bufs[j] is None:
                    bufs[j] = self.hp.allocate(_output_extents(spec, piece.fusion, args), spec.dtype)
            return self.hp.launch(target, args, outputs=bufs)

    def _input(self, hp: HostProgram, v: Val) -> None:
        if v.is_scalar:
            self.leaf_value[id(v)] = hp.define_scalar(v.dtype)
            return
        s = self.prop.final[v]
        shape = []
        for d, ax in enumerate(v.logical):
            n = self._split(s, d)
            e = ax.extent
            shape.append(e.arg // n if e.op is Op.CONST else -1)
        hv = hp.define_tensor(shape, v.dtype, ranks=self._ranks(s.mesh))
        self._input_ranks(v, s.mesh)
        self.avail[(id(v), s)] = hv
        for d, ax in enumerate(v.logical):  # global extents, from this rank's shard
            if ax.extent.op is Op.EXTENT:
                self.leaf_value[id(ax.extent)] = S.mul(hv.logical[d].extent, self._split(s, d))

    def _split(self, s: Sharding, d: int) -> int:
        return s.parts(d)

    def _wanted(self, order, lvl) -> set:
        """Nodes used outside their own piece (or as outputs, or in another sharding)."""
        out = {id(o.val) for o in self.fusion.outputs}
        for v in order:
            for k, s in enumerate(v.src):
                if s.is_tensor and id(s) in lvl and (
                        lvl[id(s)] != lvl[id(v)] or self.prop.needs[(v, k)] != self.prop.computed[s]):
                    out.add(id(s))
        return out

    def _piece_args(self, piece: Piece, given: dict | None = None) -> list:
        args = []
        for kind, i in piece.input_order:
            if kind == "tensor":
                g, sharding = piece.tensor_inputs[i]
                args.append(given[i] if given and i in given else self._obtain(g, sharding))
            else:
                args.append(self._leaf(piece.scalar_inputs[i], piece.mesh))
        return args

    def _have(self, g: Val) -> Sharding:
        """The sharding an existing host value of `g` is in."""
        return self.prop.final[g] if (id(g), self.prop.final[g]) in self.avail else self.prop.computed[g]

    def _obtain(self, g: Val, want: Sharding, into: Val | None = None) -> Val:
        """The host value of `g` in sharding `want`, resharding what exists
        (with `into`: written into that buffer, by the last collective when it can)."""
        got = self.avail.get((id(g), want))
        if got is None:
            have = self._have(g)
            got = self.avail[(id(g), have)]
            if have.mesh == want.mesh:
                got = self._reshard(got, have, want, into)
            else:
                got = self._cross(g, got, have, want)
            self.avail[(id(g), want)] = got
        if into is not None and got is not into:
            got = self._copy(got, into)
        return got

    def _copy(self, src: Val, dst: Val) -> Val:
        """A copy of `src` into buffer `dst` (a kernel: the outputs of a pipelined
        loop that no launch or collective writes in place)."""
        key = (src.dtype, src.ndim)
        fd = self._copies.get(key)
        if fd is None:
            from ..frontend import FusionDefinition
            with FusionDefinition() as fd:
                fd.add_output(fd.ops.set(fd.define_tensor([-1] * src.ndim, dtype=src.dtype)))
            self._copies[key] = fd
        self.hp.launch(fd, [src], outputs=[dst])
        return dst

    def _step(self, hv: Val, step: tuple, mesh: DeviceMesh, into: Val | None = None) -> Val:
        hp = self.hp
        if step[0] == "gather":  # innermost mesh dim first, each rank's part laid into place
            for m, a, b in reversed(step[2].steps(mesh.shape)):
                hv = hp.allgather(hv, step[1], team=(mesh, m), within=(a, b))
            return hv
        if step[0] == "take":
            for m, a, b in step[2].steps(mesh.shape):
                hv = hp.rank_part(hv, step[1], _coordinate(mesh, m, hp.rank), mesh.shape[m], (a, b))
            return hv
        kind, m = step[0], step[1]
        team = (mesh, m)
        if kind == "allgather":
            return hp.allgather(hv, step[2], team=team, out=into)
        if kind == "allreduce":
            return hp.allreduce(hv, step[2], team=team, out=into)
        if kind == "reduce_scatter":
            return hp.reduce_scatter(hv, step[2], step[3], team=team, out=into)
        if kind == "all_to_all":
            return hp.all_to_all(hv, step[3], gather_dim=step[2], team=team, out=into)
        return hp.chunk(hv, step[2], _coordinate(mesh, m, hp.rank), mesh.shape[m])

    # ------------------------------------------------------------ blocks as they arrive
    def _ring_input(self, piece: Piece):
        """(tensor input slot, output dims) when the piece reads one input that
        must be allgathered and computes each output block from its block alone
        (the gathered dim goes straight through every op): then it runs block by
        block as the blocks arrive, overlapping the transfer. Else None."""
        if piece.scalar_inputs or self.prop.mesh is None or self.prop.mesh.ndim != 1:
            return None
        gathered = []
        for i, (g, need) in enumerate(piece.tensor_inputs):
            steps = reshard_steps(self._have(g), need)
            if steps and [st[0] for st in steps] == ["allgather"]:
                gathered.append((i, steps[0][2]))
        if len(gathered) != 1:
            return None
        slot, dim = gathered[0]
        out_dims = _through(piece, slot, dim)
        return None if out_dims is None else (slot, out_dims)

    def _launch_ring(self, piece: Piece, target: PieceLaunch, slot: int, out_dims: list) -> list:
        hp, mesh = self.hp, self.prop.mesh
        g, need = piece.tensor_inputs[slot]
        x = self.avail[(id(g), self._have(g))]
        n = mesh.shape[0]
        self._rings += 1
        handle = hp.allgather_blocks(x, team=(mesh, 0))
        args = self._piece_args(piece, {slot: x})
        bufs = []
        for spec, d in zip((o.val for o in piece.fusion.outputs), out_dims):
            ext = _output_extents(spec, piece.fusion, args)
            ext[d] = S.mul(ext[d], n)
            bufs.append(hp.allocate(ext, spec.dtype))
        coord = _coordinate(mesh, 0, hp.rank)
        for j in range(n):  # this rank's block first, then the one behind it, ... (as they arrive)
            p = S.scalar_op(Op.REMAINDER, S.add(coord, n - j), n)
            args = self._piece_args(piece, {slot: hp.peer_block(handle, p)})
            hp.launch(target, args, outputs=[hp.chunk(b, d, p, n) for b, d in zip(bufs, out_dims)])
        hp.wait(handle)
        return bufs

    def _scatter_ring(self, piece: Piece):
        """(input slot, its dim, the output dim, op, the output's sharding) when
        the piece's one output is a fusion output reduce-scattered along a dim
        that some input's dim goes straight through to (a row-parallel linear's
        rows): then each rank's block is computed from that input's block, the
        other ranks' first, each sent as soon as it is computed. Else None."""
        mesh = self.prop.mesh
        if piece.scalar_inputs or mesh is None or mesh.ndim != 1 or len(piece.outputs) != 1:
            return None
        g, computed = piece.outputs[0]
        wants = {sh for o, sh in zip(self.fusion.outputs, self.prop.outputs) if o.val is g}
        wants |= {sh for (v, k), sh in self.prop.needs.items() if v.src[k] is g}
        if len(wants) != 1:  # (one consumer in the piece itself wants it unscattered: no ring)
            return None
        wants = list(wants)
        steps = reshard_steps(computed, wants[0])
        if [st[0] for st in steps] != ["reduce_scatter"]:
            return None
        _, _, d, op = steps[0]
        for slot, (gi, need) in enumerate(piece.tensor_inputs):
            for din in range(gi.ndim):
                if any(dd == din for dd, _ in need.dims):
                    continue  # a dim sharded over ranks has no blocks of the output here
                if _through(piece, slot, din) == [d]:
                    return slot, din, d, op, wants[0]
        return None

    def _launch_scatter_ring(self, piece: Piece, target: PieceLaunch, slot: int, din: int, d: int,
                             op: str, want: Sharding):
        hp, mesh = self.hp, self.prop.mesh
        n = mesh.shape[0]
        self._rings += 1
        args = self._piece_args(piece)
        x = args[next(k for k, (kind, i) in enumerate(piece.input_order)
                      if kind == "tensor" and i == slot)]
        spec = piece.fusion.outputs[0].val
        ext = _output_extents(spec, piece.fusion, args)
        ext[d] = S.floordiv(ext[d], n)
        handle = hp.reduce_scatter_blocks(ext, spec.dtype, op=op, team=(mesh, 0), blocks_of=x, dim=din)
        coord = _coordinate(mesh, 0, hp.rank)
        for j in range(1, n + 1):  # the next rank's block first, ..., this rank's own last
            p = S.scalar_op(Op.REMAINDER, S.add(coord, j), n)
            block_args = self._piece_args(piece, {slot: hp.chunk(x, din, p, n)})
            hp.launch(target, block_args, outputs=[hp.peer_block(handle, p)])
            hp.push_block(handle, p)
        hp.wait(handle)
        return handle.output, want

    # ------------------------------------------------------------ text
    def sharding_text(self) -> str:
        namer = Namer()
        several = len(self.prop.meshes) > 1
        where = ", ".join(map(repr, self.prop.meshes)) if several else str(self.prop.mesh)
        lines = [f"Sharding on {where}:"]

        def text(s: Sharding) -> str:
            return f"{s.describe()} on {s.mesh}" if several else s.describe()
        for v in [*[x for x in self.fusion.inputs if x.is_tensor], *self.fusion.tensor_exprs()]:
            c, f = self.prop.computed[v], self.prop.final[v]
            extra = "" if c == f else f", then resharded to {text(f)}"
            lines.append(f"  {namer(v)} {type_text(v, namer)}: {text(c)}{extra}")
        for i, s in enumerate(self.prop.outputs):
            lines.append(f"  output {i}: returned {text(s)}")
        lines.append(f"{len(self.pieces)} local piece(s):")
        for p in self.pieces:
            lines.append(f"--- {p.name}")
            lines.append(p.fusion_ir())
        return "\n".join(lines)


__all__ = ["DistributedFusion", "Propagation"]


def _plan_line(name: str, sharded) -> str:
    """A sharded fusion's plan in one log line (HOSTIR_LOGS=dist): pieces and collectives."""
    from . import ir as H
    kinds: dict[str, int] = {}

    def walk(stmts):
        for st in stmts:
            if isinstance(st, H.Communication):
                kinds[st.kind] = kinds.get(st.kind, 0) + 1
            walk(getattr(st, "body", ()) or ())
    walk(sharded.program.ir().body)
    comms = ", ".join(f"{n} {k}" for k, n in kinds.items()) or "no collectives"
    return (f"{name}: sharded over {sharded.comm.size()} ranks: {len(sharded.pieces)} local "
            f"piece(s), {comms}" + (", stream-pipelined" if sharded.stream is not None else ""))
