"""batch_norm, group_norm, instance_norm and their modules against PyTorch.

PyTorch is the oracle for values, first- and second-order gradients, node names, the
running statistics, module reprs, state_dicts and errors.
"""

from __future__ import annotations

import numpy as np
import pytest
from oracles import (
    arr,
    check_against_torch,
    check_on_fake_device,
    check_second_order,
    leaf,
    raises_like,
)

import aiograd as ag
from aiograd._ops.batch_norm import batch_norm, group_norm, instance_norm
from aiograd.nn._norm import (
    BatchNorm1d,
    BatchNorm2d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
)

pytestmark = pytest.mark.timeout(60)

torch = pytest.importorskip("torch")
TF = torch.nn.functional

SHAPES = [(4, 3), (4, 3, 5), (2, 3, 4, 3)]


def _stats(lib, channels, seed=5):
    """Running mean and (positive) variance of float64, for aiograd or torch."""
    rng = np.random.default_rng(seed)
    mean, var = rng.standard_normal(channels), rng.uniform(0.5, 2.0, channels)
    return lib.tensor(mean), lib.tensor(var)


def _functional(lib, bn, training, affine, channels):
    """``fn(x, weight, bias)`` or ``fn(x)``: batch_norm with fresh running stats."""
    def fn(x, *wb):
        mean, var = _stats(lib, channels)
        return bn(x, mean, var, *wb, training=training, momentum=0.3, eps=1e-3)
    return fn


# ---- batch_norm ----

@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_matches_torch_first_and_second_order(shape, training, affine):
    c = shape[1]
    arrays = [arr(shape, 1)] + ([arr((c,), 2), arr((c,), 3)] if affine else [])
    fn = _functional(ag, batch_norm, training, affine, c)
    torch_fn = _functional(torch, TF.batch_norm, training, affine, c)
    check_against_torch(fn, torch_fn, *arrays)
    if training or affine:  # else the gradient is constant: see the next test
        check_second_order(fn, torch_fn, *arrays)


def test_batch_norm_eval_input_gradient_is_constant_without_weight():
    """``g * rstd`` records nothing that depends on the input (PyTorch's
    NativeBatchNormBackwardBackward0 output requires grad, its gradient being None)."""
    x = leaf(arr((4, 3), 1))
    y = batch_norm(x, *_stats(ag, 3), training=False)
    (g,) = ag.grad_sync(y.sum(), x, create_graph=True)
    _, var = _stats(torch, 3)
    np.testing.assert_allclose(g.numpy(), np.broadcast_to((var + 1e-5).rsqrt().numpy(), (4, 3)),
                               rtol=1e-12)
    assert not g.requires_grad


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_node_name_matches_torch(training):
    x, w = arr((4, 3, 2), 1), arr((3,), 2)
    y = batch_norm(leaf(x), *_stats(ag, 3), leaf(w), training=training)
    ty = TF.batch_norm(torch.tensor(x, requires_grad=True), *_stats(torch, 3),
                       torch.tensor(w, requires_grad=True), training=training)
    assert y.grad_fn.name() == ty.grad_fn.name() == "NativeBatchNormBackward0"


@pytest.mark.parametrize("momentum", [0.1, 1.0, 0.0])
def test_batch_norm_updates_running_stats_in_place_as_torch(momentum):
    x = arr((5, 3, 4), 1)
    mean, var = _stats(ag, 3)
    t_mean, t_var = _stats(torch, 3)
    data_before = mean.data
    y = batch_norm(ag.tensor(x), mean, var, training=True, momentum=momentum)
    ty = TF.batch_norm(torch.tensor(x), t_mean, t_var, training=True, momentum=momentum)
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(mean.numpy(), t_mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(var.numpy(), t_var.numpy(), rtol=1e-12)  # unbiased variance
    assert mean.data is data_before
    assert mean._version == t_mean._version == 0


def test_batch_norm_eval_leaves_running_stats_alone():
    mean, var = _stats(ag, 3)
    before = mean.numpy().copy(), var.numpy().copy()
    batch_norm(ag.tensor(arr((4, 3), 1)), mean, var, training=False)
    np.testing.assert_array_equal(mean.numpy(), before[0])
    np.testing.assert_array_equal(var.numpy(), before[1])


def test_batch_norm_without_running_stats_uses_the_batch():
    x = arr((4, 3, 2), 1)
    y = batch_norm(ag.tensor(x), None, None, training=True)
    ty = TF.batch_norm(torch.tensor(x), None, None, training=True)
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-7, atol=1e-12)


