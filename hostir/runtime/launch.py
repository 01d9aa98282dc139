"""Loading cubins and launching kernels on torch's current CUDA stream, through
cuda.bindings' driver API with arguments packed once in C storage. Every driver
call is checked."""
from __future__ import annotations

import ctypes
import threading

import torch

from ..ir.dtypes import DataType
from ..ir.errors import ExecutionError
from ..codegen.launch_checks import device_sms
from .nvrtc import compile_cubin

def _complex_param(part):
    class ComplexParam(ctypes.Structure):
        """A complex scalar parameter (hir_complex in the kernel: real, then imaginary
        part), with ctypes' `value` as the other parameters have."""
        _fields_ = [("re", part), ("im", part)]

        def __init__(self, value=0j):
            super().__init__()
            self.value = value

        @property
        def value(self) -> complex:
            return complex(self.re, self.im)

        @value.setter
        def value(self, x) -> None:
            x = complex(x)
            self.re, self.im = x.real, x.imag
    return ComplexParam


_PARAM_CTYPES = {DataType.Bool: ctypes.c_int, DataType.Int32: ctypes.c_int,
                 DataType.Int: ctypes.c_longlong, DataType.Float: ctypes.c_float,
                 DataType.Double: ctypes.c_double, DataType.Half: ctypes.c_float,
                 DataType.BFloat16: ctypes.c_float, DataType.Float8_e4m3fn: ctypes.c_float,
                 DataType.Float8_e5m2: ctypes.c_float,
                 DataType.ComplexFloat: _complex_param(ctypes.c_float),
                 DataType.ComplexDouble: _complex_param(ctypes.c_double)}
PTR = ctypes.c_void_p
I64 = ctypes.c_longlong
I32 = ctypes.c_int


def param_ctype(dtype: DataType):
    return _PARAM_CTYPES[dtype]


def _driver():
    from cuda.bindings import driver
    return driver


def check(result, what: str):
    cu = _driver()
    err = result[0] if isinstance(result, tuple) else result
    if err != cu.CUresult.CUDA_SUCCESS:
        _, msg = cu.cuGetErrorString(err)
        raise ExecutionError(f"CUDA driver call {what} failed: {err.name}: "
                             f"{msg.decode() if msg else ''}")
    if isinstance(result, tuple):
        return result[1] if len(result) == 2 else result[1:]
    return None


def arch_of(device: torch.device) -> str:
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def sm_count(device: torch.device) -> int:
    return device_sms(device.index if device.index is not None else torch.cuda.current_device())


class CompiledKernel:
    """A cubin, the kernel's name, and its loaded function per device."""

    def __init__(self, name: str, source: str, pdl: bool = False, smem: int = 0, cluster: int = 0):
        self.name = name
        self.cluster = cluster if cluster > 1 else 0  # CTAs of a thread-block cluster (x)
        self.source = source
        self.smem = smem  # dynamic shared memory bytes a launch takes
        # launched with programmatic stream serialization (the source waits on
        # griddepcontrol before touching memory)
        self.pdl = pdl
        self._funcs: dict[int, object] = {}
        self._modules: dict[int, object] = {}
        self._launchers: dict[tuple, DirectLauncher] = {}
        self._resident: dict[tuple, int] = {}  # (device, block) -> clusters run at once
        self._lock = threading.Lock()

    def function(self, device: torch.device):
        idx = device.index if device.index is not None else torch.cuda.current_device()
        f = self._funcs.get(idx)
        if f is None:
            with self._lock:
                cu = _driver()
                torch.cuda.current_stream(idx)  # makes torch's primary context current
                cubin = compile_cubin(self.source, arch_of(device), self.name)
                module = check(cu.cuModuleLoadData(cubin), f"cuModuleLoadData({self.name})")
                f = check(cu.cuModuleGetFunction(module, self.name.encode()),
                          f"cuModuleGetFunction({self.name})")
                if self.smem:  # (past 48 KiB with static shared memory: asked for once)
                    check(cu.cuFuncSetAttribute(
                        f, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        self.smem), f"cuFuncSetAttribute({self.name}, {self.smem} bytes of shared memory)")
                self._funcs[idx] = f
                self._modules[idx] = module
        return f

    def resident_clusters(self, device: torch.device, block: int) -> int:
        """How many of this kernel's thread-block clusters the device runs at
        once in blocks of `block` threads (cuOccupancyMaxActiveClusters; 0 where
        the driver does not say)."""
        key = (device.index, block)
        got = self._resident.get(key)
        if got is None:
            cu = _driver()
            cfg = launch_config(self.cluster, block, self.smem, self.cluster)
            err, n = cu.cuOccupancyMaxActiveClusters(self.function(device), cfg)
            got = self._resident[key] = int(n) if err == cu.CUresult.CUDA_SUCCESS else 0
        return got

    def resident_blocks(self, device: torch.device, block: int) -> int:
        """How many of this kernel's blocks of `block` threads an SM runs at
        once (cuOccupancyMaxActiveBlocksPerMultiprocessor; 0 where the driver
        does not say)."""
        key = (device.index, block, "blocks")
        got = self._resident.get(key)
        if got is None:
            cu = _driver()
            err, n = cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(self.function(device), block, self.smem)
            got = self._resident[key] = int(n) if err == cu.CUresult.CUDA_SUCCESS else 0
        return got

    def launch(self, device: torch.device, grid: int, block: int, values, types,
               stream: int) -> None:
        """Launch on `stream` (a raw handle) with arguments `values` of ctypes `types`."""
        self.launcher(device, grid, block)(stream, PackedArgs(values, types))

    def launcher(self, device: torch.device, grid: int, block: int) -> "DirectLauncher":
        key = (device.index, grid, block)
        got = self._launchers.get(key)
        if got is None:
            if len(self._launchers) > 256:
                self._launchers.clear()
            got = self._launchers[key] = DirectLauncher(self, device, grid, block)
        return got


