"""hostir: a host-IR runtime for multi-GPU programs made of fused kernels."""
from . import multidevice
from .frontend import FusionDefinition, Scalar, Tensor
from .host.builder import HostProgram, max, min
from .ir.dtypes import DataType
from .ir.errors import (DefinitionError, ExecutionError, HostirError, InputError,
                        UnsupportedError, VerificationError)
from .multidevice import (Communicator, DeviceMesh, ParallelType, Partial, Replicate, Shard,
                          dtensor_execute)

__all__ = ["FusionDefinition", "HostProgram", "Tensor", "Scalar", "DataType", "HostirError", "DefinitionError",
           "InputError", "ExecutionError", "UnsupportedError", "VerificationError", "multidevice",
           "Communicator", "DeviceMesh", "ParallelType", "Shard", "Replicate", "Partial",
           "dtensor_execute"]
__version__ = "0.1.0"
