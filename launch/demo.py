"""The main job: define a fusion, print its IR, run it and check it against torch.

Runs on the GPU when one is present, else on the CPU.
"""
import torch

from hostir import DataType, FusionDefinition


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        bias = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        scale = fd.define_scalar(None, dtype=DataType.Double)
        b = fd.ops.broadcast_in_dim(bias, shape=x.shape(), broadcast_dims=[1])
        y = fd.ops.mul(fd.ops.tanh(fd.ops.add(x, b)), scale)
        total = fd.ops.sum(y, dims=[1], keepdim=False, dtype=DataType.Null)
        fd.add_output(y)
        fd.add_output(total)
    print(fd.fusion_ir())
    xs = torch.randn(64, 1024, device=device)
    bs = torch.randn(1024, device=device)
    y, total = fd.execute([xs, bs, 0.5])
    ref = torch.tanh(xs + bs) * 0.5
    torch.testing.assert_close(y, ref)
    torch.testing.assert_close(total, ref.sum(1), rtol=1e-4, atol=1e-4)
    print(f"ran on {device}: outputs {list(y.shape)} and {list(total.shape)} match torch")


if __name__ == "__main__":
    main()
