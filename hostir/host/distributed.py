"""Lowering a sharded fusion to a host program that every rank runs.

Propagation (dist/propagate.py) gives each tensor its sharding; the fusion is
cut into local pieces (dist/local.py) where an operand must be resharded.
The host program, written with the same builder users write host programs
with, takes each rank's local shards, launches the pieces in order and puts
the communication between them: allgather, allreduce, reduce-scatter over
the ranks along a mesh dimension, and a rank's block of a whole tensor as a
view (`chunk`). It returns each output as this rank's shard.
"""
from __future__ import annotations

from .. import config
from ..dist.communicator import Communicator
from ..dist.local import Piece, build_piece, levels
from ..dist.mesh import DeviceMesh
from ..dist.propagate import Propagation, propagate, reshard_steps
from ..dist.sharding import Sharding
from ..ir import ops as O
from ..ir import scalar as S
from ..ir.errors import UnsupportedError
from ..ir.fusion import Fusion
from ..ir.node import OPS, Op, Val
from ..ir.printer import Namer, fusion_text, type_text
from ..ir.rewrite import substitute
from .builder import HostProgram, _output_extents
from .cache import FusionCache
from .collectives import make_teams


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


def _check_mesh(mesh: DeviceMesh, comm: Communicator) -> None:
    want = list(range(comm.size()))
    if mesh.ranks != want:
        raise UnsupportedError(
            f"{mesh} on a job of {comm.size()} ranks: hostir runs a sharded fusion on a mesh of "
            f"every rank in rank order ({want}, in any shape)")


def _coordinate(mesh: DeviceMesh, m: int, rank: Val) -> Val:
    """This rank's index along mesh dim m (the mesh is ranks 0.. in row-major order)."""
    stride = 1
    for n in mesh.shape[m + 1:]:
        stride *= n
    return S.scalar_op(Op.REMAINDER, S.floordiv(rank, stride), mesh.shape[m])


def _bias_after_partial(fusion: Fusion, annotated: dict) -> tuple[Fusion, Propagation]:
    """A linear whose result is partial (its K sharded: row parallel) adds its
    bias after the partial results are combined, not on every rank: it becomes
    linear without bias, then add. Returns the fusion and its propagation."""
    prop = propagate(fusion, annotated)
    split = {id(v) for v in fusion.tensor_exprs()
             if v.op is Op.LINEAR and len(v.src) == 3 and prop.computed[v].partial}
    if not split:
        return fusion, prop

    def rule(v, ctx):
        if id(ctx["old"].get(id(v), v)) in split and v.op is Op.LINEAR:
            return O.pointwise(Op.ADD, O.linear(v.src[0], v.src[1]), v.src[2]).renamed(v.name)
        return None
    mapping: dict = {}
    new = substitute(fusion, rule, once=True, mapping=mapping)
    moved = {mapping.get(id(v), v): s for v, s in annotated.items()}
    return new, propagate(new, moved)


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


