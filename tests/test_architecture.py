"""The shape the code keeps (DESIGN §7): one record per op, verifiers that
re-derive types and check kernel and host IR, lazy stage dumps, knobs read
per plan, one argument layout for the CUDA printer and the interpreter."""
from __future__ import annotations

import pytest
import torch

import hostir
from hostir import DataType, FusionDefinition, HostProgram, config
from hostir.codegen.kir import K, Builder, Kernel, KernelVerificationError, TensorParam, layout, verify_kernel
from hostir.codegen.lower import PointwiseLowering, lower_pointwise
from hostir.host import ir as H
from hostir.host.steps import KernelStep
from hostir.host.verify import verify_program
from hostir.ir.fusion import Fusion, Output, TensorInputArg
from hostir.ir.node import OPS, Axis, AxisKind, Family, Op, Val, const, refine
from hostir.ir.ops import FRONTEND
from hostir.ir.verify import verify


def _input(index, ndim=1):
    axes = tuple(Axis(Val(Op.EXTENT, DataType.Int, arg=(index, d), name=f"i{index}{d}"))
                 for d in range(ndim))
    return Val(Op.TENSOR_INPUT, DataType.Float, arg=TensorInputArg(index, (True,) * ndim, None, False),
               axes=axes, name=f"T{index}")


def _steps(fd):
    return [s.target for s in fd._cache.last_plan.program.body
            if isinstance(getattr(s, "target", None), KernelStep)]


# ---------------------------------------------------------------- op records

def test_every_op_has_one_record_and_every_record_its_rules():
    assert set(OPS) == set(Op)
    for op, d in OPS.items():
        assert d.op is op
        if d.family is Family.LEAF:
            continue
        assert d.rebuild is not None and d.reference is not None, op
        if d.family is Family.POINTWISE:
            assert d.kernel is not None, op
            if op is not Op.SET:  # set is tensors only; casts are spelled by kernel IR types
                assert d.py is not None and (d.cuda is not None or op is Op.CAST), op
        if d.family is Family.VIEW:
            assert d.kernel is not None and (d.view is not None or op is Op.RESHAPE), op


def test_fd_ops_is_made_from_the_registered_constructors():
    fd = FusionDefinition()
    for name in FRONTEND:
        assert callable(getattr(fd.ops, name)), name
    # every unary and binary op is reachable under its own name
    for op, d in OPS.items():
        if d.family is Family.POINTWISE and d.arity in ((1, 1), (2, 2)) and op not in (Op.CAST, Op.SET):
            assert op.value in FRONTEND, op


# ---------------------------------------------------------------- the fusion verifier

def test_verifier_rederives_axes_from_the_op_rule():
    x, y = _input(0), _input(1)
    bad = Val(Op.ADD, DataType.Float, (x, y), axes=(Axis(const(7)),), name="T2")  # rule: [i00]
    with pytest.raises(hostir.VerificationError, match=r"T2 \(add\).*op rule gives"):
        verify(Fusion((x, y), (Output(bad),)))
    verify(Fusion((x, y), (Output(bad),)), types=False)  # structure alone is fine


def test_verifier_rederives_dtypes_from_the_op_rule():
    x = _input(0)
    bad = Val(Op.ISNAN, DataType.Float, (x,), axes=x.axes, name="T1")  # rule: Bool
    with pytest.raises(hostir.VerificationError, match=r"T1.*dtype float, but its op rule gives bool"):
        verify(Fusion((x,), (Output(bad),)))


def test_verifier_accepts_concretization_refinement_only_on_shape_ops():
    x = _input(0, 2)
    rows = x.axes[0].extent
    s = hostir.ir.ops.slice_raw(x, [const(0), const(0), rows, const(1)], (1, 1))
    assert s.logical[1].kind is AxisKind.BCAST  # a static extent 1 is a broadcast already
    s = hostir.ir.ops.slice_raw(x, [const(0), const(0), const(1), x.axes[1].extent], (1, 1))
    refined = refine(s, [0])  # extent 1 at run time, so concretization made it a broadcast
    assert refined.refined == (0,) and refined.logical[0].kind is AxisKind.BCAST
    verify(Fusion((x,), (Output(refined),)))
    neg = hostir.ir.ops.pointwise(Op.NEG, x)
    with pytest.raises(hostir.VerificationError, match="only concretization of a shape-making op"):
        verify(Fusion((x,), (Output(refine(neg, [0])),)))


