"""Issue 26, trap 2 (the parts not swept by test_public_sweep): the checkpoint module is
reachable, version-counter errors speak of aiograd, and NumPy operands promote by
PyTorch's rules (docs/differences.md, "NumPy arrays as operands")."""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest

import aiograd as ag


def test_utils_checkpoint_is_the_module_as_in_pytorch():
    module = importlib.import_module("aiograd.utils.checkpoint")
    assert ag.utils.checkpoint is module
    assert ag.utils.checkpoint.checkpoint is inspect.unwrap(ag.checkpoint)
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = ag.utils.checkpoint.checkpoint(lambda t: (t * t).sum(), x, use_reentrant=False)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_version_counter_error_names_no_torch_type():
    a = ag.ones(3, requires_grad=True)
    b = a * 2
    c = b * b
    b.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as info:
        c.sum().backward()
    message = str(info.value)
    assert "torch" not in message
    assert "[float32 [3]]" in message


def test_version_counter_error_names_the_device(fake_backend):
    a = ag.ones(2, requires_grad=True, device="fake:0")
    b = a * 2
    c = b * b
    b.add_(1)
    with pytest.raises(RuntimeError, match=r"\[float32 \[2\] on fake:0\]"):
        c.sum().backward()


_ARRAYS = [
    np.ones(3, dtype=np.float64),
    np.ones(3, dtype=np.float32),
    np.ones(3, dtype=np.float16),
    np.ones(3, dtype=np.int64),
    np.ones(3, dtype=np.int32),
    np.ones(3, dtype=np.bool_),
    np.array(2.0),  # 0-d: a dimensionless operand
    np.array(2, dtype=np.int64),
]


@pytest.mark.parametrize("array", _ARRAYS, ids=lambda a: f"{a.dtype}{a.shape}")
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
@pytest.mark.parametrize("op", ["add", "mul", "radd"])
def test_ndarray_operand_promotes_as_torch_from_numpy(op, dtype, array):
    """An ndarray operand is the tensor ``from_numpy`` makes of it, then PyTorch's
    promotion (dimensioned operands first, category by category), never NumPy's."""
    torch = pytest.importorskip("torch")
    ours = ag.ones(3, dtype=getattr(ag, dtype))
    theirs = torch.ones(3, dtype=getattr(torch, dtype))
    other = torch.from_numpy(array.copy())
    if op == "add":
        got, want = ours + array, theirs + other
    elif op == "mul":
        got, want = ours * array, theirs * other
    else:
        got, want = array + ours, other + theirs
    assert isinstance(got, ag.Tensor)
    assert str(got.dtype) == str(want.dtype).removeprefix("torch.")
    np.testing.assert_allclose(got.numpy().astype(np.float64),
                               want.numpy().astype(np.float64))
