"""``aiograd.nn.utils``: gradient clipping and parameter vectors, with torch 2.13 as oracle."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import aiograd as ag

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.timeout(60)

GRADS = [np.array([[3.0, -4.0], [0.5, 2.0]]), np.array([1.0, -2.0, 2.0], dtype=np.float32)]


def _params(lib: Any, grads: list[np.ndarray] = GRADS, skip: int | None = None) -> list[Any]:
    """Leaves with ``grads`` as their ``.grad`` (none for the one at ``skip``)."""
    params = []
    for i, g in enumerate(grads):
        p = lib.tensor(np.ones_like(g), requires_grad=True)
        if i != skip:
            p.grad = lib.tensor(g.copy())
        params.append(p)
    return params


def _grads(params: list[Any]) -> list[Any]:
    return [None if p.grad is None else p.grad.numpy().copy() for p in params]


def _assert_same(ours: Any, theirs: Any) -> None:
    if isinstance(theirs, list):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _assert_same(a, b)
    elif theirs is None:
        assert ours is None
    else:
        assert str(np.asarray(ours).dtype) == str(np.asarray(theirs).dtype)
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize("norm_type", [2.0, 1, 0.5, 3, "inf", float("inf"), 0])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_scales_grads_in_place_as_torch(norm_type: Any, max_norm: float) -> None:
    ours, theirs = _params(ag), _params(torch)
    grad_objects = [p.grad for p in ours]
    versions = [g._vc.value for g in grad_objects]
    total = ag.nn.utils.clip_grad_norm_(ours, max_norm, norm_type)
    t_total = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
    _assert_same(total.numpy(), t_total.numpy())
    _assert_same(_grads(ours), _grads(theirs))
    assert [p.grad for p in ours] == grad_objects  # the same tensors, written in place
    assert all(g._vc.value > v for g, v in zip(grad_objects, versions))


def test_clip_grad_norm_skips_params_without_grads_and_takes_one_tensor() -> None:
    ours, theirs = _params(ag, skip=0), _params(torch, skip=0)
    _assert_same(ag.nn.utils.clip_grad_norm_(ours, 1.0).numpy(),
                 torch.nn.utils.clip_grad_norm_(theirs, 1.0).numpy())
    _assert_same(_grads(ours), _grads(theirs))
    one, t_one = _params(ag)[0], _params(torch)[0]
    _assert_same(ag.nn.utils.clip_grad_norm_(one, 1.0).numpy(),
                 torch.nn.utils.clip_grad_norm_(t_one, 1.0).numpy())


def test_clip_grad_norm_of_nothing_is_a_float32_zero_and_warns_for_an_empty_generator() -> None:
    for lib in (ag, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            total = lib.nn.utils.clip_grad_norm_((p for p in []), 1.0)
        assert total.numpy().dtype == np.float32 and float(total) == 0.0
        assert [str(w.message) for w in caught] == [
            "`parameters` is an empty generator, no gradient clipping will occur."]


def test_clip_grad_norm_raises_for_a_nonfinite_norm_only_if_asked() -> None:
    bad = [np.array([1.0, np.inf])]
    messages = []
    for lib in (ag, torch):
        with pytest.raises(RuntimeError) as info:
            lib.nn.utils.clip_grad_norm_(_params(lib, bad), 1.0, error_if_nonfinite=True)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    ours, theirs = _params(ag, bad), _params(torch, bad)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nan gradients, silently as PyTorch's
        ag.nn.utils.clip_grad_norm_(ours, 1.0)
    torch.nn.utils.clip_grad_norm_(theirs, 1.0)
    _assert_same(_grads(ours), _grads(theirs))


def test_get_total_norm_then_clip_grads_with_norm_equals_clip_grad_norm_() -> None:
    ours, theirs = _params(ag), _params(torch)
    total = ag.nn.utils.get_total_norm([p.grad for p in ours], 3.0)
    t_total = torch.nn.utils.get_total_norm([p.grad for p in theirs], 3.0)
    _assert_same(total.numpy(), t_total.numpy())
    ag.nn.utils.clip_grads_with_norm_(ours, 2.0, total)
    torch.nn.utils.clip_grads_with_norm_(theirs, 2.0, t_total)
    _assert_same(_grads(ours), _grads(theirs))


def test_clip_grad_value_clamps_every_grad_in_place() -> None:
    ours, theirs = _params(ag, skip=1), _params(torch, skip=1)
    assert ag.nn.utils.clip_grad_value_(ours, 1.5) is None
    torch.nn.utils.clip_grad_value_(theirs, 1.5)
    _assert_same(_grads(ours), _grads(theirs))


def test_parameters_to_vector_is_recorded_and_vector_to_parameters_writes_them_back() -> None:
    for lib in (ag, torch):
        a = lib.tensor(np.arange(4.0).reshape(2, 2), requires_grad=True)
        b = lib.tensor(np.array([5.0, 6.0]), requires_grad=True)
        vec = lib.nn.utils.parameters_to_vector([a, b])
        assert vec.grad_fn.name() == "CatBackward0"
        np.testing.assert_array_equal(vec.detach().numpy(), [0, 1, 2, 3, 5, 6])
        lib.nn.utils.vector_to_parameters(vec.detach() * 10, [a, b])
        np.testing.assert_array_equal(a.detach().numpy(), [[0, 10], [20, 30]])
        np.testing.assert_array_equal(b.detach().numpy(), [50, 60])
        with pytest.raises(TypeError, match="expected torch.Tensor, but got"):
            lib.nn.utils.vector_to_parameters([1.0], [a])
