"""RNN, LSTM, GRU and their cells against torch: outputs, final states and gradients
with torch's weights loaded through ``load_state_dict``, parameter names, shapes and
order, initialisation bounds, dropout between layers, and the shape checks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from oracles import check_module_on_fake_device

import aiograd as ag
from aiograd import nn

pytestmark = pytest.mark.timeout(120)

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-4, 1e-5


def _randn(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _pair(a: np.ndarray) -> tuple[Any, Any]:
    return ag.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _close(ours: Any, theirs: Any) -> None:
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(),
                               rtol=RTOL, atol=ATOL)


def _flat(out: Any) -> list[Any]:
    """``(output, h_n)`` or ``(output, (h_n, c_n))`` or a cell's result, as a list."""
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in _flat(item)]
    return [out]


def _loaded(cls: str, *args: Any, **kwargs: Any) -> tuple[nn.Module, Any]:
    torch.manual_seed(0)
    theirs = getattr(torch.nn, cls)(*args, **kwargs)
    ours = getattr(nn, cls)(*args, **kwargs)
    keys = [(k, tuple(v.shape)) for k, v in ours.state_dict().items()]
    assert keys == [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def _check(ours: nn.Module, theirs: Any, args: list[Any], targs: list[Any]) -> None:
    """Equal results; then equal gradients of every parameter and tensor argument for a
    loss that weighs every result."""
    outs, touts = _flat(ours(*args)), _flat(theirs(*targs))
    assert len(outs) == len(touts)
    loss, tloss = 0.0, 0.0
    for k, (o, t) in enumerate(zip(outs, touts)):
        assert tuple(o.shape) == tuple(t.shape)
        _close(o, t)
        w = _randn(*t.shape, seed=100 + k)
        loss = loss + (o * ag.tensor(w)).sum()
        tloss = tloss + (t * torch.tensor(w)).sum()
    ag.backward_sync(loss)
    tloss.backward()
    for (name, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=RTOL, atol=ATOL,
                                   err_msg=name)
    for a, ta in zip(_flat(args), _flat(targs)):
        _close(a.grad, ta.grad)


CASES = {
    "one_layer": {},
    "two_layers": {"num_layers": 2},
    "bidirectional": {"bidirectional": True},
    "deep_bidirectional_batch_first": {"num_layers": 2, "bidirectional": True,
                                       "batch_first": True},
    "no_bias": {"bias": False, "num_layers": 2},
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_recurrent_layer_matches_torch(cls: str, case: str) -> None:
    kwargs = CASES[case]
    ours, theirs = _loaded(cls, 3, 5, **kwargs)
    shape = (2, 6, 3) if kwargs.get("batch_first") else (6, 2, 3)
    x, tx = _pair(_randn(*shape, seed=1))
    _check(ours, theirs, [x], [tx])


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_initial_states_match_torch(cls: str) -> None:
    ours, theirs = _loaded(cls, 3, 4, num_layers=2, bidirectional=True)
    x, tx = _pair(_randn(5, 2, 3, seed=1))
    h, th = _pair(_randn(4, 2, 4, seed=2))
    if cls == "LSTM":
        c, tc = _pair(_randn(4, 2, 4, seed=3))
        _check(ours, theirs, [x, (h, c)], [tx, (th, tc)])
    else:
        _check(ours, theirs, [x, h], [tx, th])


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_unbatched_input_matches_torch(cls: str) -> None:
    ours, theirs = _loaded(cls, 3, 4, num_layers=2)
    x, tx = _pair(_randn(5, 3, seed=1))
    _check(ours, theirs, [x], [tx])


def test_rnn_relu_matches_torch() -> None:
    ours, theirs = _loaded("RNN", 3, 4, nonlinearity="relu", bidirectional=True)
    x, tx = _pair(_randn(5, 2, 3, seed=1))
    _check(ours, theirs, [x], [tx])


@pytest.mark.parametrize("cls", ["LSTMCell", "GRUCell", "RNNCell"])
@pytest.mark.parametrize("with_state", [False, True])
def test_cells_match_torch(cls: str, with_state: bool) -> None:
    ours, theirs = _loaded(cls, 3, 4)
    x, tx = _pair(_randn(2, 3, seed=1))
    args, targs = [x], [tx]
    if with_state:
        h, th = _pair(_randn(2, 4, seed=2))
        if cls == "LSTMCell":
            c, tc = _pair(_randn(2, 4, seed=3))
            args.append((h, c))
            targs.append((th, tc))
        else:
            args.append(h)
            targs.append(th)
    _check(ours, theirs, args, targs)


def test_unbatched_cell_matches_torch() -> None:
    ours, theirs = _loaded("LSTMCell", 3, 4, bias=False)
    x, tx = _pair(_randn(3, seed=1))
    _check(ours, theirs, [x], [tx])


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN", "LSTMCell", "GRUCell"])
def test_initialisation_is_uniform_within_torchs_bound(cls: str) -> None:
    module = getattr(nn, cls)(8, 16)
    bound = 1 / np.sqrt(16)
    for name, p in module.named_parameters():
        data = p.detach().numpy()
        assert np.abs(data).max() <= bound, name
        assert data.std() > bound / 3, name


def test_dropout_between_layers_only_while_training() -> None:
    lstm = nn.LSTM(3, 8, num_layers=2, dropout=0.5)
    x = ag.randn(4, 2, 3)
    with ag.no_grad():
        first, second = lstm(x)[0], lstm(x)[0]
        assert not np.allclose(first.numpy(), second.numpy())
        lstm.eval()
        np.testing.assert_array_equal(lstm(x)[0].numpy(), lstm(x)[0].numpy())
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.2)


def test_all_weights_follow_torchs_layout() -> None:
    ours, theirs = _loaded("GRU", 3, 4, num_layers=2, bidirectional=True)
    shapes = [[tuple(w.shape) for w in ws] for ws in ours.all_weights]
    assert shapes == [[tuple(w.shape) for w in ws] for ws in theirs.all_weights]


def test_shape_errors() -> None:
    lstm = nn.LSTM(3, 4, num_layers=2)
    with pytest.raises(RuntimeError, match="Expected hidden size"):
        lstm(ag.randn(5, 2, 3), (ag.zeros(1, 2, 4), ag.zeros(1, 2, 4)))
    with pytest.raises(RuntimeError, match="input_size"):
        lstm(ag.randn(5, 2, 7))
    with pytest.raises(ValueError, match="2D or 3D"):
        lstm(ag.randn(5))
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(NotImplementedError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(TypeError, match="LSTMCell: hx"):
        nn.LSTMCell(3, 4)(ag.randn(2, 3), np.zeros((2, 4)))
    with pytest.raises(TypeError, match="GRU: input"):
        nn.GRU(3, 4)(np.zeros((5, 2, 3)))


@pytest.mark.anyio
async def test_lstm_trains_with_await_backward() -> None:
    ag.manual_seed(0)
    lstm, head = nn.LSTM(2, 8, batch_first=True), nn.Linear(8, 1)
    opt = ag.optim.Adam([*lstm.parameters(), *head.parameters()], lr=0.05)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 6, 2)).astype(np.float32)
    y = x[:, :, 0].sum(axis=1, keepdims=True)  # the running sum of the first feature
    losses = []
    for _ in range(30):
        out, _ = lstm(ag.tensor(x))
        loss = ((head(out[:, -1]) - ag.tensor(y)) ** 2).mean()
        opt.zero_grad()
        await loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0]


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_float64_gradcheck(cls: str) -> None:
    ag.manual_seed(0)
    module = getattr(nn, cls)(2, 3, num_layers=2, bidirectional=True, dtype=ag.float64)
    rng = np.random.default_rng(1)
    x = ag.tensor(rng.standard_normal((4, 2, 2)), requires_grad=True)
    h = ag.tensor(rng.standard_normal((4, 2, 3)), requires_grad=True)
    if cls == "LSTM":
        c = ag.tensor(rng.standard_normal((4, 2, 3)), requires_grad=True)
        assert ag.gradcheck(lambda a, b, d: module(a, (b, d))[0], (x, h, c))
    else:
        assert ag.gradcheck(lambda a, b: module(a, b)[0], (x, h))


