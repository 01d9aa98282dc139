import pytest
import torch

from hostir.ir.fusion import verify


def pytest_collection_modifyitems(config, items):
    has_gpu = torch.cuda.is_available()
    n_gpu = torch.cuda.device_count() if has_gpu else 0
    for item in items:
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if "multigpu" in item.keywords and n_gpu < 2:
            item.add_marker(pytest.mark.skip(reason="needs two CUDA GPUs"))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def run_and_verify(fd, inputs):
    """Execute `fd` after checking its fusion with the verifier."""
    out = fd.execute(inputs)
    verify(fd._fusion)
    return out
