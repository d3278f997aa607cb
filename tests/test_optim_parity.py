"""aiograd.optim's SGD, Adam and AdamW against torch.optim: the live state, the
constructor options, Tensor learning rates, state_dict order and loading, NaN steps."""

from __future__ import annotations

import tracemalloc
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aiograd as ag

pytestmark = pytest.mark.timeout(60)

torch = pytest.importorskip("torch")

W0 = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
GRADS = [np.random.RandomState(k).randn(3, 4).astype(np.float32) for k in range(4)]


def _param(lib: Any, a: np.ndarray = W0) -> Any:
    return lib.nn.Parameter(lib.tensor(a.copy()))


def _steps(lib: Any, opt: Any, params: list[Any], grads: list[np.ndarray] = GRADS) -> None:
    for g in grads:
        for p in params:
            p.grad = lib.tensor(g.astype(p.detach().numpy().dtype))
        opt.step()


def _np(value: Any) -> Any:
    """A Tensor (either library's) as a NumPy array; anything else unchanged."""
    if isinstance(value, (torch.Tensor, ag.Tensor)):
        return np.asarray(value.detach().numpy())
    return value


def _assert_state_equal(ours: dict[str, Any], theirs: dict[str, Any], rtol: float = 1e-6,
                        atol: float = 1e-8) -> None:
    assert list(ours) == list(theirs)
    for key in ours:
        a, b = _np(ours[key]), _np(theirs[key])
        assert a.dtype == b.dtype and a.shape == b.shape, key
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=key)


OPTIMIZERS: dict[str, Callable[[Any, list[Any]], Any]] = {
    "sgd_momentum": lambda lib, ps: lib.optim.SGD(ps, lr=0.1, momentum=0.9),
    "sgd_nesterov_wd": lambda lib, ps: lib.optim.SGD(ps, lr=0.1, momentum=0.8, nesterov=True,
                                                     weight_decay=0.01),
    "adam_amsgrad": lambda lib, ps: lib.optim.Adam(ps, lr=0.1, amsgrad=True),
    "adamw": lambda lib, ps: lib.optim.AdamW(ps, lr=0.1),
}


# ---- 1. the live state holds Tensors ----

@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_live_state_holds_tensors_as_torch(name: str) -> None:
    states = []
    for lib in (ag, torch):
        p = _param(lib)
        opt = OPTIMIZERS[name](lib, [p])
        _steps(lib, opt, [p])
        states.append(opt.state[p])
    ours, theirs = states
    assert all(type(v) is ag.Tensor for v in ours.values())
    _assert_state_equal(ours, theirs)
    if "step" in ours:
        assert ours["step"].shape == () and ours["step"].dtype == np.float32
        assert ours["step"].device == ag.device("cpu")
        assert ours["step"].item() == theirs["step"].item() == len(GRADS)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_state_tensors_are_updated_in_place(name: str) -> None:
    p = _param(ag)
    opt = OPTIMIZERS[name](ag, [p])
    _steps(ag, opt, [p], GRADS[:1])
    tensors = dict(opt.state[p])
    arrays = {k: t.data for k, t in tensors.items()}
    before = {k: a.copy() for k, a in arrays.items()}
    _steps(ag, opt, [p], GRADS[1:2])
    for key, t in opt.state[p].items():
        assert t is tensors[key] and t.data is arrays[key], key
        assert not np.array_equal(t.data, before[key]), key
    # The state's Tensors are usable as Tensors, as torch's.
    buf = next(t for k, t in opt.state[p].items() if k != "step")
    assert float(buf.norm()) == pytest.approx(float(np.linalg.norm(buf.data)), rel=1e-6)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_state_dict_round_trip_gives_tensors_and_the_same_trajectory(name: str) -> None:
    results = []
    for lib in (ag, torch):
        p = _param(lib)
        opt = OPTIMIZERS[name](lib, [p])
        _steps(lib, opt, [p], GRADS[:2])
        saved = opt.state_dict()
        if lib is ag:
            # Documented difference: state_dict copies arrays to NumPy.
            entry = saved["state"][0]
            assert all(type(v) is np.ndarray for v in entry.values())
            if "step" in entry:
                assert entry["step"].shape == () and entry["step"].dtype == np.float32
        p2 = _param(lib, p.detach().numpy())
        opt2 = OPTIMIZERS[name](lib, [p2])
        opt2.load_state_dict(saved)
        _steps(lib, opt2, [p2], GRADS[2:])
        results.append((p2, opt2.state[p2]))
    (p, ours), (tp, theirs) = results
    assert all(type(v) is ag.Tensor for v in ours.values())
    _assert_state_equal(ours, theirs)
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("opt_name", ["Adam", "AdamW"])
def test_load_older_state_dict_with_int_step(opt_name: str) -> None:
    """A state dict whose step is a Python int (older aiograd) loads as torch loads one."""
    states = []
    for lib in (ag, torch):
        p = _param(lib, W0.astype(np.float64))
        opt = getattr(lib.optim, opt_name)([p], lr=0.1)
        _steps(lib, opt, [p], GRADS[:3])
        saved = opt.state_dict()
        saved["state"][0]["step"] = 3
        for key in ("foreach", "capturable", "differentiable", "fused"):
            del saved["param_groups"][0][key]
        opt2 = getattr(lib.optim, opt_name)([p], lr=0.1)
        opt2.load_state_dict(saved)
        states.append((opt2.state[p], opt2.param_groups[0]))
        _steps(lib, opt2, [p], GRADS[3:])
    (ours, our_group), (theirs, their_group) = states
    assert ours["step"].dtype == np.float32 and ours["step"].item() == 4.0
    assert ours["exp_avg"].dtype == np.float64
    _assert_state_equal(ours, theirs)
    assert [(k, v) for k, v in our_group.items() if k != "params"] == [
        (k, v) for k, v in their_group.items() if k != "params"]


