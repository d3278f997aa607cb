"""More shape ops: t, mT, view_as, reshape_as, is_contiguous, flip, repeat, and
chunk/split/unbind (multi-output views). PyTorch is the oracle; gradcheck on float64."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import aiograd as ag

pytestmark = pytest.mark.timeout(60)


def arr(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def leaf(a):
    return ag.tensor(np.array(a, dtype=np.float64), requires_grad=True)


def _outputs(out):
    return list(out) if isinstance(out, tuple) else [out]


def check_against_torch(fn, *arrays, seed=1):
    """``fn(*tensors)`` (method calls shared by both libraries) agrees with PyTorch: values,
    node names and output numbers, first-order gradients (create_graph) and second-order
    gradients of the squared first-order ones."""
    torch = pytest.importorskip("torch")
    xs = [leaf(a) for a in arrays]
    ts = [torch.tensor(np.array(a, dtype=np.float64), requires_grad=True) for a in arrays]
    outs, t_outs = _outputs(fn(*xs)), _outputs(fn(*ts))
    assert len(outs) == len(t_outs)
    rng = np.random.default_rng(seed)
    loss, t_loss = 0, 0
    for out, t_out in zip(outs, t_outs):
        np.testing.assert_array_equal(out.detach().numpy(), t_out.detach().numpy())
        assert out.grad_fn.name() == type(t_out.grad_fn).__name__
        assert out.output_nr == t_out.output_nr
        w = rng.standard_normal(tuple(t_out.shape))
        loss = loss + (out * out * ag.tensor(w)).sum()
        t_loss = t_loss + (t_out * t_out * torch.tensor(w)).sum()
    grads = ag.grad_sync(loss, xs, create_graph=True)
    t_grads = torch.autograd.grad(t_loss, ts, create_graph=True)
    for g, tg in zip(grads, t_grads):
        np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-12,
                                   atol=1e-12)
    total = sum((g * g).sum() for g in grads)
    t_total = sum((g * g).sum() for g in t_grads)
    if not t_total.requires_grad:  # an empty output: no second-order graph
        return
    seconds = ag.grad_sync(total, xs)
    t_seconds = torch.autograd.grad(t_total, ts)
    for g, tg in zip(seconds, t_seconds):
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10, atol=1e-12)


def check_error(fn, shape):
    """``fn`` raises the same exception type and message in both libraries."""
    torch = pytest.importorskip("torch")
    a = arr(shape)
    with pytest.raises(Exception) as t_exc:  # noqa: PT011  (compared below)
        fn(torch.tensor(a))
    with pytest.raises(type(t_exc.value)) as exc:
        fn(ag.tensor(a))
    assert str(exc.value) == str(t_exc.value)


# ---- t / mT ----

@pytest.mark.parametrize("shape", [(3, 4), (4,), ()])
def test_t_matches_torch(shape):
    check_against_torch(lambda x: x.t() * 2, arr(shape))
    check_against_torch(lambda x: x.t(), arr(shape))


def test_t_is_a_view():
    x = ag.tensor(arr((2, 3)))
    y = x.t()
    assert y._base is x and np.shares_memory(y.data, x.data)


def test_t_rejects_more_than_two_dims():
    check_error(lambda x: x.t(), (2, 2, 2))


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4)])
def test_mT_swaps_the_last_two_dims_as_torch(shape):
    check_against_torch(lambda x: x.mT, arr(shape))


def test_mT_rejects_a_vector():
    check_error(lambda x: x.mT, (3,))


def test_mT_of_a_0d_tensor_warns_and_is_the_tensor():
    x = leaf(2.0)
    with pytest.warns(UserWarning, match="Tensor.mT is deprecated on 0-D tensors"):
        assert x.mT is x


def test_gradcheck_t_and_mT():
    assert ag.gradcheck(lambda x: x.t() ** 2, [leaf(arr((3, 2)))])
    assert ag.gradcheck(lambda x: x.mT ** 2, [leaf(arr((2, 3, 2)))])


def test_transpose_of_a_0d_tensor_has_a_gradient():
    check_against_torch(lambda x: x.transpose(0, -1), arr(()))


# ---- view_as / reshape_as ----

def test_view_as_and_reshape_as_match_torch():
    check_against_torch(lambda x: x.view_as(x.detach().reshape(4, 3)), arr((2, 6)))
    check_against_torch(lambda x: x.reshape_as(x.detach().reshape(4, 3)), arr((2, 6)))
    # reshape_as of a transposed tensor copies: UnsafeViewBackward0
    check_against_torch(lambda x: x.t().reshape_as(x.reshape(-1)), arr((3, 4)))


def test_view_as_of_a_non_viewable_tensor_raises():
    check_error(lambda x: x.t().view_as(x.reshape(-1)), (3, 4))


def test_view_as_needs_a_tensor():
    check_error(lambda x: x.view_as([1]), (3, 4))


# ---- is_contiguous ----

@pytest.mark.parametrize(
    "make",
    [
        lambda x: x,
        lambda x: x.t(),
        lambda x: x[:, ::2],
        lambda x: x[1:],
        lambda x: x[:, :1],
        lambda x: x[:1].expand(3, 4),
        lambda x: x[:0],
        lambda x: x.t().contiguous(),
    ],
)
def test_is_contiguous_matches_torch(make):
    torch = pytest.importorskip("torch")
    a = arr((3, 4))
    assert make(ag.tensor(a)).is_contiguous() == make(torch.tensor(a)).is_contiguous()


# ---- flip ----

@pytest.mark.parametrize("dims", [(0,), (1,), (0, 1), (-1, 0), ()])
def test_flip_matches_torch(dims):
    check_against_torch(lambda x: x.flip(dims), arr((3, 4)))


def test_flip_takes_dims_as_arguments_or_keyword():
    x = ag.tensor(arr((2, 3)))
    np.testing.assert_array_equal(x.flip(0, 1).numpy(), x.numpy()[::-1, ::-1])
    np.testing.assert_array_equal(x.flip(dims=[1]).numpy(), x.numpy()[:, ::-1])


def test_flip_of_a_0d_tensor():
    check_against_torch(lambda x: x.flip(0), arr(()))


def test_flip_is_a_copy():
    x = ag.tensor(arr((2, 3)))
    y = x.flip(1)
    assert y._base is None and not np.shares_memory(y.data, x.data)
    assert y.is_contiguous()


@pytest.mark.parametrize("fn", [lambda x: x.flip(0, 0), lambda x: x.flip(2)])
def test_flip_errors_match_torch(fn):
    check_error(fn, (2, 3))


def test_gradcheck_flip():
    assert ag.gradcheck(lambda x: x.flip((0, 2)) ** 2, [leaf(arr((2, 3, 2)))])


# ---- repeat ----

@pytest.mark.parametrize("sizes", [(2, 1), (1, 3), (2, 2, 3), ((2, 2),), ([3, 1, 1],), (0, 2)])
def test_repeat_matches_torch(sizes):
    check_against_torch(lambda x: x.repeat(*sizes), arr((2, 3)))


def test_repeat_of_a_0d_tensor():
    check_against_torch(lambda x: x.repeat(2, 3), arr(()))


def test_repeat_is_a_copy():
    x = ag.tensor(arr((2, 3)))
    y = x.repeat(1, 1)
    assert y._base is None and not np.shares_memory(y.data, x.data)


@pytest.mark.parametrize("fn", [lambda x: x.repeat(2), lambda x: x.repeat(-1, 2)])
def test_repeat_errors_match_torch(fn):
    check_error(fn, (3, 4))


def test_gradcheck_repeat():
    assert ag.gradcheck(lambda x: x.repeat(2, 1, 3) ** 2, [leaf(arr((2, 2)))])


# ---- chunk / split / unbind ----

SPLIT_CASES = {
    "chunk": lambda x: x.chunk(2),
    "chunk_dim1": lambda x: x.chunk(3, 1),
    "chunk_fewer_pieces": lambda x: x.chunk(4, dim=-1),
    "split": lambda x: x.split(2),
    "split_dim1": lambda x: x.split(3, dim=1),
    "split_sizes": lambda x: x.split([1, 2]),
    "split_sizes_tuple": lambda x: x.split((2, 0, 3), 1),
    "unbind": lambda x: x.unbind(),
    "unbind_dim1": lambda x: x.unbind(1),
    "unbind_negative_dim": lambda x: x.unbind(-1),
}


@pytest.mark.parametrize("name", sorted(SPLIT_CASES))
def test_split_family_matches_torch(name):
    check_against_torch(SPLIT_CASES[name], arr((3, 5)))


@pytest.mark.parametrize("name", ["chunk", "split_sizes", "unbind"])
def test_split_family_gradient_of_some_outputs_only(name):
    # The outputs that get no gradient count as zeros.
    check_against_torch(lambda x: SPLIT_CASES[name](x)[1], arr((3, 5)))


@pytest.mark.parametrize("name", sorted(SPLIT_CASES))
def test_gradcheck_split_family(name):
    fn = SPLIT_CASES[name]
    assert ag.gradcheck(lambda x: tuple(p ** 2 for p in fn(x)), [leaf(arr((3, 5)))])


def test_split_outputs_share_one_node():
    x = leaf(arr((4, 2)))
    a, b = x.split(2)
    assert a.grad_fn is b.grad_fn
    assert (a.output_nr, b.output_nr) == (0, 1)
    assert a.grad_fn.num_inputs == 2
    assert a.grad_fn.next_functions[0][0].name() == "AccumulateGrad"


def test_split_outputs_are_views_sharing_the_version_counter():
    x = ag.tensor(arr((4, 2)))
    parts = x.chunk(2) + x.unbind(1)
    for p in parts:
        assert p._base is x and p._vc is x._vc
    parts[0][0, 0] = 7.0
    assert x.numpy()[0, 0] == 7.0 and x._version == 1


def test_chunk_of_an_empty_dim_gives_chunks_empty_pieces():
    torch = pytest.importorskip("torch")
    for lib in (ag, torch):
        x = lib.zeros(0, 2, requires_grad=True)
        pieces = x.chunk(3)
        assert [tuple(p.shape) for p in pieces] == [(0, 2)] * 3
        fn = pieces[0].grad_fn
        assert (fn.name() if lib is ag else type(fn).__name__) == "SplitWithSizesBackward0"


def test_unbind_of_an_empty_dim_is_empty():
    assert ag.zeros(0, 2, requires_grad=True).unbind() == ()


def test_split_without_grad_records_nothing():
    x = ag.tensor(arr((4, 2)), requires_grad=True)
    with ag.no_grad():
        a, b = x.split(2)
    assert a.grad_fn is None and not a.requires_grad


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.reshape(-1)[0].split(1),
        lambda x: x.reshape(-1)[0].chunk(1),
        lambda x: x.reshape(-1)[0].unbind(),
        lambda x: x.chunk(0),
        lambda x: x.chunk(-1),
        lambda x: x.split(0),
        lambda x: x.split(-1),
        lambda x: x.split([1, 1]),
        lambda x: x.split([4, -1]),
        lambda x: x.split(2, 2),
        lambda x: x.chunk(2, 2),
        lambda x: x.unbind(2),
    ],
)
def test_split_family_errors_match_torch(fn):
    check_error(fn, (3, 4))


def test_chunk_needs_an_int():
    with pytest.raises(TypeError, match="must be int, not float"):
        ag.zeros(4).chunk(2.0)


def _multi_output_programs(lib):
    """Writes PyTorch refuses for outputs of ops that return several views."""
    x = lib.ones(4, requires_grad=True)

    def write_output():
        a, b = (x * 1.0).split(2)
        b.mul_(2.0)

    def write_view_of_output():
        a, b = (x * 1.0).chunk(2)
        a[0].add_(1.0)

    def write_unbind_output():
        (x * 1.0).unbind(0)[2].add_(1.0)

    def use_after_base_written():
        y = x * 1.0
        a, b = y.split(2)
        y.mul_(2.0)
        loss = a.sum()
        loss.backward() if lib.__name__ == "torch" else loss.backward_sync()

    return [write_output, write_view_of_output, write_unbind_output, use_after_base_written]


def test_outputs_of_multi_view_ops_may_not_be_written_with_autograd_as_in_torch():
    torch = pytest.importorskip("torch")
    for ours, theirs in zip(_multi_output_programs(ag), _multi_output_programs(torch)):
        with pytest.raises(RuntimeError) as expected:
            theirs()
        with pytest.raises(RuntimeError) as info:
            ours()
        assert str(info.value) == str(expected.value)
    z = ag.ones(4)  # without autograd, or under no_grad, the write is allowed
    c, _ = z.split(2)
    c.mul_(2.0)
    assert z.numpy().tolist() == [2.0, 2.0, 1.0, 1.0]
    with ag.no_grad():
        a, _ = (ag.ones(4, requires_grad=True) * 1.0).split(2)
    a.mul_(2.0)


def test_module_cat_and_stack_exist():
    assert ag.cat([ag.ones(1), ag.zeros(2)]).shape == (3,)
    assert ag.stack([ag.ones(2), ag.zeros(2)], 1).shape == (2, 2)


def test_reshape_negative_size_error_matches_torch():
    check_error(lambda x: x.reshape(-2, 6), (3, 4))


def test_no_warning_for_regular_shape_ops():
    x = leaf(arr((2, 3)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x.t().flip(0).repeat(2, 1).mT.split(1)


def test_new_shape_ops_stay_on_the_tensors_device(fake_backend):
    dev = "fake:1"
    a = arr((2, 3))
    x = ag.tensor(a, device=dev, requires_grad=True)
    outs = [x.t(), x.mT, x.flip(1), x.repeat(2, 1), *x.split([1, 2], 1), *x.unbind(), x.chunk(2)[0]]
    for out in outs:
        assert out.device == ag.device(dev)
    (g,) = ag.grad_sync(sum(out.sum() for out in outs), [x])
    assert g.device == ag.device(dev)
    np.testing.assert_array_equal(g.cpu().numpy(), np.full((2, 3), 8.0) - [[0] * 3, [1] * 3])


# ---- select / narrow / fill_ ----

def test_select_narrow_and_fill_match_torch():
    torch = pytest.importorskip("torch")
    seen = []
    for lib in (torch, ag):
        x = lib.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
        a, b, c = x.select(1, -1), x.narrow(0, 1, 2), lib.narrow(x, 1, -2, 2)
        y = x * 1.0
        y.fill_(2.0)
        v = lib.tensor(3.0, requires_grad=True)
        z = x * 1.0
        z.fill_(v)
        loss = a.sum() + (b * 2.0).sum() + (c * 3.0).sum() + y.sum() + z.sum() * 2.0
        loss.backward() if lib is torch else loss.backward_sync()
        seen.append(([t.grad_fn.name() for t in (a, b, c, y, z)], x.grad.numpy().tolist(),
                     float(v.grad), a._base is x, b._base is x))
        with pytest.raises(IndexError):
            x.select(0, 3)
        with pytest.raises(RuntimeError):
            x.narrow(0, 2, 2)
        with pytest.raises(RuntimeError):
            (x * 1.0).fill_(lib.ones(2))
    assert seen[1] == seen[0]


@pytest.mark.parametrize("numel", [6, 0])
@pytest.mark.parametrize("shape", [(-2, -1, -1), (0, -1), (-1, -1, -2), (2, -1), (7,), (-1,)])
def test_reshape_infers_and_refuses_sizes_in_torchs_order(shape, numel):
    torch = pytest.importorskip("torch")
    seen = []
    for lib in (ag, torch):
        try:
            seen.append(tuple(lib.ones(numel).reshape(*shape).shape))
        except RuntimeError as exc:
            seen.append(str(exc))
    assert seen[0] == seen[1]


def test_flatten_merges_dims_beside_an_empty_one_as_torch():
    torch = pytest.importorskip("torch")
    for dims in [(0, 1), (1, 2), (0, 2)]:
        x = ag.zeros((3, 2, 0), requires_grad=True)
        y = x.flatten(*dims)
        assert tuple(y.shape) == tuple(torch.zeros(3, 2, 0).flatten(*dims).shape)
        y.sum().backward_sync()
        assert x.grad.shape == (3, 2, 0)
