"""aiograd.optim.AdamW (and Adam's decoupled_weight_decay) against torch.optim."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aiograd as ag
from aiograd.optim import Adam, AdamW, Optimizer

pytestmark = pytest.mark.timeout(60)

torch = pytest.importorskip("torch")

STEPS = 10


def _start() -> list[np.ndarray]:
    rng = np.random.RandomState(0)
    return [rng.randn(4, 3).astype(np.float32), rng.randn(4).astype(np.float32)]


def _batch(step: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(100 + step)
    return rng.randn(8, 3).astype(np.float32), rng.randn(8, 4).astype(np.float32)


def _loss(lib: Any, params: list[Any], step: int) -> Any:
    w, b = params
    x, y = (lib.tensor(a) for a in _batch(step))
    return ((x @ w.transpose(0, 1) + b - y) ** 2).mean()


def _train(lib: Any, make: Callable[[list[Any]], Any], steps: range,
           params: list[Any] | None = None, opt: Any = None) -> tuple[list[Any], Any]:
    if params is None:
        params = [lib.tensor(a.copy(), requires_grad=True) for a in _start()]
    if opt is None:
        opt = make(params)
    for step in steps:
        opt.zero_grad()
        loss = _loss(lib, params, step)
        if lib is torch:
            loss.backward()
        else:
            ag.backward_sync(loss)
        opt.step()
    return params, opt


def _assert_same_params(ours: list[Any], theirs: list[Any]) -> None:
    for p, tp in zip(ours, theirs):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5,
                                   atol=1e-7)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(lr=0.05, weight_decay=0.1),
        dict(lr=0.05, weight_decay=0.1, amsgrad=True),
        dict(lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.3, maximize=True),
        dict(lr=0.05, weight_decay=0.0),
    ],
)
def test_adamw_trajectory_matches_torch(kwargs: dict[str, Any]):
    for step_count in (1, STEPS):
        ours, _ = _train(ag, lambda ps: AdamW(ps, **kwargs), range(step_count))
        theirs, _ = _train(torch, lambda ps: torch.optim.AdamW(ps, **kwargs), range(step_count))
        _assert_same_params(ours, theirs)


def test_adamw_decays_the_parameter_not_the_gradient():
    # Adam folds the decay into the gradient; AdamW does not: the trajectories part.
    kwargs = dict(lr=0.05, weight_decay=0.5)
    coupled, _ = _train(ag, lambda ps: Adam(ps, **kwargs), range(STEPS))
    decoupled, _ = _train(ag, lambda ps: AdamW(ps, **kwargs), range(STEPS))
    assert not np.allclose(coupled[0].detach().numpy(), decoupled[0].detach().numpy())


def test_adam_with_decoupled_weight_decay_matches_torch_and_adamw():
    kwargs = dict(lr=0.05, weight_decay=0.2, decoupled_weight_decay=True)
    ours, _ = _train(ag, lambda ps: Adam(ps, **kwargs), range(STEPS))
    theirs, _ = _train(torch, lambda ps: torch.optim.Adam(ps, **kwargs), range(STEPS))
    adamw, _ = _train(ag, lambda ps: AdamW(ps, lr=0.05, weight_decay=0.2), range(STEPS))
    _assert_same_params(ours, theirs)
    _assert_same_params(ours, adamw)


def test_adamw_param_groups_keep_their_own_weight_decay():
    def groups(ps: list[Any]) -> list[dict[str, Any]]:
        return [{"params": [ps[0]], "weight_decay": 0.5}, {"params": [ps[1]]}]

    ours, _ = _train(ag, lambda ps: AdamW(groups(ps), lr=0.05), range(STEPS))
    theirs, _ = _train(torch, lambda ps: torch.optim.AdamW(groups(ps), lr=0.05), range(STEPS))
    _assert_same_params(ours, theirs)


def test_adamw_defaults_match_torch():
    ours = AdamW([ag.zeros(1, requires_grad=True)]).param_groups[0]
    theirs = torch.optim.AdamW([torch.zeros(1, requires_grad=True)]).param_groups[0]
    for key in ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize",
                "decoupled_weight_decay"):
        assert ours[key] == theirs[key], key


def test_adamw_state_dict_round_trip_resumes_the_same_trajectory():
    kwargs = dict(lr=0.05, weight_decay=0.1, amsgrad=True)
    straight, _ = _train(ag, lambda ps: AdamW(ps, **kwargs), range(STEPS))

    params, opt = _train(ag, lambda ps: AdamW(ps, **kwargs), range(4))
    saved = opt.state_dict()
    assert set(saved["state"][0]) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
    assert saved["state"][0]["step"] == 4
    resumed = AdamW(params, lr=0.5, amsgrad=True)  # lr and weight_decay come back
    resumed.load_state_dict(saved)
    assert resumed.param_groups[0]["lr"] == 0.05
    assert resumed.param_groups[0]["weight_decay"] == 0.1
    _train(ag, None, range(4, STEPS), params=params, opt=resumed)  # type: ignore[arg-type]
    for a, b in zip(params, straight):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_adamw_loading_an_adam_state_dict_keeps_the_decay_decoupled():
    results = []
    for lib, adam, adamw in ((ag, Adam, AdamW), (torch, torch.optim.Adam, torch.optim.AdamW)):
        params, opt = _train(lib, lambda ps, adam=adam: adam(ps, lr=0.05, weight_decay=0.1),
                             range(3))
        loaded = adamw(params)
        loaded.load_state_dict(opt.state_dict())
        assert loaded.param_groups[0]["decoupled_weight_decay"] is True
        results.append(_train(lib, None, range(3, 6), params=params, opt=loaded)[0])
    _assert_same_params(*results)


@pytest.mark.parametrize("kwargs, message", [
    (dict(lr=-1.0), "Invalid learning rate: -1.0"),
    (dict(eps=-1e-8), "Invalid epsilon value: -1e-08"),
    (dict(betas=(1.0, 0.999)), "Invalid beta parameter at index 0: 1.0"),
    (dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    (dict(weight_decay=-0.1), "Invalid weight_decay value: -0.1"),
])
def test_adamw_rejects_what_torch_rejects(kwargs: dict[str, Any], message: str):
    for lib, cls in ((ag, AdamW), (torch, torch.optim.AdamW)):
        with pytest.raises(ValueError, match=f"^{message}$"):
            cls([lib.zeros(1, requires_grad=True)], **kwargs)


def test_adamw_is_an_optimizer_exported_from_aiograd_optim():
    import aiograd.optim

    assert "AdamW" in aiograd.optim.__all__
    assert isinstance(AdamW([ag.zeros(1, requires_grad=True)]), Optimizer)
