"""aiograd.nn / optim against torch 2.13: in-place relu, Module attribute rules,
``state_dict`` arguments, ``mse_loss`` and ``linear`` dtypes and shapes,
``get_submodule``/``get_parameter``/``get_buffer``, ``Linear``/``Identity``
arguments and optimizers built on ``named_parameters()``.

PyTorch is the oracle: each test runs the same program in both and compares
values, gradients, node names, warnings and error messages (with aiograd's
class names where a message names a class).
"""

from __future__ import annotations

import re
import warnings
from collections import OrderedDict
from typing import Any

import numpy as np
import pytest

import aiograd as ag
from aiograd import nn
from aiograd.nn import functional as F
from aiograd.optim import SGD, Adam

torch = pytest.importorskip("torch")
tnn = torch.nn
TF = torch.nn.functional

X = np.array([[-1.5, 0.5, 2.0], [0.25, -0.75, 1.0], [3.0, -2.0, -0.5], [0.0, 1.5, -1.0]])


def _error(fn: Any) -> tuple[type, str]:
    """The type and message of the exception ``fn()`` raises."""
    with pytest.raises(Exception) as info:  # noqa: PT011 - compared against torch's below
        fn()
    return type(info.value), str(info.value)


def _same_error(ours: Any, theirs: Any) -> None:
    a, b = _error(ours), _error(theirs)
    assert a == b


def _np(t: Any) -> np.ndarray:
    return t.detach().numpy()


# ---- in-place relu ----

_RELU_FORMS = {
    "functional_inplace": lambda mod, y: mod.nn.functional.relu(y, inplace=True),
    "functional_relu_": lambda mod, y: mod.nn.functional.relu_(y),
    "tensor_method": lambda mod, y: y.relu_(),
    "module_inplace": lambda mod, y: mod.nn.ReLU(inplace=True)(y),
}


@pytest.mark.parametrize("form", sorted(_RELU_FORMS))
def test_relu_inplace_forms_write_the_input_and_record_relu_backward(form):
    apply = _RELU_FORMS[form]
    results = []
    for mod in (ag, torch):
        x = mod.tensor(X, requires_grad=True)
        y = x * 2
        out = apply(mod, y)
        assert out is y
        assert y._version == 1
        name = type(y.grad_fn).__name__ if mod is torch else y.grad_fn.name()
        assert name == "ReluBackward0"
        nxt = y.grad_fn.next_functions[0][0]
        nxt_name = type(nxt).__name__ if mod is torch else nxt.name()
        loss = (y * y).sum()
        if mod is ag:
            loss.backward_sync()
        else:
            loss.backward()
        results.append((_np(y), x.grad.numpy(), nxt_name))
    (ay, ag_grad, an), (ty, tg, tn) = results
    np.testing.assert_allclose(ay, ty)
    np.testing.assert_allclose(ag_grad, tg)
    assert an == tn == "MulBackward0"


def test_relu_module_inplace_repr_and_training_match_torch():
    assert repr(nn.ReLU(inplace=True)) == repr(tnn.ReLU(inplace=True)) == "ReLU(inplace=True)"
    assert repr(nn.ReLU(True)) == repr(tnn.ReLU(True))
    assert repr(nn.ReLU()) == repr(tnn.ReLU()) == "ReLU()"
    model = nn.Sequential(nn.Linear(3, 4, dtype=ag.float64), nn.ReLU(inplace=True),
                          nn.Linear(4, 2, dtype=ag.float64))
    tmodel = tnn.Sequential(tnn.Linear(3, 4), tnn.ReLU(inplace=True), tnn.Linear(4, 2)).double()
    tmodel.load_state_dict({k: torch.from_numpy(v) for k, v in model.state_dict().items()})
    assert repr(model) == repr(tmodel)
    out = model(ag.tensor(X))
    tout = tmodel(torch.tensor(X))
    out.sum().backward_sync()
    tout.sum().backward()
    np.testing.assert_allclose(_np(out), _np(tout))
    for p, tp in zip(model.parameters(), tmodel.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy())


