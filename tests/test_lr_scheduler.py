"""aiograd.optim.lr_scheduler against torch.optim.lr_scheduler: lr sequences, state, errors."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aiograd as ag
from aiograd.optim import SGD, lr_scheduler

pytestmark = pytest.mark.timeout(60)

torch = pytest.importorskip("torch")

STEPS = 30
LRS = (0.1, 0.05, 0.3)


def _sgd(lib: Any, lrs: tuple[float, ...] = LRS) -> Any:
    """An SGD with one group per lr (aiograd's or torch's, after ``lib``)."""
    if lib is torch:
        groups = [{"params": [torch.zeros(2, requires_grad=True)], "lr": lr} for lr in lrs]
        return torch.optim.SGD(groups, lr=1.0)
    groups = [{"params": [ag.tensor(np.zeros(2), requires_grad=True)], "lr": lr} for lr in lrs]
    return SGD(groups, lr=1.0)


def _module(lib: Any) -> Any:
    return torch.optim.lr_scheduler if lib is torch else lr_scheduler


def _run(sched: Any, opt: Any, steps: int = STEPS) -> list[list[float]]:
    """The lrs after construction, then after each optimizer step + scheduler step."""
    seq = [[g["lr"] for g in opt.param_groups]]
    for _ in range(steps):
        opt.step()
        sched.step()
        seq.append([g["lr"] for g in opt.param_groups])
        assert sched.get_last_lr() == seq[-1]
    return seq


def _both(make: Callable[[Any, Any], Any], steps: int = STEPS) -> tuple[list, list, Any, Any]:
    ours_opt, theirs_opt = _sgd(ag), _sgd(torch)
    ours = make(lr_scheduler, ours_opt)
    theirs = make(torch.optim.lr_scheduler, theirs_opt)
    return _run(ours, ours_opt, steps), _run(theirs, theirs_opt, steps), ours, theirs


SCHEDULERS: dict[str, Callable[[Any, Any], Any]] = {
    "lambda": lambda m, o: m.LambdaLR(o, lambda e: 0.95**e + 0.01 * (e % 3)),
    "lambda_per_group": lambda m, o: m.LambdaLR(
        o, [lambda e: 1 / (e + 1), lambda e: 0.9**e, lambda e: 1.0 + e]
    ),
    "step": lambda m, o: m.StepLR(o, step_size=4, gamma=0.5),
    "step_default_gamma": lambda m, o: m.StepLR(o, 7),
    "multistep": lambda m, o: m.MultiStepLR(o, milestones=[3, 10, 10, 25], gamma=0.3),
    "multistep_with_zero": lambda m, o: m.MultiStepLR(o, milestones=[0, 5]),
    "exponential": lambda m, o: m.ExponentialLR(o, gamma=0.87),
    "cosine": lambda m, o: m.CosineAnnealingLR(o, T_max=7),
    "cosine_eta_min": lambda m, o: m.CosineAnnealingLR(o, T_max=10, eta_min=0.01),
    "linear_default": lambda m, o: m.LinearLR(o),
    "linear_decay": lambda m, o: m.LinearLR(o, start_factor=1.0, end_factor=0.1,
                                            total_iters=12),
    "sequential": lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=4),
            m.CosineAnnealingLR(o, T_max=9, eta_min=0.001),
            m.ExponentialLR(o, gamma=0.9)], milestones=[5, 16]
    ),
    "constant": lambda m, o: m.ConstantLR(o, factor=0.5, total_iters=4),
    "constant_default": lambda m, o: m.ConstantLR(o),
    "multiplicative": lambda m, o: m.MultiplicativeLR(o, lambda e: 0.95 - 0.01 * (e % 4)),
    "polynomial": lambda m, o: m.PolynomialLR(o, total_iters=12, power=2.0),
    "polynomial_default": lambda m, o: m.PolynomialLR(o),
    "warm_restarts": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=5, eta_min=0.01),
    "warm_restarts_mult": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2),
    "one_cycle": lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 0.5, 2.0], total_steps=30),
    "one_cycle_linear_three_phase": lambda m, o: m.OneCycleLR(
        o, max_lr=1.0, epochs=4, steps_per_epoch=8, pct_start=0.25, anneal_strategy="linear",
        three_phase=True, div_factor=10.0, final_div_factor=100.0
    ),
    "cyclic": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4),
    "cyclic_triangular2": lambda m, o: m.CyclicLR(
        o, 0.01, [0.1, 0.2, 0.3], step_size_up=3, step_size_down=5, mode="triangular2"
    ),
    "cyclic_exp_range": lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=4,
                                                mode="exp_range", gamma=0.9),
    "cyclic_scale_fn": lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=2,
                                               scale_fn=lambda x: 0.8**x,
                                               scale_mode="iterations"),
    "chained": lambda m, o: m.ChainedScheduler(
        [m.ConstantLR(o, factor=0.5, total_iters=3), m.ExponentialLR(o, gamma=0.9),
         m.CosineAnnealingLR(o, T_max=8)]
    ),
}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_lr_sequence_matches_torch_bit_for_bit(name: str) -> None:
    ours, theirs, sched, torch_sched = _both(SCHEDULERS[name])
    assert ours == theirs
    # ChainedScheduler has no last_epoch, as torch's.
    assert getattr(sched, "last_epoch", STEPS) == getattr(torch_sched, "last_epoch", STEPS)
    assert getattr(sched, "last_epoch", STEPS) == STEPS


def test_cosine_matches_closed_form_within_1e12() -> None:
    ours, _, _, _ = _both(SCHEDULERS["cosine_eta_min"])
    for t, lrs in enumerate(ours):
        for lr, base in zip(lrs, LRS):
            expected = 0.01 + (base - 0.01) * (1 + np.cos(np.pi * t / 10)) / 2
            assert lr == pytest.approx(expected, rel=1e-12)


def test_scheduler_sets_initial_lr_and_base_lrs() -> None:
    opt = _sgd(ag)
    sched = lr_scheduler.StepLR(opt, 3)
    assert [g["initial_lr"] for g in opt.param_groups] == list(LRS)
    assert sched.base_lrs == list(LRS)
    assert sched.last_epoch == 0
    assert sched.get_last_lr() == list(LRS)


@pytest.mark.parametrize("name", ["lambda", "step", "multistep", "exponential", "cosine",
                                  "linear_decay", "sequential", "constant", "multiplicative",
                                  "polynomial", "warm_restarts_mult", "one_cycle",
                                  "cyclic_exp_range", "chained"])
def test_state_dict_resumes_the_same_sequence(name: str) -> None:
    make = SCHEDULERS[name]
    expected, _, _, _ = _both(make)
    opt = _sgd(ag)
    sched = make(lr_scheduler, opt)
    _run(sched, opt, 11)
    opt_state, sched_state = opt.state_dict(), sched.state_dict()
    assert "optimizer" not in sched_state
    opt2 = _sgd(ag, (9.0, 9.0, 9.0))
    sched2 = make(lr_scheduler, opt2)
    opt2.load_state_dict(opt_state)
    sched2.load_state_dict(sched_state)
    assert getattr(sched2, "last_epoch", 11) == 11
    resumed = _run(sched2, opt2, STEPS - 11)
    assert resumed == expected[11:]


RESUMED: dict[str, Callable[[Any, Any], Any]] = {
    "exponential_and_step": lambda m, o: [m.ExponentialLR(o, 0.5, last_epoch=3),
                                          m.StepLR(o, 5, last_epoch=3)][1],
    "cosine": lambda m, o: m.CosineAnnealingLR(o, 6, 0.01, last_epoch=4),
    "linear": lambda m, o: m.LinearLR(o, 0.2, 0.9, 6, last_epoch=2),
    "multistep": lambda m, o: m.MultiStepLR(o, [3, 6], last_epoch=5),
    "lambda": lambda m, o: m.LambdaLR(o, lambda e: 0.9**e, last_epoch=5),
    "sequential": lambda m, o: m.SequentialLR(
        o, [m.ExponentialLR(o, 0.9), m.StepLR(o, 2)], [3], last_epoch=4
    ),
}


@pytest.mark.parametrize("name", sorted(RESUMED))
def test_construction_with_last_epoch_matches_torch(name: str) -> None:
    seqs = []
    for lib in (ag, torch):
        opt = _sgd(lib)
        for g in opt.param_groups:
            g["initial_lr"] = 2 * g["lr"]
        sched = RESUMED[name](_module(lib), opt)
        seqs.append((_run(sched, opt, 12), sched.last_epoch, getattr(sched, "base_lrs", None)))
    assert seqs[0] == seqs[1]


def test_resume_without_initial_lr_raises_keyerror() -> None:
    with pytest.raises(KeyError, match=r"param 'initial_lr' is not specified in param_groups\[0\]"):
        lr_scheduler.StepLR(_sgd(ag), 3, last_epoch=4)
    with pytest.raises(KeyError, match=r"param 'initial_lr' is not specified in param_groups\[0\]"):
        torch.optim.lr_scheduler.StepLR(_sgd(torch), 3, last_epoch=4)


def test_lambda_state_dict_saves_callable_objects_not_functions() -> None:
    class Decay:
        def __init__(self) -> None:
            self.rate = 0.5

        def __call__(self, epoch: int) -> float:
            return self.rate**epoch

    saved = lr_scheduler.LambdaLR(_sgd(ag), [Decay(), lambda e: 1.0, Decay()]).state_dict()
    assert saved["lr_lambdas"] == [{"rate": 0.5}, None, {"rate": 0.5}]
    saved["lr_lambdas"][0]["rate"] = 0.25
    fresh = Decay()
    sched = lr_scheduler.LambdaLR(_sgd(ag), [fresh, lambda e: 1.0, Decay()])
    sched.load_state_dict(saved)
    assert fresh.rate == 0.25
    assert "lr_lambdas" in saved


def test_step_with_epoch_uses_closed_form_and_warns() -> None:
    results = []
    for lib in (ag, torch):
        opt = _sgd(lib)
        sched = _module(lib).MultiStepLR(opt, [2, 5], gamma=0.5)
        opt.step()
        with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)`"):
            sched.step(6)
        results.append((sched.get_last_lr(), sched.last_epoch))
    assert results[0] == results[1] == ([lr * 0.25 for lr in LRS], 6)


def test_scheduler_step_before_optimizer_step_warns() -> None:
    for lib in (ag, torch):
        sched = _module(lib).StepLR(_sgd(lib), 3)
        with pytest.warns(UserWarning, match=r"Detected call of `lr_scheduler.step\(\)` before"):
            sched.step()


def test_no_warning_when_optimizer_steps_first() -> None:
    opt = _sgd(ag)
    sched = lr_scheduler.CosineAnnealingLR(opt, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
        sched.step()


def test_overridden_optimizer_step_warns() -> None:
    for lib in (ag, torch):
        opt = _sgd(lib)
        sched = _module(lib).ExponentialLR(opt, 0.9)
        opt.step = type(opt).step.__get__(opt)
        with pytest.warns(UserWarning, match=r"Seems like `optimizer.step\(\)` has been overr"):
            sched.step()


def test_get_lr_outside_step_warns() -> None:
    for lib in (ag, torch):
        sched = _module(lib).StepLR(_sgd(lib), 3)
        with pytest.warns(UserWarning, match=r"please use `get_last_lr\(\)`"):
            sched.get_lr()


def test_wrapping_optimizer_step_keeps_its_result_and_wraps_once() -> None:
    opt = _sgd(ag)
    lr_scheduler.StepLR(opt, 3)
    wrapped = opt.step
    lr_scheduler.ExponentialLR(opt, 0.9)
    assert opt.step is wrapped
    assert opt.step(lambda: 7.0) == 7.0
    assert opt._opt_called


@pytest.mark.parametrize("make, error, message", [
    (lambda m, o: m.StepLR(object(), 3), TypeError, "object is not an Optimizer"),
    (lambda m, o: m.LambdaLR(o, [lambda e: 1.0]), ValueError,
     "Expected 3 lr_lambdas, but got 1"),
    (lambda m, o: m.LinearLR(o, start_factor=0.0), ValueError,
     "Starting multiplicative factor expected to be greater than 0"),
    (lambda m, o: m.LinearLR(o, end_factor=1.5), ValueError,
     "Ending multiplicative factor expected to be between 0 and 1."),
    (lambda m, o: m.ReduceLROnPlateau(o, factor=1.0), ValueError, "Factor should be < 1.0."),
    (lambda m, o: m.ReduceLROnPlateau(o, mode="up"), ValueError, "mode up is unknown!"),
    (lambda m, o: m.ReduceLROnPlateau(o, threshold_mode="x"), ValueError,
     "threshold mode x is unknown!"),
    (lambda m, o: m.ReduceLROnPlateau(o, min_lr=[0.0]), ValueError,
     "expected 3 min_lrs, got 1"),
    (lambda m, o: m.SequentialLR(o, [], []), ValueError,
     "SequentialLR expects at least one scheduler"),
    (lambda m, o: m.SequentialLR(o, [m.StepLR(o, 2), m.StepLR(o, 3)], [1, 2]), ValueError,
     "one more than the number of milestone points"),
    (lambda m, o: m.SequentialLR(o, [m.ReduceLROnPlateau(o)], []), ValueError,
     "does not support `ReduceLROnPlateau`"),
    (lambda m, o: m.ConstantLR(o, factor=1.5), ValueError,
     "Constant multiplicative factor expected to be between 0 and 1."),
    (lambda m, o: m.MultiplicativeLR(o, [lambda e: 1.0, 2.0, lambda e: 1.0]), TypeError,
     "lr_lambda should be a function, but got float"),
    (lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=0), ValueError,
     "Expected positive integer T_0, but got 0"),
    (lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0), ValueError,
     "Expected integer T_mult >= 1, but got 0"),
    (lambda m, o: m.OneCycleLR(o, max_lr=1.0), ValueError,
     "You must define either total_steps OR (epochs AND steps_per_epoch)"),
    (lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=10, pct_start=1), ValueError,
     "Expected float between 0 and 1 pct_start, but got 1"),
    (lambda m, o: m.OneCycleLR(o, max_lr=[1.0], total_steps=10), ValueError,
     "max_lr must have the same length as optimizer.param_groups."),
    (lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=10, anneal_strategy="x"),
     ValueError, "anneal_strategy must be one of 'cos' or 'linear', instead got x"),
    (lambda m, o: m.CyclicLR(o, 0.1, 1.0, mode="x"), ValueError,
     "mode is invalid and scale_fn is None"),
    (lambda m, o: m.ChainedScheduler([]), ValueError,
     "ChainedScheduler expects at least one scheduler to be chained"),
    (lambda m, o: m.ChainedScheduler([m.StepLR(o, 2), m.ReduceLROnPlateau(o)]), ValueError,
     "ChainedScheduler does not support `ReduceLROnPlateau`"),
])
def test_bad_arguments_raise_like_torch(make: Callable, error: type, message: str) -> None:
    for lib in (ag, torch):
        with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
            make(_module(lib), _sgd(lib))


def test_sequential_rejects_scheduler_of_another_optimizer() -> None:
    opt = _sgd(ag)
    other = lr_scheduler.StepLR(_sgd(ag), 2)
    with pytest.raises(ValueError, match="expects all schedulers to belong to the same optimizer"):
        lr_scheduler.SequentialLR(opt, [other], [])


def _metric(step: int) -> float:
    """Falls, then plateaus with noise, then rises: exercises patience and cooldown."""
    if step < 6:
        return 1.0 - 0.1 * step
    return 0.5 + 0.00001 * ((step * 7) % 3) + (0.01 * (step - 20) if step > 20 else 0.0)


@pytest.mark.parametrize("kwargs", [
    {},
    {"patience": 2},
    {"patience": 1, "cooldown": 3, "factor": 0.5},
    {"mode": "max", "patience": 0, "threshold_mode": "abs", "threshold": 0.05},
    {"patience": 0, "factor": 0.5, "min_lr": [0.02, 0.01, 0.05]},
    {"patience": 0, "factor": 0.9, "eps": 0.01},
])
def test_reduce_on_plateau_matches_torch(kwargs: dict[str, Any]) -> None:
    seqs = []
    for lib in (ag, torch):
        opt = _sgd(lib)
        sched = _module(lib).ReduceLROnPlateau(opt, **kwargs)
        seq = []
        for step in range(STEPS):
            opt.step()
            sched.step(_metric(step))
            seq.append((sched.get_last_lr(), sched.num_bad_epochs, sched.cooldown_counter,
                        sched.best, sched.last_epoch))
        seqs.append(seq)
    assert seqs[0] == seqs[1]


def test_reduce_on_plateau_takes_a_tensor_metric_and_resumes() -> None:
    opt = _sgd(ag)
    sched = lr_scheduler.ReduceLROnPlateau(opt, patience=1)
    for step in range(12):
        sched.step(ag.tensor(np.float64(_metric(step))))
    state = sched.state_dict()
    sched2 = lr_scheduler.ReduceLROnPlateau(_sgd(ag), patience=5)
    sched2.load_state_dict(state)
    assert sched2.patience == 1 and sched2.best == sched.best
    assert sched2.num_bad_epochs == sched.num_bad_epochs


def test_state_dict_keys_are_torchs_and_older_dicts_load() -> None:
    keys = []
    for lib in (ag, torch):
        opt = _sgd(lib)
        sched = _module(lib).StepLR(opt, 3)
        opt.step()
        sched.step()
        keys.append(list(sched.state_dict()))
    assert keys[0] == keys[1]
    assert "_get_lr_called_within_step" in keys[0]
    old = lr_scheduler.StepLR(_sgd(ag), 3).state_dict()
    old["_in_step"] = old.pop("_get_lr_called_within_step")
    old["last_epoch"] = 5
    opt = _sgd(ag)
    sched = lr_scheduler.StepLR(opt, 3)
    sched.load_state_dict(old)
    assert list(sched.state_dict()) == keys[0]
    opt.step()
    sched.step()
    assert sched.last_epoch == 6 and sched.get_last_lr() == [lr * 0.1 for lr in LRS]


TENSOR_LR_SCHEDULERS = ["lambda", "step", "multistep", "exponential", "cosine_eta_min",
                        "linear_decay", "sequential", "constant", "multiplicative",
                        "polynomial", "warm_restarts", "one_cycle", "cyclic", "chained"]


@pytest.mark.parametrize("name", TENSOR_LR_SCHEDULERS)
def test_tensor_lr_is_scheduled_in_place_as_torch(name: str) -> None:
    seqs = []
    for lib in (ag, torch):
        lrs = [lib.tensor(lr) for lr in LRS]
        params = [lib.tensor(np.zeros(2, np.float32), requires_grad=True) for _ in LRS]
        opt = lib.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(params, lrs)])
        sched = SCHEDULERS[name](_module(lib), opt)
        seq = []
        for _ in range(12):
            opt.step()
            sched.step()
            assert all(g["lr"] is lr for g, lr in zip(opt.param_groups, lrs))
            last = sched.get_last_lr()
            assert all(type(x) is type(lrs[0]) and x is not lr for x, lr in zip(last, lrs))
            seq.append([float(x) for x in last])
        assert all(g["initial_lr"] is not lr for g, lr in zip(opt.param_groups, lrs))
        seq.append([float(x) for x in getattr(sched, "base_lrs", [])])
        seqs.append(seq)
    assert seqs[0] == seqs[1]


def test_tensor_lr_on_plateau_as_torch() -> None:
    seqs = []
    for lib in (ag, torch):
        lr = lib.tensor(0.1)
        opt = lib.optim.SGD([lib.tensor(np.zeros(2), requires_grad=True)], lr=lr)
        sched = _module(lib).ReduceLROnPlateau(opt, patience=0)
        for step in range(8):
            sched.step(_metric(step))
        assert opt.param_groups[0]["lr"] is lr
        seqs.append(float(lr))
    assert seqs[0] == seqs[1]


@pytest.mark.parametrize("make", [
    lambda m, o: m.OneCycleLR(o, max_lr=0.5, total_steps=20, base_momentum=0.7),
    lambda m, o: m.OneCycleLR(o, max_lr=0.5, total_steps=20, three_phase=True),
    lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=3, base_momentum=[0.5, 0.6, 0.7]),
])
@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_cycled_momentum_and_beta1_as_torch(make: Callable, opt_name: str) -> None:
    seqs = []
    for lib in (ag, torch):
        groups = [{"params": [lib.tensor(np.zeros(2, np.float32), requires_grad=True)],
                   "lr": lr} for lr in LRS]
        opt = getattr(lib.optim, opt_name)(groups, lr=1.0)
        sched = make(_module(lib), opt)
        seq = []
        for _ in range(20):
            opt.step()
            sched.step()
            seq.append([(g["lr"], g.get("momentum"), g.get("betas")) for g in opt.param_groups])
        seqs.append((seq, [sorted(g) for g in opt.param_groups]))
    assert seqs[0] == seqs[1]


def test_one_cycle_past_total_steps_raises_as_torch() -> None:
    for lib in (ag, torch):
        opt = _sgd(lib)
        sched = _module(lib).OneCycleLR(opt, max_lr=1.0, total_steps=3)
        for _ in range(3):
            opt.step()
            sched.step()
        with pytest.raises(ValueError, match="Tried to step 4 times. The specified number of "
                                             "total steps is 3"):
            sched.step()


@pytest.mark.parametrize("t_mult", [1, 2, 3])
def test_warm_restarts_step_to_an_epoch_as_torch(t_mult: int) -> None:
    seqs = []
    for lib in (ag, torch):
        opt = _sgd(lib)
        sched = _module(lib).CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=t_mult,
                                                         eta_min=0.001)
        seq = []
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no call-order or epoch warning, as torch
            for epoch in [0.5, 1.7, 3, 4.25, 7.5, 13, 20.1, 2, 5]:
                sched.step(epoch)
                seq.append((sched.get_last_lr(), sched.last_epoch, sched.T_cur, sched.T_i))
                opt.step()
                sched.step()
                seq.append((sched.get_last_lr(), sched.last_epoch, sched.T_cur, sched.T_i))
        seqs.append(seq)
    assert seqs[0] == seqs[1]
    with pytest.raises(ValueError, match="Expected non-negative epoch, but got -1"):
        lr_scheduler.CosineAnnealingWarmRestarts(_sgd(ag), T_0=3).step(-1)


@pytest.mark.parametrize("name", ["one_cycle", "cyclic_scale_fn", "warm_restarts_mult",
                                  "chained", "multiplicative", "polynomial", "constant"])
def test_new_schedulers_state_dict_keys_as_torch(name: str) -> None:
    keys = []
    for lib in (ag, torch):
        opt = _sgd(lib)
        sched = SCHEDULERS[name](_module(lib), opt)
        _run(sched, opt, 3)
        saved = sched.state_dict()
        keys.append(sorted(saved))
        if "_schedulers" in saved:
            keys.append([sorted(s) for s in saved["_schedulers"]])
    assert keys[: len(keys) // 2] == keys[len(keys) // 2:]


def test_cyclic_saves_a_callable_object_scale_fn() -> None:
    class Scale:
        def __init__(self) -> None:
            self.base = 0.5

        def __call__(self, x: float) -> float:
            return self.base**x

    saved = lr_scheduler.CyclicLR(_sgd(ag), 0.01, 0.1, scale_fn=Scale()).state_dict()
    assert saved["_scale_fn_custom"] == {"base": 0.5} and "_scale_fn_ref" not in saved
    saved["_scale_fn_custom"]["base"] = 0.25
    fresh = Scale()
    sched = lr_scheduler.CyclicLR(_sgd(ag), 0.01, 0.1, scale_fn=fresh)
    sched.load_state_dict(saved)
    assert fresh.base == 0.25 and saved["_scale_fn_custom"] == {"base": 0.25}
