"""scaled_dot_product_attention, MultiheadAttention and the Transformer encoder against
torch: outputs, attention weights and gradients with torch's weights loaded through
``load_state_dict``, and state_dict key names and shapes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from oracles import check_module_on_fake_device

import aiograd as ag
from aiograd import nn
from aiograd.nn import functional as F

# torch warns when a boolean and a float mask meet (aiograd merges them silently, as torch
# still does); the tests mix them on purpose.
pytestmark = [pytest.mark.timeout(120),
              pytest.mark.filterwarnings("ignore:Support for mismatched:UserWarning")]

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-4, 1e-5


def _pair(a: np.ndarray, requires_grad: bool = True) -> tuple[Any, Any]:
    return (ag.tensor(a, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def _randn(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _close(ours: Any, theirs: Any) -> None:
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(),
                               rtol=RTOL, atol=ATOL)


def _backward_both(ours: Any, theirs: Any, seed: int = 99) -> None:
    """Backward of ``sum(out * w)`` with the same random ``w`` through both outputs."""
    w = _randn(*theirs.shape, seed=seed)
    ag.backward_sync((ours * ag.tensor(w)).sum())
    (theirs * torch.tensor(w)).sum().backward()


def _module_grads_close(ours: nn.Module, theirs: Any) -> None:
    for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == tname
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=RTOL, atol=ATOL,
                                   err_msg=name)


def _copy_of(theirs: Any, ours: nn.Module) -> nn.Module:
    """``ours`` with ``theirs``' state_dict loaded (torch tensors as they come)."""
    keys = [(k, tuple(v.shape)) for k, v in ours.state_dict().items()]
    assert keys == [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    ours.load_state_dict(theirs.state_dict())
    return ours


# ---- scaled_dot_product_attention ----

SDPA_CASES = {
    "plain": dict(),
    "scale": dict(scale=0.3),
    "causal": dict(is_causal=True),
    "bool_mask": dict(mask="bool"),
    "float_mask": dict(mask="float"),
}


@pytest.mark.parametrize("case", sorted(SDPA_CASES))
@pytest.mark.parametrize("source", [5, 7])
def test_sdpa_matches_torch(case: str, source: int) -> None:
    opts = dict(SDPA_CASES[case])
    q, tq = _pair(_randn(2, 3, 5, 4, seed=1))
    k, tk = _pair(_randn(2, 3, source, 4, seed=2))
    v, tv = _pair(_randn(2, 3, source, 6, seed=3))
    kind = opts.pop("mask", None)
    if kind == "bool":
        m = np.random.default_rng(4).random((2, 1, 5, source)) > 0.3
        m[..., 0] = True
        opts["attn_mask"], topts = ag.tensor(m), {"attn_mask": torch.tensor(m)}
    elif kind == "float":
        m = _randn(5, source, seed=4)
        opts["attn_mask"], topts = ag.tensor(m), {"attn_mask": torch.tensor(m)}
    else:
        topts = dict(opts)
    out = F.scaled_dot_product_attention(q, k, v, **opts)
    tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **topts)
    _close(out, tout)
    _backward_both(out, tout)
    for ours, theirs in ((q, tq), (k, tk), (v, tv)):
        _close(ours.grad, theirs.grad)


def test_sdpa_fully_masked_row_gives_zeros_as_torch() -> None:
    q, tq = _pair(_randn(1, 3, 4, seed=1))
    m = np.array([[True, False], [False, False], [True, True]])
    out = F.scaled_dot_product_attention(q, q[..., :2, :], q[..., :2, :],
                                         attn_mask=ag.tensor(m))
    tout = torch.nn.functional.scaled_dot_product_attention(
        tq, tq[..., :2, :], tq[..., :2, :], attn_mask=torch.tensor(m))
    _close(out, tout)
    assert not np.isnan(out.detach().numpy()).any()
    _backward_both(out, tout)
    _close(q.grad, tq.grad)


def test_sdpa_grouped_query_attention_matches_torch() -> None:
    q, tq = _pair(_randn(2, 4, 5, 3, seed=1))
    k, tk = _pair(_randn(2, 2, 6, 3, seed=2))
    v, tv = _pair(_randn(2, 2, 6, 3, seed=3))
    out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True)
    _close(out, tout)
    _backward_both(out, tout)
    for ours, theirs in ((q, tq), (k, tk), (v, tv)):
        _close(ours.grad, theirs.grad)


