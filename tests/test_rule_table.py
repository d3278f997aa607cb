"""The rule table's generated plumbing: slots, release, needs-grad masking, saves."""

from __future__ import annotations

import numpy as np
import pytest

import aiograd as ag
from aiograd._ops._rule import RULES, Rule, identity

pytestmark = pytest.mark.timeout(60)


def test_a_rule_key_is_declared_once() -> None:
    with pytest.raises(ValueError, match="already declared"):
        Rule("MulBackward0", identity, identity)


def test_a_rule_takes_formulas_or_whole_not_both() -> None:
    with pytest.raises(TypeError, match="not both"):
        Rule("BothBackward0", identity, whole=lambda node, grads, cg: (grads[0],))


def test_generated_node_has_the_declared_slots_and_pytorch_name() -> None:
    a = ag.tensor([1.0, 2.0], requires_grad=True)
    b = ag.tensor([3.0, 4.0], requires_grad=True)
    fn = (a * b).grad_fn
    assert fn.name() == "MulBackward0"
    assert type(fn).__slots__ == ("other", "self_")
    assert fn.rule is RULES["MulBackward0"]


def test_only_for_saves_nothing_for_an_input_that_needs_no_grad() -> None:
    a = ag.tensor([1.0, 2.0], requires_grad=True)
    b = ag.tensor([3.0, 4.0])
    fn = (a * b).grad_fn
    assert fn.other is not None and fn.self_ is None  # only a's formula reads b
    (ga, gb) = fn.apply([np.ones(2)], False)
    np.testing.assert_array_equal(ga, [3.0, 4.0])
    assert gb is None


def test_release_frees_saves_and_kept_numbers() -> None:
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 2.0).sum()
    ag.backward_sync(y)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        ag.backward_sync(y)
    z = (x.exp() * x).sum()
    ag.backward_sync(z)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        ag.backward_sync(z)
