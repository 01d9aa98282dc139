"""Kernel IR, lowering of scheduled segments to it, CUDA C++ printer, CPU
interpreter; `KernelSpec` is what the runtime gets."""
from .spec import KernelOptions, KernelSpec, Variant, pointwise_spec

__all__ = ["KernelOptions", "KernelSpec", "Variant", "pointwise_spec"]