def test_concretized_fusions_verify_with_refined_axes():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        n = fd.define_scalar(None, dtype=DataType.Int)
        r = fd.ops.reshape(t, [n, -1])
        fd.add_output(fd.ops.add(r, 1.0))
    a = torch.randn(4, 6)
    (out,) = fd.execute([a, 1])   # a reshape to extent 1: refined to a broadcast in the plan
    torch.testing.assert_close(out, a.reshape(1, -1) + 1.0)
    concrete = fd._cache.last_plan.segmented.fusion
    assert any(v.refined for v in concrete.tensor_exprs())
    verify(concrete)


# ---------------------------------------------------------------- kernel IR

def _tiny_kernel(store=True):
    t = Val(Op.TENSOR_INPUT, DataType.Float, arg=None)
    b = Builder()
    i0 = b.mk(K.INDEX, DataType.Int, arg=0)
    val = b.mk(K.LOAD, DataType.Float, (b.const(True, DataType.Bool), i0), arg=0)
    return Kernel("k", inputs=[TensorParam(t, 1, DataType.Float)],
                  outputs=[TensorParam(t, 1, DataType.Float), TensorParam(t, 1, DataType.Float)],
                  extent_vals=[t], stores=[(0, val, (i0,))] + ([(1, val, (i0,))] if store else []),
                  order=list(b.order)), b


def test_kernel_verifier_finds_unstored_outputs_and_bad_loads():
    k, _ = _tiny_kernel()
    verify_kernel(k)
    k, _ = _tiny_kernel(store=False)
    with pytest.raises(KernelVerificationError, match=r"outputs \[1\] are never stored"):
        verify_kernel(k)
    k, b = _tiny_kernel()
    bad = b.mk(K.LOAD, DataType.Float, (b.const(True, DataType.Bool), b.i(0)), arg=3)
    k.order = list(b.order)
    with pytest.raises(KernelVerificationError, match="load of input 3 of 1"):
        verify_kernel(k)
    k, b = _tiny_kernel()
    b.mk(K.INDEX, DataType.Int, arg=2)
    k.order = list(b.order)
    with pytest.raises(KernelVerificationError, match="index of dim 2"):
        verify_kernel(k)


def test_layout_is_what_the_printer_declares():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        s = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(fd.ops.mul(x, s))
    fd.execute([torch.randn(3, 4), 2.0])
    spec = _steps(fd)[0].spec
    src = spec.source
    head = src[src.index("(") + 1:src.index(") {")]
    names = [p.split()[-1] for p in head.split(",")]
    assert names == [slot.name for slot in layout(spec.plain)]


def test_interpreter_reads_the_packed_arguments():
    """CPU runs go through the same packing a CUDA launch does: strides come
    from the packed values, not from the tensors."""
    from hostir.codegen.interpret import interpret
    from hostir.codegen.kir import pack
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[False, False], dtype=DataType.Float)
        fd.add_output(fd.ops.neg(x))
    a = torch.randn(6, 5).t()  # non-contiguous
    fd.execute([a])
    kern = _steps(fd)[0].spec.plain
    slots = layout(kern)
    out = torch.zeros(5, 6)
    values = pack(slots, [a], [out], [], [5, 6], 30, pointer=lambda t: t)
    interpret(kern, slots, values)
    torch.testing.assert_close(out, -a)
    swapped = list(values)  # the input's strides swapped: the interpreter must follow them
    i = [k for k, s in enumerate(slots) if s.kind == "in_stride"]
    swapped[i[0]], swapped[i[1]] = values[i[1]], values[i[0]]
    interpret(kern, slots, swapped)
    expect = -torch.as_strided(a, (5, 6), (a.stride(1), a.stride(0)))
    torch.testing.assert_close(out, expect)


# ---------------------------------------------------------------- host IR

