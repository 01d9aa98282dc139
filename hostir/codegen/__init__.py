"""Kernel IR, lowering of scheduled segments to it, CUDA C++ printer, CPU
interpreter; `KernelSpec` is what the runtime gets."""
from .options import KernelOptions
from .spec import KernelSpec, Variant, pointwise_spec

__all__ = ["KernelOptions", "KernelSpec", "Variant", "pointwise_spec"]
