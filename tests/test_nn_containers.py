"""aiograd.nn's module API against torch.nn: hooks, apply, traversal, containers.

Most tests run one scenario written against the shared API on both
``aiograd.nn`` and ``torch.nn`` and compare what they observe (names, order,
types, errors). Where aiograd deliberately differs from torch (a torch bug,
or Parameter copying its data), the test states the hand-derived result.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aiograd
from aiograd import nn


def _torch() -> Any:
    return pytest.importorskip("torch")


def _both(scenario: Callable[[Any, Any], Any]) -> tuple[Any, Any]:
    """``scenario(lib, lib.nn)`` for aiograd and for torch."""
    torch = _torch()
    return scenario(aiograd, aiograd.nn), scenario(torch, torch.nn)


def _kinds(modules: Any) -> list[str]:
    return [type(m).__name__ for m in modules]


def _outcome(fn: Callable[[], Any]) -> Any:
    """The result of ``fn()``, or the exception type it raises."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001  (compared across libraries)
        return type(e).__name__


class _Echo:
    """Builds a module whose forward returns ``(args, kwargs)``."""

    @staticmethod
    def make(tnn: Any) -> Any:
        class Echo(tnn.Module):
            def forward(self, *args: Any, **kwargs: Any) -> Any:
                return args, kwargs

        return Echo()


# ---- forward hooks ----


def test_forward_hooks_run_in_torch_order_with_prepend():
    def scenario(lib: Any, tnn: Any) -> list[str]:
        log: list[str] = []
        m = _Echo.make(tnn)
        m.register_forward_pre_hook(lambda mod, a: log.append("pre1"))
        m.register_forward_pre_hook(lambda mod, a: log.append("pre2"), prepend=True)
        m.register_forward_hook(lambda mod, a, o: log.append("post1"))
        m.register_forward_hook(lambda mod, a, o: log.append("post2"), prepend=True)
        m.register_forward_pre_hook(lambda mod, a: log.append("pre3"))
        m(1)
        return log

    ours, theirs = _both(scenario)
    assert ours == theirs == ["pre2", "pre1", "pre3", "post2", "post1"]


def test_pre_hook_result_replaces_args_and_a_non_tuple_is_wrapped():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        out = []
        for result in (5, [7, 8], (9, 10), None):
            m = _Echo.make(tnn)
            m.register_forward_pre_hook(lambda mod, a, r=result: r)
            out.append(m(1, 2, z=3))
        return out

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours[0] == ((5,), {"z": 3})


def test_pre_hook_with_kwargs_replaces_args_and_kwargs_seen_by_forward_hooks():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        seen: list[Any] = []
        m = _Echo.make(tnn)
        m.register_forward_pre_hook(lambda mod, a, k: ((a[0] * 10,), {"q": k["z"]}),
                                    with_kwargs=True)
        m.register_forward_hook(lambda mod, a, k, o: seen.append((a, k, o)), with_kwargs=True)
        m.register_forward_hook(lambda mod, a, o: seen.append((a, o)))
        return [m(1, z=3), seen]

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours[0] == ((10,), {"q": 3})


def test_pre_hook_with_kwargs_must_return_a_pair():
    m = _Echo.make(nn)
    m.register_forward_pre_hook(lambda mod, a, k: 5, with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"forward pre-hook must return None or a tuple of "
                                           r"\(new_args, new_kwargs\), but got 5\."):
        m(1)


def test_forward_hook_replaces_output_and_later_hooks_see_it():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        seen: list[Any] = []
        m = _Echo.make(tnn)
        m.register_forward_hook(lambda mod, a, o: "first")
        m.register_forward_hook(lambda mod, a, o: seen.append(o))
        m.register_forward_hook(lambda mod, a, o: o + "+second")
        return [m(1), seen]

    ours, theirs = _both(scenario)
    assert ours == theirs == ["first+second", ["first"]]


