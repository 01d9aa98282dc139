"""Segmentation of a concrete fusion into kernels, and the segmented-fusion dump."""
from .segmenter import segment
from .segments import Segment, SegmentedFusion, segmented_text

__all__ = ["Segment", "SegmentedFusion", "segment", "segmented_text"]
