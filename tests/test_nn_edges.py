"""nn functions at their edges, against torch 2.13 (found by a differential probe).

What a backward saves is the tensor PyTorch saves, version-checked: an in-place
write after the forward either leaves the gradient right (the output of
``layer_norm`` no longer shares the array its backward keeps) or raises, never
silently changes it. Losses and optimizers raise PyTorch's errors for the dtypes
and values PyTorch refuses.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import aiograd as ag
import aiograd.nn.functional as AF

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def outcome(run):
    """``run()``'s value as a nested list, or the type and message of its error."""
    try:
        value = run()
    except Exception as exc:  # noqa: BLE001  (compared between the libraries)
        return type(exc).__name__, str(exc)
    return np.asarray(value.detach().numpy() if hasattr(value, "detach") else value).tolist()


def both(program):
    """``program(lib, F, grad)`` under torch and aiograd."""
    t = outcome(lambda: program(torch, TF, lambda o, i: torch.autograd.grad(o, i)[0]))
    a = outcome(lambda: program(ag, AF, lambda o, i: ag.grad_sync(o, i)[0]))
    return t, a


def close(t, a):
    if isinstance(t, tuple) or isinstance(a, tuple):
        assert t == a
    else:
        np.testing.assert_allclose(np.asarray(a), np.asarray(t), rtol=1e-6, atol=1e-6)


def test_writing_layer_norms_output_in_place_leaves_its_gradient_right():
    def program(lib, F, grad):
        x = lib.tensor([[1.0, 2.0, 4.0]], dtype=lib.float64, requires_grad=True)
        h = F.layer_norm(x, (3,))
        h += 1.0
        return grad((h * h).sum(), x)

    close(*both(program))


def test_layer_norm_input_written_in_place_before_backward_raises():
    def program(lib, F, grad):
        x = lib.tensor([[1.0, 2.0, 4.0]], dtype=lib.float64, requires_grad=True)
        y = x * 1
        h = F.layer_norm(y, (3,))
        y.mul_(2)
        return grad(h.sum(), x)

    t, a = both(program)
    assert t[0] == a[0] == "RuntimeError"
    assert "modified by an inplace operation" in a[1]


def test_embedding_indices_written_in_place_after_the_forward_raise():
    def program(lib, F, grad):
        w = lib.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
        idx = lib.tensor([0, 1])
        e = F.embedding(idx, w)
        idx[0] = 3
        return grad(e.sum(), w)

    t, a = both(program)
    assert t[0] == a[0] == "RuntimeError"


def test_cross_entropy_target_written_in_place_after_the_forward_raises():
    def program(lib, F, grad):
        x = lib.tensor([[1.0, 2.0, 4.0], [0.0, -1.0, 3.0]], requires_grad=True)
        target = lib.tensor([0, 2])
        loss = F.cross_entropy(x, target)
        target[0] = 1
        return grad(loss, x)

    t, a = both(program)
    assert t[0] == a[0] == "RuntimeError"


def test_cross_entropy_of_a_1d_input_saves_its_0d_target():
    def program(lib, F, grad):
        x = lib.tensor([1.0, 2.0, 4.0], requires_grad=True)
        return grad(F.cross_entropy(x, lib.tensor(1)), x)

    close(*both(program))


def test_smoothed_cross_entropy_weight_written_in_place_after_the_forward_raises():
    def program(lib, F, grad):
        x = lib.tensor([[1.0, 2.0, 4.0], [0.0, -1.0, 3.0]], requires_grad=True)
        w = lib.tensor([1.0, 2.0, 3.0])
        loss = F.cross_entropy(x, lib.tensor([0, 2]), w, label_smoothing=0.2)
        w.mul_(10)
        return grad(loss, x)

    t, a = both(program)
    assert t[0] == a[0] == "RuntimeError"


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("values", [((1, 2), (0, 0)), ((1, 2), (0.0, 0.0)), ((1.0, 2.0), (0, 0)),
                                    ((True, False), (False, False))])
@pytest.mark.parametrize("loss", ["mse_loss", "l1_loss"])
def test_pointwise_losses_promote_and_refuse_dtypes_as_pytorch(loss, values, reduction):
    def program(lib, F, grad):
        return getattr(F, loss)(lib.tensor(values[0]), lib.tensor(values[1]), reduction=reduction)

    close(*both(program))


TARGETS = {
    "int32 target": lambda lib: lib.tensor([1, 0], dtype=lib.int32),
    "bool target": lambda lib: lib.tensor([True, False]),
    "float target": lambda lib: lib.tensor([1.0, 0.0]),
    "int32 target of another batch": lambda lib: lib.tensor([1, 0, 1], dtype=lib.int32),
    "2-D int32 target": lambda lib: lib.zeros(2, 2, dtype=lib.int32),
    "uint8 target": lambda lib: lib.tensor([1, 0], dtype=lib.uint8),
}


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("target", list(TARGETS))
def test_class_index_targets_other_than_long_or_byte_raise_after_the_shape_checks(loss, target):
    def program(lib, F, grad):
        return getattr(F, loss)(lib.tensor([[1.0, 2.0], [3.0, 4.0]]), TARGETS[target](lib))

    t, a = both(program)
    if isinstance(t, tuple):
        assert a[0] == t[0]
        assert a[1].startswith(t[1].rstrip("."))  # aiograd may add what shape it expected
    else:
        close(t, a)


def test_layer_norm_over_no_dim_raises():
    t, a = both(lambda lib, F, grad: F.layer_norm(lib.tensor([[1.0, 2.0]]), ()))
    assert t == a


@pytest.mark.parametrize("option", ["lr", "eps", "weight_decay"])
@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_adam_refuses_a_nan_hyperparameter(name, option):
    def build(lib):
        return getattr(lib.optim, name)([lib.zeros(1, requires_grad=True)], **{option: math.nan})

    t, a = outcome(lambda: build(torch)), outcome(lambda: build(ag))
    assert t == a and t[0] == "ValueError"