def test_batch_norm_float32_matches_torch():
    x = arr((6, 3, 4), 1).astype(np.float32)
    w = arr((3,), 2).astype(np.float32)
    ax, aw = ag.tensor(x, requires_grad=True), ag.tensor(w, requires_grad=True)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    mean, var = (t.float() for t in _stats(ag, 3))
    t_mean, t_var = (t.float() for t in _stats(torch, 3))
    y = batch_norm(ax, mean, var, aw, training=True)
    ty = TF.batch_norm(tx, t_mean, t_var, tw, training=True)
    assert y.dtype == np.float32 and mean.dtype == np.float32
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean.numpy(), t_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var.numpy(), t_var.numpy(), rtol=1e-5, atol=1e-6)
    v = arr(x.shape, 4).astype(np.float32)
    grads = ag.grad_sync(y, [ax, aw], ag.tensor(v))
    t_grads = torch.autograd.grad(ty, [tx, tw], torch.tensor(v))
    for g, tg in zip(grads, t_grads):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-4, atol=1e-5)


def test_batch_norm_output_is_contiguous_for_a_transposed_input():
    x = ag.tensor(arr((4, 3, 2), 1)).transpose(0, 2)
    y = batch_norm(x, None, None, training=True)
    ty = TF.batch_norm(torch.tensor(arr((4, 3, 2), 1)).transpose(0, 2), None, None,
                       training=True)
    assert y.data.flags.c_contiguous
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-7, atol=1e-12)


def test_batch_norm_passes_gradcheck():
    w, b = leaf(arr((3,), 2)), leaf(arr((3,), 3))
    x = leaf(arr((3, 3, 2), 1))
    assert ag.gradcheck(lambda x, w, b: batch_norm(x, None, None, w, b, training=True),
                        (x, w, b))


def test_batch_norm_of_an_empty_batch_records_torchs_graph():
    x = ag.tensor(np.zeros((0, 3)), requires_grad=True)
    w = leaf(arr((3,), 2))
    y = batch_norm(x, None, None, w, w, training=True)
    ty = TF.batch_norm(torch.zeros(0, 3, dtype=torch.float64, requires_grad=True), None,
                       None, torch.tensor(arr((3,), 2), requires_grad=True),
                       torch.tensor(arr((3,), 2), requires_grad=True), training=True)
    assert y.shape == (0, 3)
    assert y.grad_fn.name() == ty.grad_fn.name() == "AddBackward0"


