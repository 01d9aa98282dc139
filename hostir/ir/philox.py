"""Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
3", SC 2011) on torch int64 tensors: the same bits as kernels/hostir.cuh's
hir_philox, so random ops give the same numbers on CPU and GPU. A value
depends only on (seed, offset, stream, linear element index): the counter is
(index low, index high, offset low, offset high + stream), the key the seed's
two 32-bit halves; none of it depends on how a launch is laid out."""
from __future__ import annotations

import math

import torch

M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
MASK = 0xFFFFFFFF


def _mulhilo(a: int, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(high, low) 32-bit words of the 64-bit product of constant a and b (both
    < 2^32), exactly, in int64 (each partial product stays below 2^48)."""
    bl, bh = b & 0xFFFF, b >> 16
    t, u = a * bl, a * bh
    hi = (u + (t >> 16)) >> 16
    lo = (((u & 0xFFFF) << 16) + t) & MASK
    return hi, lo


def philox(seed: int, offset: int, stream: int, index: torch.Tensor) -> list[torch.Tensor]:
    """The four 32-bit outputs (int64 tensors in [0, 2^32)) at each `index`."""
    index = index.to(torch.int64)
    c0, c1 = index & MASK, (index >> 32) & MASK
    c2 = torch.full_like(index, offset & MASK)
    c3 = torch.full_like(index, ((offset >> 32) + stream) & MASK)
    k0, k1 = seed & MASK, (seed >> 32) & MASK
    for r in range(10):
        if r:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        hi0, lo0 = _mulhilo(M0, c0)
        hi1, lo1 = _mulhilo(M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return [c0, c1, c2, c3]


def _words(seed, offset, stream, index: torch.Tensor, per: int) -> list[torch.Tensor]:
    """For each index, the `per` words it takes from the draw of counter
    index // (4 // per): consecutive elements share one draw (as a thread's
    vector of them does in a kernel)."""
    index = index.to(torch.int64)
    group = 4 // per
    x = torch.stack(philox(seed, offset, stream, index // group))  # [4, n]
    first = (index % group) * per
    return [x.gather(0, (first + k).unsqueeze(0)).squeeze(0) for k in range(per)]


def uniform(seed: int, offset: int, stream: int, index: torch.Tensor, double: bool) -> torch.Tensor:
    """Uniform in [0, 1): 24 random bits (float32: a word, four elements a draw)
    or 53 (float64: two words, two elements a draw), exact."""
    if double:
        a, b = _words(seed, offset, stream, index, 2)
        return ((a >> 5) * 67108864 + (b >> 6)).to(torch.float64) * 2.0 ** -53
    (a,) = _words(seed, offset, stream, index, 1)
    return (a >> 8).to(torch.float32) * 2.0 ** -24


def normal(seed: int, offset: int, stream: int, index: torch.Tensor, double: bool) -> torch.Tensor:
    """Standard normal by Box-Muller from two uniforms in (0, 1] and [0, 1).
    float64: four words, one element a draw. float32: four elements a draw,
    r cos t and r sin t of its first two words, then of its last two (as
    hir_rng_normal_f: a log, a square root and a sine-cosine per two elements)."""
    index = index.to(torch.int64)
    if double:
        w = _words(seed, offset, stream, index, 4)
        u1 = ((w[0] >> 5) * 67108864 + (w[1] >> 6) + 1).to(torch.float64) * 2.0 ** -53
        u2 = ((w[2] >> 5) * 67108864 + (w[3] >> 6)).to(torch.float64) * 2.0 ** -53
        return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos((2.0 * math.pi) * u2)
    x = torch.stack(philox(seed, offset, stream, index // 4))  # [4, n]
    first = ((index % 4) // 2) * 2
    a, b = (x.gather(0, (first + k).unsqueeze(0)).squeeze(0) for k in range(2))
    u1 = ((a >> 8) + 1).to(torch.float32) * 2.0 ** -24
    u2 = (b >> 8).to(torch.float32) * 2.0 ** -24
    t = (2.0 * math.pi) * u2
    r = torch.sqrt(-2.0 * torch.log(u1))
    return torch.where(index % 2 == 0, r * torch.cos(t), r * torch.sin(t))