def _relu_inplace_second_order(mod: Any, on_view: bool) -> list[np.ndarray]:
    a = mod.tensor(X, requires_grad=True)
    b = a * a - 1
    target = b[:, 1:] if on_view else b
    target.relu_()
    loss = (b * b * b).sum()
    if mod is ag:
        (g,) = ag.grad_sync(loss, a, create_graph=True)
        (g2,) = ag.grad_sync((g * g).sum(), a)
    else:
        (g,) = torch.autograd.grad(loss, a, create_graph=True)
        (g2,) = torch.autograd.grad((g * g).sum(), a)
    return [_np(b), _np(g), _np(g2)]


@pytest.mark.parametrize("on_view", [False, True], ids=["tensor", "view_of_non_leaf"])
def test_relu_inplace_first_and_second_order_match_torch(on_view):
    for ours, theirs in zip(_relu_inplace_second_order(ag, on_view),
                            _relu_inplace_second_order(torch, on_view)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10)


def test_relu_inplace_on_view_of_non_leaf_records_copy_slices_as_torch():
    names = []
    for mod in (ag, torch):
        a = mod.tensor(X, requires_grad=True)
        b = a * 1
        v = b[0]
        v.relu_()
        nodes = [v.grad_fn, v.grad_fn.next_functions[0][0], b.grad_fn]
        names.append([type(n).__name__ if mod is torch else n.name() for n in nodes]
                     + [v._version, b._version])
        np.testing.assert_allclose(_np(b)[0], np.maximum(X[0], 0))
    assert names[0] == names[1] == ["AsStridedBackward0", "CopySlices", "CopySlices", 1, 1]


def test_relu_inplace_without_grad_writes_through_a_view():
    for mod in (ag, torch):
        base = mod.tensor(X)
        v = base[1:, :2]
        out = v.relu_()
        assert out is v and base._version == 1 and v._version == 1
        expected = X.copy()
        expected[1:, :2] = np.maximum(expected[1:, :2], 0)
        np.testing.assert_array_equal(base.numpy(), expected)
    ints = ag.tensor([-2, 0, 3])
    np.testing.assert_array_equal(F.relu_(ints).numpy(), torch.relu_(torch.tensor([-2, 0, 3])))


def _leaf_write(mod: Any) -> Any:
    return mod.tensor([1.0, -1.0], requires_grad=True).relu_()


def _view_of_leaf_write(mod: Any) -> Any:
    return mod.tensor([1.0, -1.0], requires_grad=True)[:1].relu_()


def _no_grad_view_write(mod: Any) -> Any:
    b = mod.tensor([1.0, -1.0], requires_grad=True) * 1
    with mod.no_grad():
        v = b[:1]
    return v.relu_()


@pytest.mark.parametrize("program", [_leaf_write, _view_of_leaf_write, _no_grad_view_write])
def test_relu_inplace_refuses_what_torch_refuses(program):
    _same_error(lambda: program(ag), lambda: program(torch))


def test_relu_inplace_saves_its_result_at_the_new_version():
    messages = []
    for mod in (ag, torch):
        x = mod.tensor([-1.0, 2.0, 3.0], requires_grad=True)
        y = x * 1
        y.relu_()
        y.add_(2)  # the saved result is now stale
        loss = y.sum()
        kind, msg = _error(loss.backward_sync if mod is ag else loss.backward)
        assert kind is RuntimeError
        messages.append(re.search(r"which is output 0 of \w+, is at version \d+; expected "
                                  r"version \d+", msg).group(0))
    assert messages[0] == messages[1] == (
        "which is output 0 of Relu, is at version 2; expected version 1")


# ---- Module.__setattr__ ----

def test_assigning_a_module_over_a_parameter_raises_as_torch():
    m, tm = nn.Module(), tnn.Module()
    m.x, tm.x = nn.Parameter(ag.ones(1)), tnn.Parameter(torch.ones(1))
    _, theirs = _error(lambda: setattr(tm, "x", tnn.Linear(1, 1)))
    kind, ours = _error(lambda: setattr(m, "x", nn.Linear(1, 1)))
    assert kind is TypeError
    assert ours == (theirs.replace("torch.nn.modules.linear.Linear", "aiograd.nn._layers.Linear")
                    .replace("torch.nn.Parameter", "aiograd.nn.Parameter"))
    assert list(m._parameters) == list(tm._parameters) == ["x"]
    assert list(m._modules) == list(tm._modules) == []