_BAD_CALLS = {
    "one value per channel": lambda lib: ((lib.ones(1, 3, dtype=lib.float64), None, None),
                                          {"training": True}),
    "one value per channel 3d": lambda lib: ((lib.ones(1, 3, 1, dtype=lib.float64), None,
                                              None), {"training": True}),
    "eval without mean": lambda lib: ((lib.ones(2, 3, dtype=lib.float64), None,
                                       lib.ones(3, dtype=lib.float64)), {}),
    "eval without var": lambda lib: ((lib.ones(2, 3, dtype=lib.float64),
                                      lib.ones(3, dtype=lib.float64), None), {}),
    "one stat": lambda lib: ((lib.ones(2, 3, dtype=lib.float64),
                              lib.ones(3, dtype=lib.float64), None), {"training": True}),
    "channels of mean": lambda lib: ((lib.ones(2, 4, dtype=lib.float64),
                                      lib.ones(3, dtype=lib.float64),
                                      lib.ones(3, dtype=lib.float64)), {}),
    "channels of weight": lambda lib: ((lib.ones(2, 3, dtype=lib.float64), None, None,
                                        lib.ones(4, dtype=lib.float64)), {"training": True}),
    "channels of bias": lambda lib: ((lib.ones(2, 3, dtype=lib.float64), None, None, None,
                                      lib.ones(2, dtype=lib.float64)), {"training": True}),
    "1-d input": lambda lib: ((lib.ones(3, dtype=lib.float64), lib.ones(3, dtype=lib.float64),
                               lib.ones(3, dtype=lib.float64)), {}),
    "1-d input no stats": lambda lib: ((lib.ones(3, dtype=lib.float64), None, None),
                                       {"training": True}),
    "zero eps": lambda lib: ((lib.ones(2, 3, dtype=lib.float64), None, None),
                             {"training": True, "eps": 0.0}),
    "negative eps": lambda lib: ((lib.ones(2, 3, dtype=lib.float64),
                                  lib.ones(3, dtype=lib.float64),
                                  lib.ones(3, dtype=lib.float64)), {"eps": -1.0}),
    "integer input": lambda lib: ((lib.ones(2, 3, dtype=lib.int64), None, None),
                                  {"training": True}),
    "float32 stats": lambda lib: ((lib.ones(2, 3, dtype=lib.float64),
                                   lib.ones(3, dtype=lib.float32),
                                   lib.ones(3, dtype=lib.float32)), {}),
    "float64 weight": lambda lib: ((lib.ones(2, 3, dtype=lib.float32), None, None,
                                    lib.ones(3, dtype=lib.float64)), {"training": True}),
    "momentum None": lambda lib: ((lib.ones(2, 3, dtype=lib.float64), None, None),
                                  {"training": True, "momentum": None}),
}


@pytest.mark.parametrize("case", sorted(_BAD_CALLS))
def test_batch_norm_rejects_misuse_as_torch(case):
    args, kwargs = _BAD_CALLS[case](ag)
    t_args, t_kwargs = _BAD_CALLS[case](torch)
    raises_like(lambda: batch_norm(*args, **kwargs), lambda: TF.batch_norm(*t_args, **t_kwargs))


# ---- BatchNorm1d / BatchNorm2d ----

MODULES = [(BatchNorm1d, torch.nn.BatchNorm1d, (6, 3)),
           (BatchNorm1d, torch.nn.BatchNorm1d, (4, 3, 5)),
           (BatchNorm2d, torch.nn.BatchNorm2d, (2, 3, 4, 3))]


@pytest.mark.parametrize("cls, t_cls, shape", MODULES)
@pytest.mark.parametrize("kwargs", [{}, {"momentum": None}, {"affine": False},
                                    {"track_running_stats": False}, {"bias": False}])
