"""aiograd.nn and aiograd.optim: modules, layers, losses, SGD and Adam.

PyTorch is the oracle for forward values, gradients and optimizer
trajectories (same weights copied in, float64). The async tests train real
models with ``await loss.backward()`` under asyncio and Trio.
"""

from __future__ import annotations

import copy
import pickle
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from typing import Any

import anyio
import numpy as np
import pytest

import aiograd
from aiograd import nn
from aiograd.nn import functional as F
from aiograd.optim import SGD, Adam, Optimizer

# ---- helpers ----


def _mlp(dtype: Any = aiograd.float64) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(4, 8, dtype=dtype),
        nn.ReLU(),
        nn.Linear(8, 8, dtype=dtype),
        nn.Tanh(),
        nn.Linear(8, 3, dtype=dtype),
    )


def _torch_mlp(torch: Any, model: nn.Sequential) -> Any:
    """The same architecture in PyTorch, with ``model``'s weights copied in."""
    tnn = torch.nn
    tmodel = tnn.Sequential(
        tnn.Linear(4, 8), tnn.ReLU(), tnn.Linear(8, 8), tnn.Tanh(), tnn.Linear(8, 3)
    ).double()
    tmodel.load_state_dict({k: torch.from_numpy(v) for k, v in model.state_dict().items()})
    return tmodel


def _data(seed: int = 0, n: int = 16) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4))
    y = rng.integers(0, 3, size=n)
    return x, y


# ---- Parameter ----


def test_parameter_is_a_plain_leaf_tensor_copy():
    src = aiograd.tensor([1.0, 2.0])
    p = nn.Parameter(src)
    assert type(p) is aiograd.Tensor
    assert p.requires_grad and p.is_leaf
    assert isinstance(p, nn.Parameter)
    assert not isinstance(src, nn.Parameter)
    p.data[0] = 5.0
    assert src.data[0] == 1.0  # shares nothing


def test_parameter_works_in_arithmetic_with_tensors():
    p = nn.Parameter(aiograd.tensor([1.0, 2.0], dtype=aiograd.float64))
    x = aiograd.tensor([3.0, 4.0], dtype=aiograd.float64)
    y = (p * x).sum()
    aiograd.backward_sync(y)
    np.testing.assert_array_equal(p.grad.data, [3.0, 4.0])


def test_parameter_without_grad():
    p = nn.Parameter(np.zeros(3), requires_grad=False)
    assert not p.requires_grad
    assert isinstance(p, nn.Parameter)


def _pickle_round_trip(obj: Any) -> Any:
    return pickle.loads(pickle.dumps(obj))


_COPIES = pytest.mark.parametrize("clone", [copy.deepcopy, _pickle_round_trip],
                                  ids=["deepcopy", "pickle"])


@_COPIES
@pytest.mark.parametrize("requires_grad", [True, False])
def test_copied_parameter_is_a_new_parameter_without_grad_like_torch(
        clone: Callable[[Any], Any], requires_grad: bool):
    torch = pytest.importorskip("torch")
    p = nn.Parameter(np.arange(3.0), requires_grad=requires_grad)
    tp = torch.nn.Parameter(torch.arange(3.0, dtype=torch.float64), requires_grad=requires_grad)
    p.grad = aiograd.ones(3, dtype=aiograd.float64)
    tp.grad = torch.ones(3, dtype=torch.float64)
    q, tq = clone(p), clone(tp)
    assert isinstance(q, nn.Parameter) and isinstance(tq, torch.nn.Parameter)
    assert q.requires_grad == tq.requires_grad == requires_grad
    assert q.grad is None and tq.grad is None
    assert q.dtype == p.dtype
    np.testing.assert_array_equal(q.data, tq.detach().numpy())
    assert not np.shares_memory(q.data, p.data)
    assert not isinstance(clone(aiograd.ones(2)), nn.Parameter)  # plain tensors stay plain


# ---- Module registration and traversal ----


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
        self.head = nn.Linear(3, 1)
        self.scale = nn.Parameter(aiograd.ones(1))
        self.register_buffer("steps", aiograd.zeros(1))
        self.plain = aiograd.ones(2)  # a plain attribute: neither parameter nor buffer

    def forward(self, x: aiograd.Tensor) -> aiograd.Tensor:
        return self.head(self.body(x)) * self.scale