@pytest.mark.parametrize("value", ["tensor", 3, None])
def test_assigning_a_non_parameter_over_a_parameter_raises_as_torch(value):
    m, tm = nn.Linear(2, 2), tnn.Linear(2, 2)
    ours = ag.ones(2, 2) if value == "tensor" else value
    theirs = torch.ones(2, 2) if value == "tensor" else value
    if value is None:
        m.weight, tm.weight = ours, theirs
        assert m.weight is None and tm.weight is None
        assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
        return
    _, tmsg = _error(lambda: setattr(tm, "weight", theirs))
    kind, msg = _error(lambda: setattr(m, "weight", ours))
    assert kind is TypeError
    assert msg == (tmsg.replace("torch.FloatTensor", "aiograd.Tensor")
                   .replace("torch.nn.Parameter", "aiograd.nn.Parameter"))


def test_assigning_a_parameter_over_a_submodule_replaces_it_as_torch():
    m, tm = nn.Module(), tnn.Module()
    m.x, tm.x = nn.Linear(1, 1), tnn.Linear(1, 1)
    m.x, tm.x = nn.Parameter(ag.ones(1)), tnn.Parameter(torch.ones(1))
    assert list(m._parameters) == list(tm._parameters) == ["x"]
    assert list(m._modules) == list(tm._modules) == []
    assert list(m.state_dict()) == list(tm.state_dict()) == ["x"]


def test_assigning_a_module_over_a_buffer_replaces_it_as_torch():
    m, tm = nn.Module(), tnn.Module()
    m.register_buffer("b", ag.ones(1), persistent=False)
    tm.register_buffer("b", torch.ones(1), persistent=False)
    m.b, tm.b = nn.Linear(1, 1), tnn.Linear(1, 1)
    assert list(m._buffers) == list(tm._buffers) == []
    assert list(m._modules) == list(tm._modules) == ["b"]
    assert not m._non_persistent_buffers and not tm._non_persistent_buffers_set


def test_assigning_a_module_before_init_raises_as_torch():
    def program(mod: Any) -> Any:
        class Net(mod.nn.Module):
            def __init__(self) -> None:
                self.fc = mod.nn.Linear(1, 1)

        return Net()

    _same_error(lambda: program(ag), lambda: program(torch))


# ---- state_dict ----

def _pair() -> tuple[nn.Module, Any]:
    m = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    m[0].register_buffer("count", ag.zeros(1))
    tm = tnn.Sequential(tnn.Linear(2, 3), tnn.Linear(3, 1))
    tm[0].register_buffer("count", torch.zeros(1))
    return m, tm


@pytest.mark.parametrize("prefix", ["", "p", "p.", "model/"])
def test_state_dict_prefix_is_prepended_as_given(prefix):
    m, tm = _pair()
    assert list(m.state_dict(prefix=prefix)) == list(tm.state_dict(prefix=prefix))
    assert "pweight" in nn.Linear(1, 1).state_dict(prefix="p")


def test_state_dict_keep_vars_returns_the_parameters_and_buffers():
    m, tm = _pair()
    sd, tsd = m.state_dict(keep_vars=True), tm.state_dict(keep_vars=True)
    assert list(sd) == list(tsd)
    assert sd["0.weight"] is m[0].weight and tsd["0.weight"] is tm[0].weight
    assert sd["0.count"] is m[0].count and tsd["0.count"] is tm[0].count
    assert isinstance(m.state_dict()["0.weight"], np.ndarray)  # the default: NumPy copies


def test_state_dict_fills_and_returns_a_given_destination():
    m, tm = _pair()
    dest, tdest = OrderedDict(existing=1), OrderedDict(existing=1)
    assert m.state_dict(destination=dest, prefix="a.") is dest
    assert tm.state_dict(destination=tdest, prefix="a.") is tdest
    assert list(dest) == list(tdest) == ["existing", "a.0.weight", "a.0.bias", "a.0.count",
                                         "a.1.weight", "a.1.bias"]


def test_state_dict_positional_arguments_warn_and_work_as_torch():
    m, tm = _pair()
    results = []
    for model in (m, tm):
        dest: OrderedDict[str, Any] = OrderedDict()
        with pytest.warns(FutureWarning, match="Positional args are being deprecated, use "
                                               "kwargs instead"):
            out = model.state_dict(dest, "q.", True)
        results.append((out is dest, list(out), out["q.0.weight"] is model[0].weight))
    assert results[0] == results[1] == (True, [f"q.{k}" for k in tm.state_dict()], True)


