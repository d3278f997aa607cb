"""Note [Errors at the public boundary]: what an error looks like when it leaves aiograd."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import aiograd as ag
import aiograd.nn.functional as F
from aiograd._boundary import OutOfRangeError


def _notes(exc: BaseException) -> list[str]:
    return list(getattr(exc, "__notes__", ()))


def test_a_numpy_exception_leaves_as_a_plain_type_error_naming_the_function():
    with pytest.raises(TypeError) as info:
        F.elu(ag.ones(3), "x")  # alpha must be a number: NumPy's ufunc refuses the string
    assert type(info.value) is TypeError
    assert str(info.value).startswith("elu(): ")


def test_an_index_error_is_also_a_value_error_with_pytorchs_text():
    torch = pytest.importorskip("torch")
    with pytest.raises(IndexError) as theirs:
        torch.tensor([1, 4]).diagonal()
    with pytest.raises(OutOfRangeError) as ours:
        ag.tensor([1, 4]).diagonal()
    assert isinstance(ours.value, ValueError)
    assert str(ours.value) == str(theirs.value)
    assert _notes(ours.value) == ["(raised by aiograd's diagonal())"]


def test_a_message_that_names_the_function_gets_no_note():
    with pytest.raises(TypeError) as info:
        F.relu(np.ones(3))
    assert str(info.value).startswith("relu(): argument 'input' (position 1)")
    assert _notes(info.value) == []


def test_a_wrong_arity_names_the_public_function_not_an_internal_closure():
    with pytest.raises(TypeError) as info:
        ag.ones(3).exp(1)
    assert str(info.value) == "exp() takes 1 positional argument but 2 were given"


def test_an_error_of_the_users_own_code_passes_untouched():
    class Mine(Exception):
        pass

    def fn(t: ag.Tensor) -> ag.Tensor:
        raise Mine("from the user")

    with pytest.raises(Mine) as info:
        ag.checkpoint(fn, ag.ones(2, requires_grad=True), use_reentrant=False)
    assert str(info.value) == "from the user" and _notes(info.value) == []

    def hook(grad: ag.Tensor) -> None:
        raise ValueError("a hook's")

    x = ag.ones(2, requires_grad=True)
    x.register_hook(hook)
    with pytest.raises(ValueError) as raised:
        (x * 2).sum().backward_sync()
    assert str(raised.value) == "a hook's" and _notes(raised.value) == []


def test_argument_errors_of_backward_and_grad_name_the_call_made():
    for call, run in (("backward", lambda: ag.backward(np.ones(3))),
                      ("backward_sync", lambda: ag.backward_sync(np.ones(3))),
                      ("grad", lambda: ag.grad(np.ones(3), [])),
                      ("grad_sync", lambda: ag.grad_sync(np.ones(3), []))):
        with pytest.raises(TypeError, match=rf"^{call}\(\): outputs|^{call}\(\): tensors"):
            run()


def test_a_warning_still_points_at_the_users_line(monkeypatch):
    monkeypatch.setattr(ag.autograd, "_create_graph_warned", False)  # once per process
    x = ag.ones(2, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (x * x).sum().backward_sync(create_graph=True)
    assert [w.filename for w in caught] == [__file__]
    x.grad = None  # the graph kept by create_graph refers to x: let it go


def test_the_wrapped_surface_keeps_its_signatures_and_docstrings():
    for name in ("sum", "diagonal", "register_hook"):
        method = getattr(ag.Tensor, name)
        assert inspect.signature(method) == inspect.signature(inspect.unwrap(method))
        assert method.__doc__ == inspect.unwrap(method).__doc__
    assert inspect.unwrap(ag.einsum) is not ag.einsum


def test_an_attribute_error_of_library_code_leaves_as_a_type_error():
    with pytest.raises(TypeError, match=r"^matmul\(\): an argument has a type"):
        ag.matmul(np.ones(3), np.ones(3))

    def fn(t: ag.Tensor) -> ag.Tensor:
        return t.no_such_method()  # the user's own AttributeError

    with pytest.raises(AttributeError, match="no_such_method"):
        ag.checkpoint(fn, ag.ones(2, requires_grad=True), use_reentrant=False)
