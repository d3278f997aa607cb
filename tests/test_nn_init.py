"""``aiograd.nn.init`` against ``torch.nn.init``.

Deterministic results (gains, fans, constants, eye, errors) are compared exactly;
random fills cannot follow torch's stream, so they are checked by their bounds and
statistics against torch's formulas, and for reproducibility under ``manual_seed``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from oracles import raises_like

import aiograd as ag
import aiograd.nn as nn
from aiograd.nn import init

pytestmark = pytest.mark.timeout(60)

torch = pytest.importorskip("torch")
TI = torch.nn.init


GAIN_CASES = [
    ("linear", None), ("conv1d", None), ("conv2d", None), ("conv3d", None),
    ("conv_transpose1d", None), ("conv_transpose2d", None), ("conv_transpose3d", None),
    ("sigmoid", None), ("tanh", None), ("relu", None), ("selu", None),
    ("leaky_relu", None), ("leaky_relu", 0.2), ("leaky_relu", 3), ("leaky_relu", 0),
]


@pytest.mark.parametrize(("name", "param"), GAIN_CASES)
def test_calculate_gain_matches_torch_exactly(name, param) -> None:
    ours, theirs = init.calculate_gain(name, param), TI.calculate_gain(name, param)
    assert ours == theirs
    assert type(ours) is type(theirs)


@pytest.mark.parametrize(("name", "param"), [
    ("leaky_relu", True), ("leaky_relu", "0.1"), ("softplus", None), ("ReLU", None),
])
def test_calculate_gain_rejects_like_torch(name, param) -> None:
    raises_like(lambda: init.calculate_gain(name, param),
                 lambda: TI.calculate_gain(name, param))


@pytest.mark.parametrize("shape", [(3, 5), (4, 2, 3), (6, 3, 2, 5), (2, 0), (1, 1, 1, 1, 7)])
def test_fans_match_torch(shape) -> None:
    ours = init._calculate_fan_in_and_fan_out(ag.zeros(*shape))
    assert ours == TI._calculate_fan_in_and_fan_out(torch.zeros(*shape))


@pytest.mark.parametrize("shape", [(5,), ()])
def test_fans_need_two_dims(shape) -> None:
    raises_like(lambda: init._calculate_fan_in_and_fan_out(ag.zeros(shape)),
                 lambda: TI._calculate_fan_in_and_fan_out(torch.zeros(shape)))
    raises_like(lambda: init.xavier_uniform_(ag.zeros(shape)),
                 lambda: TI.xavier_uniform_(torch.zeros(shape)))
    raises_like(lambda: init.kaiming_normal_(ag.zeros(shape)),
                 lambda: TI.kaiming_normal_(torch.zeros(shape)))


def test_kaiming_mode_is_case_insensitive_and_checked() -> None:
    raises_like(lambda: init.kaiming_uniform_(ag.zeros(2, 3), mode="fan_avg"),
                 lambda: TI.kaiming_uniform_(torch.zeros(2, 3), mode="fan_avg"))
    raises_like(lambda: init.kaiming_uniform_(ag.zeros(2, 3), nonlinearity="swish"),
                 lambda: TI.kaiming_uniform_(torch.zeros(2, 3), nonlinearity="swish"))
    ag.manual_seed(0)
    w = init.kaiming_uniform_(ag.zeros(3, 400), mode="FAN_OUT", nonlinearity="relu")
    assert np.abs(w.numpy()).max() <= math.sqrt(2.0) * math.sqrt(3.0 / 3)


@pytest.mark.parametrize("fn", ["kaiming_uniform_", "kaiming_normal_"])
def test_kaiming_zero_element_tensor_warns_and_is_untouched(fn) -> None:
    t = ag.zeros(0, 3)
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        out = getattr(init, fn)(t)
    assert out is t and t._version == 0
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        getattr(TI, fn)(torch.zeros(0, 3))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_constant_ones_zeros_match_torch(dtype) -> None:
    t = ag.tensor(np.full((3, 4), 9, dtype=dtype))
    tt = torch.from_numpy(np.full((3, 4), 9, dtype=dtype))
    for ours, theirs in [
        (lambda: init.constant_(t, 2.7), lambda: TI.constant_(tt, 2.7)),
        (lambda: init.ones_(t), lambda: TI.ones_(tt)),
        (lambda: init.zeros_(t), lambda: TI.zeros_(tt)),
    ]:
        assert ours() is t
        theirs()
        assert t.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(t.numpy(), tt.numpy())


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 4), (0, 2)])
def test_eye_matches_torch(shape) -> None:
    t = ag.tensor(np.full(shape, 7.0, dtype="float32"))
    assert init.eye_(t) is t
    np.testing.assert_array_equal(t.numpy(), TI.eye_(torch.full(shape, 7.0)).numpy())


@pytest.mark.parametrize("shape", [(3,), (2, 2, 2)])
def test_eye_needs_two_dims(shape) -> None:
    raises_like(lambda: init.eye_(ag.zeros(*shape)), lambda: TI.eye_(torch.zeros(*shape)))


ALL_FILLS = [
    lambda t: init.uniform_(t, -1.0, 2.0),
    lambda t: init.normal_(t, 1.0, 3.0),
    lambda t: init.trunc_normal_(t),
    lambda t: init.constant_(t, 0.5),
    init.ones_, init.zeros_, init.eye_,
    init.xavier_uniform_, init.xavier_normal_,
    init.kaiming_uniform_, init.kaiming_normal_,
]


@pytest.mark.parametrize("fill", ALL_FILLS)
def test_parameter_keeps_identity_and_requires_grad_and_version_bumps(fill) -> None:
    lin = nn.Linear(4, 3)
    p = lin.weight
    array, version = p.data, p._version
    with ag.enable_grad():
        out = fill(p)
    assert out is p and lin.weight is p and p.data is array
    assert isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf
    assert p.grad_fn is None
    assert p._version == version + 1


def test_write_after_use_breaks_the_saved_graph_as_torch() -> None:
    p = nn.Parameter(ag.ones(2, 2))
    y = (p * p).sum()
    init.normal_(p)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ag.grad_sync(y, p)


@pytest.mark.parametrize("fill", ALL_FILLS[:3] + ALL_FILLS[7:])
def test_random_fills_are_reproducible_under_manual_seed(fill) -> None:
    ag.manual_seed(123)
    a = fill(ag.zeros(20, 30)).numpy().copy()
    b = fill(ag.zeros(20, 30)).numpy().copy()
    ag.manual_seed(123)
    c = fill(ag.zeros(20, 30)).numpy()
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b)
    gen = np.random.default_rng(5)
    ag.manual_seed(0)
    init.uniform_(ag.zeros(3))  # the process generator moves; an explicit one does not care
    d = init.normal_(ag.zeros(4), generator=gen).numpy()
    np.testing.assert_array_equal(d, init.normal_(ag.zeros(4),
                                                  generator=np.random.default_rng(5)).numpy())


def _check_uniform(values: np.ndarray, lo: float, hi: float) -> None:
    assert values.min() >= lo and values.max() <= hi
    n = values.size
    assert abs(values.mean() - (lo + hi) / 2) < 5 * (hi - lo) / math.sqrt(12 * n)
    np.testing.assert_allclose(values.std(), (hi - lo) / math.sqrt(12), rtol=0.01)
    # the bounds are reached closely: not a narrower distribution
    assert values.min() < lo + (hi - lo) * 1e-3 and values.max() > hi - (hi - lo) * 1e-3


def _check_normal(values: np.ndarray, mean: float, std: float) -> None:
    assert abs(values.mean() - mean) < 5 * std / math.sqrt(values.size)
    np.testing.assert_allclose(values.std(), std, rtol=0.01)


SHAPE = (500, 500)


def test_uniform_and_normal_statistics() -> None:
    ag.manual_seed(1)
    _check_uniform(init.uniform_(ag.zeros(*SHAPE), -1.5, 4.0).numpy(), -1.5, 4.0)
    _check_uniform(init.uniform_(ag.zeros(*SHAPE)).numpy(), 0.0, 1.0)
    _check_normal(init.normal_(ag.zeros(*SHAPE), 2.0, 0.5).numpy(), 2.0, 0.5)
    _check_normal(init.normal_(ag.zeros(*SHAPE, dtype="float64")).numpy(), 0.0, 1.0)
    assert init.normal_(ag.zeros(3, dtype="float64")).dtype == np.float64


@pytest.mark.parametrize("gain", [1.0, 5.0 / 3])
@pytest.mark.parametrize("shape", [(500, 500), (250, 100, 10)])
def test_xavier_bounds_and_std_follow_torch_formula(gain, shape) -> None:
    ag.manual_seed(2)
    fan_in, fan_out = TI._calculate_fan_in_and_fan_out(torch.empty(*shape))
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    _check_uniform(init.xavier_uniform_(ag.zeros(*shape), gain).numpy(), -bound, bound)
    _check_normal(init.xavier_normal_(ag.zeros(*shape), gain=gain).numpy(), 0.0, std)
    # torch's own draws have the same statistics
    np.testing.assert_allclose(TI.xavier_normal_(torch.empty(*shape), gain).std().item(),
                               std, rtol=0.01)


@pytest.mark.parametrize(("a", "mode", "nonlinearity"), [
    (0, "fan_in", "leaky_relu"), (0.2, "fan_out", "leaky_relu"), (0, "fan_in", "relu"),
    (0, "fan_out", "tanh"), (0, "fan_in", "linear"),
])
def test_kaiming_bounds_and_std_follow_torch_formula(a, mode, nonlinearity) -> None:
    ag.manual_seed(3)
    shape = (250, 200, 5)
    fan = dict(zip(("fan_in", "fan_out"), TI._calculate_fan_in_and_fan_out(
        torch.empty(*shape))))[mode]
    std = TI.calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    w = init.kaiming_uniform_(ag.zeros(*shape), a=a, mode=mode, nonlinearity=nonlinearity)
    _check_uniform(w.numpy(), -bound, bound)
    w = init.kaiming_normal_(ag.zeros(*shape), a, mode, nonlinearity)
    _check_normal(w.numpy(), 0.0, std)


def _trunc_moments(mean: float, std: float, a: float, b: float) -> tuple[float, float]:
    """Mean and std of N(mean, std²) truncated to [a, b] (closed form)."""
    alpha, beta = (a - mean) / std, (b - mean) / std

    def pdf(x: float) -> float:
        return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)

    def cdf(x: float) -> float:
        return 0.5 * (1 + math.erf(x / math.sqrt(2)))

    z = cdf(beta) - cdf(alpha)
    m = (pdf(alpha) - pdf(beta)) / z
    var = 1 + (alpha * pdf(alpha) - beta * pdf(beta)) / z - m * m
    return mean + std * m, std * math.sqrt(var)


@pytest.mark.parametrize(("mean", "std", "a", "b"), [
    (0.0, 1.0, -2.0, 2.0),     # the default: the normal branch
    (0.5, 2.0, -1.0, 3.0),     # the normal branch, asymmetric window
    (0.0, 1.0, 1.0, 1.5),      # a narrow window: the uniform-proposal branch
    (0.0, 0.02, -0.04, 0.04),  # the usual transformer init
])
def test_trunc_normal_bounds_and_moments(mean, std, a, b) -> None:
    ag.manual_seed(4)
    v = init.trunc_normal_(ag.zeros(*SHAPE), mean, std, a, b).numpy()
    assert v.min() >= a and v.max() <= b
    exp_mean, exp_std = _trunc_moments(mean, std, a, b)
    assert abs(v.mean() - exp_mean) < 5 * exp_std / math.sqrt(v.size)
    np.testing.assert_allclose(v.std(), exp_std, rtol=0.01)
    tv = TI.trunc_normal_(torch.empty(*SHAPE), mean, std, a, b)
    np.testing.assert_allclose(tv.std().item(), exp_std, rtol=0.01)


def test_trunc_normal_warns_like_torch_when_mean_is_far() -> None:
    with pytest.warns(UserWarning, match="mean is more than 2 std from"):
        v = init.trunc_normal_(ag.zeros(100), mean=10.0, a=-2.0, b=2.0).numpy()
    assert v.min() >= -2.0 and v.max() <= 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        init.trunc_normal_(ag.zeros(10))


@pytest.mark.parametrize("name", [
    "uniform_", "normal_", "trunc_normal_", "kaiming_uniform_", "xavier_normal_",
])
def test_integer_tensor_rejected_like_torch(name) -> None:
    raises_like(lambda: getattr(init, name)(ag.zeros(3, 3, dtype="int64")),
                 lambda: getattr(TI, name)(torch.zeros(3, 3, dtype=torch.long)))


def test_complex_uniform_and_normal_fill_both_parts_as_torch() -> None:
    ag.manual_seed(6)
    u = init.uniform_(ag.zeros(SHAPE[0] * SHAPE[1], dtype="complex64"), 1.0, 2.0).numpy()
    assert u.dtype == np.complex64
    _check_uniform(u.real, 1.0, 2.0)
    _check_uniform(u.imag, 1.0, 2.0)
    n = init.normal_(ag.zeros(SHAPE[0] * SHAPE[1], dtype="complex128"), 1.0, 2.0).numpy()
    t = torch.empty(SHAPE[0] * SHAPE[1], dtype=torch.complex128).normal_(1.0, 2.0)
    for part, tpart in ((n.real, t.real), (n.imag, t.imag)):
        _check_normal(part, 1.0, 2.0 / math.sqrt(2))
        np.testing.assert_allclose(part.std(), tpart.std().item(), rtol=0.02)


def test_fills_land_on_the_tensors_device(fake_backend) -> None:
    t = ag.zeros(4, 5, device="fake:1")
    ag.manual_seed(7)
    assert init.kaiming_uniform_(t) is t
    assert t.device is ag.device("fake:1")
    ag.manual_seed(7)
    expected = init.kaiming_uniform_(ag.zeros(4, 5)).numpy()
    np.testing.assert_array_equal(fake_backend.to_host(t.data), expected)
    init.eye_(t)
    np.testing.assert_array_equal(fake_backend.to_host(t.data), np.eye(4, 5))
    init.constant_(t, 3.0)
    np.testing.assert_array_equal(fake_backend.to_host(t.data), np.full((4, 5), 3.0))