def test_attribute_assignment_registers_parameters_modules_and_buffers():
    net = _Net()
    names = [name for name, _ in net.named_parameters()]
    assert names == ["scale", "body.0.weight", "body.0.bias", "head.weight", "head.bias"]
    assert [name for name, _ in net.named_buffers()] == ["steps"]
    assert list(net.children()) == [net.body, net.head]
    assert [type(m).__name__ for m in net.modules()] == [
        "_Net", "Sequential", "Linear", "ReLU", "Linear"
    ]
    assert all(isinstance(p, nn.Parameter) for p in net.parameters())
    assert not any(p is net.plain for p in net.parameters())


def test_shared_parameter_is_listed_once():
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, nn.ReLU(), shared)
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.modules())) == 3


def test_assigning_a_plain_tensor_over_a_parameter_raises():
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="Parameter or None expected"):
        lin.weight = aiograd.ones(2, 2)
    lin.bias = None
    assert [n for n, _ in lin.named_parameters()] == ["weight"]


def test_parameter_before_init_raises():
    class Bad(nn.Module):
        def __init__(self) -> None:
            self.w = nn.Parameter(aiograd.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Bad()


def test_train_and_eval_propagate():
    net = _Net()
    assert net.training and net.body[0].training
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())


def test_call_runs_forward():
    lin = nn.Linear(3, 2, dtype=aiograd.float64)
    x = aiograd.randn(5, 3, dtype=aiograd.float64)
    expected = x.data @ lin.weight.data.T + lin.bias.data
    np.testing.assert_allclose(lin(x).data, expected)


def test_repr_nests_children():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    assert repr(model) == (
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (1): ReLU()\n"
        ")"
    )


def test_sequential_indexing_len_and_ordered_dict():
    a, b = nn.Linear(2, 2), nn.Tanh()
    seq = nn.Sequential(OrderedDict(first=a, second=b))
    assert len(seq) == 2 and seq[0] is a and seq[-1] is b
    assert [n for n, _ in seq.named_children()] == ["first", "second"]
    assert list(seq[1:]) == [b]
    with pytest.raises(IndexError):
        seq[2]


@_COPIES
def test_copied_module_is_independent_and_trains_like_torch(clone: Callable[[Any], Any]):
    torch = pytest.importorskip("torch")
    model = _mlp()
    before = model.state_dict()
    copied, tcopied = clone(model), clone(_torch_mlp(torch, model))
    for (name, p), (tname, tp) in zip(copied.named_parameters(), tcopied.named_parameters(),
                                      strict=True):
        assert name == tname
        assert isinstance(p, nn.Parameter) and isinstance(tp, torch.nn.Parameter)
        assert not any(np.shares_memory(p.data, q.data) for q in model.parameters())
    copied[0].weight = copied[0].weight  # a copied parameter can be registered again
    xn, yn = _data()
    opt, topt = SGD(copied.parameters(), lr=0.1), torch.optim.SGD(tcopied.parameters(), lr=0.1)
    aiograd.backward_sync(F.cross_entropy(copied(aiograd.tensor(xn)), yn))
    torch.nn.functional.cross_entropy(tcopied(torch.from_numpy(xn)),
                                      torch.from_numpy(yn)).backward()
    opt.step()
    topt.step()
    for name, value in tcopied.state_dict().items():
        np.testing.assert_allclose(copied.state_dict()[name], value.numpy(), rtol=1e-12,
                                   err_msg=name)
        assert not np.array_equal(copied.state_dict()[name], before[name])
        np.testing.assert_array_equal(model.state_dict()[name], before[name])


def test_module_list_registers_children():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(layers) == 3
    assert len(list(layers.parameters())) == 6


# ---- Linear ----


def test_linear_init_is_uniform_within_bound_and_float32():
    aiograd.manual_seed(0)
    lin = nn.Linear(100, 50)
    assert lin.weight.shape == (50, 100) and lin.bias.shape == (50,)
    assert lin.weight.dtype == aiograd.float32
    bound = 1 / np.sqrt(100)
    assert np.abs(lin.weight.data).max() <= bound
    assert np.abs(lin.weight.data).max() > 0.9 * bound  # spread over the whole interval
    assert abs(lin.weight.data.mean()) < 0.01


