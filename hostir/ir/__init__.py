"""Fusion IR: dtypes, symbolic scalars, the node type and its ops, printer,
verifier, reference evaluator. Imports nothing else of hostir."""
from . import ops  # noqa: F401  (every op's record is registered on import)
