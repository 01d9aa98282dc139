"""fd.ops.batch_norm (nvFuser's composite) against torch.nn.functional.batch_norm
on random data: training and inference, channels first and last, with and
without weight, bias and running statistics, odd and size-1 extents, and the
running statistics updated in place call after call."""
import pytest
import torch
import torch.nn.functional as F

from hostir import DataType, DefinitionError, FusionDefinition
from ops_util import TEST_DEVICE, check, rand, to_device_exact

D = DataType
# (shape with channels at dim 1, channels_last)
BN_CASES = [((4, 3, 5, 6), False), ((4, 5, 6, 3), True), ((2, 7), False), ((1, 3, 9), False),
            ((5, 1, 2, 2), False), ((3, 2, 4, 1, 5), False), ((2, 3, 4, 7), True)]


def _bn_fusion(ndim, dtype, training, channels_last, weight=True, bias=True, running=True, stat=D.Float):
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1] * ndim, contiguity=True, dtype=dtype)
        w = fd.define_tensor([-1], contiguity=True, dtype=stat) if weight else None
        b = fd.define_tensor([-1], contiguity=True, dtype=stat) if bias else None
        rm = fd.define_tensor([-1], contiguity=True, dtype=stat) if running else None
        rv = fd.define_tensor([-1], contiguity=True, dtype=stat) if running else None
        momentum = fd.define_scalar(None, dtype=D.Double)
        y, mean, invstd = fd.ops.batch_norm(x, w, b, rm, rv, momentum, fd.define_scalar(1e-5),
                                            training, channels_last=channels_last)
        fd.add_output(y)
        fd.add_output(mean)
        fd.add_output(invstd)
    return fd


def _on_device(t):
    return to_device_exact(t, TEST_DEVICE) if TEST_DEVICE != "cpu" else t


@pytest.mark.parametrize("case", BN_CASES, ids=str)
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_batch_norm(case, training):
    """Output, mean and invstd as torch's (the batch's in training, the running
    statistics' in inference); in training the running statistics move toward
    the batch's (the unbiased variance), in place, on every call."""
    shape, channels_last = case
    c = shape[-1] if channels_last else shape[1]
    fd = _bn_fusion(len(shape), D.Float, training, channels_last)
    w, b = rand((c,), D.Float), rand((c,), D.Float)
    rm, rv = rand((c,), D.Float), rand((c,), D.Float, 0.5, 2.0)
    ref_rm, ref_rv = rm.double(), rv.double()   # torch's, updated in place in float64
    rm, rv = _on_device(rm), _on_device(rv)     # hostir's, updated in place
    for call in range(2):
        x = rand(shape, D.Float)
        xc = (x.movedim(-1, 1) if channels_last else x).double()
        dims = [d for d in range(x.ndim) if d != 1]
        if training:
            e_mean, e_invstd = xc.mean(dims), torch.rsqrt(xc.var(dims, correction=0) + 1e-5)
        else:
            e_mean, e_invstd = ref_rm.clone(), torch.rsqrt(ref_rv + 1e-5)
        expected = F.batch_norm(xc, ref_rm, ref_rv, w.double(), b.double(), training, 0.25, 1e-5)
        y, mean, invstd = (o.cpu() for o in fd.execute([_on_device(t) for t in (x, w, b)] + [rm, rv, 0.25]))
        check(y, (expected.movedim(1, -1) if channels_last else expected).float(), "reduction")
        check(mean, e_mean.float(), "reduction")
        check(invstd, e_invstd.float(), "reduction", 1e-4, 1e-4)
        check(rm.cpu(), ref_rm.float(), "reduction")
        check(rv.cpu(), ref_rv.float(), "reduction", 1e-4, 1e-4)