# ---- mse_loss ----

def test_mse_loss_reduction_is_keyword_only():
    with pytest.raises(TypeError, match="positional"):
        F.mse_loss(ag.ones(2), ag.zeros(2), "sum")
    assert F.mse_loss(ag.ones(2), ag.zeros(2), reduction="sum").item() == 2.0


@pytest.mark.parametrize(("a_dtype", "b_dtype", "b_shape"), [
    ("float32", "int64", (4, 3)),
    ("int64", "float32", (4, 3)),
    ("float32", "float64", (4, 3)),
    ("float32", "float64", ()),
    ("float64", "float32", (3,)),
    ("float32", "bool", (4, 3)),
    ("float32", "int32", (4, 3)),
])
def test_mse_loss_promotes_dtypes_as_torch(a_dtype, b_dtype, b_shape):
    target = np.ones(b_shape, dtype=b_dtype)
    x = X.astype(a_dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the broadcasting warning
        for reduction in ("mean", "none"):
            ours = F.mse_loss(ag.tensor(x), ag.tensor(target), reduction=reduction)
            theirs = TF.mse_loss(torch.tensor(x), torch.tensor(target), reduction=reduction)
            assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


def test_mse_loss_with_an_integer_target_gives_float32_gradients():
    grads = []
    for mod in (ag, torch):
        x = mod.tensor(X.astype(np.float32), requires_grad=True)
        loss = mod.nn.functional.mse_loss(x * 2, mod.tensor(np.ones((4, 3), np.int64)))
        if mod is ag:
            loss.backward_sync()
        else:
            loss.backward()
        assert str(loss.dtype).removeprefix("torch.") == "float32"
        grads.append(x.grad.numpy())
    assert grads[0].dtype == grads[1].dtype == np.float32
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


@pytest.mark.parametrize(("a_shape", "b_shape"), [((3,), (4,)), ((2, 3), (2, 4)),
                                                  ((2, 3), (4, 3))])
def test_mse_loss_rejects_shapes_that_do_not_broadcast_after_warning(a_shape, b_shape):
    def program(mod: Any) -> Any:
        return mod.nn.functional.mse_loss(mod.ones(*a_shape), mod.zeros(*b_shape))

    results = []
    for mod in (ag, torch):
        with pytest.warns(UserWarning, match="that is different to the input size") as rec:
            kind, msg = _error(lambda m=mod: program(m))
        results.append((kind, msg, len(rec)))
    assert results[0] == results[1]


def test_mse_loss_broadcast_target_gradients_match_torch():
    grads = []
    for mod in (ag, torch):
        x = mod.tensor(X, requires_grad=True)
        t = mod.tensor(X[0] * 0.5, requires_grad=True)
        with pytest.warns(UserWarning, match=r"Using a target size .*3.* input size .*4, 3"):
            loss = mod.nn.functional.mse_loss(x, t)
        if mod is ag:
            loss.backward_sync()
        else:
            loss.backward()
        grads.append((loss.item(), x.grad.numpy(), t.grad.numpy()))
    (al, ax, at), (tl, tx, tt) = grads
    assert al == pytest.approx(tl)
    np.testing.assert_allclose(ax, tx)
    np.testing.assert_allclose(at, tt)


# ---- linear ----

_LINEAR_DTYPE_CASES = {
    "input_only": ((4, 3), "float32", "float64", None),
    "input_only_double": ((4, 3), "float64", "float32", None),
    "input_vs_weight_with_bias": ((4, 3), "float32", "float64", "float64"),
    "bias_vs_weight": ((4, 3), "float32", "float64", "float32"),
    "bias_only": ((4, 3), "float32", "float32", "float64"),
    "integer_input": ((4, 3), "int64", "float32", None),
    "batched_input": ((5, 4, 3), "float32", "float64", None),
    "batched_with_bias": ((5, 4, 3), "float32", "float64", "float64"),
    "batched_bias_only": ((5, 4, 3), "float32", "float32", "float64"),
    "wrong_shape_and_dtype": ((4, 5), "float32", "float64", None),
}


@pytest.mark.parametrize("case", sorted(_LINEAR_DTYPE_CASES))
def test_linear_rejects_mixed_dtypes_as_torch(case):
    shape, x_dtype, w_dtype, b_dtype = _LINEAR_DTYPE_CASES[case]

    def program(mod: Any) -> Any:
        x = mod.ones(*shape, dtype=getattr(mod, x_dtype))
        w = mod.ones(2, 3, dtype=getattr(mod, w_dtype))
        b = None if b_dtype is None else mod.ones(2, dtype=getattr(mod, b_dtype))
        return mod.nn.functional.linear(x, w, b)

    ours, theirs = _error(lambda: program(ag)), _error(lambda: program(torch))
    assert ours[0] is theirs[0] is RuntimeError
    assert ours[1].startswith(theirs[1])


def test_module_of_double_weights_rejects_a_float_input_as_torch():
    m, tm = nn.Linear(2, 2).double(), tnn.Linear(2, 2).double()
    ours = _error(lambda: m(ag.ones(1, 2)))
    theirs = _error(lambda: tm(torch.ones(1, 2)))
    assert ours == theirs == (RuntimeError,
                              "mat1 and mat2 must have the same dtype, but got Float and Double")


@pytest.mark.parametrize("bias_shape", [(1,), (), (4, 1), (1, 2)])
def test_linear_broadcasts_a_bias_as_torch(bias_shape):
    results = []
    for mod in (ag, torch):
        x = mod.tensor(X, requires_grad=True)
        w = mod.tensor(X[:2] * 0.5, requires_grad=True)
        b = mod.tensor(np.full(bias_shape, 0.25), requires_grad=True)
        y = mod.nn.functional.linear(x, w, b)
        loss = (y * y).sum()
        if mod is ag:
            loss.backward_sync()
        else:
            loss.backward()
        results.append([_np(y), x.grad.numpy(), w.grad.numpy(), b.grad.numpy()])
    for ours, theirs in zip(*results):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs)