# ---- 2. the constructors' keyword arguments ----

CONSTRUCTORS: list[tuple[str, dict[str, Any]]] = [
    ("SGD", {}),
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "foreach": False, "fused": True}),
    ("SGD", {"nesterov": True, "momentum": 0.5, "maximize": True, "foreach": True}),
    ("Adam", {}),
    ("Adam", {"lr": 0.1, "foreach": False, "fused": True, "decoupled_weight_decay": True}),
    ("AdamW", {}),
    ("AdamW", {"amsgrad": True, "maximize": True, "foreach": True}),
]


@pytest.mark.parametrize("name, kwargs", CONSTRUCTORS)
def test_options_in_defaults_groups_state_dict_and_repr_as_torch(
        name: str, kwargs: dict[str, Any]) -> None:
    ours = getattr(ag.optim, name)([_param(ag)], **kwargs)
    theirs = getattr(torch.optim, name)([_param(torch)], **kwargs)
    assert list(ours.defaults.items()) == list(theirs.defaults.items())
    assert [type(v) for v in ours.defaults.values()] == [
        type(v) for v in theirs.defaults.values()]
    assert list(ours.param_groups[0]) == list(theirs.param_groups[0])
    assert ours.state_dict()["param_groups"] == theirs.state_dict()["param_groups"]
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
@pytest.mark.parametrize("options", [{"foreach": True}, {"fused": True}, {"foreach": False},
                                     {"fused": False}])
def test_foreach_and_fused_change_nothing(name: str, options: dict[str, Any]) -> None:
    results = []
    for lib in (ag, torch):
        plain, other = _param(lib), _param(lib)
        kw = {"lr": 0.1, "momentum": 0.9} if name == "SGD" else {"lr": 0.1}
        _steps(lib, getattr(lib.optim, name)([plain], **kw), [plain])
        _steps(lib, getattr(lib.optim, name)([other], **kw, **options), [other])
        results.append(other.detach().numpy())
        if lib is ag:
            np.testing.assert_array_equal(plain.detach().numpy(), other.detach().numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name, flag", [("SGD", "differentiable"), ("Adam", "differentiable"),
                                        ("Adam", "capturable"), ("AdamW", "capturable"),
                                        ("AdamW", "differentiable")])
def test_differentiable_and_capturable_are_refused(name: str, flag: str) -> None:
    with pytest.raises(NotImplementedError, match=f"does not support {flag}=True"):
        getattr(ag.optim, name)([_param(ag)], **{flag: True})
    # torch accepts them at construction on CPU, and fails at the step.
    getattr(torch.optim, name)([_param(torch)], **{flag: True})


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
@pytest.mark.parametrize("options, message", [
    ({"fused": True, "foreach": True}, "`fused` and `foreach` cannot be `True` together."),
    ({"fused": True, "differentiable": True}, "`fused` does not support `differentiable`"),
])
def test_fused_conflicts_raise_as_torch(name: str, options: dict[str, Any],
                                        message: str) -> None:
    for lib in (ag, torch):
        with pytest.raises(RuntimeError) as info:
            getattr(lib.optim, name)([_param(lib)], **options)
        assert str(info.value) == message


