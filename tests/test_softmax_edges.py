"""softmax / log_softmax at their edges: integer and bool inputs, the ``dtype`` argument,
dims of length 0, and cross_entropy on an empty batch.

PyTorch is the oracle for values, dtypes, gradients and errors.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import aiograd as ag
import aiograd.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

NON_FLOAT_DTYPES = ["uint8", "int8", "int16", "int32", "int64", "bool"]
# (shape, dim): the last dim and a 0-d input take PyTorch's ``lastdim`` kernel, others not.
NON_EMPTY_DIMS = [((2, 3), -1), ((2, 3), 1), ((2, 3), 0), ((3,), 0), ((), 0), ((2, 3, 1), 1)]
EMPTY_DIMS = [((3, 0), -1), ((0, 3), 0), ((0,), 0), ((3, 0), 0), ((0, 3), 1)]


def _entry_points(lib, fn_module, name):
    """The three spellings of ``name`` (``softmax``/``log_softmax``): module, method, functional."""
    return {
        "module": lambda x, dim: getattr(lib, name)(x, dim),
        "method": lambda x, dim: getattr(x, name)(dim),
        "functional": lambda x, dim: getattr(fn_module, name)(x, dim),
    }


def _both(values, dtype, requires_grad=False):
    """The same values as an aiograd and a PyTorch tensor of ``dtype`` (a name)."""
    a = np.asarray(values).astype(dtype)
    return (ag.tensor(a, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def _raised(fn, *args):
    with pytest.raises(Exception) as info:
        fn(*args)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("entry", ["module", "method", "functional"])
@pytest.mark.parametrize("dtype", NON_FLOAT_DTYPES)
@pytest.mark.parametrize(("shape", "dim"), NON_EMPTY_DIMS)
def test_non_float_input_raises_pytorchs_not_implemented_error(name, entry, dtype, shape, dim):
    x, tx = _both(np.ones(shape), dtype)
    ours = _raised(_entry_points(ag, F, name)[entry], x, dim)
    theirs = _raised(_entry_points(torch, TF, name)[entry], tx, dim)
    assert ours == theirs
    assert ours[0] is NotImplementedError


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", NON_FLOAT_DTYPES)
@pytest.mark.parametrize(("shape", "dim"), EMPTY_DIMS)
def test_empty_non_float_input_gives_empty_result_of_its_dtype(name, dtype, shape, dim):
    x, tx = _both(np.zeros(shape), dtype)
    out, t_out = getattr(ag, name)(x, dim), getattr(torch, name)(tx, dim)
    assert out.shape == tuple(t_out.shape)
    assert out.numpy().dtype == t_out.numpy().dtype


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", ["int64", "uint8", "bool"])
@pytest.mark.parametrize("to", ["float32", "float64"])
def test_dtype_argument_computes_non_float_input_in_that_dtype(name, dtype, to):
    x, tx = _both([[0, 1, 2], [3, 1, 0]], dtype)
    ours, theirs = getattr(ag, to), getattr(torch, to)
    results = [
        (getattr(F, name)(x, 1, dtype=ours), getattr(TF, name)(tx, 1, dtype=theirs)),
        (getattr(ag, name)(x, 1, ours), getattr(torch, name)(tx, 1, theirs)),
        (getattr(x, name)(0, dtype=ours), getattr(tx, name)(0, dtype=theirs)),
    ]
    for out, t_out in results:
        assert out.numpy().dtype == t_out.numpy().dtype == np.dtype(to)
        np.testing.assert_allclose(out.numpy(), t_out.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_dtype_argument_of_an_integer_type_raises_for_float_input(name):
    x, tx = _both([1.0, 2.0], "float32")
    ours = _raised(lambda: getattr(F, name)(x, 0, dtype=ag.int32))
    theirs = _raised(lambda: getattr(TF, name)(tx, 0, dtype=torch.int32))
    assert ours == theirs


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_dtype_argument_gradient_reaches_input_in_its_dtype(name):
    values = np.random.default_rng(0).standard_normal((2, 3))
    x, tx = _both(values, "float32", requires_grad=True)
    w = np.random.default_rng(1).standard_normal((2, 3))
    (getattr(ag, name)(x, 1, ag.float64) * ag.tensor(w)).sum().backward_sync()
    (getattr(torch, name)(tx, 1, torch.float64) * torch.tensor(w)).sum().backward()
    assert x.grad.numpy().dtype == tx.grad.numpy().dtype == np.float32
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("entry", ["module", "method", "functional"])
@pytest.mark.parametrize(("shape", "dim"), EMPTY_DIMS)
def test_empty_float_input_gives_empty_result_and_empty_gradient(name, entry, shape, dim):
    x, tx = _both(np.zeros(shape), "float32", requires_grad=True)
    out = _entry_points(ag, F, name)[entry](x, dim)
    t_out = _entry_points(torch, TF, name)[entry](tx, dim)
    assert out.shape == tuple(t_out.shape)
    assert out.dtype == ag.float32
    assert out.grad_fn.name() == type(t_out.grad_fn).__name__
    out.sum().backward_sync()
    t_out.sum().backward()
    assert x.grad.shape == tuple(tx.grad.shape)
    assert x.grad.numpy().dtype == tx.grad.numpy().dtype


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize(("shape", "dim"), EMPTY_DIMS)
def test_empty_float_input_second_order_gradient_is_empty(name, shape, dim):
    x, tx = _both(np.zeros(shape), "float64", requires_grad=True)
    (g,) = ag.grad_sync(getattr(ag, name)(x, dim).sum(), x, create_graph=True)
    (tg,) = torch.autograd.grad(getattr(torch, name)(tx, dim).sum(), tx, create_graph=True)
    (gg,) = ag.grad_sync(g.sum(), x, allow_unused=True)
    (tgg,) = torch.autograd.grad(tg.sum(), tx, allow_unused=True)
    assert g.shape == tuple(tg.shape)
    assert (gg is None) == (tgg is None)
    if gg is not None:
        assert gg.shape == tuple(tgg.shape)


EMPTY_BATCH_CASES = {
    "fused": ((0, 3), np.zeros(0, np.int64), {}),
    "weight": ((0, 3), np.zeros(0, np.int64), {"weight": np.ones(3, np.float32)}),
    "label_smoothing": ((0, 3), np.zeros(0, np.int64), {"label_smoothing": 0.1}),
    "ignore_index_in_range": ((0, 3), np.zeros(0, np.int64), {"ignore_index": 1}),
    "spatial": ((0, 3, 4), np.zeros((0, 4), np.int64), {}),
    "class_probabilities": ((0, 3), np.zeros((0, 3), np.float32), {}),
    "no_classes_probabilities": ((2, 0), np.zeros((2, 0), np.float32), {}),
}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", list(EMPTY_BATCH_CASES))
def test_cross_entropy_on_empty_batch_matches_pytorch_without_warnings(case, reduction):
    shape, target, kwargs = EMPTY_BATCH_CASES[case]
    x, tx = _both(np.zeros(shape), "float32", requires_grad=True)
    ag_kwargs = {k: ag.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    t_kwargs = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss = F.cross_entropy(x, ag.tensor(target), reduction=reduction, **ag_kwargs)
        loss.sum().backward_sync()
    t_loss = TF.cross_entropy(tx, torch.tensor(target), reduction=reduction, **t_kwargs)
    t_loss.sum().backward()
    np.testing.assert_array_equal(loss.detach().numpy(), t_loss.detach().numpy())
    assert loss.detach().numpy().dtype == t_loss.detach().numpy().dtype
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    assert x.grad.numpy().dtype == tx.grad.numpy().dtype


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_fused_cross_entropy_on_empty_batch_has_empty_second_order_gradient(reduction):
    x, tx = _both(np.zeros((0, 3)), "float64", requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss = F.cross_entropy(x, np.zeros(0, np.int64), reduction=reduction)
        assert loss.grad_fn.name() == "CrossEntropyLossBackward0"
        (g,) = ag.grad_sync(loss, x, create_graph=True)
    t_loss = TF.cross_entropy(tx, torch.zeros(0, dtype=torch.long), reduction=reduction)
    (tg,) = torch.autograd.grad(t_loss, tx, create_graph=True)
    np.testing.assert_array_equal(g.detach().numpy(), tg.detach().numpy())
    assert g.shape == tuple(tg.shape) == (0, 3)