# ---- another device ----

@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_recurrent_layers_stay_on_their_device(fake_backend: Any, cls: str) -> None:
    check_module_on_fake_device(
        fake_backend, lambda: getattr(nn, cls)(3, 4, num_layers=2, bidirectional=True),
        lambda m, x: m(x)[0], [_randn(5, 2, 3, seed=1)])


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad"])
def test_optimizers_step_on_the_parameters_device(fake_backend: Any, name: str) -> None:
    finals = []
    for device in ("cpu", "fake:1"):
        p = ag.tensor(_randn(3, 4, seed=1), device=device, requires_grad=True)
        opt = getattr(ag.optim, name)([p], lr=0.1)
        for k in range(3):
            p.grad = ag.tensor(_randn(3, 4, seed=10 + k), device=device)
            opt.step()
        assert all(v.device is ag.device("cpu" if key == "step" else device)
                   for key, v in opt.state[p].items())
        finals.append(fake_backend.to_host(p.data) if device != "cpu" else p.detach().numpy())
    np.testing.assert_allclose(finals[1], finals[0], rtol=1e-6)


# ---- node names ----

def _node_names(out: Any) -> list[str]:
    return [type(t.grad_fn).__name__ for t in _flat(out)]


@pytest.mark.parametrize(("cls", "shape"), [("GRU", (5, 2, 3)), ("RNN", (5, 2, 3)),
                                            ("LSTMCell", (2, 3)), ("GRUCell", (2, 3)),
                                            ("RNNCell", (2, 3))])
def test_result_nodes_are_torchs(cls: str, shape: tuple[int, ...]) -> None:
    ours, theirs = _loaded(cls, 3, 4)
    x, tx = _pair(_randn(*shape, seed=1))
    assert _node_names(ours(x)) == _node_names(theirs(tx))


def test_lstm_state_nodes_are_torchs() -> None:
    """h_n and c_n; torch's output comes from its fused CPU kernel (MkldnnRnnLayerBackward0),
    aiograd's from stacking the steps (StackBackward0)."""
    ours, theirs = _loaded("LSTM", 3, 4)
    x, tx = _pair(_randn(5, 2, 3, seed=1))
    assert _node_names(ours(x))[1:] == _node_names(theirs(tx))[1:]