def test_linear_init_follows_manual_seed():
    aiograd.manual_seed(7)
    a = nn.Linear(3, 4)
    aiograd.manual_seed(7)
    b = nn.Linear(3, 4)
    np.testing.assert_array_equal(a.weight.data, b.weight.data)


def test_linear_dtype_and_no_bias():
    lin = nn.Linear(3, 4, bias=False, dtype=aiograd.float64)
    assert lin.bias is None
    assert lin.weight.dtype == aiograd.float64
    assert [n for n, _ in lin.named_parameters()] == ["weight"]


def test_linear_forward_backward_matches_torch():
    torch = pytest.importorskip("torch")
    lin = nn.Linear(4, 3, dtype=aiograd.float64)
    tlin = torch.nn.Linear(4, 3).double()
    tlin.load_state_dict({k: torch.from_numpy(v) for k, v in lin.state_dict().items()})
    xn = np.random.default_rng(1).standard_normal((5, 4))
    x = aiograd.tensor(xn, requires_grad=True)
    tx = torch.tensor(xn, requires_grad=True)
    out, tout = lin(x), tlin(tx)
    np.testing.assert_allclose(out.data, tout.detach().numpy(), rtol=1e-12)
    g = np.random.default_rng(2).standard_normal((5, 3))
    aiograd.backward_sync(out, aiograd.tensor(g))
    tout.backward(torch.from_numpy(g))
    np.testing.assert_allclose(lin.weight.grad.data, tlin.weight.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(lin.bias.grad.data, tlin.bias.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("loss_name", ["cross_entropy", "mse"])
def test_sequential_loss_and_grads_match_torch(loss_name: str):
    torch = pytest.importorskip("torch")
    model = _mlp()
    tmodel = _torch_mlp(torch, model)
    xn, yn = _data()
    x, tx = aiograd.tensor(xn), torch.from_numpy(xn)
    if loss_name == "cross_entropy":
        loss = nn.CrossEntropyLoss()(model(x), yn)
        tloss = torch.nn.CrossEntropyLoss()(tmodel(tx), torch.from_numpy(yn))
    else:
        target = np.eye(3)[yn]
        loss = nn.MSELoss()(model(x), aiograd.tensor(target))
        tloss = torch.nn.MSELoss()(tmodel(tx), torch.from_numpy(target))
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-12)
    aiograd.backward_sync(loss)
    tloss.backward()
    tgrads = dict(tmodel.named_parameters())
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.data, tgrads[name].grad.numpy(), rtol=1e-10,
                                   atol=1e-14, err_msg=name)


def test_activations_and_sigmoid_match_numpy():
    xn = np.linspace(-3, 3, 7)
    x = aiograd.tensor(xn)
    np.testing.assert_allclose(nn.ReLU()(x).data, np.maximum(xn, 0))
    np.testing.assert_allclose(nn.Tanh()(x).data, np.tanh(xn))
    np.testing.assert_allclose(nn.Sigmoid()(x).data, 1 / (1 + np.exp(-xn)))


def test_mse_loss_of_an_empty_input_is_nan_with_an_empty_grad_like_torch():
    torch = pytest.importorskip("torch")
    x = aiograd.tensor(np.zeros((0, 3)), requires_grad=True)
    tx = torch.zeros(0, 3, dtype=torch.float64, requires_grad=True)
    loss = F.mse_loss(x, np.zeros((0, 3)))
    tloss = torch.nn.functional.mse_loss(tx, torch.zeros(0, 3, dtype=torch.float64))
    assert np.isnan(loss.item()) and np.isnan(tloss.item())
    aiograd.backward_sync(loss)
    tloss.backward()
    assert x.grad.shape == tuple(tx.grad.shape) == (0, 3)