@pytest.mark.parametrize("weight,bias,running", [(False, False, False), (True, False, True), (False, True, False)])
def test_batch_norm_optional_operands(weight, bias, running):
    """Without weight, bias or running statistics (training then uses the
    batch's and updates nothing)."""
    shape, c = (3, 4, 5), 4
    fd = _bn_fusion(3, D.Float, True, False, weight, bias, running)
    x, w, b = rand(shape, D.Float), rand((c,), D.Float), rand((c,), D.Float)
    rm, rv = rand((c,), D.Float), rand((c,), D.Float, 0.5, 2.0)
    e_rm, e_rv = (rm.double(), rv.double()) if running else (None, None)
    expected = F.batch_norm(x.double(), e_rm, e_rv, w.double() if weight else None,
                            b.double() if bias else None, True, 0.1, 1e-5)
    rm_d, rv_d = _on_device(rm), _on_device(rv)
    args = [_on_device(x)] + ([_on_device(w)] if weight else []) + ([_on_device(b)] if bias else []) \
        + ([rm_d, rv_d] if running else []) + [0.1]
    y, mean, _ = (o.cpu() for o in fd.execute(args))
    check(y, expected.float(), "reduction")
    check(mean, x.double().mean((0, 2)).float(), "reduction")
    if running:
        check(rm_d.cpu(), e_rm.float(), "reduction")
        check(rv_d.cpu(), e_rv.float(), "reduction", 1e-4, 1e-4)


def test_batch_norm_of_half_input_with_float_statistics():
    """A Half arg with Float weight and running statistics (the usual mixed
    precision): as nvFuser's composite, the output takes the promoted type
    (Float: the Half values times the Float weight), the statistics stay Float,
    updated in place."""
    shape, c = (8, 3, 4, 4), 3
    fd = _bn_fusion(4, D.Half, True, False)
    x, w, b = rand(shape, D.Half), rand((c,), D.Float), rand((c,), D.Float)
    rm, rv = rand((c,), D.Float), rand((c,), D.Float, 0.5, 2.0)
    e_rm, e_rv = rm.double().clone(), rv.double().clone()
    expected = F.batch_norm(x.double(), e_rm, e_rv, w.double(), b.double(), True, 0.1, 1e-5)
    rm_d, rv_d = _on_device(rm), _on_device(rv)
    y, mean, invstd = (o.cpu() for o in fd.execute([_on_device(t) for t in (x, w, b)] + [rm_d, rv_d, 0.1]))
    assert y.dtype == torch.float32 and rm_d.dtype == torch.float32
    check(y, expected.float(), "reduction", 1e-2, 1e-2)
    check(rm_d.cpu(), e_rm.float(), "reduction", 1e-3, 1e-3)
    check(rv_d.cpu(), e_rv.float(), "reduction", 1e-3, 1e-3)


def test_batch_norm_bad_definitions():
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 3, -1], dtype=D.Float)
        x1 = fd.define_tensor([-1], dtype=D.Float)
        w4, wi = fd.define_tensor([4], dtype=D.Float), fd.define_tensor([-1], dtype=D.Int)
        rm = fd.define_tensor([-1], dtype=D.Float)
        with pytest.raises(DefinitionError, match=r"batch_norm: arg T1 .* at least 2 dims"):
            fd.ops.batch_norm(x1, None, None, None, None, 0.1, 1e-5, True)
        with pytest.raises(DefinitionError, match="batch_norm: weight T2 .* has 4 entries, the arg has 3 channels"):
            fd.ops.batch_norm(x, w4, None, None, None, 0.1, 1e-5, True)
        with pytest.raises(DefinitionError, match="batch_norm: bias T3 .* must be a 1-D float tensor"):
            fd.ops.batch_norm(x, None, wi, None, None, 0.1, 1e-5, True)
        with pytest.raises(DefinitionError, match="running_mean and running_var come in pairs"):
            fd.ops.batch_norm(x, None, None, rm, None, 0.1, 1e-5, True)
        with pytest.raises(DefinitionError, match="training and channels_last must be bools"):
            fd.ops.batch_norm(x, None, None, None, None, 0.1, 1e-5, 1)
        with pytest.raises(DefinitionError, match="running_var .* is updated in place, so it must be an input"):
            fd.ops.batch_norm(x, None, None, rm, fd.ops.abs(rm), 0.1, 1e-5, True)
        fd.add_output(x)