def test_sdpa_dropout_zeroes_or_rescales_each_weight() -> None:
    ag.manual_seed(0)
    q = ag.tensor(_randn(64, 4, seed=1))
    eye = ag.eye(64)  # value = identity: the output is the (dropped) attention weights
    weights = F.softmax(q.matmul(q.T) / 2.0, dim=-1).numpy()
    out = F.scaled_dot_product_attention(q, q, eye, dropout_p=0.5).numpy()
    dropped = out == 0
    assert 0.4 < dropped.mean() < 0.6
    np.testing.assert_allclose(out[~dropped], 2 * weights[~dropped], rtol=1e-5)


def test_sdpa_is_causal_with_a_mask_is_refused() -> None:
    q = ag.randn(2, 3, 4)
    with pytest.raises(RuntimeError, match="is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=ag.ones(3, 3), is_causal=True)
    with pytest.raises(TypeError, match="scaled_dot_product_attention.*'query'"):
        F.scaled_dot_product_attention(np.ones((3, 4)), q, q)
    with pytest.raises(TypeError, match="scaled_dot_product_attention.*'attn_mask'"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=np.ones((3, 3), dtype=bool))


# ---- MultiheadAttention ----

def _mha_pair(**kwargs: Any) -> tuple[nn.MultiheadAttention, Any]:
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, **kwargs)
    ours = nn.MultiheadAttention(8, 2, **kwargs)
    return _copy_of(theirs, ours), theirs


MHA_CASES = {
    "seq_first": ({}, {}),
    "batch_first": ({"batch_first": True}, {}),
    "no_bias": ({"bias": False}, {}),
    "kdim_vdim": ({"kdim": 5, "vdim": 3}, {"cross": True}),
    "cross": ({}, {"cross": True}),
    "padding_bool": ({}, {"kpm": "bool"}),
    "padding_float": ({"batch_first": True}, {"kpm": "float"}),
    "attn_mask_bool_2d": ({}, {"attn_mask": "bool2"}),
    "attn_mask_float_3d": ({}, {"attn_mask": "float3", "kpm": "bool"}),
    "per_head_weights": ({}, {"average_attn_weights": False}),
    "no_weights": ({"batch_first": True}, {"need_weights": False, "kpm": "bool"}),
}


@pytest.mark.parametrize("case", sorted(MHA_CASES))
def test_multihead_attention_matches_torch(case: str) -> None:
    kwargs, call = MHA_CASES[case]
    ours, theirs = _mha_pair(**kwargs)
    length, source, batch = 4, 6, 3
    kdim, vdim = kwargs.get("kdim", 8), kwargs.get("vdim", 8)

    def layout(*shape: int) -> tuple[int, ...]:  # shape given as (N, L, E)
        return shape if kwargs.get("batch_first") else (shape[1], shape[0], shape[2])

    x, tx = _pair(_randn(*layout(batch, length, 8), seed=1))
    if call.get("cross"):
        k, tk = _pair(_randn(*layout(batch, source, kdim), seed=2))
        v, tv = _pair(_randn(*layout(batch, source, vdim), seed=3))
    else:
        source, k, tk, v, tv = length, x, tx, x, tx
    opts: dict[str, Any] = {}
    topts: dict[str, Any] = {}
    rng = np.random.default_rng(5)
    if call.get("kpm") == "bool":
        m = rng.random((batch, source)) > 0.7
        m[:, 0] = False
        opts["key_padding_mask"], topts["key_padding_mask"] = ag.tensor(m), torch.tensor(m)
    elif call.get("kpm") == "float":
        m = _randn(batch, source, seed=6)
        opts["key_padding_mask"], topts["key_padding_mask"] = ag.tensor(m), torch.tensor(m)
    if call.get("attn_mask") == "bool2":
        m = np.triu(np.ones((length, source), dtype=bool), 1)
        opts["attn_mask"], topts["attn_mask"] = ag.tensor(m), torch.tensor(m)
    elif call.get("attn_mask") == "float3":
        m = _randn(batch * 2, length, source, seed=7)
        opts["attn_mask"], topts["attn_mask"] = ag.tensor(m), torch.tensor(m)
    for key in ("need_weights", "average_attn_weights"):
        if key in call:
            opts[key] = topts[key] = call[key]
    out, weights = ours(x, k, v, **opts)
    tout, tweights = theirs(tx, tk, tv, **topts)
    _close(out, tout)
    if tweights is None:
        assert weights is None
    else:
        _close(weights, tweights)
    _backward_both(out, tout)
    _module_grads_close(ours, theirs)
    _close(x.grad, tx.grad)
    if call.get("cross"):
        _close(k.grad, tk.grad)
        _close(v.grad, tv.grad)