def test_loss_reduction_is_checked_when_called_and_not_shown_as_torch():
    torch = pytest.importorskip("torch")
    messages, reprs = [], []
    for lib in (aiograd, torch):
        loss = lib.nn.MSELoss(reduction="average")  # no error yet, as PyTorch
        reprs.append((repr(loss), repr(lib.nn.CrossEntropyLoss(reduction="sum"))))
        with pytest.raises(ValueError) as info:
            loss(lib.ones(2), lib.ones(2))
        messages.append(str(info.value).split(";")[0])
    assert messages[0] == messages[1] == "average is not a valid value for reduction"
    assert reprs[0] == reprs[1] == ("MSELoss()", "CrossEntropyLoss()")


# ---- state_dict, to, zero_grad ----


def test_state_dict_holds_numpy_copies():
    net = _Net()
    sd = net.state_dict()
    assert list(sd) == ["scale", "steps", "body.0.weight", "body.0.bias", "head.weight",
                        "head.bias"]
    assert all(type(v) is np.ndarray for v in sd.values())
    sd["head.bias"][...] = 123.0
    assert net.head.bias.data[0] != 123.0


def test_load_state_dict_copies_in_place_and_keeps_identity():
    src, dst = _mlp(), _mlp()
    weight, weight_array = dst[0].weight, dst[0].weight.data
    result = dst.load_state_dict(src.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert dst[0].weight is weight and dst[0].weight.data is weight_array
    for name, value in src.state_dict().items():
        np.testing.assert_array_equal(dst.state_dict()[name], value)


def test_state_dict_names_a_module_used_twice_under_both_paths_like_torch():
    torch = pytest.importorskip("torch")
    lin = nn.Linear(2, 2, dtype=aiograd.float64)
    tlin = torch.nn.Linear(2, 2).double()
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    tseq = torch.nn.Sequential(tlin, torch.nn.ReLU(), tlin)
    sd = seq.state_dict()
    assert list(sd) == list(tseq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    tseq.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})  # strict

    other = nn.Linear(2, 2, dtype=aiograd.float64)
    result = nn.Sequential(other, nn.ReLU(), other).load_state_dict(
        {k: v.numpy() for k, v in tseq.state_dict().items()})  # strict
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(other.weight.data, lin.weight.data)
    np.testing.assert_array_equal(other.bias.data, lin.bias.data)


def test_load_state_dict_bumps_the_version_counter():
    lin = nn.Linear(2, 2)
    before = lin.weight._version
    lin.load_state_dict(lin.state_dict())
    assert lin.weight._version == before + 1


def test_load_state_dict_strict_reports_missing_unexpected_and_size():
    lin = nn.Linear(2, 3)
    sd = lin.state_dict()
    del sd["bias"]
    sd["extra"] = np.zeros(1)
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "bias"') as info:
        lin.load_state_dict(sd)
    assert 'Unexpected key(s) in state_dict: "extra"' in str(info.value)
    result = lin.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["bias"] and result.unexpected_keys == ["extra"]
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        lin.load_state_dict({"weight": np.zeros((2, 3)), "bias": np.zeros(3)})


def test_to_dtype_keeps_parameter_identity():
    lin = nn.Linear(2, 3)
    weight = lin.weight
    assert lin.to(aiograd.float64) is lin
    assert lin.weight is weight and weight.dtype == aiograd.float64
    assert isinstance(weight, nn.Parameter)
    lin.float()
    assert weight.dtype == aiograd.float32
    lin.to("cpu")
    assert weight.device == aiograd.device("cpu")


def test_module_zero_grad():
    lin = nn.Linear(2, 2, dtype=aiograd.float64)
    aiograd.backward_sync(lin(aiograd.ones(1, 2, dtype=aiograd.float64)).sum())
    grad = lin.weight.grad
    lin.zero_grad(set_to_none=False)
    assert lin.weight.grad is grad
    np.testing.assert_array_equal(grad.data, 0.0)
    lin.zero_grad()
    assert lin.weight.grad is None and lin.bias.grad is None


# ---- optimizers ----


