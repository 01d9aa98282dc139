"""Fusion IR: dtypes, symbolic scalars, tensor nodes, ops, printer, verifier,
reference evaluator. Imports nothing else of hostir."""