def test_host_verifier_names_misplaced_waits_and_uses():
    hp = HostProgram()
    x = hp.define_tensor([-1])
    y = hp.allreduce(x)
    hp.add_output(y)
    prog = hp.ir()
    verify_program(prog, (hp.world_size, hp.rank))
    comm, wait = prog.body
    early = H.HostIR(prog.inputs, (wait, comm), prog.outputs)
    with pytest.raises(hostir.VerificationError, match="not started before it"):
        verify_program(early, (hp.world_size, hp.rank))
    unwaited = H.HostIR(prog.inputs, (comm, H.Deallocate(y), wait), prog.outputs)
    with pytest.raises(hostir.VerificationError, match="before the Wait of its allreduce"):
        verify_program(unwaited, (hp.world_size, hp.rank))
    freed = H.HostIR(prog.inputs, (comm, wait, H.Deallocate(y)), prog.outputs)
    with pytest.raises(hostir.VerificationError, match="not defined at the end"):
        verify_program(freed, (hp.world_size, hp.rank))


def test_hand_written_program_using_an_undefined_value_is_a_definition_error():
    hp = HostProgram()
    x = hp.define_tensor([-1])
    other = HostProgram().define_tensor([-1])  # a tensor of another program
    out = hp.allocate([4])
    prog_stmt = H.Slice(out, other, 0, const(0), const(1))
    hp._emit(prog_stmt)
    hp.add_output(x)
    with pytest.raises(hostir.DefinitionError, match="used before it is defined"):
        hp.execute([torch.randn(3)])


# ---------------------------------------------------------------- stages and knobs

def test_dumps_format_nothing_unless_asked(monkeypatch):
    calls = []

    class Loud:
        def __str__(self):
            calls.append(1)
            return "text"
    config.dump("preseg", Loud())
    assert not calls
    with config.override(dump=frozenset({"preseg"})):
        config.dump("preseg", Loud())
    assert calls == [1]


def test_kernel_knobs_are_read_when_a_plan_is_made():
    def make():
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
            fd.add_output(fd.ops.exp(x))
        return fd
    a = torch.randn(64)
    with config.override(block=128, streaming=True):
        fd = make()
        fd.execute([a])
    (out,) = fd.execute([a])  # outside the block: the plan keeps its knobs
    torch.testing.assert_close(out, torch.exp(a))
    opts = _steps(fd)[0].spec.options
    assert opts.block == 128 and opts.streaming
    assert "__launch_bounds__(128)" in _steps(fd)[0].spec.source
    other = make()
    other.execute([a])
    assert _steps(other)[0].spec.options.block == config.get().block == 256


def test_stages_print_themselves(capsys):
    with config.override(dump=frozenset({"concretized", "preseg", "aliases", "segments",
                                          "host_ir", "kernels"})):
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
            fd.add_output(fd.ops.permute(x, [1, 0]))
            fd.add_output(fd.ops.sin(x))
        fd.execute([torch.randn(2, 3)])
    out = capsys.readouterr().out
    for stage in ("concretized", "preseg", "aliases", "segments", "host_ir", "kernels"):
        assert f"===== hostir {stage} =====" in out, stage
    assert "output 0: T0 -> " in out and "(a view, no kernel)" in out
    assert "__global__" in out and "kernel hir_seg0_pointwise" in out


# ---------------------------------------------------------------- pairing

def _exhaustive_pairing(seg, extents):
    base = PointwiseLowering(seg, "k")
    base.run()
    best, best_gain = None, 0.0
    for d, e in enumerate(extents):
        if e < 2 or e % 2:
            continue
        low = PointwiseLowering(seg, "k")
        low.run(extents, pair_dims=(d,))
        gain = len(base.moving_loads(d)) - len(low.moving_loads(d)) / 2
        if gain > best_gain:
            best, best_gain = d, gain
    return best


