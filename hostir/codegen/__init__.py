"""Kernel IR, lowering of scheduled segments to it, CUDA C++ printer, CPU interpreter."""
