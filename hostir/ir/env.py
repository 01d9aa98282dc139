"""Values of a fusion's nodes during evaluation: an identity-keyed map from
leaves (inputs, extents) and computed nodes to tensors and Python numbers,
plus the device tensors are made on. `bind_inputs` fills it from a call's
arguments; `eval_node` runs one node by its op's reference rule."""
from __future__ import annotations

import torch

from .dtypes import coerce
from .errors import ExecutionError, HostirError
from .node import OPS, Op, Val
from .scalar import evaluate_scalar


class Env(dict):
    """Values of nodes (identity-keyed), the device tensors are made on, and
    whether ops through ATen check their index values before they use them
    (`checks_indices`: a check on a GPU costs a synchronization)."""

    __slots__ = ("device", "checks_indices")

    def __init__(self, device: torch.device, checks_indices: bool = True):
        super().__init__()
        self.device = device
        self.checks_indices = checks_indices

    def scalar(self, v: Val):
        return evaluate_scalar(v, self)

    def extents(self, axes) -> list[int]:
        return [evaluate_scalar(a.extent, self) for a in axes]


def bind_inputs(params, args, env: Env) -> Env:
    """Bind each input Val of `params` to its argument (tensor inputs with
    their symbolic extents; scalars as Python numbers of their dtype, a 0-dim
    tensor given for a scalar by its value)."""
    for v, a in zip(params, args):
        if v.op is Op.TENSOR_INPUT:
            env[v] = a
            for d, ax in enumerate(v.axes):
                if ax.extent.op is Op.EXTENT:
                    env[ax.extent] = a.shape[d]
        else:
            env[v] = coerce(a.item() if isinstance(a, torch.Tensor) else a, v.dtype)
    return env


def eval_node(v: Val, env: Env):
    """`v`'s value by its op's reference rule, checked against its extents."""
    if v.is_scalar:
        return env.scalar(v)
    args = [env[s] if s.is_tensor else env.scalar(s) for s in v.src]
    d = OPS[v.op]
    try:
        out = d.reference(v, args, env)
    except HostirError:  # names the op already (an UnsupportedError is a RuntimeError too)
        raise
    except (RuntimeError, ValueError, IndexError, ZeroDivisionError) as e:
        raise ExecutionError(f"{v.op.value} -> {v!r}: {e}") from e
    if d.results is not None:  # a tuple: its RESULT nodes check each shape
        return tuple(out)
    expected = env.extents(v.logical)
    if list(out.shape) != expected:
        raise ExecutionError(
            f"{v.op.value} -> {v!r}: produced shape {list(out.shape)}, expected {expected}")
    return out
