"""Host layer: plans per concretization key, and running them."""