@pytest.mark.parametrize("which", ["rotation", "rope", "rows", "pad", "plain"])
def test_pairing_precheck_finds_what_the_exhaustive_search_finds(which):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=DataType.Float)
        n0, n1, n2 = (fd.ops.size(x, i) for i in range(3))
        if which == "rotation":
            h = fd.ops.div(n2, 2)
            r = fd.ops.cat([fd.ops.slice(x, [0, 0, h], [n0, n1, n2]), fd.ops.slice(x, [0, 0, 0], [n0, n1, h])], 2)
        elif which == "rope":
            h = fd.ops.div(n2, 2)
            r = fd.ops.cat([fd.ops.neg(fd.ops.slice(x, [0, 0, h], [n0, n1, n2])),
                            fd.ops.slice(x, [0, 0, 0], [n0, n1, h])], 2)
        elif which == "rows":
            h = fd.ops.div(n0, 2)
            r = fd.ops.cat([fd.ops.slice(x, [h, 0, 0], [n0, n1, n2]), fd.ops.slice(x, [0, 0, 0], [h, n1, n2])], 0)
        elif which == "pad":
            r = fd.ops.pad(fd.ops.slice(x, [0, 1, 0], [n0, n1, n2]), [0, 0, 0, 1])
        else:
            r = fd.ops.exp(x)
        fd.add_output(fd.ops.add(x, r))
    a = torch.randn(4, 6, 8)
    fd.execute([a])
    seg = fd._cache.last_plan.segmented.segments[0]
    _, paired = lower_pointwise(seg, "k", [4, 6, 8])
    chosen = paired.pairs[0][0] if paired is not None else None
    assert chosen == _exhaustive_pairing(seg, [4, 6, 8])


def test_every_pipeline_stage_can_be_dumped():
    from hostir.host.pipeline import STAGES
    assert set(STAGES) <= config.DUMP_STAGES


def test_every_op_says_where_its_operands_dims_go():
    """OpDef.dims, checked against torch: each operand dim that maps to a result
    dim has the same extent there."""
    from hostir.ir.node import REDUCED
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[2, 3, 4], contiguity=True, dtype=DataType.Float)
        b = fd.define_tensor(shape=[4, 5], contiguity=True, dtype=DataType.Float)
        w = fd.define_tensor(shape=[6, 4], contiguity=True, dtype=DataType.Float)
        c = fd.define_tensor(shape=[3, 4], contiguity=True, dtype=DataType.Float)
        outs = [fd.ops.add(a, c), fd.ops.permute(a, [2, 0, 1]), fd.ops.sum(a, [1]),
                fd.ops.matmul(a, b), fd.ops.linear(a, w), fd.ops.broadcast(c, [True, False, False]),
                fd.ops.squeeze(fd.ops.broadcast(c, [False, True, False]), [1]),
                fd.ops.slice(a, [0, 1, 0], [2, 3, 4]), fd.ops.cat([a, a], 1)]
        for o in outs:
            fd.add_output(o)
    fusion = fd.ir()
    for o in fusion.outputs:
        v = o.val
        d = OPS[v.op]
        for k, s in enumerate(v.src):
            if not s.is_tensor:
                continue
            m = d.dims(v, k)
            assert len(m) == s.ndim, (v.op, k)
            for sd, od in enumerate(m):
                if isinstance(od, int):
                    assert s.logical[sd].extent.arg == v.logical[od].extent.arg, (v.op, k, sd, od)
    mm = next(o.val for o in fusion.outputs if o.val.op is Op.MATMUL)
    assert OPS[Op.MATMUL].dims(mm, 0) == (0, 1, REDUCED) and OPS[Op.MATMUL].dims(mm, 1) == (REDUCED, 2)


def test_kernel_spec_kinds_keep_the_launch_interface():
    """The runtime calls every spec's launch methods alike (backend.start): a
    kind of KernelSpec that overrides one keeps its parameters (a grid that
    dropped the clusters argument failed only on GPUs)."""
    import inspect
    from hostir.codegen import scan, scatter  # noqa: F401  (the kinds register as subclasses)
    from hostir.codegen.spec import KernelSpec

    def kinds(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from kinds(sub)
    found = list(kinds(KernelSpec))
    assert len(found) >= 3
    for name in ("grid", "count", "split", "scratch_size", "choose", "kernel_for"):
        want = list(inspect.signature(getattr(KernelSpec, name)).parameters)
        for sub in found:
            got = list(inspect.signature(getattr(sub, name)).parameters)
            assert got == want, f"{sub.__name__}.{name}{got} differs from KernelSpec.{name}{want}"