def test_multihead_attention_unbatched_matches_torch() -> None:
    ours, theirs = _mha_pair()
    x, tx = _pair(_randn(5, 8, seed=1))
    out, w = ours(x, x, x)
    tout, tw = theirs(tx, tx, tx)
    assert tuple(out.shape) == (5, 8) and tuple(w.shape) == (5, 5)
    _close(out, tout)
    _close(w, tw)


def test_multihead_attention_parameters_are_initialised_as_torch() -> None:
    mha = nn.MultiheadAttention(16, 4)
    bound = np.sqrt(6.0 / (16 + 48))
    w = mha.in_proj_weight.detach().numpy()
    assert w.shape == (48, 16) and np.abs(w).max() <= bound and w.std() > bound / 3
    assert not mha.in_proj_bias.detach().numpy().any()
    assert not mha.out_proj.bias.detach().numpy().any()
    separate = nn.MultiheadAttention(16, 4, kdim=3, vdim=5)
    names = [(n, tuple(p.shape)) for n, p in separate.named_parameters()]
    tnames = [(n, tuple(p.shape))
              for n, p in torch.nn.MultiheadAttention(16, 4, kdim=3, vdim=5).named_parameters()]
    assert names == tnames


def test_multihead_attention_dropout_only_while_training() -> None:
    mha = nn.MultiheadAttention(8, 2, dropout=0.5)
    x = ag.randn(4, 2, 8)
    with ag.no_grad():
        first, _ = mha(x, x, x)
        second, _ = mha(x, x, x)
        assert not np.allclose(first.numpy(), second.numpy())
        mha.eval()
        np.testing.assert_array_equal(mha(x, x, x)[0].numpy(), mha(x, x, x)[0].numpy())


def test_multihead_attention_errors() -> None:
    mha = nn.MultiheadAttention(8, 2)
    x = ag.randn(4, 2, 8)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        mha(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match="attn_mask"):
        mha(x, x, x, attn_mask=ag.zeros(3, 3))
    with pytest.raises(AssertionError, match="key_padding_mask"):
        mha(x, x, x, key_padding_mask=ag.zeros(4, 2, dtype=ag.bool))
    with pytest.raises(AssertionError, match="divisible"):
        nn.MultiheadAttention(8, 3)
    with pytest.raises(NotImplementedError, match="add_bias_kv"):
        nn.MultiheadAttention(8, 2, add_bias_kv=True)
    with pytest.raises(TypeError, match="MultiheadAttention.*'key_padding_mask'"):
        mha(x, x, x, key_padding_mask=np.zeros((2, 4), dtype=bool))
    with pytest.raises(TypeError, match="MultiheadAttention.*'query'"):
        mha(np.zeros((4, 2, 8)), x, x)
    with pytest.raises(TypeError, match="MultiheadAttention.*key_padding_mask of dtype"):
        mha(x, x, x, key_padding_mask=ag.zeros(2, 4, dtype=ag.int64))


# ---- the Transformer encoder ----

LAYER_CASES = {
    "post_norm_relu": {},
    "pre_norm_gelu": {"norm_first": True, "activation": "gelu"},
    "batch_first_no_bias": {"batch_first": True, "bias": False},
}


@pytest.mark.parametrize("case", sorted(LAYER_CASES))
def test_transformer_encoder_layer_matches_torch(case: str) -> None:
    kwargs = dict(LAYER_CASES[case], dim_feedforward=16, dropout=0.0)
    torch.manual_seed(0)
    theirs = torch.nn.TransformerEncoderLayer(8, 2, **kwargs)
    ours = _copy_of(theirs, nn.TransformerEncoderLayer(8, 2, **kwargs))
    x, tx = _pair(_randn(*((3, 4, 8) if kwargs.get("batch_first") else (4, 3, 8)), seed=1))
    causal = np.triu(np.full((4, 4), -np.inf, dtype=np.float32), 1)
    padding = np.zeros((3, 4), dtype=bool)  # (N, S)
    padding[:, -1] = True
    out = ours(x, src_mask=ag.tensor(causal), src_key_padding_mask=ag.tensor(padding))
    tout = theirs(tx, src_mask=torch.tensor(causal), src_key_padding_mask=torch.tensor(padding))
    _close(out, tout)
    _backward_both(out, tout)
    _module_grads_close(ours, theirs)
    _close(x.grad, tx.grad)