def test_forward_hook_output_takes_part_in_backward():
    torch = _torch()
    w = np.array([[1.0, -2.0], [0.5, 3.0]])
    x = np.array([0.3, -0.7])
    grads = []
    for lib in (aiograd, torch):
        lin = lib.nn.Linear(2, 2, bias=False).double()
        lin.load_state_dict({"weight": lib.tensor(w)})
        lin.register_forward_pre_hook(lambda mod, a: (a[0] * 2,))
        lin.register_forward_hook(lambda mod, a, o: o * o)
        xt = lib.tensor(x, requires_grad=True)
        out = lin(xt).sum()
        if lib is aiograd:
            aiograd.backward_sync(out)
        else:
            out.backward()
        grads.append((float(out.item()), np.asarray(lin.weight.grad.numpy()),
                      np.asarray(xt.grad.numpy())))
    (v0, gw0, gx0), (v1, gw1, gx1) = grads
    assert v0 == pytest.approx(v1)
    np.testing.assert_allclose(gw0, gw1)
    np.testing.assert_allclose(gx0, gx1)


def test_handle_removes_only_its_own_registration_of_a_shared_function():
    def scenario(lib: Any, tnn: Any) -> list[int]:
        calls: list[int] = []
        m = _Echo.make(tnn)
        f = lambda mod, a, o: calls.append(len(calls))  # noqa: E731
        first = m.register_forward_hook(f)
        second = m.register_forward_hook(f)
        second.remove()
        m(1)
        second.remove()  # idempotent
        first.remove()
        m(1)
        return calls

    ours, theirs = _both(scenario)
    assert ours == theirs == [0]


def test_hook_removed_during_a_call_still_runs_in_that_call():
    def scenario(lib: Any, tnn: Any) -> list[int]:
        seen: list[int] = []
        m = _Echo.make(tnn)
        handles = []

        def once(mod: Any, a: Any) -> None:
            seen.append(1)
            handles[1].remove()  # removes the next hook; it runs this time all the same

        handles.append(m.register_forward_pre_hook(once))
        handles.append(m.register_forward_pre_hook(lambda mod, a: seen.append(2)))
        m(1)
        m(1)
        return seen

    ours, theirs = _both(scenario)
    assert ours == theirs == [1, 2, 1]


def test_removed_hooks_leave_plain_forward():
    m = _Echo.make(nn)
    handles = [m.register_forward_pre_hook(lambda mod, a: (0,)),
               m.register_forward_hook(lambda mod, a, o: "hooked")]
    assert m(1) == "hooked"
    for h in handles:
        h.remove()
    assert m(1) == ((1,), {})


def test_hook_handle_is_a_context_manager():
    m = _Echo.make(nn)
    with m.register_forward_hook(lambda mod, a, o: "hooked"):
        assert m(1) == "hooked"
    assert m(1) == ((1,), {})


def test_non_callable_hook_is_rejected_at_registration():
    with pytest.raises(TypeError, match="hook must be callable, got int"):
        nn.ReLU().register_forward_hook(3)  # type: ignore[arg-type]


def test_always_call_hooks_run_when_forward_raises():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        log: list[Any] = []

        class Bad(tnn.Module):
            def forward(self, x: Any) -> Any:
                raise ValueError("boom")

        b = Bad()
        b.register_forward_pre_hook(lambda mod, a: (a[0] * 10,))
        b.register_forward_hook(lambda mod, a, o: log.append("plain"))
        b.register_forward_hook(lambda mod, a, o: log.append(("always", a, o)), always_call=True)
        b.register_forward_hook(lambda mod, a, k, o: log.append(("kw", a, k, o)),
                                always_call=True, with_kwargs=True)
        log.append(_outcome(lambda: b(1)))
        return log

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours == [("always", (10,), None), ("kw", (10,), {}, None), "ValueError"]


