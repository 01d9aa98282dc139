"""NVRTC compilation to cubin (cached in memory and on disk), module loading, launch."""