def test_linear_bias_of_one_element_keeps_the_fused_node():
    y = F.linear(ag.tensor(X, requires_grad=True), ag.ones(2, 3, dtype=ag.float64),
                 ag.ones(1, dtype=ag.float64))
    assert y.grad_fn.name() == "AddmmBackward0"


@pytest.mark.parametrize(("x_shape", "bias_shape"), [((4, 3), (3,)), ((4, 3), (2, 2))])
def test_linear_rejects_a_bias_that_does_not_fit(x_shape, bias_shape):
    def program(mod: Any) -> Any:
        return mod.nn.functional.linear(mod.ones(*x_shape), mod.ones(2, 3), mod.ones(*bias_shape))

    ours, theirs = _error(lambda: program(ag)), _error(lambda: program(torch))
    assert ours[0] is theirs[0] is RuntimeError
    if bias_shape == (3,):  # the fused path gives torch's message
        assert ours[1] == theirs[1]


def test_linear_shape_error_starts_with_torch_message():
    ours = _error(lambda: F.linear(ag.ones(2, 4), ag.ones(2, 3)))
    theirs = _error(lambda: TF.linear(torch.ones(2, 4), torch.ones(2, 3)))
    assert ours[0] is theirs[0] is RuntimeError
    assert ours[1].startswith(theirs[1])


# ---- get_submodule / get_parameter / get_buffer ----

def _tree(mod: Any) -> Any:
    net = mod.nn.Module()
    net.block = mod.nn.Sequential(mod.nn.Linear(2, 2))
    net.block[0].register_buffer("stat", mod.zeros(2))
    net.scale = 3.0
    return net


@pytest.mark.parametrize(("method", "target"), [
    ("get_submodule", ""),
    ("get_submodule", "block"),
    ("get_submodule", "block.0"),
    ("get_submodule", "block.1"),
    ("get_submodule", "nothing.here"),
    ("get_submodule", "scale"),
    ("get_submodule", "block.0.weight"),
    ("get_parameter", "block.0.weight"),
    ("get_parameter", "block.0.bias"),
    ("get_parameter", "block.0.stat"),
    ("get_parameter", "block.0.missing"),
    ("get_parameter", "block.2.weight"),
    ("get_parameter", "scale"),
    ("get_buffer", "block.0.stat"),
    ("get_buffer", "block.0.weight"),
    ("get_buffer", "missing"),
    ("get_buffer", "block"),
])
def test_get_submodule_parameter_buffer_match_torch(method, target):
    net, tnet = _tree(ag), _tree(torch)
    try:
        theirs = getattr(tnet, method)(target)
    except AttributeError as e:
        assert _error(lambda: getattr(net, method)(target)) == (AttributeError, str(e))
        return
    ours = getattr(net, method)(target)
    names = {id(v): k for k, v in [*net.named_modules(), *net.named_parameters(),
                                   *net.named_buffers()]}
    tnames = {id(v): k for k, v in [*tnet.named_modules(), *tnet.named_parameters(),
                                    *tnet.named_buffers()]}
    assert names[id(ours)] == tnames[id(theirs)]