def _trajectory(make_opt: Callable[[Any], Optimizer], torch_opt: Callable[[Any], Any],
                steps: int = 5) -> None:
    """Train the same MLP with aiograd and PyTorch; compare parameters after every step."""
    torch = pytest.importorskip("torch")
    model = _mlp()
    tmodel = _torch_mlp(torch, model)
    opt, topt = make_opt(model.parameters()), torch_opt(tmodel.parameters())
    for step in range(steps):
        xn, yn = _data(seed=step)
        opt.zero_grad()
        topt.zero_grad()
        loss = F.cross_entropy(model(aiograd.tensor(xn)), yn)
        aiograd.backward_sync(loss)
        torch.nn.functional.cross_entropy(tmodel(torch.from_numpy(xn)),
                                          torch.from_numpy(yn)).backward()
        opt.step()
        topt.step()
        tparams = dict(tmodel.named_parameters())
        for name, p in model.named_parameters():
            np.testing.assert_allclose(p.data, tparams[name].detach().numpy(), rtol=1e-6,
                                       atol=1e-9, err_msg=f"{name} after step {step}")


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(lr=0.1),
        dict(lr=0.1, momentum=0.9),
        dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-2),
        dict(lr=0.05, momentum=0.5, dampening=0.3, maximize=True),
    ],
)
def test_sgd_trajectory_matches_torch(kwargs: dict[str, Any]):
    torch = pytest.importorskip("torch")
    _trajectory(lambda ps: SGD(ps, **kwargs), lambda ps: torch.optim.SGD(ps, **kwargs))


def test_sgd_nesterov_with_dampening_set_in_a_group_matches_torch():
    # The constructor refuses nesterov with dampening; a param group does not.
    torch = pytest.importorskip("torch")
    kwargs = dict(lr=0.05, momentum=0.9, nesterov=True)
    _trajectory(lambda ps: SGD([{"params": ps, "dampening": 0.5}], **kwargs),
                lambda ps: torch.optim.SGD([{"params": ps, "dampening": 0.5}], **kwargs))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=1e-2),
        dict(lr=0.01, amsgrad=True),
    ],
)
def test_adam_trajectory_matches_torch(kwargs: dict[str, Any]):
    torch = pytest.importorskip("torch")
    _trajectory(lambda ps: Adam(ps, **kwargs), lambda ps: torch.optim.Adam(ps, **kwargs))


@pytest.mark.parametrize("make", [lambda ps: SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: Adam(ps, lr=0.1)])
def test_step_updates_data_in_place_and_bumps_the_version(make: Callable[[Any], Optimizer]):
    p = nn.Parameter(np.ones(3))
    arr = p.data
    opt = make([p])
    for _ in range(3):
        version = p._version
        p.grad = aiograd.tensor(np.full(3, 0.5))
        opt.step()
        assert p._version > version  # an in-place write, as PyTorch's under no_grad
    assert p.data is arr
    assert (p.data < 1.0).all()


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_backward_through_a_graph_recorded_before_a_step_raises_as_in_pytorch(optimizer):
    # the graph saved the old weights: backward after the step would silently use the new ones
    torch = pytest.importorskip("torch")
    errors = []
    for lib, make, backward in ((torch, getattr(torch.optim, optimizer), "backward"),
                                (aiograd, {"SGD": SGD, "Adam": Adam}[optimizer],
                                 "backward_sync")):
        w = lib.tensor(np.array([2.0, -1.0]), requires_grad=True)
        loss = (w * w).sum()
        getattr(loss, backward)(retain_graph=True)
        make([w], lr=0.5).step()
        with pytest.raises(RuntimeError) as info:
            getattr(loss, backward)()
        errors.append(str(info.value).split(" is at version")[0])
    assert "modified by an inplace operation" in errors[1]
    # the same words, with aiograd's name of the tensor ("[float64 [2]]")
    assert errors[1].replace("[float64 [2]]", "[torch.DoubleTensor [2]]") == errors[0]


def test_step_skips_parameters_without_grad():
    a, b = nn.Parameter(np.ones(2)), nn.Parameter(np.ones(2))
    a.grad = aiograd.tensor(np.ones(2))
    Adam([a, b], lr=0.1).step()
    assert (a.data < 1).all()
    np.testing.assert_array_equal(b.data, 1.0)


