"""Why a fusion makes a new plan (HOSTIR_LOGS=cache): what changed between the
previous call's input signature and concretization key and this call's.

A signature holds, per input, (shape, strides, dtype, device, alignment) for a
tensor, (type, value) for a scalar that shapes or specialized bounds depend on,
and the type of any other scalar (see `FusionCache._signature`). A key is
(specialized resize bounds, size-1 axes of the nodes making extents, layouts of
inputs whose outputs may be views) (see `concretization_key`).
"""
from __future__ import annotations

from ..concretize import DynamicInfo
from ..ir.fusion import Fusion
from ..ir.node import OPS

_TENSOR_PARTS = ("shape", "strides", "dtype", "device", "alignment (address % 16)")


def _show(part: str, value) -> str:
    if part in ("shape", "strides"):
        return str(list(value))
    if part == "device":
        return "cpu" if value == -1 else f"cuda:{value}"
    return str(value).replace("torch.", "")


def signature_changes(fusion: Fusion, before: tuple, now: tuple) -> list[str]:
    """One phrase per input part that differs: 'input 0 (T0) shape [8, 4] -> [8, 1]'."""
    changes = []
    for i, (a, b) in enumerate(zip(before, now)):
        if a == b:
            continue
        name = f"input {i} ({fusion.inputs[i]!r})" if i < len(fusion.inputs) else f"input {i}"
        if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) == len(_TENSOR_PARTS):
            for part, x, y in zip(_TENSOR_PARTS, a, b):
                if x != y:
                    word = "stride/contiguity" if part == "strides" else part
                    changes.append(f"{name} {word} {_show(part, x)} -> {_show(part, y)}")
        elif isinstance(a, tuple) and isinstance(b, tuple):  # (type, value) of a shape scalar
            changes.append(f"{name} scalar value {a[1]!r} -> {b[1]!r}")
        else:
            changes.append(f"{name} {_type(a)} -> {_type(b)}")
    return changes


def _type(t) -> str:
    return getattr(t, "__name__", str(t))


def key_changes(info: DynamicInfo, before: tuple, now: tuple) -> list[str]:
    """One phrase per concretization-key part that differs."""
    (r0, k0, l0), (r1, k1, l1) = before, now
    changes = []
    if (r0 is None) != (r1 is None):
        changes.append("slice/pad/cat bounds " + ("made symbolic" if r1 is None else "specialized"))
    elif r0 is not None:
        resizes = [v for v in info.shape_nodes if OPS[v.op].bounds is not None]
        for j, (a, b) in enumerate(zip(r0, r1)):
            if a != b:
                what = f"{resizes[j].op.value} {resizes[j]!r}" if j < len(resizes) else f"resize {j}"
                changes.append(f"specialized bounds of {what} {list(a)} -> {list(b)}")
    for v, a, b in zip(info.shape_nodes, k0, k1):
        if a != b:
            axes = [d for d, (x, y) in enumerate(zip(a, b)) if x != y]
            became = ["size 1 (broadcast)" if b[d] else "not size 1" for d in axes]
            changes.append(f"{v.op.value} {v!r} axis " + ", ".join(
                f"{d} became {w}" for d, w in zip(axes, became)))
    for pos, a, b in zip(info.view_inputs, l0, l1):
        if a != b:
            changes.append(f"layout of input {pos} (its outputs may be views): "
                           f"stride order {list(a[1])} -> {list(b[1])}, dense dims {list(a[2])} -> "
                           f"{list(b[2])}, offset 0 {a[3]} -> {b[3]}")
    return changes


def why(fusion: Fusion, info: DynamicInfo, before_sig, sig, before_key, key) -> str:
    """The reason for a new plan, in words (for HOSTIR_LOGS=cache)."""
    if before_key is None:
        return "first call"
    parts = key_changes(info, before_key, key)
    inputs = signature_changes(fusion, before_sig, sig) if before_sig is not None else []
    text = "; ".join(parts) or "a key seen before was evicted"
    if inputs:
        text += " (inputs: " + "; ".join(inputs) + ")"
    return text