# ---- Identity / Linear arguments ----

def test_identity_ignores_its_arguments():
    m = nn.Identity(3, unused="x")
    assert repr(m) == repr(tnn.Identity(3, unused="x")) == "Identity()"
    x = ag.ones(2)
    assert m(x) is x


@pytest.mark.parametrize("args", [(2.0, 3), (2, 3.0), ("2", 3), (None, 3)])
def test_linear_rejects_non_integer_sizes_with_type_error(args):
    with pytest.raises(TypeError):
        tnn.Linear(*args)
    with pytest.raises(TypeError, match="must be an int"):
        nn.Linear(*args)


@pytest.mark.parametrize("args", [(-1, 3), (2, -3), (-2, -3)])
def test_linear_rejects_negative_sizes_as_torch(args):
    _same_error(lambda: nn.Linear(*args), lambda: tnn.Linear(*args))


def test_linear_accepts_integer_like_sizes():
    m = nn.Linear(np.int64(3), 2)
    assert m.weight.shape == (2, 3) and m.bias.shape == (2,)


# ---- optimizers on named_parameters() ----

def _models() -> tuple[nn.Module, Any]:
    m = nn.Sequential(nn.Linear(3, 4, dtype=ag.float64), nn.Tanh(),
                      nn.Linear(4, 2, dtype=ag.float64))
    tm = tnn.Sequential(tnn.Linear(3, 4), tnn.Tanh(), tnn.Linear(4, 2)).double()
    tm.load_state_dict({k: torch.from_numpy(v) for k, v in m.state_dict().items()})
    return m, tm


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_optimizer_on_named_parameters_matches_torch(opt_name):
    m, tm = _models()
    kwargs = {"lr": 0.1, "momentum": 0.9} if opt_name == "SGD" else {"lr": 0.05}
    opt = {"SGD": SGD, "Adam": Adam}[opt_name](m.named_parameters(), **kwargs)
    topt = getattr(torch.optim, opt_name)(tm.named_parameters(), **kwargs)
    assert opt.param_groups[0]["param_names"] == topt.param_groups[0]["param_names"]
    assert opt.param_groups[0]["params"] == list(m.parameters())
    for _ in range(3):
        for model, o in ((m, opt), (tm, topt)):
            o.zero_grad()
            x = ag.tensor(X) if model is m else torch.tensor(X)
            loss = (model(x) ** 2).sum()
            loss.backward_sync() if model is m else loss.backward()
            o.step()
    for p, tp in zip(m.parameters(), tm.parameters()):
        np.testing.assert_allclose(_np(p), _np(tp), rtol=1e-10)
    sd, tsd = opt.state_dict(), topt.state_dict()
    group, tgroup = sd["param_groups"][0], tsd["param_groups"][0]
    assert group["param_names"] == tgroup["param_names"] == ["0.weight", "0.bias", "2.weight",
                                                             "2.bias"]
    assert group["params"] == tgroup["params"] == [0, 1, 2, 3]
    assert list(group)[0] == list(tgroup)[0] == "param_names"
    assert list(group)[-1] == list(tgroup)[-1] == "params"
    assert sorted(sd["state"]) == sorted(tsd["state"])


def test_named_group_keys_follow_torch_order():
    m, tm = _models()
    opt = SGD([{"params": list(m.named_parameters())[:2], "lr": 0.5}], lr=0.1)
    topt = torch.optim.SGD([{"params": list(tm.named_parameters())[:2], "lr": 0.5}], lr=0.1)
    ours = [k for k in opt.param_groups[0] if k in topt.param_groups[0]]
    assert ours == [k for k in topt.param_groups[0] if k in opt.param_groups[0]]
    assert ours[:3] == ["params", "lr", "param_names"]