def test_optimizer_zero_grad():
    a = nn.Parameter(np.ones(2))
    a.grad = aiograd.tensor(np.ones(2))
    opt = SGD([a], lr=0.1)
    grad = a.grad
    opt.zero_grad(set_to_none=False)
    assert a.grad is grad
    np.testing.assert_array_equal(grad.data, 0.0)
    opt.zero_grad()
    assert a.grad is None


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True:UserWarning")
@pytest.mark.parametrize("grad_kind", ["with_history", "leaf_requiring_grad"])
def test_optimizer_zero_grad_cuts_the_same_grad_off_the_graph_like_torch(grad_kind: str):
    torch = pytest.importorskip("torch")
    p = nn.Parameter(np.array([1.0, 2.0]))
    tp = torch.nn.Parameter(torch.tensor([1.0, 2.0], dtype=torch.float64))
    if grad_kind == "with_history":
        aiograd.backward_sync((p * p * p).sum(), create_graph=True)
        (tp * tp * tp).sum().backward(create_graph=True)
    else:
        p.grad = aiograd.tensor(np.ones(2), requires_grad=True)
        tp.grad = torch.ones(2, dtype=torch.float64, requires_grad=True)
    seen = []
    for param, opt in ((p, SGD([p], lr=0.1)), (tp, torch.optim.SGD([tp], lr=0.1))):
        grad = param.grad
        assert grad.requires_grad
        version = grad._version
        opt.zero_grad(set_to_none=False)
        seen.append((param.grad is grad, grad.requires_grad, grad.grad_fn is None,
                     grad._version - version))
    assert seen[0] == seen[1] == (True, False, True, 1)
    np.testing.assert_array_equal(p.grad.data, 0.0)
    np.testing.assert_array_equal(tp.grad.numpy(), 0.0)


def test_optimizer_state_is_a_defaultdict_like_torch():
    torch = pytest.importorskip("torch")
    p = nn.Parameter(np.ones(2))
    tp = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
    opt = SGD([p], lr=0.1, momentum=0.9)
    topt = torch.optim.SGD([tp], lr=0.1, momentum=0.9)
    assert opt.state[p] == {} == topt.state[tp]
    assert opt.state_dict()["state"] == {0: {}} == topt.state_dict()["state"]
    p.grad = aiograd.ones(2, dtype=aiograd.float64)
    opt.step()
    opt.load_state_dict(opt.state_dict())
    assert isinstance(opt.state, defaultdict) and isinstance(topt.state, defaultdict)
    np.testing.assert_array_equal(opt.state[p]["momentum_buffer"], 1.0)
    assert opt.state[nn.Parameter(np.ones(1))] == {}


def test_param_groups_take_their_own_lr():
    a, b = nn.Parameter(np.zeros(1)), nn.Parameter(np.zeros(1))
    opt = SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 1.0]
    a.grad = aiograd.tensor(np.ones(1))
    b.grad = aiograd.tensor(np.ones(1))
    opt.step()
    np.testing.assert_allclose([a.data[0], b.data[0]], [-0.1, -1.0])