def test_module_trains_and_evaluates_as_torch(cls, t_cls, shape, kwargs):
    m, tm = cls(3, **kwargs), t_cls(3, **kwargs)
    assert repr(m) == repr(tm)
    for step in range(3):
        if step == 2:
            m.eval(), tm.eval()
        x = arr(shape, step).astype(np.float32)
        ax, tx = ag.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        y, ty = m(ax), tm(tx)
        assert y.grad_fn.name() == ty.grad_fn.name()
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
        (ag.tensor(arr(shape, 9).astype(np.float32)) * y).sum().backward_sync()
        (torch.tensor(arr(shape, 9).astype(np.float32)) * ty).sum().backward()
        np.testing.assert_allclose(ax.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
        for (name, p), tp in zip(m.named_parameters(), tm.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-5,
                                       err_msg=name)
        state, t_state = m.state_dict(), tm.state_dict()
        assert list(state) == list(t_state)
        for key in state:
            assert state[key].dtype == t_state[key].numpy().dtype, key
            np.testing.assert_allclose(state[key], t_state[key].numpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=key)


def test_module_buffers_and_state_dict_keys_match_torch():
    m, tm = BatchNorm2d(4), torch.nn.BatchNorm2d(4)
    assert list(m.state_dict()) == list(tm.state_dict()) == [
        "weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert m.num_batches_tracked.dtype == np.int64 and m.num_batches_tracked.shape == ()
    assert [n for n, _ in m.named_buffers()] == [n for n, _ in tm.named_buffers()]
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    bare, t_bare = BatchNorm1d(4, affine=False, track_running_stats=False), \
        torch.nn.BatchNorm1d(4, affine=False, track_running_stats=False)
    assert list(bare.state_dict()) == list(t_bare.state_dict()) == []
    assert bare.running_mean is None and bare.weight is None


def test_module_state_dict_round_trips_and_reset_running_stats():
    m = BatchNorm1d(3)
    m(ag.tensor(arr((5, 3), 1).astype(np.float32)))
    other = BatchNorm1d(3)
    assert str(other.load_state_dict(m.state_dict())) == "<All keys matched successfully>"
    np.testing.assert_array_equal(other.running_var.numpy(), m.running_var.numpy())
    assert int(other.num_batches_tracked) == 1
    other.reset_running_stats()
    assert int(other.num_batches_tracked) == 0
    np.testing.assert_array_equal(other.running_var.numpy(), np.ones(3, np.float32))


def test_module_counts_batches_even_when_the_batch_is_rejected():
    m, tm = BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    raises_like(lambda: m(ag.ones(1, 3)), lambda: tm(torch.ones(1, 3)))
    assert int(m.num_batches_tracked) == int(tm.num_batches_tracked) == 1
    m.eval(), tm.eval()
    y, ty = m(ag.ones(1, 3)), tm(torch.ones(1, 3))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("cls, t_cls, shape", [(BatchNorm1d, torch.nn.BatchNorm1d, (2, 3, 4, 5)),
                                               (BatchNorm1d, torch.nn.BatchNorm1d, (3,)),
                                               (BatchNorm2d, torch.nn.BatchNorm2d, (2, 3, 4))])
def test_module_rejects_wrong_ranks_as_torch(cls, t_cls, shape):
    raises_like(lambda: cls(3)(ag.ones(*shape)), lambda: t_cls(3)(torch.ones(*shape)))


def test_module_float64_and_dtype_argument():
    m, tm = BatchNorm2d(2, dtype=ag.float64), torch.nn.BatchNorm2d(2, dtype=torch.float64)
    assert m.weight.dtype == m.running_mean.dtype == np.float64
    x = arr((3, 2, 2, 2), 1)
    y, ty = m(ag.tensor(x)), tm(torch.tensor(x))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(m.running_var.numpy(), tm.running_var.numpy(), rtol=1e-12)


# ---- group_norm / GroupNorm ----

@pytest.mark.parametrize("shape, groups", [((3, 4), 2), ((2, 6, 5), 3), ((2, 4, 3, 2), 1),
                                           ((2, 4, 3), 4)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_matches_torch_first_and_second_order(shape, groups, affine):
    c = shape[1]
    arrays = [arr(shape, 1)] + ([arr((c,), 2), arr((c,), 3)] if affine else [])
    check_against_torch(lambda x, *wb: group_norm(x, groups, *wb, eps=1e-3),
                        lambda x, *wb: TF.group_norm(x, groups, *wb, eps=1e-3), *arrays)
    check_second_order(lambda x, *wb: group_norm(x, groups, *wb, eps=1e-3),
                       lambda x, *wb: TF.group_norm(x, groups, *wb, eps=1e-3), *arrays)


def test_group_norm_node_name_float32_and_empty_batch_match_torch():
    x = arr((3, 4, 2), 1).astype(np.float32)
    y = group_norm(ag.tensor(x, requires_grad=True), 2)
    ty = TF.group_norm(torch.tensor(x, requires_grad=True), 2)
    assert y.grad_fn.name() == ty.grad_fn.name() == "NativeGroupNormBackward0"
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    empty = group_norm(ag.tensor(np.zeros((0, 4)), requires_grad=True), 2)
    assert empty.shape == (0, 4) and empty.grad_fn.name() == "NativeGroupNormBackward0"


_BAD_GROUP_CALLS = {
    "indivisible": lambda lib: (lib.ones(2, 3, 4, dtype=lib.float64), 2),
    "1-d input": lambda lib: (lib.ones(3, dtype=lib.float64), 1),
    "weight size": lambda lib: (lib.ones(2, 4, dtype=lib.float64), 2,
                                lib.ones(3, dtype=lib.float64)),
    "bias size": lambda lib: (lib.ones(2, 4, dtype=lib.float64), 2, None,
                              lib.ones(5, dtype=lib.float64)),
    "bias size with weight": lambda lib: (lib.ones(2, 4, dtype=lib.float64), 2,
                                          lib.ones(4, dtype=lib.float64),
                                          lib.ones(5, dtype=lib.float64)),
    "one value per group": lambda lib: (lib.ones(1, 4, dtype=lib.float64), 4),
    "float32 weight": lambda lib: (lib.ones(2, 4, dtype=lib.float64), 2, lib.ones(4)),
    "integer input": lambda lib: (lib.ones(2, 4, dtype=lib.int64), 2),
    "zero groups": lambda lib: (lib.ones(2, 4, dtype=lib.float64), 0),
}


@pytest.mark.parametrize("case", sorted(_BAD_GROUP_CALLS))
def test_group_norm_rejects_misuse_as_torch(case):
    raises_like(lambda: group_norm(*_BAD_GROUP_CALLS[case](ag)),
                 lambda: TF.group_norm(*_BAD_GROUP_CALLS[case](torch)))


@pytest.mark.parametrize("kwargs", [{}, {"affine": False}, {"bias": False}])
def test_group_norm_module_matches_torch(kwargs):
    m, tm = GroupNorm(2, 4, **kwargs), torch.nn.GroupNorm(2, 4, **kwargs)
    assert repr(m) == repr(tm)
    assert list(m.state_dict()) == list(tm.state_dict())
    x = arr((3, 4, 5), 1).astype(np.float32)
    ax, tx = ag.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, ty = m(ax), tm(tx)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    y.sum().backward_sync()
    (ty.sum()).backward()
    np.testing.assert_allclose(ax.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    for p, tp in zip(m.parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_group_norm_module_rejects_indivisible_channels_as_torch():
    raises_like(lambda: GroupNorm(2, 3), lambda: torch.nn.GroupNorm(2, 3))


# ---- instance_norm / InstanceNorm1d / InstanceNorm2d ----

@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 3, 2, 3)])
@pytest.mark.parametrize("use_input_stats", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_instance_norm_matches_torch_first_and_second_order(shape, use_input_stats, affine):
    c = shape[1]
    arrays = [arr(shape, 1)] + ([arr((c,), 2), arr((c,), 3)] if affine else [])

    def build(lib, fn):
        def call(x, *wb):
            return fn(x, *_stats(lib, c), *wb, use_input_stats=use_input_stats, eps=1e-3)
        return call
    check_against_torch(build(ag, instance_norm), build(torch, TF.instance_norm), *arrays)
    if use_input_stats or affine:
        check_second_order(build(ag, instance_norm), build(torch, TF.instance_norm), *arrays)


def test_instance_norm_graph_and_running_stats_match_torch():
    x, w = arr((3, 2, 5), 1), arr((2,), 2)
    mean, var = _stats(ag, 2)
    t_mean, t_var = _stats(torch, 2)
    y = instance_norm(leaf(x), mean, var, leaf(w), momentum=0.4)
    ty = TF.instance_norm(torch.tensor(x, requires_grad=True), t_mean, t_var,
                          torch.tensor(w, requires_grad=True), momentum=0.4)
    assert y.grad_fn.name() == ty.grad_fn.name() == "ViewBackward0"
    inner, t_inner = y.grad_fn.next_functions[0][0], ty.grad_fn.next_functions[0][0]
    assert inner.name() == t_inner.name() == "NativeBatchNormBackward0"
    assert [e[0].name() for e in inner.next_functions if e[0] is not None] == [
        e[0].name() for e in t_inner.next_functions if e[0] is not None]
    np.testing.assert_allclose(mean.numpy(), t_mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(var.numpy(), t_var.numpy(), rtol=1e-12)
    assert mean._version == t_mean._version == 1


@pytest.mark.parametrize("case", ["one spatial element", "no stats in eval"])
def test_instance_norm_rejects_misuse_as_torch(case):
    def call(lib, fn):
        if case == "one spatial element":
            return lambda: fn(lib.ones(2, 3, 1, dtype=lib.float64))
        return lambda: fn(lib.ones(2, 3, 4, dtype=lib.float64), use_input_stats=False)
    raises_like(call(ag, instance_norm), call(torch, TF.instance_norm))


@pytest.mark.parametrize("cls, t_cls, shape", [
    (InstanceNorm1d, torch.nn.InstanceNorm1d, (2, 3, 5)),
    (InstanceNorm1d, torch.nn.InstanceNorm1d, (3, 5)),
    (InstanceNorm2d, torch.nn.InstanceNorm2d, (2, 3, 2, 3)),
    (InstanceNorm2d, torch.nn.InstanceNorm2d, (3, 2, 3))])
@pytest.mark.parametrize("kwargs", [{}, {"affine": True, "track_running_stats": True},
                                    {"track_running_stats": True, "momentum": None}])
def test_instance_norm_module_matches_torch(cls, t_cls, shape, kwargs):
    m, tm = cls(3, **kwargs), t_cls(3, **kwargs)
    assert repr(m) == repr(tm)
    assert list(m.state_dict()) == list(tm.state_dict())
    for step in range(3):
        if step == 2:
            m.eval(), tm.eval()
        x = arr(shape, step).astype(np.float32)
        ax, tx = ag.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        y, ty = m(ax), tm(tx)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5,
                                   atol=1e-5)
        (ag.tensor(arr(shape, 9).astype(np.float32)) * y).sum().backward_sync()
        (torch.tensor(arr(shape, 9).astype(np.float32)) * ty).sum().backward()
        np.testing.assert_allclose(ax.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
        for key, value in tm.state_dict().items():
            np.testing.assert_allclose(m.state_dict()[key], value.numpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=key)


def test_instance_norm_module_checks_features_and_ranks_as_torch():
    raises_like(lambda: InstanceNorm1d(4, affine=True)(ag.ones(2, 3, 5)),
                 lambda: torch.nn.InstanceNorm1d(4, affine=True)(torch.ones(2, 3, 5)))
    raises_like(lambda: InstanceNorm2d(3)(ag.ones(2, 3)),
                 lambda: torch.nn.InstanceNorm2d(3)(torch.ones(2, 3)))
    with pytest.warns(UserWarning, match="does not match num_features"):
        InstanceNorm1d(4)(ag.ones(2, 3, 5))


# ---- devices ----

FAKE_OPS = {
    "batch_norm": lambda t: batch_norm(t, None, None, training=True) * t,
    "group_norm": lambda t: group_norm(t.reshape(2, 3, 1), 3) * t.reshape(2, 3, 1),
    "instance_norm": lambda t: instance_norm(t.reshape(1, 2, 3)) * t.reshape(1, 2, 3),
}


@pytest.mark.parametrize("name", sorted(FAKE_OPS))
def test_norms_stay_on_their_device(fake_backend, name):
    check_on_fake_device(fake_backend, FAKE_OPS[name])


def test_running_stats_update_on_their_device(fake_backend):
    x = ag.tensor(arr((4, 3), 1), device="fake:1")
    mean = ag.zeros(3, dtype=ag.float64, device="fake:1")
    var = ag.ones(3, dtype=ag.float64, device="fake:1")
    batch_norm(x, mean, var, training=True)
    t_mean, t_var = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    TF.batch_norm(torch.tensor(arr((4, 3), 1)), t_mean, t_var, training=True)
    assert mean.device is ag.device("fake:1")
    np.testing.assert_allclose(fake_backend.to_host(mean.data), t_mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(fake_backend.to_host(var.data), t_var.numpy(), rtol=1e-12)


def test_a_state_dict_without_num_batches_tracked_or_with_it_as_one_element_loads_as_torch():
    seen = []
    for lib in (ag, torch):
        m = lib.nn.BatchNorm2d(3)
        older = {k: v for k, v in m.state_dict().items() if k != "num_batches_tracked"}
        results = [repr(m.load_state_dict(older)), repr(m.load_state_dict(older, strict=False))]
        legacy = dict(m.state_dict())
        legacy["num_batches_tracked"] = lib.tensor(np.array([7]))
        m.load_state_dict(legacy)
        seen.append((results, int(m.num_batches_tracked)))
    assert seen[0] == seen[1] == (["<All keys matched successfully>"] * 2, 7)