def test_loading_a_named_state_dict_keeps_the_names():
    m, _ = _models()
    opt = SGD(m.named_parameters(), lr=0.1, momentum=0.9)
    (m(ag.tensor(X)) ** 2).sum().backward_sync()
    opt.step()
    fresh = SGD(m.parameters(), lr=0.1, momentum=0.9)
    fresh.load_state_dict(opt.state_dict())
    assert fresh.param_groups[0]["param_names"] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    np.testing.assert_array_equal(fresh.state[m[0].weight]["momentum_buffer"],
                                  opt.state[m[0].weight]["momentum_buffer"])


def _mixed_in_group(mod: Any, model: Any) -> Any:
    weight, bias = list(model.parameters())[:2]
    return mod.optim.SGD([("w", weight), bias], lr=0.1)


def _named_then_plain(mod: Any, model: Any) -> Any:
    opt = mod.optim.SGD(list(model.named_parameters())[:1], lr=0.1)
    opt.add_param_group({"params": list(model.parameters())[1:2]})


def _plain_then_named(mod: Any, model: Any) -> Any:
    opt = mod.optim.SGD(list(model.parameters())[:1], lr=0.1)
    opt.add_param_group({"params": list(model.named_parameters())[1:2]})


@pytest.mark.parametrize("program", [_mixed_in_group, _named_then_plain, _plain_then_named])
def test_named_and_unnamed_parameters_do_not_mix(program):
    m, tm = _models()
    _same_error(lambda: program(ag, m), lambda: program(torch, tm))


# ---- load_state_dict's result, half(), to(tensor) ----

def test_load_state_dict_result_prints_as_torch() -> None:
    printed = []
    for lib in (ag, torch):
        m = lib.nn.Linear(2, 2)
        full = m.load_state_dict(m.state_dict())
        partial = m.load_state_dict({"weight": m.weight.detach()}, strict=False)
        printed.append((repr(full), str(full), repr(partial), partial.missing_keys))
    assert printed[0] == printed[1]
    assert printed[0][0] == "<All keys matched successfully>"


def test_module_half_and_to_a_tensor_take_dtypes_as_torch() -> None:
    seen = []
    for lib in (ag, torch):
        m = lib.nn.Linear(2, 2)
        dtypes = [str(m.half().weight.dtype).replace("torch.", "")]
        dtypes.append(str(m.to(lib.tensor(np.zeros(1))).weight.dtype).replace("torch.", ""))
        with pytest.raises(TypeError, match="nn.Module.to only accepts floating point"):
            m.to(lib.tensor(np.zeros(1, np.int64)))
        seen.append(dtypes)
    assert seen[0] == seen[1] == ["float16", "float64"]


def test_functional_in_place_aliases_and_pool_with_indices_as_torch() -> None:
    results = []
    for lib in (ag, torch):
        f = lib.nn.functional
        x = lib.tensor(np.array([[-2.0, 0.5], [3.0, -0.1]]), requires_grad=True)
        a, b = f.elu_(x * 1, 0.5), f.hardtanh_(x * 1, -0.5, 0.5)
        values, indices = f.max_pool2d_with_indices(
            lib.tensor(np.arange(16.0).reshape(1, 1, 4, 4)), 2)
        results.append((a.grad_fn.name(), b.grad_fn.name(), a.detach().numpy().round(6).tolist(),
                        b.detach().numpy().tolist(), values.numpy().ravel().tolist(),
                        indices.numpy().ravel().tolist()))
    assert results[0] == results[1]


def test_a_loss_weight_that_requires_grad_is_refused_only_in_grad_mode_as_torch() -> None:
    values = []
    for lib in (ag, torch):
        x = lib.tensor(np.array([0.2, 0.7]))
        t = lib.tensor(np.array([0.0, 1.0]))
        w = lib.tensor(np.array([1.0, 2.0]), requires_grad=True)
        f = lib.nn.functional
        with pytest.raises(RuntimeError, match="not differentiable with respect to argument"):
            f.binary_cross_entropy(x, t, w)
        with lib.no_grad():
            values.append([float(f.binary_cross_entropy(x, t, w)),
                           float(f.binary_cross_entropy_with_logits(x, t, w))])
    np.testing.assert_allclose(values[0], values[1], rtol=1e-12)
