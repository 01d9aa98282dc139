"""One rank's part of a sharded fusion: local fusions ("pieces") between communications.

Propagation gives every tensor the sharding it is computed in and every
operand the sharding it is read in. A node whose operands come in the
sharding its producer computed them in joins its producer's piece; one that
needs a reshard (communication) starts a later piece. Pieces never mix meshes:
the nodes of one level on different meshes (pipeline stages) are a piece each. Each piece is an
ordinary fusion over local shards, made by re-running each node's op rule on
local operands: its tensor inputs are (global tensor, sharding) pairs the
host program provides, its scalar inputs the fusion's scalar inputs and the
global extents of its tensor inputs (which the host program computes from
the local shards), and a sharded dim's extent taken from a scalar source
(expand's shape) is divided by its mesh dimension's size.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import scalar as S
from ..ir.dtypes import DataType
from ..ir.errors import DefinitionError
from ..ir.fusion import Fusion, Output, TensorInputArg
from ..ir.node import Axis, AxisKind, Op, Val, const
from ..ir.rewrite import rebuild
from ..ir.verify import verify
from .propagate import Propagation
from .sharding import Sharding


def levels(fusion: Fusion, prop: Propagation) -> dict:
    """Piece index of every tensor node: past its producers' pieces when an
    operand needs a reshard (inputs are resharded before the first piece)."""
    inputs = {id(v) for v in fusion.inputs}
    lvl: dict[int, int] = {}
    for v in fusion.tensor_exprs():
        at = 0
        for k, s in enumerate(v.src):
            if not s.is_tensor or id(s) in inputs:
                continue
            same = prop.needs[(v, k)] == prop.computed[s]
            at = max(at, lvl[id(s)] + (0 if same else 1))
        lvl[id(v)] = at
    return lvl


@dataclass
class Piece:
    """A local fusion and what its inputs and outputs stand for."""

    fusion: Fusion
    tensor_inputs: list          # (global tensor Val, Sharding) per local tensor input
    scalar_inputs: list          # global scalar leaf Val per local scalar input, in order
    outputs: list                # (global tensor Val, Sharding) per output
    input_order: list = field(default_factory=list)  # ("tensor" | "scalar", index) per input
    mesh: object = None          # the mesh it runs on (every node of a piece is on one)


class _PieceBuilder:
    def __init__(self, prop: Propagation):
        self.prop = prop
        self.inputs: list[Val] = []
        self.order: list = []
        self.tensor_keys: list = []
        self.scalar_leaves: list = []
        self.local_tensor: dict = {}   # (id(global), Sharding) -> local input Val
        self.local_scalar: dict = {}   # id(global leaf) -> local scalar input
        self.memo: dict = {}           # id(global scalar expr) -> local expr
        self.computed: dict = {}       # id(global node) -> local Val

    def _n(self, sharding: Sharding, d: int) -> int:
        return sharding.parts(d)

    def tensor_input(self, g: Val, sharding: Sharding) -> Val:
        key = (id(g), sharding)
        got = self.local_tensor.get(key)
        if got is not None:
            return got
        index = len(self.inputs)
        axes = []
        for d, ax in enumerate(g.logical):
            e, n = ax.extent, self._n(sharding, d)
            if ax.kind is AxisKind.BCAST and S.is_const(e, 1):
                axes.append(Axis(const(1), AxisKind.BCAST))
                continue
            if S.is_const(e) and e.arg % n:
                raise DefinitionError(f"dim {d} of {g!r} has extent {e.arg}, which {n} ranks "
                                      f"do not split into equal blocks")
            # symbolic, also where static: a piece may run on blocks of its input
            ext = Val(Op.EXTENT, DataType.Int, arg=(index, d), name=f"l{index}_{d}")
            axes.append(Axis(ext, AxisKind.ITER))
        contiguity = tuple(None if a.kind is AxisKind.BCAST else False for a in axes)
        v = Val(Op.TENSOR_INPUT, g.dtype, arg=TensorInputArg(index, contiguity, None, False),
                axes=tuple(axes), name=f"{g.name or 'T'}_local")
        self.inputs.append(v)
        self.order.append(("tensor", len(self.tensor_keys)))
        self.tensor_keys.append((g, sharding))
        self.local_tensor[key] = v
        return v

    def scalar(self, e: Val) -> Val:
        """A global scalar expression over local scalar inputs."""
        if e.op is Op.CONST:
            return e
        got = self.memo.get(id(e))
        if got is not None:
            return got
        if not e.src:
            got = Val(Op.SCALAR_INPUT, e.dtype, arg=len(self.inputs), name=f"{e.name or 's'}_g")
            self.inputs.append(got)
            self.order.append(("scalar", len(self.scalar_leaves)))
            self.scalar_leaves.append(e)
        else:
            got = rebuild(e, tuple(self.scalar(s) for s in e.src))
        self.memo[id(e)] = got
        return got

    def node(self, v: Val, same_piece: set) -> Val:
        prop = self.prop
        src = []
        for k, s in enumerate(v.src):
            if s.is_scalar:
                src.append(self.scalar(s))
                continue
            need = prop.needs[(v, k)]
            if id(s) in same_piece and need == prop.computed[s]:
                src.append(self.computed[id(s)])
            else:
                src.append(self.tensor_input(s, need))
        c = prop.computed[v]
        sharded = {d: c.parts(d) for d, _ in c.dims}
        for j, s in enumerate(v.src):  # a sharded dim's extent given as a scalar source
            for d, n in sharded.items():
                if s is v.logical[d].extent:
                    src[j] = S.floordiv(src[j], n)
        local = rebuild(v, tuple(src))
        self.computed[id(v)] = local
        return local


def build_piece(nodes: list[Val], prop: Propagation, wanted: set) -> Piece:
    """The local fusion of `nodes` (producers first); `wanted`: ids of nodes
    needed outside the piece, which become its outputs."""
    b = _PieceBuilder(prop)
    members = {id(v) for v in nodes}
    for v in nodes:
        b.node(v, members)
    outs = [(v, prop.computed[v]) for v in nodes if id(v) in wanted]
    fusion = Fusion(tuple(b.inputs), tuple(Output(b.computed[id(v)]) for v, _ in outs))
    verify(fusion)
    return Piece(fusion, b.tensor_keys, b.scalar_leaves, outs, b.order, prop.computed[nodes[0]].mesh)
