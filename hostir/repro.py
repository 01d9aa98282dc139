"""Runnable repros of failing fusions.

A FusionDefinition records its definition as it is made: every define_*, op
and add_output call, as the Python line that makes it again (`Script`). When
`execute` fails, the error carries a note with a repro: that definition, code
that makes inputs of the same shapes, strides, dtypes and devices (the values
themselves for small tensors), the execute call, and the hostir, torch and
CUDA versions and the GPU. Short repros are printed in the note; long ones
are written to a file (HOSTIR_REPRO_DIR, default the temp dir) whose path the
note gives. Sharded fusions get none (their meshes are not recorded).
"""
from __future__ import annotations

import math
import os
import re
import tempfile
import time
from pathlib import Path

import torch

from .ir.dtypes import DataType

MAX_PRINTED_LINES = 40   # longer repros go to a file
EXACT_VALUES = 64        # tensors this small are given by value


class Script:
    """The Python lines that define a fusion again, and each value's name in them."""

    def __init__(self):
        self.lines: list[str] = []
        self.names: dict[int, str] = {}
        self.depth = 0
        self._count = 0

    def _fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def arg(self, x) -> str:
        from .handles import _Handle
        if isinstance(x, _Handle):
            name = self.names.get(id(x.val))
            if name is not None:
                return name
            if x.val.is_scalar and x.val.const is not None:
                return repr(x.val.const)
            return f"<unrecorded {x.name}>"
        if isinstance(x, (list, tuple)):
            inner = ", ".join(self.arg(e) for e in x)
            return f"[{inner}]" if isinstance(x, list) else f"({inner}{',' if len(x) == 1 else ''})"
        if isinstance(x, dict):
            return "{" + ", ".join(f"{self.arg(k)}: {self.arg(v)}" for k, v in x.items()) + "}"
        if isinstance(x, DataType):
            return f"DataType.{x.name}"
        if isinstance(x, torch.dtype):
            return str(x)
        if isinstance(x, float) and not math.isfinite(x):
            return f"float({str(x)!r})"
        return repr(x)

    def name_result(self, out, prefix: str) -> str:
        from .handles import _Handle
        if isinstance(out, _Handle):
            name = out.name if out.name and re.fullmatch(r"[A-Za-z_]\w*", out.name) else None
            if name is None or name in self.names.values():
                name = self._fresh(prefix)
            self.names[id(out.val)] = name
            return name
        if isinstance(out, (list, tuple)):
            if isinstance(out, list):  # a vector (define_vector, shape()): one name, indexed
                base = self._fresh("V")
                for i, e in enumerate(out):
                    if isinstance(e, _Handle) and id(e.val) not in self.names:
                        self.names[id(e.val)] = f"{base}[{i}]"
                return base
            return ", ".join(self.name_result(e, prefix) for e in out)
        return ""

    def record(self, call: str, args=(), kwargs=None, out=None) -> None:
        parts = [self.arg(a) for a in args] + [f"{k}={self.arg(v)}" for k, v in (kwargs or {}).items()]
        text = f"{call}({', '.join(parts)})"
        lhs = self.name_result(out, "T" if out is not None else "") if out is not None else ""
        self.lines.append(f"{lhs} = {text}" if lhs else text)


def recorded(call: str):
    """Decorator of FusionDefinition / Ops / Tensor methods: the call goes into
    the fusion's Script (outer calls only: what they make themselves is not)."""
    def wrap(fn):
        def method(self, *args, **kwargs):
            fd = getattr(self, "_fd", None) or getattr(self, "fd", None) or self
            script = getattr(fd, "_script", None)
            if script is None:
                return fn(self, *args, **kwargs)
            script.depth += 1
            try:
                out = fn(self, *args, **kwargs)
            finally:
                script.depth -= 1
            if script.depth == 0:
                prefix = call.format(self=script.arg(self) if fd is not self else "fd")
                script.record(prefix, args, kwargs, out)
            return out
        method.__name__ = fn.__name__
        method.__doc__ = fn.__doc__
        return method
    return wrap


def _input_code(x) -> str:
    if not isinstance(x, torch.Tensor):
        return repr(x)
    dev = f"device={str(x.device)!r}"
    if x.numel() <= EXACT_VALUES and x.is_contiguous():
        vals = x.detach().cpu().tolist()
        return f"torch.tensor({vals!r}, dtype={x.dtype}, {dev})"
    storage = x.untyped_storage().nbytes() // max(x.element_size(), 1)
    if x.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):  # (randn does not make float8)
        base = f"torch.randn({storage}, {dev}).to({x.dtype})"
    elif x.dtype.is_floating_point or x.dtype.is_complex:
        base = f"torch.randn({storage}, dtype={x.dtype}, {dev})"
    elif x.dtype == torch.bool:
        base = f"(torch.rand({storage}, {dev}) < 0.5)"
    else:
        base = f"torch.randint(-4, 5, ({storage},), dtype={x.dtype}, {dev})"
    return (f"{base}.as_strided({tuple(x.shape)}, {tuple(x.stride())}, {x.storage_offset()})")


def environment() -> list[str]:
    import hostir
    lines = [f"hostir {hostir.__version__}, torch {torch.__version__}"]
    if torch.cuda.is_available():
        lines.append(f"CUDA {torch.version.cuda}, {torch.cuda.get_device_name()} "
                     f"(sm_{''.join(map(str, torch.cuda.get_device_capability()))})")
    else:
        lines.append("no GPU (CPU)")
    return lines


def repro_text(script: Script, inputs=None, error: BaseException | None = None) -> str:
    """The definition as a script, then (given `inputs`) inputs like them and the
    execute call; with `error`, headed by it."""
    if error is not None:
        first = str(error).splitlines()[0] if str(error) else ""
        head = [f"# hostir repro: {type(error).__name__}: {first}"[:300]]
    else:
        head = ["# hostir repro"]
    head += [f"# {line}" for line in environment()]
    body = ["import torch", "from hostir import DataType, FusionDefinition", "",
            "with FusionDefinition() as fd:"]
    body += [f"    {line}" for line in script.lines]
    if inputs is not None:
        body += ["", "inputs = ["] + [f"    {_input_code(x)}," for x in inputs] + ["]",
                 "fd.execute(inputs)"]
    return "\n".join(head + body) + "\n"


def attach(fd, inputs, error: BaseException) -> None:
    """Add the repro of `fd` failing on `inputs` to `error` (once)."""
    script = getattr(fd, "_script", None)
    if script is None or getattr(error, "_hostir_repro", False) or not isinstance(inputs, (list, tuple)):
        return
    try:
        error._hostir_repro = True
    except AttributeError:
        return
    try:
        text = repro_text(script, inputs, error)
    except Exception as e:  # a repro must never hide the error itself
        error.add_note(f"(hostir could not make a repro: {type(e).__name__}: {e})")
        return
    if text.count("\n") <= MAX_PRINTED_LINES:
        error.add_note("hostir repro (run it to reproduce this error):\n" + text)
        return
    from . import config
    folder = Path(config.get().repro_dir or tempfile.gettempdir())
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"hostir_repro_{time.strftime('%Y%m%d_%H%M%S')}_{os.getpid()}_{id(error) % 10000}.py"
        path.write_text(text)
        error.add_note(f"hostir repro written to {path} (python {path} reproduces this error)")
    except OSError as e:
        error.add_note("hostir repro (could not write it to a file: " + str(e) + "):\n" + text)
