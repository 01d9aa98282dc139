"""`fd.sched`: nvFuser's scheduling calls as its multi-GPU programs make them
in `multidevice_schedule(self)` (class-style definitions), mapped onto hostir's
loop-domain annotations (handles.Tensor: set_device_mesh, split, axis(i).
parallelize). hostir schedules its kernels itself: the calls that only shape
a single-GPU kernel schedule are accepted where they change nothing, refused
with the reason where they would."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .dist.mesh import DeviceMesh
from .handles import Tensor
from .ir.errors import DefinitionError, UnsupportedError

if TYPE_CHECKING:
    from .frontend import FusionDefinition


class Sched:
    """nvFuser's `fd.sched` for multi-GPU scheduling."""

    def __init__(self, fd: "FusionDefinition"):
        self._fd = fd

    def _tensor(self, t, what: str) -> Tensor:
        if not isinstance(t, Tensor) or t.fd is not self._fd:
            raise DefinitionError(f"sched.{what}: expected a tensor of this fusion, got {t!r}")
        return t

    def _create_device_mesh(self, devices) -> DeviceMesh:
        return DeviceMesh(devices)

    def _set_device_mesh(self, tensor, mesh: DeviceMesh) -> None:
        if not isinstance(mesh, DeviceMesh):
            raise DefinitionError(f"sched._set_device_mesh: expected a DeviceMesh, got {mesh!r}")
        self._tensor(tensor, "_set_device_mesh").set_device_mesh(mesh)

    def parallelize(self, tensor, axis: int, parallel_type) -> None:
        """Loop axis `axis` of `tensor` over the ranks of a mesh dimension, or streams."""
        self._tensor(tensor, "parallelize").axis(axis).parallelize(parallel_type)

    def split(self, tensor, axis: int, factor: int, inner_split: bool = True) -> None:
        self._tensor(tensor, "split").split(axis, factor, inner_split)

    def reorder(self, tensor, old2new: dict) -> None:
        self._tensor(tensor, "reorder").reorder(old2new)

    def merge(self, tensor, *args, **kwargs) -> None:
        self._tensor(tensor, "merge").merge(*args, **kwargs)

    def set_allocation_as_loop(self, tensor) -> None:
        """Accepted: hostir allocates a sharded dim as its loop domain says."""
        self._tensor(tensor, "set_allocation_as_loop")

    def tensors(self) -> list[Tensor]:
        """The fusion's tensors (inputs first, then in definition order)."""
        fd = self._fd
        out = [fd._tensor_handle(v) for v in fd.ir().inputs if v.is_tensor]
        out += [fd._tensor_handle(v) for v in fd.ir().exprs() if v.is_tensor]
        return out

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise UnsupportedError(f"fd.sched.{name}: hostir schedules its kernels itself; of nvFuser's "
                               f"scheduling calls it takes the multi-GPU ones (_create_device_mesh, "
                               f"_set_device_mesh, parallelize, split, reorder, set_allocation_as_loop, "
                               f"tensors)")