def test_always_call_hook_errors_become_warnings_after_a_forward_hook_fails():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        log: list[Any] = []
        m = _Echo.make(tnn)

        def fail(mod: Any, a: Any, o: Any) -> None:
            raise TypeError("post")

        def fail_always(mod: Any, a: Any, o: Any) -> None:
            raise RuntimeError("inner")

        m.register_forward_hook(lambda mod, a, o: log.append(("A", o)) or "r1", always_call=True)
        m.register_forward_hook(lambda mod, a, o: "r2")
        m.register_forward_hook(fail)
        m.register_forward_hook(lambda mod, a, o: log.append(("C", o)), always_call=True)
        m.register_forward_hook(fail_always, always_call=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            log.append(_outcome(lambda: m(1)))
        log.append([(w.category.__name__, str(w.message)) for w in caught])
        return log

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours[1] == ("C", "r2")  # the output as far as it got
    assert ours[3][0][1].endswith("raised in forward: inner")


@pytest.mark.anyio
async def test_forward_hooks_of_an_async_forward_run_after_it_is_awaited():
    log: list[str] = []

    class Slow(nn.Module):
        async def forward(self, x: int) -> int:
            log.append("forward")
            return x + 1

    m = Slow()
    m.register_forward_pre_hook(lambda mod, a: log.append("pre"))
    m.register_forward_hook(lambda mod, a, o: o * 10)
    pending = m(1)
    assert log == ["pre"]
    assert await pending == 20
    assert log == ["pre", "forward"]


@pytest.mark.anyio
async def test_always_call_hooks_run_when_an_async_forward_raises():
    log: list[Any] = []

    class Failing(nn.Module):
        async def forward(self, x: int) -> int:
            raise ValueError("boom")

    m = Failing()
    m.register_forward_hook(lambda mod, a, o: log.append("plain"))
    m.register_forward_hook(lambda mod, a, o: log.append(("always", a, o)), always_call=True)
    pending = m(1)
    assert log == []
    with pytest.raises(ValueError, match="boom"):
        await pending
    assert log == [("always", (1,), None)]


# ---- apply, train, traversal ----


def test_apply_visits_children_first_then_self_and_returns_self():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        shared = tnn.ReLU()
        net = tnn.Sequential(tnn.Linear(1, 1), tnn.Sequential(shared, tnn.Tanh()), shared)
        order: list[str] = []
        result = net.apply(lambda m: order.append(type(m).__name__))
        return [order, result is net]

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours[0] == ["Linear", "ReLU", "Tanh", "Sequential", "ReLU", "Sequential"]


def test_train_goes_through_each_childs_own_train():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        class Frozen(tnn.Module):
            def train(self, mode: bool = True) -> Any:
                return super().train(False)

        net = tnn.Sequential(Frozen(), tnn.Sequential(Frozen(), tnn.ReLU()))
        net.eval()
        after_eval = [m.training for m in net.modules()]
        net.train()
        return [after_eval, [m.training for m in net.modules()]]

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours[1] == [True, False, True, False, True]


def test_train_rejects_a_non_bool_mode():
    with pytest.raises(ValueError, match="training mode is expected to be boolean, got 1"):
        nn.ReLU().train(1)  # type: ignore[arg-type]


def test_named_modules_and_members_match_torch_names_and_order():
    def scenario(lib: Any, tnn: Any) -> dict[str, Any]:
        lin = tnn.Linear(1, 1)
        net = tnn.Sequential(lin, tnn.Sequential(lin, tnn.ReLU()), lin)
        net.add_module("gone", None)
        memo = {net[1]}
        return {
            "modules": [n for n, _ in net.named_modules()],
            "all_paths": [n for n, _ in net.named_modules(remove_duplicate=False)],
            "prefixed": [n for n, _ in net.named_modules(prefix="root")],
            "memo": [n for n, _ in net.named_modules(memo=memo)],
            "memo_grew": len(memo),
            "children": [n for n, _ in net.named_children()],
            "params": [n for n, _ in net.named_parameters(prefix="x")],
            "param_paths": [n for n, _ in net.named_parameters(remove_duplicate=False)],
            "own_params": [n for n, _ in net.named_parameters(recurse=False)],
            "state": list(net.state_dict(prefix="p.")),
        }

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours["memo"] == ["", "0"]


def test_requires_grad_and_zero_grad_reach_every_parameter():
    net = nn.Sequential(nn.Linear(2, 2), nn.ModuleDict({"a": nn.Linear(2, 1)}))
    assert net.requires_grad_(False) is net
    assert [p.requires_grad for p in net.parameters()] == [False] * 4
    net.requires_grad_()
    for p in net.parameters():
        p.grad = aiograd.ones_like(p)
    net.zero_grad(set_to_none=False)
    assert all(float(p.grad.sum().item()) == 0.0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_repr_layout_matches_torch_for_multi_line_extra_repr():
    def scenario(lib: Any, tnn: Any) -> list[str]:
        class Two(tnn.Module):
            def extra_repr(self) -> str:
                return "a=1\nb=2"

        class WithChild(tnn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.r = tnn.ReLU()

            def extra_repr(self) -> str:
                return "a=1"

        return [repr(Two()), repr(WithChild()), repr(tnn.ModuleList()), repr(tnn.Module())]

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours[0] == "Two(\n  a=1\n  b=2\n)"


# ---- Sequential ----


def _seq_keys(s: Any) -> list[str]:
    return list(s._modules)


def test_sequential_delitem_renumbers_even_named_children():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        named = tnn.Sequential(OrderedDict(a=tnn.ReLU(), b=tnn.Tanh(), c=tnn.Sigmoid()))
        del named[1]
        four = tnn.Sequential(tnn.ReLU(), tnn.Tanh(), tnn.Sigmoid(), tnn.Identity())
        del four[1:3]
        return [_seq_keys(named), _kinds(named), _seq_keys(four), _kinds(four)]

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours == [["0", "1"], ["ReLU", "Sigmoid"], ["0", "1"], ["ReLU", "Identity"]]


def test_sequential_list_operations_match_torch():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        s = tnn.Sequential(tnn.ReLU(), tnn.Tanh())
        log: list[Any] = []
        log.append(s.insert(0, tnn.Sigmoid()) is s)
        s.insert(-1, tnn.Identity())
        log.append(_kinds(s))
        log.append(_outcome(lambda: s.insert(9, tnn.Identity())))
        log.append(type(s.pop(0)).__name__)
        log.append(_kinds(s.pop(slice(0, 2))))
        s[0] = tnn.Identity()
        log.append(_outcome(lambda: s.__setitem__(5, tnn.Identity())))
        log.append(_outcome(lambda: s.__setitem__(0, 3)))
        log.append(s.extend(tnn.Sequential(tnn.ReLU())).extend([tnn.Tanh()]) is s)
        log.append(s.append(tnn.Sigmoid()) is s)
        log.append((_seq_keys(s), _kinds(s), len(s)))
        log.append(type(s[np.int64(-1)]).__name__)
        log.append(_outcome(lambda: s["0"]))
        log.append(_outcome(lambda: s[4]))
        return log

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours[-4] == (["0", "1", "2", "3"], ["Identity", "ReLU", "Tanh", "Sigmoid"], 4)


def test_sequential_index_error_names_the_index():
    with pytest.raises(IndexError, match="index 3 is out of range"):
        nn.Sequential(nn.ReLU())[3]
    with pytest.raises(IndexError, match="Index out of range: -3"):
        nn.Sequential(nn.ReLU()).insert(-3, nn.ReLU())


def test_sequential_slice_keeps_names_and_class():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        class MySeq(tnn.Sequential):
            pass

        s = MySeq(OrderedDict(a=tnn.ReLU(), b=tnn.Tanh(), c=tnn.Sigmoid()))
        part = s[1:]
        return [type(part).__name__, _seq_keys(part), part[0] is s[1]]

    ours, theirs = _both(scenario)
    assert ours == theirs == ["MySeq", ["b", "c"], True]


def test_sequential_add_and_iadd():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        s = tnn.Sequential(OrderedDict(a=tnn.ReLU()))
        t = s + tnn.Sequential(tnn.Tanh())
        s += tnn.Sequential(tnn.Sigmoid())
        return [_seq_keys(t), _kinds(t), _seq_keys(s), _kinds(s),
                _outcome(lambda: s + [tnn.ReLU()]), _outcome(lambda: s.__iadd__([tnn.ReLU()]))]

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours[:2] == [["0", "1"], ["ReLU", "Tanh"]]
    with pytest.raises(ValueError, match="add operator supports only objects of Sequential"):
        nn.Sequential() + [nn.ReLU()]  # type: ignore[operator]


def test_sequential_forward_after_edits_matches_torch():
    torch = _torch()
    x = np.array([[-1.0, 0.5, 2.0]])
    outs = []
    for lib in (aiograd, torch):
        tnn = lib.nn
        s = tnn.Sequential(tnn.Tanh(), tnn.ReLU())
        s.insert(0, tnn.Sigmoid())
        del s[1]
        s.append(tnn.Tanh())
        outs.append(np.asarray(s(lib.tensor(x)).numpy()))
    np.testing.assert_allclose(outs[0], outs[1])


def test_named_sequential_insert_renumbers():
    # torch raises KeyError here (it shifts children by their index); aiograd renumbers,
    # as deleting from a named Sequential does in both.
    s = nn.Sequential(OrderedDict(a=nn.ReLU(), b=nn.Tanh()))
    s.insert(1, nn.Identity())
    assert _seq_keys(s) == ["0", "1", "2"]
    assert _kinds(s) == ["ReLU", "Identity", "Tanh"]


# ---- ModuleList ----


def test_modulelist_slicing_returns_the_same_class():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        class MyList(tnn.ModuleList):
            pass

        layers = MyList([tnn.ReLU(), tnn.Tanh(), tnn.Sigmoid()])
        part = layers[::-1]
        return [type(part).__name__, _seq_keys(part), _kinds(part), part[0] is layers[2]]

    ours, theirs = _both(scenario)
    assert ours == theirs == ["MyList", ["0", "1", "2"], ["Sigmoid", "Tanh", "ReLU"], True]


def test_modulelist_list_operations_match_torch():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        layers = tnn.ModuleList([tnn.ReLU(), tnn.Tanh(), tnn.Sigmoid()])
        log: list[Any] = []
        log.append(layers.insert(1, tnn.Identity()))
        log.append(_kinds(layers))
        del layers[0:4:2]
        log.append((_seq_keys(layers), _kinds(layers)))
        log.append(type(layers.pop(0)).__name__)
        log.append(type(layers.pop(slice(0, 1))).__name__)
        layers += [tnn.ReLU(), tnn.Tanh()]
        layers[-1] = tnn.Sigmoid()
        log.append(layers.extend((tnn.Identity(),)) is layers)
        log.append(layers.append(tnn.Tanh()) is layers)
        combined = layers + [tnn.ReLU()]
        log.append((type(combined).__name__, _kinds(combined), len(layers)))
        log.append((_seq_keys(layers), _kinds(layers)))
        for bad in (lambda: layers[7], lambda: layers.__delitem__(7),
                    lambda: layers.__setitem__(7, tnn.ReLU()),
                    lambda: layers.__setitem__(0, 4), lambda: layers.extend(3)):
            log.append(_outcome(bad))
        return log

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours[-6] == (["0", "1", "2", "3"], ["ReLU", "Sigmoid", "Identity", "Tanh"])


def test_modulelist_extend_rejects_non_iterables():
    with pytest.raises(TypeError, match="ModuleList.extend should be called with an iterable, "
                                        "but got int"):
        nn.ModuleList().extend(3)  # type: ignore[arg-type]


def test_modulelist_insert_checks_index_and_type():
    # torch's insert writes past the end (index 5 leaves a gap), fails on negatives and
    # accepts non-modules; aiograd follows Sequential.insert's rules instead.
    layers = nn.ModuleList([nn.ReLU()])
    layers.insert(-1, nn.Tanh())
    assert _kinds(layers) == ["Tanh", "ReLU"]
    with pytest.raises(IndexError, match="Index out of range: 5"):
        layers.insert(5, nn.Tanh())
    with pytest.raises(TypeError, match="int is not a Module subclass"):
        layers.insert(0, 3)  # type: ignore[arg-type]


def test_modulelist_extend_with_itself_doubles_once():
    layers = nn.ModuleList([nn.ReLU(), nn.Tanh()])
    layers.extend(layers)
    assert _kinds(layers) == ["ReLU", "Tanh", "ReLU", "Tanh"]
    assert [n for n, _ in layers.named_modules()] == ["", "0", "1"]  # shared, listed once


def test_modulelist_iteration_agrees_with_len_when_holding_none():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        layers = tnn.ModuleList([tnn.ReLU()])
        layers.append(None)
        return [len(layers), list(layers)[1], len(list(layers))]

    ours, theirs = _both(scenario)
    assert ours == theirs == [2, None, 2]


# ---- ModuleDict ----


def test_moduledict_keeps_insertion_order_and_registers_children():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        d = tnn.ModuleDict({"b": tnn.Linear(1, 1), "a": tnn.Tanh()})
        d.update([("c", tnn.Linear(1, 2))])
        d["b"] = tnn.Linear(2, 1)
        return [list(d), list(d.keys()), [k for k, _ in d.items()], _kinds(d.values()),
                len(d), "a" in d, 3 in d, [n for n, _ in d.named_parameters()],
                list(d.state_dict())]

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours[0] == ["b", "a", "c"]


def test_moduledict_removal_and_errors_match_torch():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        d = tnn.ModuleDict(OrderedDict(x=tnn.ReLU(), y=tnn.Tanh(), z=tnn.Sigmoid()))
        log: list[Any] = []
        del d["x"]
        log.append(type(d.pop("y")).__name__)
        log.append(list(d))
        for bad in (lambda: d.pop("nope"), lambda: d["nope"], lambda: d.update(3),
                    lambda: d.update([3]), lambda: d.update([("a",)]),
                    lambda: d.__setitem__("x.y", tnn.ReLU()),
                    lambda: d.__setitem__(3, tnn.ReLU()),
                    lambda: d.__setitem__("q", 3),
                    lambda: d.__setitem__("forward", tnn.ReLU()), lambda: d(1)):
            log.append(_outcome(bad))
        d.update(tnn.ModuleDict({"w": tnn.ReLU()}))
        log.append(list(d))
        d.clear()
        log.append((list(d), len(d)))
        return log

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours[1] == ["z"]


def test_moduledict_update_errors_name_the_bad_element():
    d = nn.ModuleDict()
    with pytest.raises(TypeError, match="ModuleDict.update should be called with an iterable "
                                        "of key/value pairs, but got int"):
        d.update(3)
    with pytest.raises(ValueError, match="element #1 has length 3; 2 is required"):
        d.update([("a", nn.ReLU()), ("b", nn.ReLU(), 1)])


# ---- ParameterList ----


def test_parameterlist_registers_parameters_under_torch_names():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        m = tnn.Module()
        m.plist = tnn.ParameterList([lib.ones(2), tnn.Parameter(lib.zeros(3)), "text", 5])
        m.plist.append(lib.ones(1))
        m.plist.extend([lib.ones(2, 2)])
        m.plist += [None]
        return [len(m.plist), [n for n, _ in m.named_parameters()], list(m.state_dict()),
                [isinstance(v, tnn.Parameter) for v in m.plist], m.plist[2], m.plist[-1],
                [p.requires_grad for p in m.parameters()]]

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours[1] == ["plist.0", "plist.1", "plist.4", "plist.5"]


def test_parameterlist_turns_a_plain_tensor_into_a_copied_parameter():
    t = aiograd.ones(2)
    plist = nn.ParameterList([t])
    p = plist[0]
    assert isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf
    assert p is not t  # aiograd's Parameter copies (Note [Parameters are plain tensors])
    kept = nn.Parameter(aiograd.zeros(1))
    plist[0] = kept
    assert plist[0] is kept
    assert list(plist.parameters()) == [kept]


def test_parameterlist_indexing_and_slicing_match_torch():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        plist = tnn.ParameterList([lib.ones(1), lib.ones(2), lib.ones(3)])
        part = plist[::2]
        plist[-1] = lib.zeros(4)
        return [type(part).__name__, len(part), part[1] is plist[2] or part[1].shape,
                tuple(plist[2].shape), _outcome(lambda: plist[3]),
                _outcome(lambda: plist.extend(lib.ones(2))), _outcome(lambda: plist(1)),
                hasattr(plist, "pop"), hasattr(plist, "__delitem__")]

    ours, theirs = _both(scenario)
    assert [v for i, v in enumerate(ours) if i != 2] == [
        v for i, v in enumerate(theirs) if i != 2]
    assert ours[2] == (3,)  # the slice kept the old third parameter


def test_parameterlist_repr_lists_each_entry():
    plist = nn.ParameterList([aiograd.ones((2, 3), dtype=aiograd.float64), "x"])
    assert repr(plist) == (
        "ParameterList(\n"
        "    (0): Parameter containing: [float64 of size 2x3]\n"
        "    (1): Object of type: str\n"
        ")"
    )


def test_parameterlist_gradients_and_sgd_step_match_torch():
    init = [np.array([1.0, -2.0]), np.array([0.5, 0.25])]

    def scenario(lib: Any, tnn: Any) -> list[np.ndarray]:
        ws = tnn.ParameterList([lib.tensor(w) for w in init])
        opt = lib.optim.SGD(ws.parameters(), lr=0.1)
        x = lib.tensor(np.array([3.0, 4.0]))
        for w in ws:
            x = x * w
        loss = x.sum()
        if lib is aiograd:
            aiograd.backward_sync(loss)
        else:
            loss.backward()
        opt.step()
        return [np.asarray(p.detach().numpy()) for p in ws.parameters()]

    ours, theirs = _both(scenario)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b)
    np.testing.assert_allclose(ours[0], [1.0 - 0.1 * 1.5, -2.0 - 0.1 * 1.0])


# ---- ParameterDict ----


def test_parameterdict_orders_plain_dicts_by_key_and_ordered_dicts_as_given():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        plain = tnn.ParameterDict({"w": lib.ones(2), "b": lib.ones(1), "s": "text"})
        ordered = tnn.ParameterDict(OrderedDict(w=lib.ones(2), b=lib.ones(1)))
        ordered.update([("z", lib.ones(1)), ("a", lib.ones(1))])
        ordered.update({"y": lib.ones(1), "c": lib.ones(1)})
        return [list(plain), [n for n, _ in plain.named_parameters()], list(plain.state_dict()),
                list(ordered), list(ordered.keys()), list(reversed(ordered))]

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours[0] == ["b", "s", "w"]
    assert ours[3] == ["w", "b", "z", "a", "c", "y"]


def test_parameterdict_dict_api_matches_torch():
    def scenario(lib: Any, tnn: Any) -> list[Any]:
        pd = tnn.ParameterDict(OrderedDict(a=lib.ones(1), b=tnn.Parameter(lib.zeros(2))))
        log: list[Any] = []
        log.append([isinstance(v, tnn.Parameter) for v in pd.values()])
        log.append([k for k, _ in pd.items()])
        log.append((pd.get("nope"), pd.get("nope", 3), tuple(pd.get("b").shape)))
        log.append(tuple(pd.setdefault("c", lib.ones(3)).shape))
        log.append(tuple(pd.setdefault("c", lib.ones(5)).shape))
        log.append(tuple(pd.pop("a").shape))
        log.append(pd.popitem()[0])
        del pd["b"]
        log.append((list(pd), "b" in pd, len(pd)))
        pd["n"] = lib.ones(1)
        pd["n"] = None
        log.append((list(pd), pd["n"], list(pd.named_parameters())))
        copied = pd.copy()
        pd["m"] = lib.ones(1)
        log.append((type(copied).__name__, list(copied), list(pd)))
        pd.clear()
        log.append((len(pd), list(pd.named_parameters())))
        # popitem first: torch keeps the rejected keys below (see the test after next).
        for bad in (lambda: pd.popitem(), lambda: pd.__setitem__(3, lib.ones(1)),
                    lambda: pd.__setitem__("a.b", lib.ones(1)),
                    lambda: pd.update(3), lambda: pd.update([3]),
                    lambda: pd.update([("a",)]), lambda: pd(1)):
            log.append(_outcome(bad))
        return log

    ours, theirs = _both(scenario)
    assert ours == theirs
    assert ours[6:8] == ["c", ([], False, 0)]  # popitem takes the last key


def test_parameterdict_copy_shares_the_parameters():
    pd = nn.ParameterDict({"a": aiograd.ones(1)})
    assert pd.copy()["a"] is pd["a"]


def test_parameterdict_rejects_bad_keys_without_recording_them():
    # torch records the key before validating it, leaving a key with no value behind.
    pd = nn.ParameterDict()
    with pytest.raises(TypeError, match="not a string \\(type is 'int'\\)"):
        pd[3] = aiograd.ones(1)  # type: ignore[index]
    with pytest.raises(KeyError, match=r"parameter name can.+t be empty or contain"):
        pd["a.b"] = aiograd.ones(1)
    assert list(pd) == [] and len(pd) == 0


def test_parameterdict_missing_key_raises_key_error():
    # torch raises AttributeError here; a dict's KeyError is what ``except KeyError`` expects.
    pd = nn.ParameterDict({"a": aiograd.ones(1)})
    with pytest.raises(KeyError, match="'nope'"):
        pd["nope"]
    with pytest.raises(KeyError, match="'nope'"):
        pd.pop("nope")


def test_parameterdict_state_dict_round_trip_keeps_identity():
    model = nn.Module()
    model.pd = nn.ParameterDict(OrderedDict(w=aiograd.ones(2), b=aiograd.zeros(1)))
    w = model.pd["w"]
    state = model.state_dict()
    assert list(state) == ["pd.w", "pd.b"]
    state["pd.w"] = np.array([3.0, 4.0], dtype=np.float32)
    model.load_state_dict(state)
    assert model.pd["w"] is w
    np.testing.assert_array_equal(w.detach().numpy(), [3.0, 4.0])


def test_parameterdict_repr_lists_each_entry():
    pd = nn.ParameterDict(OrderedDict(w=aiograd.ones(2), s="x"))
    assert repr(pd) == (
        "ParameterDict(\n"
        "    (w): Parameter containing: [float32 of size 2]\n"
        "    (s): Object of type: str\n"
        ")"
    )
