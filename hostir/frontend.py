"""The nvFuser-compatible Python frontend: FusionDefinition and fd.ops (the
Tensor and Scalar handles it returns are in handles.py)."""
from __future__ import annotations

from dataclasses import replace

import torch

from . import config
from .dist.mesh import Replicate
from .dist.sharding import LoopDomain, Sharding, placements_sharding
from . import repro
from .fd_debug import Inspection
from .fd_ops import Ops
from .fd_sched import Sched
from .handles import Scalar, Tensor, _Handle
from .repro import Script, recorded
from .host.cache import CacheInfo, FusionCache
from .host.distributed import DistributedFusion
from .ir import ops as O
from .ir.dtypes import DataType, from_torch, python_scalar_dtype
from .ir.errors import DefinitionError, InputError, UnsupportedError
from .ir.fusion import Fusion, Output, TensorInputArg
from .ir.inputs import dense_dims
from .ir.node import Axis, AxisKind, Op, Val, const
from .ir.verify import verify


class FusionDefinition(Inspection):
    """Define a fusion once, execute it many times.

    Either `with FusionDefinition() as fd: ...` or subclass it and override
    `definition(self)`.
    """

    def __init__(self):
        self._inputs: list[Val] = []
        self._vector_inputs: dict[int, int] = {}     # first scalar input's index -> vector length
        self._outputs: list[Output] = []
        self._counter = 0
        self._extent_counter = 0
        self._defining = False
        self._fusion: Fusion | None = None
        self._dumped = False
        self._fusion_cache: FusionCache | None = None
        self._domains: dict[int, LoopDomain] = {}     # id(Val) -> its loop-domain annotations
        self._placements: dict[int, tuple] = {}       # id(Val) -> (Val, Sharding)
        self._dist = None                             # the DistributedFusion, when sharded
        self.ops = Ops(self)
        self.sched = Sched(self)                      # nvFuser's multi-GPU scheduling calls
        self._script = Script()                       # the definition as Python (repros)
        self._stride_orders: dict[int, tuple] = {}    # id(Val) -> fd.ops.stride_order's order
        self._rng_position: int | None = None         # where the implicit rng seed, offset inputs sit
        self._rng_streams = 0                         # random ops drawing from them so far
        self._rng_seed: int | None = None             # drawn from torch's generator on first call
        self._rng_calls = 0                           # the offset of the next call
        self._repro: str | None = None                # the script of execute(save_repro_inputs=True)

    # ------------------------------------------------------------ definition
    def __enter__(self) -> "FusionDefinition":
        if self._fusion is not None:
            raise DefinitionError("this FusionDefinition is already defined; create a new one")
        self._defining = True
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._defining = False
        if exc_type is None:
            self._finalize()

    def definition(self) -> None:
        """Override in a subclass to define the fusion (class style)."""
        raise DefinitionError(
            "FusionDefinition has no definition: use `with FusionDefinition() as fd:` "
            "or subclass it and override definition(self)")

    def _finalize(self) -> None:
        if not self._outputs:
            raise DefinitionError("the fusion has no outputs: call fd.add_output(tensor)")
        self._fusion = Fusion(tuple(self._inputs), tuple(self._outputs))
        verify(self._fusion, types=config.debugging("verify"))

    def ir(self) -> Fusion:
        """The definition as hostir's fusion IR (defining a class-style fusion first)."""
        if self._fusion is None:
            if self._defining:
                raise DefinitionError("execute() was called inside the `with` block; "
                                      "finish the definition first")
            if type(self).definition is FusionDefinition.definition:
                raise DefinitionError("the fusion is empty: define it in a `with` block")
            with self:
                self.definition()
            self.multidevice_schedule()
            if any("schedule" in vars(c) for c in type(self).__mro__ if c.__module__.split(".")[0] != "hostir"):
                config.note_once(f"schedule {type(self).__name__}",
                                 f"{type(self).__name__}.schedule() is not called: hostir schedules its "
                                 f"kernels itself (multidevice_schedule() and fd.sched shard tensors)")
        return self._fusion

    def multidevice_schedule(self) -> None:
        """Override in a subclass to shard the fusion's tensors after definition()
        (nvFuser's class style: self.sched._set_device_mesh, parallelize, split;
        or the tensors' own set_device_mesh, split, axis(i).parallelize)."""

    def _check_defining(self, what: str) -> None:
        if not self._defining:
            raise DefinitionError(
                f"{what}: this FusionDefinition is not being defined (use it inside its "
                f"`with` block or definition())")

    def _name(self, prefix: str) -> str:
        name = f"{prefix}{self._counter}"
        self._counter += 1
        return name

    def _tensor_handle(self, val: Val) -> Tensor:
        return Tensor(val.renamed(self._name("T")) if val.name is None else val, self)

    def _scalar_handle(self, val: Val) -> Scalar:
        return Scalar(val, self)

    def _unwrap(self, x, opname: str):
        if isinstance(x, _Handle):
            if x.fd is not self:
                raise DefinitionError(f"{opname}: {x.name} belongs to another FusionDefinition")
            return x.val
        if isinstance(x, (list, tuple)):
            return [self._unwrap(e, opname) for e in x]
        if isinstance(x, torch.Tensor):
            raise DefinitionError(
                f"{opname}: got a torch.Tensor; define fusion inputs with fd.define_tensor "
                f"or fd.from_pytorch and pass the data to execute()")
        return x

    def _wrap(self, val: Val):
        if val.is_tensor:
            return self._tensor_handle(val)
        if val.op is Op.CONST or val.name is not None:
            return Scalar(val, self)
        return Scalar(val.renamed(self._name("S")), self)

    @recorded("fd.define_tensor")
    def define_tensor(self, shape=None, contiguity=None, dtype: DataType = DataType.Float,
                      is_cpu: bool = False, stride_order=None, symbolic_sizes=None,
                      mesh=None, placements=None, *, sizes=None, strides=None,
                      static_sizes: bool = False, **unsupported) -> Tensor:
        """A tensor input. shape: -1 symbolic, 1 broadcast, n static (global
        shapes: `mesh` and DTensor-style `placements` say how ranks hold it).
        Or nvFuser's other form: `sizes` and `strides` of an example tensor
        (symbolic sizes unless `static_sizes`; contiguity and stride order read
        from the strides)."""
        self._check_defining("define_tensor")
        if unsupported:
            raise DefinitionError(f"define_tensor: unsupported arguments {sorted(unsupported)}")
        if sizes is not None or strides is not None:
            if shape is not None or contiguity is not None or stride_order is not None:
                raise DefinitionError("define_tensor: pass sizes and strides, or shape / contiguity "
                                      "/ stride_order, not both")
            sizes, strides = list(sizes or []), list(strides or [])
            if len(sizes) != len(strides) or not all(
                    isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in sizes + strides):
                raise DefinitionError(f"define_tensor: sizes {sizes} and strides {strides} must be "
                                      f"lists of non-negative ints of one length")
            t = self._strided_input(sizes, strides, dtype, static_sizes, is_cpu)
            if mesh is not None or placements is not None:
                self._place(t.val, mesh, placements)
            return t
        if shape is None:
            shape = symbolic_sizes
        if shape is None or isinstance(shape, int):
            raise DefinitionError(f"define_tensor: shape must be a list of ints, got {shape!r}")
        shape = list(shape)
        if not isinstance(dtype, DataType) or dtype is DataType.Null:
            raise DefinitionError(f"define_tensor: dtype must be a DataType other than Null, got {dtype!r}")
        for s in shape:
            if not isinstance(s, int) or isinstance(s, bool) or s < -1:
                raise DefinitionError(
                    f"define_tensor: shape entries must be -1 (symbolic), 1 (broadcast) or a "
                    f"non-negative static extent, got {shape}")
        n = len(shape)
        contig = self._contiguity(shape, contiguity)
        if stride_order is not None:
            stride_order = tuple(stride_order)
            if sorted(stride_order) != list(range(n)):
                raise DefinitionError(
                    f"define_tensor: stride_order {list(stride_order)} is not a permutation of "
                    f"0..{n - 1}")
        index = len(self._inputs)
        name = self._name("T")
        axes = []
        for d, s in enumerate(shape):
            if s == -1:
                ext = Val(Op.EXTENT, DataType.Int, arg=(index, d), name=f"i{self._extent_counter}")
                self._extent_counter += 1
                axes.append(Axis(ext, AxisKind.ITER))
            else:
                axes.append(Axis(const(s), AxisKind.BCAST if s == 1 else AxisKind.ITER))
        arg = TensorInputArg(index, contig, stride_order, bool(is_cpu))
        val = Val(Op.TENSOR_INPUT, dtype, arg=arg, axes=tuple(axes), name=name)
        self._inputs.append(val)
        if mesh is not None or placements is not None:
            self._place(val, mesh, placements)
        return Tensor(val, self)

    def _place(self, val: Val, mesh, placements) -> None:
        if mesh is None:
            raise DefinitionError(f"define_tensor: placements for {val!r} need a mesh")
        placements = placements if placements is not None else [Replicate()] * mesh.ndim
        self._placements[id(val)] = (val, placements_sharding(val, mesh, placements))

    def _domain(self, val: Val) -> LoopDomain:
        got = self._domains.get(id(val))
        if got is None:
            got = self._domains[id(val)] = LoopDomain(val)
        return got

    def _sharding_of(self, val: Val) -> Sharding:
        if id(val) in self._placements:
            return self._placements[id(val)][1]
        domain = self._domains.get(id(val))
        return domain.sharding() if domain is not None else Sharding()

    def _annotations(self) -> dict:
        """{Val: Sharding} of every tensor the user gave a mesh."""
        out = {val: s for val, s in self._placements.values()}
        for d in self._domains.values():
            if d.mesh is not None or any(a.ptype is not None for a in d.axes):
                s = d.sharding()
                placed = out.get(d.val)
                # placements given at definition, a stream-parallel axis scheduled after
                out[d.val] = s if placed is None or d.mesh is not None else replace(placed, stream=s.stream)
        return out

    @property
    def fusion(self) -> "_FusionView":
        """`fd.fusion.inputs()` / `outputs()`: the definition's tensors (as nvFuser's)."""
        return _FusionView(self)

    @staticmethod
    def _contiguity(shape, contiguity) -> tuple:
        n = len(shape)
        if contiguity is None or isinstance(contiguity, bool):
            flag = bool(contiguity)
            return tuple(None if s == 1 else flag for s in shape)
        contiguity = list(contiguity)
        if len(contiguity) != n:
            raise DefinitionError(
                f"define_tensor: contiguity has {len(contiguity)} entries but shape {shape} has {n} dims")
        out = []
        for d, (s, c) in enumerate(zip(shape, contiguity)):
            if s == 1:
                out.append(None)
            else:  # None on a wider dim: nvFuser's expanded broadcast (stride 0)
                out.append(None if c is None else bool(c))
        return tuple(out)

    def from_pytorch(self, tensor: torch.Tensor, static_sizes: bool = False) -> Tensor:
        """A tensor input shaped like `tensor`: symbolic sizes (size-1 dims broadcast),
        contiguity and stride order read from its strides."""
        if not isinstance(tensor, torch.Tensor):
            raise DefinitionError(f"from_pytorch: expected a torch.Tensor, got {type(tensor).__name__}")
        dtype = from_torch(tensor.dtype)
        if dtype is None:
            raise DefinitionError(f"from_pytorch: unsupported dtype {tensor.dtype}")
        return self._strided_input(list(tensor.shape), list(tensor.stride()), dtype, static_sizes)

    def _strided_input(self, sizes: list, strides: list, dtype: DataType, static_sizes: bool,
                       is_cpu: bool = False) -> Tensor:
        """A tensor input laid out as `sizes` and `strides` say: symbolic sizes
        (unless static; size-1 dims broadcast), contiguity and stride order."""
        shape = [s if (static_sizes or s == 1) else -1 for s in sizes]
        n = len(sizes)
        # outermost first; equal strides (size-1 dims) keep their dim order, so a
        # contiguous tensor with size-1 dims gets no stride_order
        order = sorted(range(n), key=lambda d: (strides[d], -d), reverse=True)
        stride_order = [0] * n
        for rank, d in enumerate(reversed(order)):
            stride_order[d] = rank
        default = stride_order == list(range(n - 1, -1, -1))
        contiguity = [dense for dense, _ in dense_dims(sizes, strides, order)]
        return self.define_tensor(shape=shape, contiguity=contiguity, dtype=dtype, is_cpu=is_cpu,
                                  stride_order=None if default else stride_order)

    @recorded("fd.define_scalar")
    def define_scalar(self, value=None, dtype: DataType | None = None) -> Scalar:
        """A constant (value given) or a scalar input (value None)."""
        self._check_defining("define_scalar")
        if dtype is not None and (not isinstance(dtype, DataType) or dtype is DataType.Null):
            raise DefinitionError(f"define_scalar: dtype must be a DataType other than Null, got {dtype!r}")
        name = self._name("S")
        if value is None:
            if dtype is None:
                raise DefinitionError("define_scalar: a scalar input (value=None) needs a dtype")
            val = Val(Op.SCALAR_INPUT, dtype, arg=len(self._inputs), name=name)
            self._inputs.append(val)
            return Scalar(val, self)
        if not isinstance(value, (bool, int, float, complex)):
            raise DefinitionError(f"define_scalar: value must be a Python number, got {value!r}")
        dtype = dtype or python_scalar_dtype(value)
        if dtype.is_int and isinstance(value, float) and not value.is_integer():
            raise DefinitionError(f"define_scalar: {value!r} is not an integer but dtype is {dtype!r}")
        if isinstance(value, complex) and value.imag != 0 and not dtype.is_complex:
            raise DefinitionError(f"define_scalar: {value!r} is complex but dtype is {dtype!r} "
                                  f"(define it complex and take fd.ops.real, or cast)")
        return Scalar(const(value, dtype).renamed(name), self)

    define_constant = define_scalar

    @recorded("fd.define_vector")
    def define_vector(self, values, dtype: DataType = DataType.Int) -> list:
        """nvFuser's vectors of scalars, used as shapes: from a list of ints and
        Scalars (`define_vector([t.size(0), 1])`), or, given a length n, an input
        the caller passes to `execute` as a list or tuple of n ints."""
        self._check_defining("define_vector")
        if dtype is not DataType.Int and dtype is not DataType.Int32:
            raise DefinitionError(f"define_vector: dtype must be Int (a shape), got {dtype!r}")
        if isinstance(values, int) and not isinstance(values, bool):
            if values < 0:
                raise DefinitionError(f"define_vector: length must be >= 0, got {values}")
            first = len(self._inputs)
            out = [self.define_scalar(None, dtype) for _ in range(values)]
            self._vector_inputs[first] = values
            return out
        if not isinstance(values, (list, tuple)):
            raise DefinitionError(f"define_vector: expected a list of ints and Scalars or a length, "
                                  f"got {values!r}")
        out = []
        for v in values:
            if isinstance(v, Scalar):
                out.append(v)
            elif isinstance(v, int) and not isinstance(v, bool):
                out.append(self.define_scalar(v, dtype))
            else:
                raise DefinitionError(f"define_vector: entries must be ints or Scalars, got {v!r}")
        return out

    def _flatten_inputs(self, inputs) -> list:
        """The caller's inputs with each vector input (a list of n ints) spread
        over its n scalar inputs."""
        flat, i = [], 0
        for x in inputs:
            n = self._vector_inputs.get(len(flat))
            if n is None:
                flat.append(x)
            else:
                if not isinstance(x, (list, tuple, torch.Size)) or len(x) != n:
                    raise InputError(f"input {i} is a vector of {n} ints (define_vector({n})), "
                                     f"got {x!r}")
                flat.extend(x)
            i += 1
        return flat

    @recorded("fd.add_output")
    def add_output(self, t: Tensor, alias_input: Tensor | None = None, stride_order=None) -> None:
        self._check_defining("add_output")
        if not isinstance(t, Tensor):
            raise DefinitionError(f"add_output: expected a Tensor, got {t!r}")
        val = self._unwrap(t, "add_output")
        alias = None
        if alias_input is not None:
            if not isinstance(alias_input, Tensor) or alias_input.val.op is not Op.TENSOR_INPUT:
                raise DefinitionError(
                    f"add_output: alias_input must be a tensor input of this fusion, got {alias_input!r}")
            alias = self._unwrap(alias_input, "add_output")
            if alias.dtype != val.dtype or alias.ndim != val.ndim:
                raise DefinitionError(
                    f"add_output: {t!r} cannot update {alias_input!r} in place: expected the same "
                    f"dtype and rank")
        if stride_order is None:  # fd.ops.stride_order(t, ...) given as the output
            stride_order = self._stride_orders.get(id(val))
        if stride_order is not None:
            stride_order = tuple(stride_order)
            if sorted(stride_order) != list(range(val.ndim)):
                raise DefinitionError(
                    f"add_output: stride_order {list(stride_order)} for {t!r} is not a permutation "
                    f"of 0..{val.ndim - 1}")
        self._outputs.append(Output(val, alias, stride_order))

    # ------------------------------------------------------------ execution
    def execute(self, inputs, device=None, *, out=None, _enable_options=(),
                _disable_options=(), **ignored) -> list[torch.Tensor]:
        """Run the fusion on `inputs` (tensors and Python numbers, in definition order).
        `device` places a fusion without tensor inputs; `out` (one tensor per
        returned output) receives the results, which are returned too. A sharded
        fusion takes and returns each rank's local shards. An error raised here
        carries a note with a runnable repro (hostir.repro)."""
        try:
            return self._execute(inputs, device, out, _enable_options, _disable_options, ignored)
        except Exception as e:
            if self._dist is None and not self._placements and not self._domains:
                repro.attach(self, inputs, e)
            raise

    @property
    def _scalar_tensors(self) -> list[int]:
        """Positions of 0-dim tensor inputs (nvFuser lets them be CPU tensors)."""
        got = self.__dict__.get("_scalar_tensor_positions")
        if got is None:
            got = self.__dict__["_scalar_tensor_positions"] = [
                i for i, v in enumerate(self.ir().inputs) if v.op is Op.TENSOR_INPUT and v.ndim == 0]
        return got

    def _host_scalars_to_device(self, inputs) -> list:
        """0-dim CPU tensors beside inputs on a GPU go there with them (nvFuser
        reads such a tensor's value on the host; here it is a 4-byte copy)."""
        dev = next((a.device for a in inputs if isinstance(a, torch.Tensor) and a.is_cuda), None)
        if dev is None:
            return inputs
        inputs = list(inputs)
        for i in self._scalar_tensors:
            a = inputs[i] if i < len(inputs) else None
            if isinstance(a, torch.Tensor) and a.ndim == 0 and not a.is_cuda:
                inputs[i] = a.to(dev, non_blocking=True)
        return inputs

    def _rng_inputs(self) -> tuple[Val, Val, int]:
        """The implicit (seed, offset) scalar inputs of random ops given no
        rng_seed/rng_offset, made on first use, and a new stream number (two such
        ops draw different numbers). `execute` supplies their values."""
        if self._rng_position is None:
            self._rng_position = len(self._inputs)
            for k, name in enumerate(("rng_seed", "rng_offset")):
                self._inputs.append(Val(Op.SCALAR_INPUT, DataType.Int, arg=self._rng_position + k,
                                        name=name))
        seed, offset = self._inputs[self._rng_position:self._rng_position + 2]
        self._rng_streams += 1
        return seed, offset, self._rng_streams

    def _with_rng(self, inputs, advance: bool = True) -> list:
        """The caller's inputs with the implicit rng seed and offset put in: the
        seed drawn from torch's default generator on the first call (so
        torch.manual_seed makes runs repeatable), the offset one more every call
        (that `advance`s: a plan or a reference made for the next call does not)."""
        if self._rng_seed is None:
            self._rng_seed = int(torch.randint(0, 2 ** 62, (1,)).item())
        inputs = list(inputs)
        pos = self._rng_position
        inputs[pos:pos] = [self._rng_seed, self._rng_calls]
        self._rng_calls += advance
        return inputs

    def _prepared(self, inputs, advance: bool = True):
        """The caller's inputs as the fusion takes them: vectors flattened, the
        implicit rng seed and offset put in, 0-dim CPU scalars beside GPU inputs
        moved there."""
        if not isinstance(inputs, (list, tuple)):
            return inputs
        if self._vector_inputs:
            inputs = self._flatten_inputs(inputs)
        if self._rng_position is not None:
            inputs = self._with_rng(inputs, advance)
        if self._scalar_tensors:
            inputs = self._host_scalars_to_device(inputs)
        return inputs

    def _execute(self, inputs, device, out, _enable_options, _disable_options, ignored):
        if ignored.pop("save_repro_inputs", False) and isinstance(inputs, (list, tuple)):
            self._repro = repro.repro_text(self._script, inputs)  # (the text: no tensor kept alive)
        inputs = self._prepared(inputs)
        cache = self._fusion_cache
        if cache is not None and isinstance(inputs, (list, tuple)):  # the common, repeated call
            return cache.execute(inputs, device, out)
        fusion = self.ir()
        if not self._dumped:
            config.dump("fusion_ir", fusion)
            self._dumped = True
        options = sorted({*ignored, *map(str, _enable_options), *map(str, _disable_options)})
        if options:  # nvFuser's knobs (profiling, host-IR lowering, ...): nothing here to turn
            config.note_once(f"execute_options {options}", f"execute: {', '.join(options)} "
                             f"mean nothing to hostir and are ignored")
        if not isinstance(inputs, (list, tuple)):
            raise InputError(f"execute expects a list of inputs, got {type(inputs).__name__}")
        if self._dist is None and self._annotations():
            self._dist = DistributedFusion(fusion, self._annotations(), type(self).__name__)
        if self._dist is not None:
            if out is not None:
                raise UnsupportedError("execute(out=...) of a sharded fusion")
            return self._dist.execute(list(inputs))
        return self._cache.execute(inputs, device, out)

    def output_shardings(self) -> list:
        """How each output of the last (sharded) run lies over the ranks."""
        if self._dist is None:
            raise DefinitionError("output_shardings: the fusion is not sharded or has not run")
        return self._dist.output_shardings()

    @property
    def fec(self):
        """nvFuser's executor cache handle: `fd.fec.get_output_shardings()`."""
        return _ExecutorView(self)

    @property
    def _cache(self) -> FusionCache:
        if self._fusion_cache is None:
            self._fusion_cache = FusionCache(self.ir(), type(self).__name__)
        return self._fusion_cache

    def cache_info(self) -> CacheInfo:
        """Hits, misses and plans of this fusion's concretization cache."""
        return self._cache.cache_info()


class _ExecutorView:
    def __init__(self, fd: FusionDefinition):
        self.get_output_shardings = fd.output_shardings


class _FusionView:
    """nvFuser's `fd.fusion`: the definition's inputs and outputs as handles."""

    def __init__(self, fd: FusionDefinition):
        self._fd = fd

    def inputs(self) -> list:
        return [Tensor(v, self._fd) if v.is_tensor else Scalar(v, self._fd) for v in self._fd._inputs]

    def outputs(self) -> list:
        return [Tensor(o.val, self._fd) for o in self._fd._outputs]

    def vals(self) -> list:
        """The inputs, then every value the outputs are computed from (producers
        first): constants and extents aside."""
        fd = self._fd
        seen = {id(v) for v in fd._inputs}
        # a tuple of results is no value of nvFuser's (its RESULT nodes are)
        nodes = list(fd._inputs) + [v for v in Fusion(tuple(fd._inputs), tuple(fd._outputs)).exprs()
                                    if id(v) not in seen and not O.is_several(v)]
        return [Tensor(v, fd) if v.is_tensor else Scalar(v, fd) for v in nodes]