def test_transformer_encoder_matches_torch_in_eval() -> None:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
    theirs = torch.nn.TransformerEncoder(layer, 2, norm=torch.nn.LayerNorm(8),
                                         enable_nested_tensor=False).eval()
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16,
                                                            batch_first=True),
                                 2, norm=nn.LayerNorm(8)).eval()
    _copy_of(theirs, ours)
    assert list(ours.state_dict())[:2] == ["layers.0.self_attn.in_proj_weight",
                                           "layers.0.self_attn.in_proj_bias"]
    x, tx = _pair(_randn(3, 5, 8, seed=1), requires_grad=False)
    with torch.no_grad():
        _close(ours(x), theirs(tx))


def test_encoder_layers_are_independent_copies() -> None:
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 3)
    first = encoder.layers[0].linear1.weight.detach()
    assert len({id(layer.linear1.weight) for layer in encoder.layers}) == 3
    assert all(np.array_equal(layer.linear1.weight.detach().numpy(), first.numpy())
               for layer in encoder.layers)


def test_encoder_layer_bad_activation() -> None:
    with pytest.raises(RuntimeError, match="relu/gelu"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")


# ---- finite differences ----

def test_sdpa_gradcheck_with_a_float_mask_and_causal() -> None:
    rng = np.random.default_rng(0)
    q, k, v = (ag.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
               for _ in range(3))
    mask = ag.tensor(rng.standard_normal((3, 3)))
    assert ag.gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, mask),
                        (q, k, v))
    assert ag.gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c,
                                                                       is_causal=True),
                        (q, k, v))


def test_float64_encoder_layer_gradcheck() -> None:
    ag.manual_seed(0)
    layer = nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, dropout=0.0,
                                       activation="gelu", dtype=ag.float64)
    assert all(p.dtype == np.float64 for p in layer.parameters())
    x = ag.tensor(np.random.default_rng(1).standard_normal((3, 2, 4)), requires_grad=True)
    padding = ag.tensor(np.array([[False, False, True], [False, False, False]]))
    assert ag.gradcheck(lambda t: layer(t, src_key_padding_mask=padding), (x,))


# ---- another device ----

def test_attention_stays_on_its_device(fake_backend: Any) -> None:
    padding = np.zeros((2, 5), dtype=bool)
    padding[0, -2:] = True
    check_module_on_fake_device(
        fake_backend,
        lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
        lambda m, x, p: m(x, src_key_padding_mask=p), [_randn(2, 5, 8, seed=1), padding])


# ---- node names ----

def _node_names(out: Any) -> list[str | None]:
    items = out if isinstance(out, tuple) else (out,)
    return [None if t is None else type(t.grad_fn).__name__ for t in items]


@pytest.mark.parametrize(("kwargs", "call", "shape"), [
    ({}, {}, (5, 2, 8)),
    ({"batch_first": True}, {}, (2, 5, 8)),
    ({}, {}, (5, 8)),
    ({}, {"average_attn_weights": False}, (5, 2, 8)),
    ({"batch_first": True}, {"need_weights": False}, (2, 5, 8)),
])
def test_multihead_attention_outputs_nodes_are_torchs(kwargs: dict[str, Any],
                                                       call: dict[str, Any],
                                                       shape: tuple[int, ...]) -> None:
    ours, theirs = _mha_pair(**kwargs)
    x, tx = _pair(_randn(*shape, seed=1))
    assert _node_names(ours(x, x, x, **call)) == _node_names(theirs(tx, tx, tx, **call))


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_output_node_is_torchs(norm_first: bool) -> None:
    kwargs = {"dim_feedforward": 16, "norm_first": norm_first}
    x, tx = _pair(_randn(5, 2, 8, seed=1))
    assert (_node_names(nn.TransformerEncoderLayer(8, 2, **kwargs)(x))
            == _node_names(torch.nn.TransformerEncoderLayer(8, 2, **kwargs)(tx)))
