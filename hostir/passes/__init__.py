"""Fusion -> Fusion passes (pre-segmentation rewrites) and alias analysis."""
