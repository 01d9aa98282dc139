"""Loading cubins and launching kernels on torch's current CUDA stream.
Every driver call is checked."""
from __future__ import annotations

import ctypes
import threading

import torch

from ..ir.dtypes import DataType
from ..ir.errors import ExecutionError
from .nvrtc import compile_cubin

_PARAM_CTYPES = {DataType.Bool: ctypes.c_int, DataType.Int32: ctypes.c_int,
                 DataType.Int: ctypes.c_longlong, DataType.Float: ctypes.c_float,
                 DataType.Double: ctypes.c_double, DataType.Half: ctypes.c_float,
                 DataType.BFloat16: ctypes.c_float}
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


_sm_count: dict[int, int] = {}


def sm_count(device: torch.device) -> int:
    idx = device.index if device.index is not None else torch.cuda.current_device()
    n = _sm_count.get(idx)
    if n is None:
        n = _sm_count[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return n


class CompiledKernel:
    """A cubin, the kernel's name, and its loaded function per device."""

    def __init__(self, name: str, source: str):
        self.name = name
        self.source = source
        self._funcs: dict[int, object] = {}
        self._core: dict = {}   # device index -> cuda.core Kernel
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
                self._funcs[idx] = f
                self._module = module
        return f

    def launch(self, device: torch.device, grid: int, block: int, values: tuple, types: tuple,
               stream: int) -> None:
        """Launch on `stream` (a raw handle). Uses cuda.core's launcher (its
        argument packing is compiled) and falls back to cuLaunchKernel."""
        if _CORE.usable:
            try:
                kern = self._core_kernel(device)
                args = [_NUMPY[t](v) for v, t in zip(values, types)]
                _CORE.launch(_CORE.stream(stream), _CORE.config(grid, block), kern, *args)
                return
            except Exception as e:  # an unusable cuda.core: use the driver API from now on
                _CORE.disable(e)
        cu = _driver()
        f = self.function(device)
        check(cu.cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, stream, (values, types), 0),
              f"cuLaunchKernel({self.name})")

    def launch_prepared(self, device: torch.device, grid: int, block: int, args: list,
                        types: tuple, stream: int) -> None:
        """Launch with arguments already converted by `numpy_value`."""
        if _CORE.usable:
            try:
                _CORE.launch(_CORE.stream(stream), _CORE.config(grid, block),
                             self._core_kernel(device), *args)
                return
            except Exception as e:
                _CORE.disable(e)
        values = tuple(a.item() for a in args)
        self.launch(device, grid, block, values, tuple(types), stream)

    def core_handles(self, device: torch.device, grid: int, block: int):
        """(cuda.core Kernel, LaunchConfig) for direct launches, or None."""
        if not _CORE.usable:
            return None
        try:
            return self._core_kernel(device), _CORE.config(grid, block)
        except Exception as e:
            _CORE.disable(e)
            return None

    def _core_kernel(self, device: torch.device):
        k = self._core.get(device.index)
        if k is None:
            idx = device.index if device.index is not None else torch.cuda.current_device()
            from cuda.core import ObjectCode
            torch.cuda.current_stream(idx)
            code = ObjectCode.from_cubin(compile_cubin(self.source, arch_of(device), self.name))
            k = self._core[device.index] = code.get_kernel(self.name)
        return k


def _numpy_types():
    import numpy as np
    return {PTR: np.uint64, I64: np.int64, I32: np.int32, ctypes.c_float: np.float32,
            ctypes.c_double: np.float64}


class _CoreLauncher:
    """cuda.core's launch with cached Stream and LaunchConfig objects."""

    def __init__(self):
        self.usable = True
        self._streams: dict[int, object] = {}
        self._configs: dict[tuple, object] = {}
        self.error = None
        try:
            from cuda.core import LaunchConfig, Stream, launch
            self.launch, self._Stream, self._Config = launch, Stream, LaunchConfig
        except Exception as e:  # pragma: no cover - depends on the install
            self.disable(e)

    def disable(self, e) -> None:
        self.usable = False
        self.error = e

    def stream(self, handle: int):
        s = self._streams.get(handle)
        if s is None:
            s = self._streams[handle] = self._Stream.from_handle(handle)
        return s

    def config(self, grid: int, block: int):
        c = self._configs.get((grid, block))
        if c is None:
            c = self._configs[(grid, block)] = self._Config(grid=grid, block=block)
        return c


_CORE = _CoreLauncher()
_NUMPY = _numpy_types()


def numpy_converter(ctype):
    return _NUMPY[ctype]


def numpy_value(value, ctype):
    return _NUMPY[ctype](value)


def current_stream_handle(device: torch.device) -> int:
    """The raw handle of torch's current stream (cheaper than current_stream())."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    try:
        return torch._C._cuda_getCurrentRawStream(idx)
    except AttributeError:  # pragma: no cover - older torch
        return torch.cuda.current_stream(idx).cuda_stream