def test_optimizer_argument_errors():
    p = nn.Parameter(np.ones(1))
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        SGD([], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        Adam([p], lr=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires"):
        SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="non-leaf"):
        SGD([p * 2], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


def test_optimizer_state_dict_resumes_the_same_trajectory():
    def run(model: nn.Module, opt: Optimizer, seeds: range) -> None:
        for seed in seeds:
            xn, yn = _data(seed)
            opt.zero_grad()
            aiograd.backward_sync(F.cross_entropy(model(aiograd.tensor(xn)), yn))
            opt.step()

    model = _mlp()
    start = model.state_dict()
    opt = Adam(model.parameters(), lr=0.01)
    run(model, opt, range(2))
    saved_model, saved_opt = model.state_dict(), opt.state_dict()
    run(model, opt, range(2, 4))

    resumed = _mlp()
    resumed.load_state_dict(saved_model)
    ropt = Adam(resumed.parameters(), lr=0.5)  # lr comes back from the state dict
    ropt.load_state_dict(saved_opt)
    assert ropt.param_groups[0]["lr"] == 0.01
    run(resumed, ropt, range(2, 4))
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(resumed.state_dict()[name], value)
        assert not np.array_equal(start[name], value)


@pytest.mark.parametrize("make", [lambda ps: SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.1),
                                  lambda ps: Adam(ps, lr=0.1, weight_decay=0.1)])
def test_training_on_another_device_matches_cpu(fake_backend: Any,
                                                make: Callable[[Any], Optimizer]):
    cpu_model = _mlp()
    dev_model = _mlp()
    dev_model.load_state_dict(cpu_model.state_dict())
    weight = dev_model[0].weight
    assert dev_model.to("fake:1") is dev_model and dev_model[0].weight is weight
    assert weight.device == aiograd.device("fake:1") and weight.data.fake_index == 1
    for model, device in ((cpu_model, "cpu"), (dev_model, "fake:1")):
        opt = make(model.parameters())
        for seed in range(3):
            xn, yn = _data(seed)
            opt.zero_grad()
            x = aiograd.tensor(xn, device=device)
            loss = F.cross_entropy(model(x), aiograd.tensor(yn, device=device))
            aiograd.backward_sync(loss)
            opt.step()
    for p in dev_model.parameters():
        assert p.device == aiograd.device("fake:1") and p.data.fake_index == 1
    for name, value in cpu_model.state_dict().items():
        np.testing.assert_allclose(dev_model.state_dict()[name], value, rtol=1e-12,
                                   err_msg=name)


def test_linear_built_on_a_device(fake_backend: Any):
    aiograd.manual_seed(3)
    on_device = nn.Linear(3, 2, device="fake:2")
    aiograd.manual_seed(3)
    on_host = nn.Linear(3, 2)
    assert on_device.weight.device == aiograd.device("fake:2")
    np.testing.assert_array_equal(on_device.state_dict()["weight"],
                                  on_host.state_dict()["weight"])


# ---- async training ----


def _blobs(seed: int, n: int = 96) -> tuple[np.ndarray, np.ndarray]:
    """Three Gaussian blobs in 4-D, one per class; a fixed dataset for ``seed``."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((3, 4)) * 2.0
    y = rng.integers(0, 3, size=n)
    x = centers[y] + 0.5 * rng.standard_normal((n, 4))
    return x, y


async def _train(model: nn.Module, x: np.ndarray, y: np.ndarray, steps: int,
                 log: list[int] | None = None, tag: int = 0) -> list[float]:
    opt = Adam(model.parameters(), lr=0.05)
    xt = aiograd.tensor(x)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(xt), y)
        await loss.backward()
        opt.step()
        losses.append(loss.item())
        if log is not None:
            log.append(tag)
    return losses


@pytest.mark.anyio
async def test_async_training_loop_decreases_the_loss():
    aiograd.manual_seed(0)
    model = _mlp()
    x, y = _blobs(seed=0)
    losses = await _train(model, x, y, steps=30)
    assert losses[-1] < 0.5 * losses[0]
    with aiograd.no_grad():
        pred = model(aiograd.tensor(x)).data.argmax(axis=1)
    assert (pred == y).mean() > 0.9


@pytest.mark.anyio
async def test_models_trained_concurrently_end_as_if_trained_alone():
    aiograd.manual_seed(1)
    inits = [_mlp().state_dict() for _ in range(4)]
    datasets = [_blobs(seed=10 + i) for i in range(4)]

    def fresh(i: int) -> nn.Module:
        model = _mlp()
        model.load_state_dict(inits[i])
        return model

    alone = []
    for i in range(4):
        model = fresh(i)
        await _train(model, *datasets[i], steps=8)
        alone.append(model.state_dict())

    together = [fresh(i) for i in range(4)]
    losses: dict[int, list[float]] = {}
    log: list[int] = []  # which model finished each step, in order

    async def run(i: int) -> None:
        losses[i] = await _train(together[i], *datasets[i], steps=8, log=log, tag=i)

    async with anyio.create_task_group() as tg:
        for i in range(4):
            tg.start_soon(run, i)

    # The steps interleaved: model 0 had not finished when another model stepped.
    assert log.index(1) < len(log) - 1 - log[::-1].index(0)
    for i in range(4):
        assert losses[i][-1] < losses[i][0]
        for name, value in together[i].state_dict().items():
            np.testing.assert_array_equal(value, alone[i][name], err_msg=f"model {i} {name}")
