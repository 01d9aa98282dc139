"""Many ranks: processes and communicators, device meshes and sharding."""
from .communicator import Communicator

__all__ = ["Communicator"]
