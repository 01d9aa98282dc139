"""Segmentation of a concrete fusion into kernels, and the segmented-fusion dump."""
from .segmenter import Segment, SegmentedFusion, segment

__all__ = ["Segment", "SegmentedFusion", "segment"]
