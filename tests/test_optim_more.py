"""aiograd.optim's RMSprop and Adagrad against torch.optim: trajectories, the live state,
the groups' defaults, state_dict round trips and the constructors' checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aiograd as ag

torch = pytest.importorskip("torch")
import test_optim_parity as parity  # noqa: E402  (its helpers need torch)
from test_optim_parity import W0, _param  # noqa: E402

pytestmark = pytest.mark.timeout(60)

GRADS = [np.random.RandomState(k).randn(3, 4).astype(np.float32) for k in range(6)]

OPTIMIZERS: dict[str, Callable[[Any, list[Any]], Any]] = {
    "rmsprop": lambda lib, ps: lib.optim.RMSprop(ps),
    "rmsprop_momentum_wd": lambda lib, ps: lib.optim.RMSprop(ps, lr=0.05, momentum=0.9,
                                                             weight_decay=0.1),
    "rmsprop_centered_max": lambda lib, ps: lib.optim.RMSprop(ps, lr=0.01, alpha=0.9,
                                                              centered=True, maximize=True),
    "rmsprop_all": lambda lib, ps: lib.optim.RMSprop(ps, lr=0.02, momentum=0.5, eps=1e-3,
                                                     centered=True, weight_decay=0.01),
    "adagrad": lambda lib, ps: lib.optim.Adagrad(ps),
    "adagrad_decay_wd": lambda lib, ps: lib.optim.Adagrad(ps, lr=0.1, lr_decay=0.05,
                                                          weight_decay=0.1),
    "adagrad_init_max": lambda lib, ps: lib.optim.Adagrad(ps, lr=0.1,
                                                          initial_accumulator_value=0.5,
                                                          eps=1e-4, maximize=True),
}


def _steps(lib: Any, opt: Any, params: list[Any], grads: list[np.ndarray] = GRADS) -> None:
    parity._steps(lib, opt, params, grads)


def _assert_state_equal(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    parity._assert_state_equal(ours, theirs, rtol=1e-5, atol=1e-6)


def _groups(opt: Any) -> list[list[tuple[str, Any]]]:
    return [[(k, v) for k, v in g.items() if k != "params"] for g in opt.param_groups]


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_trajectory_and_state_match_torch(name: str) -> None:
    runs = []
    for lib in (ag, torch):
        p = _param(lib)
        opt = OPTIMIZERS[name](lib, [p])
        _steps(lib, opt, [p])
        runs.append((p, opt))
    (p, opt), (tp, topt) = runs
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert all(type(v) is ag.Tensor for v in opt.state[p].values())
    _assert_state_equal(opt.state[p], topt.state[tp])
    assert opt.state[p]["step"].dtype == np.float32
    assert opt.state[p]["step"].item() == len(GRADS)
    assert _groups(opt) == _groups(topt)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_state_dict_round_trip_continues_the_trajectory(name: str) -> None:
    results = []
    for lib in (ag, torch):
        p = _param(lib)
        opt = OPTIMIZERS[name](lib, [p])
        _steps(lib, opt, [p], GRADS[:3])
        saved = opt.state_dict()
        p2 = _param(lib, p.detach().numpy())
        opt2 = OPTIMIZERS[name](lib, [p2])
        opt2.load_state_dict(saved)
        _steps(lib, opt2, [p2], GRADS[3:])
        results.append((p2, opt2))
    (p, opt), (tp, topt) = results
    _assert_state_equal(opt.state[p], topt.state[tp])
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert _groups(opt) == _groups(topt)


@pytest.mark.parametrize("name", ["rmsprop_all", "adagrad_decay_wd"])
def test_torch_state_dict_loads(name: str) -> None:
    tp = _param(torch)
    topt = OPTIMIZERS[name](torch, [tp])
    _steps(torch, topt, [tp], GRADS[:3])
    p = _param(ag, tp.detach().numpy())
    opt = OPTIMIZERS[name](ag, [p])
    opt.load_state_dict(topt.state_dict())
    _steps(ag, opt, [p], GRADS[3:])
    _steps(torch, topt, [tp], GRADS[3:])
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_adagrad_makes_state_for_every_parameter_at_construction() -> None:
    states = []
    for lib in (ag, torch):
        a, b = _param(lib), _param(lib, W0[:2])
        opt = lib.optim.Adagrad([a, b], initial_accumulator_value=0.25)
        a.grad = lib.tensor(GRADS[0])
        opt.step()
        states.append((opt.state[a], opt.state[b]))
    for ours, theirs in zip(*states):
        _assert_state_equal(ours, theirs)


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad"])
def test_defaults_equal_torch(name: str) -> None:
    ours = getattr(ag.optim, name)([_param(ag)])
    theirs = getattr(torch.optim, name)([_param(torch)])
    assert ours.defaults == theirs.defaults


def test_tensor_lr_matches_torch() -> None:
    runs = []
    for lib in (ag, torch):
        p = _param(lib)
        opt = lib.optim.RMSprop([p], lr=lib.tensor(0.03), momentum=0.3)
        _steps(lib, opt, [p])
        runs.append(p.detach().numpy())
    np.testing.assert_allclose(*runs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("name", "kwargs"), [
    ("RMSprop", {"lr": -1.0}),
    ("RMSprop", {"eps": -1.0}),
    ("RMSprop", {"momentum": -0.1}),
    ("RMSprop", {"weight_decay": -0.1}),
    ("RMSprop", {"alpha": -0.1}),
    ("Adagrad", {"lr": -1.0}),
    ("Adagrad", {"lr_decay": -1.0}),
    ("Adagrad", {"weight_decay": -1.0}),
    ("Adagrad", {"initial_accumulator_value": -1.0}),
    ("Adagrad", {"eps": -1.0}),
])
def test_bad_hyperparameters_raise_torchs_value_error(name: str, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError) as theirs:
        getattr(torch.optim, name)([_param(torch)], **kwargs)
    with pytest.raises(ValueError, match=str(theirs.value)):
        getattr(ag.optim, name)([_param(ag)], **kwargs)


@pytest.mark.parametrize(("name", "flag"), [("RMSprop", "differentiable"),
                                             ("RMSprop", "capturable"),
                                             ("Adagrad", "differentiable")])
def test_unsupported_flags_are_refused(name: str, flag: str) -> None:
    with pytest.raises(NotImplementedError, match=flag):
        getattr(ag.optim, name)([_param(ag)], **{flag: True})


def test_parameter_without_grad_is_left_alone() -> None:
    p, q = _param(ag), _param(ag)
    opt = ag.optim.RMSprop([p, q], lr=0.1)
    p.grad = ag.tensor(GRADS[0])
    opt.step()
    np.testing.assert_array_equal(q.detach().numpy(), W0)
    assert q not in opt.state