# ---- 3. a Tensor learning rate ----

TENSOR_LR: dict[str, Callable[[Any, list[Any], Any], Any]] = {
    "sgd": lambda lib, ps, lr: lib.optim.SGD(ps, lr=lr),
    "sgd_momentum": lambda lib, ps, lr: lib.optim.SGD(ps, lr=lr, momentum=0.9,
                                                      weight_decay=0.1),
    "adam": lambda lib, ps, lr: lib.optim.Adam(ps, lr=lr, weight_decay=0.1),
    "adamw": lambda lib, ps, lr: lib.optim.AdamW(ps, lr=lr, amsgrad=True),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(TENSOR_LR))
def test_tensor_lr_steps_as_torch(name: str, dtype: type) -> None:
    results = []
    for lib in (ag, torch):
        lr = lib.tensor(np.array([0.05], dtype=np.float32))
        p = _param(lib, W0.astype(dtype))
        opt = TENSOR_LR[name](lib, [p], lr)
        assert opt.param_groups[0]["lr"] is lr
        _steps(lib, opt, [p])
        results.append(p.detach().numpy())
    tol = 1e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(results[0], results[1], rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_tensor_lr_checks_as_torch(name: str) -> None:
    for lib in (ag, torch):
        with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
            getattr(lib.optim, name)([_param(lib)], lr=lib.tensor([0.1, 0.2]))
        with pytest.raises(ValueError, match="Invalid learning rate"):
            getattr(lib.optim, name)([_param(lib)], lr=lib.tensor(-0.1))
        if name != "SGD":
            with pytest.raises(ValueError, match="lr as a Tensor is not supported for "
                                                 "capturable=False and foreach=True"):
                getattr(lib.optim, name)([_param(lib)], lr=lib.tensor(0.1), foreach=True)


# ---- 4. state_dict["state"] in the order parameters got state ----

@pytest.mark.parametrize("name", ["sgd_momentum", "adam_amsgrad"])
def test_state_dict_state_in_insertion_order(name: str) -> None:
    keys = []
    for lib in (ag, torch):
        ps = [_param(lib) for _ in range(3)]
        opt = OPTIMIZERS[name](lib, ps)
        _steps(lib, opt, [ps[2]], GRADS[:1])
        _steps(lib, opt, ps[:2], GRADS[:1])
        ids = [id(q) for q in ps]
        keys.append((list(opt.state_dict()["state"]), [ids.index(id(p)) for p in opt.state]))
    assert keys[0] == keys[1] == ([2, 0, 1], [2, 0, 1])


def test_sgd_without_momentum_keeps_no_state() -> None:
    for lib in (ag, torch):
        p = _param(lib)
        opt = lib.optim.SGD([p], lr=0.1)
        _steps(lib, opt, [p])
        assert len(opt.state) == 0 and opt.state_dict()["state"] == {}


# ---- 5. no NumPy warnings from a step ----

@pytest.mark.parametrize("make, grad", [
    (lambda lib, ps: lib.optim.Adam(ps, lr=0.1), np.full((3, 4), np.nan, np.float32)),
    (lambda lib, ps: lib.optim.AdamW(ps, lr=0.1, amsgrad=True),
     np.full((3, 4), np.inf, np.float32)),
    (lambda lib, ps: lib.optim.Adam(ps, lr=0.1, eps=0.0), np.zeros((3, 4), np.float32)),
    (lambda lib, ps: lib.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.1),
     np.full((3, 4), np.inf, np.float32)),
])
def test_nan_steps_are_silent_and_give_torchs_values(make: Callable, grad: np.ndarray) -> None:
    results = []
    for lib in (ag, torch):
        p = _param(lib)
        opt = make(lib, [p])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _steps(lib, opt, [p], [grad, grad])
        results.append(p.detach().numpy())
    np.testing.assert_array_equal(results[0], results[1])