# device index -> raw handle of torch's current stream (cheaper than current_stream())
raw_stream_handle = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda idx: torch.cuda.current_stream(idx).cuda_stream)  # older torch


def current_stream_handle(device: torch.device) -> int:
    """The raw handle of torch's current stream on `device`."""
    return raw_stream_handle(device.index if device.index is not None
                             else torch.cuda.current_device())


_CTYPE_OF = {PTR: ctypes.c_uint64, I64: ctypes.c_longlong, I32: ctypes.c_int,
             ctypes.c_float: ctypes.c_float, ctypes.c_double: ctypes.c_double,
             **{t: t for t in (_PARAM_CTYPES[DataType.ComplexFloat],
                               _PARAM_CTYPES[DataType.ComplexDouble])}}


class PackedArgs:
    """Kernel arguments packed once into C storage (one object per parameter and
    the void** array cuLaunchKernel takes). Launches of one signature change
    only pointers and scalar values: `objs[i].value = x`, no repacking."""

    __slots__ = ("objs", "array", "address")

    def __init__(self, values, types):
        self.objs = [_CTYPE_OF[t](v) for v, t in zip(values, types)]
        self.array = (ctypes.c_void_p * max(1, len(self.objs)))(
            *[ctypes.addressof(o) for o in self.objs])
        self.address = ctypes.addressof(self.array)


def launch_config(grid: int, block: int, smem: int, cluster: int = 0, pdl: bool = False, stream=None):
    """A cuLaunchKernelEx configuration (also what cuOccupancyMaxActiveClusters
    reads): a grid of `grid` blocks, in clusters of `cluster` CTAs where > 1,
    as a programmatic dependent launch where `pdl`."""
    cu = _driver()
    cfg = cu.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid, 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block, 1, 1
    cfg.sharedMemBytes = smem
    if stream is not None:
        cfg.hStream = stream
    attrs = []
    if pdl:
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        attr.value.programmaticStreamSerializationAllowed = 1
        attrs.append(attr)
    if cluster > 1:
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster, 1, 1
        attrs.append(attr)
    cfg.attrs = attrs
    cfg.numAttrs = len(attrs)
    return cfg


class DirectLauncher:
    """Launches one compiled kernel with a fixed grid and block through
    cuLaunchKernel (cuLaunchKernelEx when the kernel is launched as a
    programmatic dependent launch or in thread-block clusters) with
    PackedArgs: the cheapest launch cuda.bindings offers (no argument
    conversion per call)."""

    __slots__ = ("name", "f", "grid", "block", "pdl", "smem", "cluster", "ex", "_streams",
                 "_launch", "_ok")

    def __init__(self, compiled: CompiledKernel, device: torch.device, grid: int, block: int):
        cu = _driver()
        self.name = compiled.name
        self.f = compiled.function(device)
        self.grid, self.block, self.pdl, self.smem = grid, block, compiled.pdl, compiled.smem
        self.cluster = compiled.cluster
        if self.cluster and grid % self.cluster:
            raise ValueError(f"{self.name}: a grid of {grid} blocks is no multiple of its "
                             f"clusters of {self.cluster}")
        self.ex = self.pdl or bool(self.cluster)  # launched through a launch config
        self._streams: dict[int, object] = {}
        self._launch = cu.cuLaunchKernelEx if self.ex else cu.cuLaunchKernel
        self._ok = cu.CUresult.CUDA_SUCCESS

    def _stream(self, handle: int):
        cu = _driver()
        if len(self._streams) >= 64:  # (torch hands out pooled streams; stay bounded anyway)
            self._streams.clear()
        if not self.ex:
            s = self._streams[handle] = cu.CUstream(handle)
            return s
        cfg = launch_config(self.grid, self.block, self.smem, self.cluster, self.pdl, cu.CUstream(handle))
        self._streams[handle] = cfg
        return cfg

    def __call__(self, stream: int, args: PackedArgs) -> None:
        s = self._streams.get(stream)
        if s is None:
            s = self._stream(stream)
        if self.ex:
            (err,) = self._launch(s, self.f, args.address, 0)
        else:
            g, b = self.grid, self.block
            (err,) = self._launch(self.f, g, 1, 1, b, 1, 1, self.smem, s, args.address, 0)
        if err != self._ok:
            check(err, f"{'cuLaunchKernelEx' if self.ex else 'cuLaunchKernel'}({self.name})")