class DistributedFusion:
    """A fusion whose tensors are sharded over a mesh: propagation, the pieces
    and the host program, made once; `execute` runs the program on local shards."""

    def __init__(self, fusion: Fusion, annotated: dict, name: str = "fusion"):
        self.fusion, self.prop = _bias_after_partial(fusion, annotated)
        if any(sh.stream is not None for sh in annotated.values()):
            config.note_once("stream_axis", "stream-parallel axes are not pipelined yet: the fusion "
                                            "runs unpipelined (results are the same)")
        self.comm = Communicator.instance()
        _check_mesh(self.prop.mesh, self.comm)
        make_teams(self.prop.mesh, self.comm)
        self.pieces: list[PieceLaunch] = []
        self.program = self._lower(name)
        config.dump("sharding", self.sharding_text)
        config.dump("host_ir", lambda: str(self.program))

    def execute(self, args) -> list:
        return self.program.execute(args)

    def output_shardings(self) -> list[Sharding]:
        return list(self.prop.outputs)

    # ------------------------------------------------------------ lowering
    def _lower(self, name: str) -> HostProgram:
        fusion, prop = self.fusion, self.prop
        hp = HostProgram(rank_checks=True)  # even shards: every rank's inputs alike
        self.hp = hp
        self.avail: dict = {}
        self.leaf_value: dict = {}
        for v in fusion.inputs:
            self._input(hp, v)
        lvl = levels(fusion, prop)
        order = fusion.tensor_exprs()
        wanted = self._wanted(order, lvl)
        for level in range(max(lvl.values(), default=-1) + 1):
            nodes = [v for v in order if lvl[id(v)] == level]
            piece = build_piece(nodes, prop, wanted)
            target = PieceLaunch(piece, f"{name}_piece{level}")
            self.pieces.append(target)
            ring = self._ring_input(piece)
            if ring is not None:
                outs = self._launch_ring(piece, target, *ring)
            else:
                outs = hp.launch(target, self._piece_args(piece))
            for key, o in zip(piece.outputs, outs):
                self.avail[(id(key[0]), key[1])] = o
        for o, sharding in zip(fusion.outputs, prop.outputs):
            if o.alias_input is not None:
                raise UnsupportedError("alias_input (in-place updates) in a sharded fusion")
            hp.add_output(self._obtain(o.val, sharding))
        return hp

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
        hv = hp.define_tensor(shape, v.dtype)
        self.avail[(id(v), s)] = hv
        for d, ax in enumerate(v.logical):  # global extents, from this rank's shard
            if ax.extent.op is Op.EXTENT:
                self.leaf_value[id(ax.extent)] = S.mul(hv.logical[d].extent, self._split(s, d))

    def _split(self, s: Sharding, d: int) -> int:
        m = next((mm for dd, mm in s.dims if dd == d), None)
        return 1 if m is None else self.prop.mesh.shape[m]

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
                leaf = piece.scalar_inputs[i]
                args.append(self.leaf_value[id(leaf)])
        return args

    def _have(self, g: Val) -> Sharding:
        """The sharding an existing host value of `g` is in."""
        return self.prop.final[g] if (id(g), self.prop.final[g]) in self.avail else self.prop.computed[g]

    def _obtain(self, g: Val, want: Sharding) -> Val:
        """The host value of `g` in sharding `want`, resharding what exists."""
        got = self.avail.get((id(g), want))
        if got is not None:
            return got
        have = self._have(g)
        hv = self.avail[(id(g), have)]
        steps = reshard_steps(have, want)
        steps.sort(key=lambda st: st[0] == "slice")  # communicate first, then take blocks
        for step in steps:
            hv = self._step(hv, step)
        self.avail[(id(g), want)] = hv
        return hv

    def _step(self, hv: Val, step: tuple) -> Val:
        hp, mesh = self.hp, self.prop.mesh
        kind, m = step[0], step[1]
        team = (mesh, m)
        if kind == "allgather":
            return hp.allgather(hv, step[2], team=team)
        if kind == "allreduce":
            return hp.allreduce(hv, step[2], team=team)
        if kind == "reduce_scatter":
            return hp.reduce_scatter(hv, step[2], step[3], team=team)
        return hp.chunk(hv, step[2], _coordinate(mesh, m, hp.rank), mesh.shape[m])

    # ------------------------------------------------------------ blocks as they arrive
    def _ring_input(self, piece: Piece):
        """(tensor input slot, output dims) when the piece reads one input that
        must be allgathered and computes each output block from its block alone
        (the gathered dim goes straight through every op): then it runs block by
        block as the blocks arrive, overlapping the transfer. Else None."""
        if piece.scalar_inputs or self.prop.mesh.ndim != 1:
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

    # ------------------------------------------------------------ text
    def sharding_text(self) -> str:
        namer = Namer()
        lines = [f"Sharding on {self.prop.mesh}:"]
        for v in [*[x for x in self.fusion.inputs if x.is_tensor], *self.fusion.tensor_exprs()]:
            c, f = self.prop.computed[v], self.prop.final[v]
            extra = "" if c == f else f", then resharded to {f.describe()}"
            lines.append(f"  {namer(v)} {type_text(v, namer)}: {c.describe()}{extra}")
        for i, s in enumerate(self.prop.outputs):
            lines.append(f"  output {i}: returned {s.describe()}")
        lines.append(f"{len(self.pieces)} local piece(s):")
        for p in self.pieces:
            lines.append(f"--- {p.name}")
            lines.append(p.fusion_ir())
        return "\n".join(lines)


__all__ = ["DistributedFusion", "Propagation"]