# ---- 6. a non-leaf that retains its grad may be optimized ----

def test_non_leaf_retaining_grad_is_optimized_as_torch() -> None:
    results = []
    for lib in (ag, torch):
        h = _param(lib) * 2
        h.retain_grad()
        opt = lib.optim.SGD([h], lr=0.1)
        loss = (h**2).sum()
        if lib is torch:
            loss.backward()
        else:
            ag.backward_sync(loss)
        opt.step()
        results.append(h.detach().numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6)


def test_non_leaf_without_retain_grad_is_refused_as_torch() -> None:
    for lib in (ag, torch):
        with pytest.raises(ValueError) as info:
            lib.optim.SGD([_param(lib) * 2], lr=0.1)
        assert str(info.value) == "can't optimize a non-leaf Tensor"


# ---- 7. a saved state entry that matches no parameter ----

def test_state_of_unknown_index_is_kept_under_its_key() -> None:
    results = []
    for lib in (ag, torch):
        p = _param(lib)
        opt = lib.optim.SGD([p], lr=0.1, momentum=0.9)
        _steps(lib, opt, [p], GRADS[:1])
        saved = opt.state_dict()
        saved["state"][7] = {"note": "kept"}
        opt2 = lib.optim.SGD([p], lr=0.1, momentum=0.9)
        opt2.load_state_dict(saved)
        assert opt2.state[7] == {"note": "kept"}
        _steps(lib, opt2, [p], GRADS[1:2])
        results.append((list(opt2.state_dict()["state"]), opt2.state_dict()["state"][7]))
    assert results[0] == results[1] == ([0, 7], {"note": "kept"})


# ---- load_state_dict replaces the groups, as torch ----

@pytest.mark.parametrize("saved_named, named", [(True, False), (False, True), (True, True)])
def test_loaded_groups_keep_the_saved_keys_in_order(saved_named: bool, named: bool) -> None:
    groups = []
    for lib in (ag, torch):
        model = lib.nn.Linear(2, 2)
        src = lib.optim.SGD(model.named_parameters() if saved_named else model.parameters(),
                            lr=0.1, momentum=0.9)
        saved = src.state_dict()
        saved["param_groups"][0]["extra"] = 1
        del saved["param_groups"][0]["nesterov"]
        opt = lib.optim.SGD(model.named_parameters() if named else model.parameters(),
                            lr=0.5)
        opt.load_state_dict(saved)
        groups.append([(k, v) for k, v in opt.param_groups[0].items() if k != "params"])
    assert groups[0] == groups[1]


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_steps_after_the_first_allocate_no_arrays(name: str) -> None:
    """Note [Optimizer steps write .data in place]: the state Tensors wrap the buffers
    the update writes, so a later step allocates no parameter-sized array."""
    p = ag.nn.Parameter(ag.tensor(np.ones((256, 256), np.float32)))
    p.grad = ag.tensor(np.full((256, 256), 0.5, np.float32))
    opt = OPTIMIZERS[name](ag, [p])
    opt.step()
    tracemalloc.start()
    try:
        opt.step()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < p.data.nbytes // 4


@pytest.mark.parametrize("name, kwargs", [
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("Adam", {"lr": 0.1}),
    ("Adam", {"lr": 0.1, "amsgrad": True}),
])
def test_a_pytorch_optimizer_checkpoint_resumes_the_same_trajectory(name, kwargs):
    """torch.Tensor state becomes aiograd Tensors: steps after the load equal PyTorch's."""
    torch = pytest.importorskip("torch")
    tp = torch.nn.Parameter(torch.ones(2))
    t_opt = getattr(torch.optim, name)([tp], **kwargs)
    tp.grad = torch.ones(2)
    t_opt.step()
    ap = ag.tensor(tp.detach().numpy().copy(), requires_grad=True)
    a_opt = getattr(ag.optim, name)([ap], **kwargs)
    a_opt.load_state_dict(t_opt.state_dict())
    assert all(isinstance(v, ag.Tensor) for v in a_opt.state[ap].values())
    for _ in range(3):
        tp.grad = torch.full((2,), 0.3)
        t_opt.step()
        ap.grad = ag.tensor(np.full(2, 0.3, np.float32))
        a_opt.step()
    np.testing.assert_allclose(ap.detach().numpy(), tp.detach().numpy(), rtol=1e-6)
