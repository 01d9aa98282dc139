"""The ops, one module per family. Each op is defined in one place: its
constructor (the shape and dtype rule, with errors that name the op and its
operands) and its `OpDef` record (reference evaluation, printing, index map,
view rule, CUDA spelling), registered in `node.OPS`; `fd.ops` names are
registered in `FRONTEND` beside them."""
from ..node import ONE, ZERO
from . import leaves  # noqa: F401  (registers the leaf records)
from .common import FRONTEND, describe, norm_dim
from .factories import full, iota
from .matmul import linear, matmul
from .results import is_several, result, results
from .attention import sdpfa_bwd, sdpfa_fwd
from .sorting import argsort, topk
from .pointwise import as_tensor, cast, compute_type, pointwise, set_, where
from .reductions import ReductionArg, reduction, reduction_raw, var_mean
from .scans import ScanArg, scan, scan_raw
from .indexing import embedding_fwd, gather, index_select, scatter, take_along_axis
from .random import random
from .resize import cat, pad, pad_raw, slice_, slice_raw
from .views import broadcast, broadcast_in_dim, expand, permute, reshape, squeeze

__all__ = ["FRONTEND", "ONE", "ZERO", "ReductionArg", "argsort", "as_tensor", "broadcast", "broadcast_in_dim",
           "cast", "cat", "compute_type", "describe", "embedding_fwd", "expand", "gather", "index_select", "full", "iota", "is_several", "linear", "matmul",
           "norm_dim", "pad", "pad_raw", "permute", "pointwise", "reduction", "reduction_raw",
           "reshape", "result", "results", "ScanArg", "scan", "scan_raw", "scatter", "sdpfa_bwd", "sdpfa_fwd", "set_",
           "slice_", "slice_raw", "squeeze", "take_along_axis", "topk", "var_mean", "where"]
