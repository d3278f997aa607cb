"""cross_entropy and nll_loss with PyTorch's full options, the loss modules, and the small
functional forms (softmax's implicit dim, sigmoid, tanh, linear with 1-D operands).

PyTorch is the oracle for values, first- and second-order gradients, graph node
names and errors.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from oracles import arr, check_against_torch, check_second_order, leaf

import aiograd as ag
import aiograd.nn as nn
import aiograd.nn.functional as F

pytestmark = pytest.mark.timeout(60)

torch = pytest.importorskip("torch")
TF = torch.nn.functional

REDUCTIONS = ["mean", "sum", "none"]
WEIGHT = np.array([0.5, 2.0, 1.0, 3.0])
TARGET = np.array([0, 3, -100, 1, 2])  # -100: PyTorch's default ignore_index


def both(values):
    """The same class indices for aiograd (an array) and PyTorch (a tensor)."""
    return np.asarray(values), torch.tensor(values)


# (our kwargs, torch kwargs, logits shape, target): each a different option of cross_entropy.
CLASS_CASES = {
    "ignored_default_index": ({}, (5, 4), TARGET),
    "weight": ({"weight": WEIGHT}, (5, 4), [0, 3, 3, 1, 2]),
    "weight_and_ignored": ({"weight": WEIGHT}, (5, 4), TARGET),
    "ignore_index_in_range": ({"ignore_index": 1}, (5, 4), [0, 1, 3, 1, 2]),
    "ignore_index_above_range": ({"ignore_index": 7}, (5, 4), [0, 7, 3, 1, 2]),
    "label_smoothing": ({"label_smoothing": 0.2}, (5, 4), TARGET),
    "label_smoothing_and_weight": ({"label_smoothing": 0.3, "weight": WEIGHT}, (5, 4), TARGET),
    "spatial_3d": ({}, (2, 4, 3), [[0, 3, -100], [1, 2, 2]]),
    "spatial_4d_weight_smoothing": ({"weight": WEIGHT, "label_smoothing": 0.1}, (2, 4, 2, 2),
                                    [[[0, 3], [1, 1]], [[2, -100], [0, 3]]]),
    "single_sample_ignored": ({"weight": WEIGHT}, (4,), -100),
}


def _kwargs(kwargs, lib):
    out = dict(kwargs)
    if "weight" in out:
        out["weight"] = ag.tensor(out["weight"]) if lib == "ag" else torch.tensor(out["weight"])
    return out


def _class_fns(case, reduction, square=False):
    kwargs, _, target = CLASS_CASES[case]
    ours_t, theirs_t = both(target)
    ours_kw, theirs_kw = _kwargs(kwargs, "ag"), _kwargs(kwargs, "torch")

    def ours(x):
        return F.cross_entropy(x * x if square else x, ours_t, reduction=reduction, **ours_kw)

    def theirs(x):
        return TF.cross_entropy(x * x if square else x, theirs_t, reduction=reduction,
                                **theirs_kw)

    return ours, theirs


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", sorted(CLASS_CASES))
def test_cross_entropy_option_matches_torch(case, reduction):
    ours, theirs = _class_fns(case, reduction)
    check_against_torch(ours, theirs, arr(CLASS_CASES[case][1]))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_of_one_sample_with_a_1d_target_gives_torchs_0d_loss(reduction):
    # Values only: PyTorch's own backward rejects this target shape.
    xs = arr((4,))
    out = F.cross_entropy(ag.tensor(xs), np.array([2]), reduction=reduction)
    expected = TF.cross_entropy(torch.tensor(xs), torch.tensor([2]), reduction=reduction)
    assert out.shape == tuple(expected.shape) == ()
    assert out.item() == pytest.approx(expected.item(), rel=1e-14)


@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("case", sorted(CLASS_CASES))
def test_cross_entropy_option_second_order_matches_torch(case, reduction):
    ours, theirs = _class_fns(case, reduction, square=True)
    check_second_order(ours, theirs, arr(CLASS_CASES[case][1]))


@pytest.mark.parametrize("case, names", [
    ("weight", ["NllLossBackward0", "LogSoftmaxBackward0"]),
    ("ignored_default_index", ["NllLossBackward0", "LogSoftmaxBackward0"]),
    ("label_smoothing", ["AddBackward0"]),
    ("spatial_4d_weight_smoothing", ["AddBackward0"]),
])
def test_cross_entropy_options_record_torchs_graph(case, names):
    ours, theirs = _class_fns(case, "mean")
    out = ours(leaf(arr(CLASS_CASES[case][1])))
    t_out = theirs(torch.tensor(arr(CLASS_CASES[case][1]), requires_grad=True))
    node, t_node = out.grad_fn, t_out.grad_fn
    for name in names:
        assert node.name() == type(t_node).__name__ == name
        node, t_node = node.next_functions[0][0], t_node.next_functions[0][0]


def test_cross_entropy_with_defaults_keeps_the_fused_node():
    x = ag.ones(5, 4, requires_grad=True)
    assert F.cross_entropy(x, np.array([0, 3, 2, 1, 2])).grad_fn.name() == (
        "CrossEntropyLossBackward0")
    # An ignore_index outside [0, C) that no target hits changes nothing.
    out = F.cross_entropy(x, np.array([0, 1, 2, 3, 0]), ignore_index=9)
    assert out.grad_fn.name() == "CrossEntropyLossBackward0"


def test_cross_entropy_ignored_rows_give_zero_loss_and_zero_gradient():
    x = leaf(arr((3, 4)))
    losses = F.cross_entropy(x, np.array([1, -100, 2]), reduction="none")
    assert losses.detach().numpy()[1] == 0.0
    (g,) = ag.grad_sync(F.cross_entropy(x, np.array([1, -100, 2])), x)
    np.testing.assert_array_equal(g.numpy()[1], np.zeros(4))
    # The mean divides by the 2 targets that count, not by 3.
    full = F.cross_entropy(x, np.array([1, -100, 2]), reduction="sum")
    np.testing.assert_allclose(
        F.cross_entropy(x, np.array([1, -100, 2])).item(), full.item() / 2, rtol=1e-15)


def test_weighted_mean_divides_by_the_weights_of_the_targets():
    logits = arr((3, 4))
    x = leaf(logits)
    target = np.array([0, 3, 3])
    loss = F.cross_entropy(x, target, ag.tensor(WEIGHT))
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    picked = -logp[np.arange(3), target] * WEIGHT[target]
    assert loss.item() == pytest.approx(picked.sum() / WEIGHT[target].sum(), rel=1e-13)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_with_every_target_ignored_is_nan_with_zero_grad_like_torch(smoothing):
    xs = arr((2, 3))
    x, tx = leaf(xs), torch.tensor(xs, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss = F.cross_entropy(x, np.array([-100, -100]), label_smoothing=smoothing)
        (g,) = ag.grad_sync(loss, x)
    t_loss = TF.cross_entropy(tx, torch.tensor([-100, -100]), label_smoothing=smoothing)
    (tg,) = torch.autograd.grad(t_loss, tx)
    assert np.isnan(loss.item()) and np.isnan(t_loss.item())
    np.testing.assert_array_equal(g.numpy(), tg.numpy())


def test_nll_loss_with_zero_total_weight_matches_torchs_nan_gradient():
    xs = arr((2, 3))
    weight = np.array([0.0, 0.0, 1.0])
    x, tx = leaf(xs), torch.tensor(xs, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (g,) = ag.grad_sync(F.nll_loss(x, np.array([0, 1]), ag.tensor(weight)), x)
    (tg,) = torch.autograd.grad(
        TF.nll_loss(tx, torch.tensor([0, 1]), torch.tensor(weight)), tx)
    np.testing.assert_array_equal(g.numpy(), tg.numpy())  # nan at the targets, 0 elsewhere


def test_cross_entropy_with_weight_keeps_float32():
    x = ag.ones(3, 4, requires_grad=True)
    loss = F.cross_entropy(x, np.array([0, -100, 3]), ag.tensor(WEIGHT.astype(np.float32)),
                           label_smoothing=0.1)
    assert loss.dtype == ag.float32
    (g,) = ag.grad_sync(loss, x)
    assert g.dtype == ag.float32


# ---- class probabilities ----

PROB_CASES = {
    "plain": {},
    "weight": {"weight": WEIGHT},
    "label_smoothing": {"label_smoothing": 0.25},
    "weight_and_label_smoothing": {"weight": WEIGHT, "label_smoothing": 0.25},
}


def _prob_fns(case, reduction, square=False):
    kwargs = PROB_CASES[case]
    ours_kw, theirs_kw = _kwargs(kwargs, "ag"), _kwargs(kwargs, "torch")

    def ours(x, p):
        return F.cross_entropy(x * x if square else x, p, reduction=reduction, **ours_kw)

    def theirs(x, p):
        return TF.cross_entropy(x * x if square else x, p, reduction=reduction, **theirs_kw)

    return ours, theirs


def _probs(shape, seed=3):
    p = np.random.default_rng(seed).random(shape)
    return p / p.sum(1, keepdims=True)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", sorted(PROB_CASES))
def test_cross_entropy_with_class_probabilities_matches_torch_for_input_and_target(
        case, reduction):
    ours, theirs = _prob_fns(case, reduction)
    check_against_torch(ours, theirs, arr((5, 4)), _probs((5, 4)))


@pytest.mark.parametrize("case", sorted(PROB_CASES))
def test_cross_entropy_with_class_probabilities_second_order_matches_torch(case):
    ours, theirs = _prob_fns(case, "mean", square=True)
    check_second_order(ours, theirs, arr((5, 4)), _probs((5, 4)))


def test_cross_entropy_with_spatial_class_probabilities_matches_torch():
    ours, theirs = _prob_fns("weight", "none")
    check_against_torch(ours, theirs, arr((2, 4, 3)), _probs((2, 4, 3)))


def test_cross_entropy_probability_weight_gets_a_gradient_like_torch():
    xs, ps = arr((3, 4)), _probs((3, 4))
    w, tw = leaf(WEIGHT), torch.tensor(WEIGHT, requires_grad=True)
    (g,) = ag.grad_sync(F.cross_entropy(ag.tensor(xs), ps, w), w)
    (tg,) = torch.autograd.grad(TF.cross_entropy(torch.tensor(xs), torch.tensor(ps), tw), tw)
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-12)


# ---- nll_loss ----

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape, target, kwargs", [
    ((5, 4), TARGET, {}),
    ((5, 4), [0, 3, 3, 1, 2], {"weight": WEIGHT}),
    ((5, 4), [0, 1, 3, 1, 2], {"weight": WEIGHT, "ignore_index": 1}),
    ((4,), 3, {"weight": WEIGHT}),
    ((2, 4, 3), [[0, 3, -100], [1, 2, 2]], {"weight": WEIGHT}),
], ids=["ignored", "weight", "weight_ignore_in_range", "one_sample", "spatial"])
def test_nll_loss_matches_torch(shape, target, kwargs, reduction):
    ours_t, theirs_t = both(target)
    ours_kw, theirs_kw = _kwargs(kwargs, "ag"), _kwargs(kwargs, "torch")
    check_against_torch(
        lambda x: F.nll_loss(x, ours_t, reduction=reduction, **ours_kw),
        lambda x: TF.nll_loss(x, theirs_t, reduction=reduction, **theirs_kw),
        arr(shape))
    check_second_order(
        lambda x: F.nll_loss(F.log_softmax(x * x, -1), ours_t, reduction=reduction, **ours_kw)
        if len(shape) < 3 else F.nll_loss(x * x, ours_t, reduction=reduction, **ours_kw),
        lambda x: TF.nll_loss(TF.log_softmax(x * x, -1), theirs_t, reduction=reduction,
                              **theirs_kw)
        if len(shape) < 3 else TF.nll_loss(x * x, theirs_t, reduction=reduction, **theirs_kw),
        arr(shape))


@pytest.mark.parametrize("shape, target, name", [
    ((5, 4), [0, 1, 2, 3, 0], "NllLossBackward0"),
    ((2, 4, 3, 3), np.zeros((2, 3, 3), dtype=np.int64), "NllLoss2DBackward0"),
])
def test_nll_loss_records_torchs_node(shape, target, name):
    out = F.nll_loss(ag.ones(*shape, requires_grad=True), np.asarray(target))
    t_out = TF.nll_loss(torch.ones(shape, requires_grad=True), torch.tensor(target))
    assert out.grad_fn.name() == type(t_out.grad_fn).__name__ == name


def test_nll_loss_runs_on_another_device_backend(fake_backend):
    xs = arr((5, 4))
    x = ag.tensor(xs, device="fake:1", requires_grad=True)
    weight = ag.tensor(WEIGHT, device="fake:1")
    target = ag.tensor(np.array([0, 1, 3, 1, 2]), device="fake:1")
    loss = F.cross_entropy(x, target, weight, ignore_index=1, label_smoothing=0.1)
    (g,) = ag.grad_sync(loss, x)
    assert loss.device is g.device is ag.device("fake:1")
    cpu = leaf(xs)
    (expected,) = ag.grad_sync(F.cross_entropy(cpu, np.array([0, 1, 3, 1, 2]),
                                               ag.tensor(WEIGHT), ignore_index=1,
                                               label_smoothing=0.1), cpu)
    np.testing.assert_allclose(fake_backend.to_host(g.data), expected.numpy(), rtol=1e-12)


# ---- bad input: the same error type and message as PyTorch ----

ERROR_CASES = {
    "weight_of_the_wrong_length": (
        lambda lib: dict(input=lib.ones(2, 3), target=[0, 1], weight=lib.ones(2)),
        RuntimeError, r"weight tensor should be defined either for all 3 classes or no "
                      r"classes but got weight tensor of shape: \[2\]"),
    "weight_of_another_dtype": (
        lambda lib: dict(input=lib.ones(2, 3), target=[0, 1],
                         weight=lib.ones(3, dtype=lib.float64)),
        RuntimeError, "expected scalar type Float but found Double"),
    "label_smoothing_above_one": (
        lambda lib: dict(input=lib.ones(2, 3), target=[0, 1], label_smoothing=1.5),
        RuntimeError, r"label_smoothing must be between 0.0 and 1.0. Got: 1.5"),
    "integer_target_of_the_input_shape": (
        lambda lib: dict(input=lib.ones(2, 3), target=[[0, 1, 1], [0, 0, 0]]),
        RuntimeError, "Expected floating point type for target with class probabilities, "
                      "got Long"),
    "ignore_index_with_probabilities": (
        lambda lib: dict(input=lib.ones(2, 3), target=lib.ones(2, 3), ignore_index=0),
        RuntimeError, "ignore_index is not supported for floating point target"),
    "out_of_bounds_target": (
        lambda lib: dict(input=lib.ones(2, 3), target=[0, 5]),
        IndexError, "Target 5 is out of bounds"),
    "out_of_bounds_target_with_weight": (
        lambda lib: dict(input=lib.ones(2, 3), target=[-3, 1], weight=lib.ones(3)),
        IndexError, "Target -3 is out of bounds"),
    "batch_size_mismatch": (
        lambda lib: dict(input=lib.ones(2, 3), target=[0]),
        ValueError, r"Expected input batch_size \(2\) to match target batch_size \(1\)"),
    "spatial_size_mismatch": (
        lambda lib: dict(input=lib.ones(2, 3, 4), target=np.zeros((2, 5), dtype=np.int64)),
        RuntimeError, r"Expected target size \[2, 4\], got \[2, 5\]"),
    "one_sample_with_two_targets": (
        lambda lib: dict(input=lib.ones(3), target=[1, 2]),
        ValueError, "For 1D input, 1D target must have size 1, but got target size: 2"),
    "multi_target": (
        lambda lib: dict(input=lib.ones(2, 3), target=[[0, 1], [1, 1]]),
        RuntimeError, "0D or 1D target tensor expected, multi-target not supported"),
    "scalar_input": (
        lambda lib: dict(input=lib.ones(()), target=[0]),
        ValueError, r"Expected 1 or more dimensions \(got 0\)"),
}


def _call(fn_name, lib, spec):
    kwargs = spec(ag if lib is None else torch)
    if lib is None:
        kwargs["target"] = np.asarray(kwargs["target"])
        return getattr(F, fn_name)(**kwargs)
    if not isinstance(kwargs["target"], torch.Tensor):
        kwargs["target"] = torch.tensor(kwargs["target"])
    return getattr(TF, fn_name)(**kwargs)


# PyTorch's cross_entropy fails on a 0-d input in log_softmax, with another message.
@pytest.mark.parametrize("case", sorted(set(ERROR_CASES) - {"scalar_input"}))
def test_cross_entropy_rejects_bad_input_like_torch(case):
    spec, exc, pattern = ERROR_CASES[case]
    with pytest.raises(exc, match=pattern):
        _call("cross_entropy", None, spec)
    with pytest.raises(exc, match=pattern):
        _call("cross_entropy", torch, spec)


@pytest.mark.parametrize("case", ["weight_of_the_wrong_length", "weight_of_another_dtype",
                                  "out_of_bounds_target", "batch_size_mismatch",
                                  "spatial_size_mismatch", "multi_target", "scalar_input"])
def test_nll_loss_rejects_bad_input_like_torch(case):
    spec, exc, pattern = ERROR_CASES[case]
    with pytest.raises(exc, match=pattern):
        _call("nll_loss", None, spec)
    with pytest.raises(exc, match=pattern):
        _call("nll_loss", torch, spec)


@pytest.mark.parametrize("fn_name", ["nll_loss", "cross_entropy"])
def test_a_weight_that_requires_grad_is_rejected_like_torch(fn_name):
    message = re.escape("The function 'nll_loss_forward' is not differentiable with respect "
                        "to argument 'weight'.")
    with pytest.raises(RuntimeError, match=message):
        getattr(F, fn_name)(ag.ones(2, 3), np.array([0, 1]), ag.ones(3, requires_grad=True))
    with pytest.raises(RuntimeError, match=message):
        getattr(TF, fn_name)(torch.ones(2, 3), torch.tensor([0, 1]),
                             torch.ones(3, requires_grad=True))


def test_cross_entropy_rejects_a_float_ignore_index_and_an_unknown_reduction():
    with pytest.raises(TypeError, match="'ignore_index' must be int, not float"):
        F.cross_entropy(ag.ones(2, 3), np.array([0, 1]), ignore_index=1.5)
    with pytest.raises(ValueError) as info:
        F.nll_loss(ag.ones(2, 3), np.array([0, 1]), reduction="avg")
    assert str(info.value) == "avg is not a valid value for reduction"


# ---- loss modules ----

@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_loss_module_matches_torch(reduction):
    ours = nn.CrossEntropyLoss(ag.tensor(WEIGHT), ignore_index=1, reduction=reduction,
                               label_smoothing=0.1)
    theirs = torch.nn.CrossEntropyLoss(torch.tensor(WEIGHT), ignore_index=1,
                                       reduction=reduction, label_smoothing=0.1)
    target = [0, 1, 3, 2, 1]
    check_against_torch(lambda x: ours(x, np.array(target)),
                        lambda x: theirs(x, torch.tensor(target)), arr((5, 4)))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_module_matches_torch(reduction):
    ours = nn.NLLLoss(ag.tensor(WEIGHT), ignore_index=2, reduction=reduction)
    theirs = torch.nn.NLLLoss(torch.tensor(WEIGHT), ignore_index=2, reduction=reduction)
    target = [0, 2, 3, 2, 1]
    check_against_torch(lambda x: ours(x, np.array(target)),
                        lambda x: theirs(x, torch.tensor(target)), arr((5, 4)))


@pytest.mark.parametrize("cls", ["CrossEntropyLoss", "NLLLoss"])
def test_loss_module_weight_is_a_buffer_like_torch(cls):
    ours = getattr(nn, cls)(ag.tensor(WEIGHT))
    theirs = getattr(torch.nn, cls)(torch.tensor(WEIGHT))
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    np.testing.assert_array_equal(ours.state_dict()["weight"], WEIGHT)
    assert ours.float().weight.dtype == ag.float32  # buffers follow the module's casts
    unweighted = getattr(nn, cls)()
    assert unweighted.weight is None and list(unweighted.state_dict()) == []


# ---- softmax's dim, sigmoid, tanh ----

@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 3, 2), (2, 3, 2, 2)], ids=str)
def test_softmax_without_dim_warns_and_picks_torchs_dim(name, shape):
    xs = arr(shape)
    with pytest.warns(UserWarning, match=f"Implicit dimension choice for {name} has been "
                                         "deprecated"):
        out = getattr(F, name)(ag.tensor(xs))
    with pytest.warns(UserWarning):
        expected = getattr(TF, name)(torch.tensor(xs))
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_dtype_casts_the_input_first_like_torch(name):
    xs = arr((2, 3)).astype(np.float32)
    x = ag.tensor(xs, requires_grad=True)
    out = getattr(F, name)(x, 1, dtype=ag.float64)
    t_out = getattr(TF, name)(torch.tensor(xs), 1, dtype=torch.float64)
    assert out.dtype == ag.float64
    np.testing.assert_allclose(out.detach().numpy(), t_out.numpy(), rtol=1e-12)
    (g,) = ag.grad_sync(out.sum(), x)
    assert g.dtype == ag.float32


@pytest.mark.parametrize("name", ["sigmoid", "tanh"])
def test_functional_sigmoid_and_tanh_match_torch(name):
    check_against_torch(getattr(F, name), getattr(TF, name), arr((2, 3)))


# ---- linear with 1-D operands ----

@pytest.mark.parametrize("x_shape, w_shape, b_shape", [
    ((4, 3), (3,), None),
    ((5, 4, 3), (3,), None),
    ((3,), (3,), ()),
    ((3,), (2, 3), (2,)),
    ((5, 4, 3), (2, 3), (2,)),
], ids=str)
def test_linear_with_1d_operands_matches_torch(x_shape, w_shape, b_shape):
    arrays = [arr(x_shape, 1), arr(w_shape, 2)] + ([] if b_shape is None else [arr(b_shape, 3)])
    out_shape = TF.linear(*[torch.tensor(a) for a in arrays]).shape
    check_against_torch(F.linear, TF.linear, *arrays)
    assert F.linear(*[ag.tensor(a) for a in arrays]).shape == tuple(out_shape)


@pytest.mark.parametrize("x_shape, w_shape, b_shape, pattern", [
    ((4, 3), (3,), (), "mat2 must be a matrix, got 1-D tensor"),
    ((4, 3), (2, 2, 3), None, "t\\(\\) expects a tensor with <= 2 dimensions, but self is 3D"),
    ((4, 3), (), None, "both arguments to linear need to be at least 1D, but they are 2D and 0D"),
], ids=str)
def test_linear_rejects_bad_ranks_like_torch(x_shape, w_shape, b_shape, pattern):
    ours = [ag.ones(*s) for s in (x_shape, w_shape)]
    theirs = [torch.ones(s) for s in (x_shape, w_shape)]
    if b_shape is not None:
        ours.append(ag.ones(*b_shape))
        theirs.append(torch.ones(b_shape))
    with pytest.raises(RuntimeError, match=pattern):
        F.linear(*ours)
    with pytest.raises(RuntimeError, match=pattern):
        TF.linear(*theirs)
