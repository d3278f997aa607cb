"""Every public callable, fed what a user might pass by mistake, fails with a user-facing
error: a TypeError, ValueError or RuntimeError (where PyTorch raises an IndexError or an
AssertionError, aiograd's is also a ValueError) that names the function in its message or
its note, never an internal AttributeError or KeyError, and never lets a NumPy warning
escape. The callables are enumerated, so new APIs are swept too (Note [Errors at the
public boundary])."""

from __future__ import annotations

import inspect
import os
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiograd as ag
import aiograd.nn.functional as F
from aiograd import Tensor

pytestmark = pytest.mark.timeout(120)

USER_ERRORS = (TypeError, ValueError, RuntimeError)

# Deliberate exceptions, each as PyTorch's: a path that does not exist is the OS's error,
# as torch.load's
EXPECTED = {"load": OSError}
# Callables that would block, wait or change process state when called with junk.
SKIP = {"set_multithreading_enabled", "offload", "manual_seed", "seed", "set_rng_state",
        "set_default_dtype"}


def _public_functions() -> list[tuple[str, object]]:
    found = [(f"aiograd.{n}", getattr(ag, n)) for n in ag.__all__
             if callable(getattr(ag, n)) and not inspect.isclass(getattr(ag, n))
             and n not in SKIP]
    found += [(f"F.{n}", getattr(F, n)) for n in F.__all__]
    return found


def _tensor_methods() -> list[str]:
    return sorted(n for n in dir(Tensor) if not n.startswith("_")
                  and callable(getattr(Tensor, n, None)) and n not in {"backward_sync"})


FUNCTIONS = _public_functions()


@pytest.fixture(autouse=True)
def _in_a_scratch_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # aiograd.save(..., "x") writes a file named x
METHODS = _tensor_methods()


def _bad_values(fake_backend: object) -> list[object]:
    return [np.ones(3), np.ones((2, 3), dtype=np.float64), [1.0, 2.0], 1.5, None, "x",
            ag.tensor([1, 2]), ag.tensor([True, False]), ag.ones(2, 3, dtype=ag.float64),
            ag.ones(2, 3, device="fake:0")]


NUMPY = os.path.dirname(np.__file__)


def _names(exc: BaseException, name: str) -> bool:
    """Whether the message of ``exc`` or one of its notes names ``name`` (a word of it); a
    module (``nn.Dropout``) is named by its class or, as in PyTorch, by the function it
    calls (``dropout(): argument 'input' ...``)."""
    pattern = rf"(?<!\w){re.escape(name)}\b"
    if name[:1].isupper():
        pattern += r"|\b\w+\(\)"
    return any(re.search(pattern, text) for text in [str(exc), *getattr(exc, "__notes__", ())])


def _call(label: str, fn, *args) -> None:
    """``fn(*args)`` must return or raise a user-facing error naming the function, with no
    NumPy warning (any category, as under ``-W error``)."""
    name = label.rpartition(".")[2]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn(*args)
        except USER_ERRORS as exc:
            if not _names(exc, name):
                raise AssertionError(f"{label}{args!r} raised {type(exc).__name__} without "
                                     f"naming {name}: {exc}") from exc
            result = None
        except Exception as exc:  # noqa: BLE001
            expected = EXPECTED.get(name)
            if expected is None or not isinstance(exc, expected):
                raise AssertionError(f"{label}{args!r} raised {type(exc).__name__}: "
                                     f"{exc}") from exc
            result = None
        if inspect.iscoroutine(result):
            result.close()
    numpy_warnings = [w for w in caught if w.filename.startswith(NUMPY)
                      or not issubclass(w.category, UserWarning)
                      or issubclass(w.category, np.exceptions.VisibleDeprecationWarning)]
    assert not numpy_warnings, f"{label}{args!r} let NumPy warnings escape: {numpy_warnings}"


def test_enumeration_finds_the_public_surface():
    names = {label for label, _ in FUNCTIONS}
    assert {"aiograd.einsum", "aiograd.save", "F.relu", "F.mse_loss"} <= names
    assert {"matmul", "unique", "erfinv", "backward"} <= set(METHODS)


@pytest.mark.parametrize("label,fn", FUNCTIONS, ids=[label for label, _ in FUNCTIONS])
def test_functions_refuse_bad_arguments_cleanly(label, fn, fake_backend):
    for value in _bad_values(fake_backend):
        _call(label, fn, value)
        _call(label, fn, ag.ones(2, 3), value)
        _call(label, fn, ag.ones(2, 3, requires_grad=True), value, value)


@pytest.mark.parametrize("name", METHODS)
def test_tensor_methods_refuse_bad_arguments_cleanly(name, fake_backend):
    for value in _bad_values(fake_backend):
        _call(f"Tensor.{name}", getattr(ag.ones(2, 3), name), value)
        _call(f"Tensor.{name}", getattr(ag.ones(2, 3, requires_grad=True) * 1, name), value)


def test_a_non_tensor_input_names_the_function_and_the_argument():
    for fn, label in ((F.relu, "relu"), (F.softmax, "softmax"), (F.mse_loss, "mse_loss")):
        with pytest.raises(TypeError, match=rf"{label}\(\): argument 'input' \(position 1\) "
                                            r"must be Tensor, not ndarray"):
            fn(np.ones(3), ag.ones(3))
    # a target may be an array (it carries no gradient): the same loss either way it comes
    np.testing.assert_allclose(F.mse_loss(ag.ones(3), np.zeros(3)).item(),
                               F.mse_loss(ag.ones(3), ag.zeros(3)).item())
    with pytest.raises(TypeError, match=r"relu\(\): argument 'input'"):
        ag.nn.ReLU()(np.ones(3))


def test_module_calls_refuse_non_tensors_cleanly():
    for name in sorted(dir(ag.nn)):
        cls = getattr(ag.nn, name)
        if not (inspect.isclass(cls) and issubclass(cls, ag.nn.Module)):
            continue
        try:
            module = cls()
        except TypeError:  # needs arguments (sizes): swept through its functional form
            continue
        for value in (np.ones((2, 3)), [1.0, 2.0], 1.5, "x"):
            _call(f"nn.{name}", module, value)


def test_a_float64_array_promotes_as_a_float64_tensor_as_in_torch():
    torch = pytest.importorskip("torch")
    ours = ag.ones(3) + np.ones(3)
    theirs = torch.ones(3) + np.ones(3)
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.") == "float64"
    assert str((ag.ones(3) + 1.5).dtype) == "float32"  # a Python number does not promote


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_bad_calls(data, fake_backend):
    bad = _bad_values(fake_backend)
    label, fn = data.draw(st.sampled_from(FUNCTIONS + [(f"Tensor.{m}", m) for m in METHODS]))
    args = data.draw(st.lists(st.sampled_from(bad + [ag.ones(2, 3), 0, -1, 2]), min_size=0,
                              max_size=3))
    if isinstance(fn, str):
        _call(label, getattr(data.draw(st.sampled_from(bad[6:] + [ag.ones(3)])), fn), *args)
    else:
        _call(label, fn, *args)
