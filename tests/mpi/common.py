"""What the multi-rank scripts share (each runs as a script under mpirun:
`from common import full, check`)."""
import torch

from hostir.multidevice import Communicator

_draws = iter(range(10 ** 6))


def full(*shape, dtype=torch.float32):
    """A whole tensor, the same on every rank (the k-th draw is seeded by k)."""
    g = torch.Generator().manual_seed(next(_draws))
    return torch.randn(*shape, generator=g).to(dtype).to(Communicator.instance().device)


def check(name, got, want, rtol=1e-4, atol=1e-4, as_float=True):
    """`got` is close to `want` (compared as float32 unless `as_float` is off,
    which also checks the dtypes); prints the rank's ok line."""
    if as_float:
        got, want = got.float(), want.float()
    torch.testing.assert_close(got.cpu(), want.cpu(), rtol=rtol, atol=atol)
    print(f"rank {Communicator.instance().rank()}: {name} ok", flush=True)
