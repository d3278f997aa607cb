"""Random graphs against PyTorch: the same program built with both libraries.

Each seed builds a random DAG of float64 (2, 3) tensors: several leaves (some
not requiring grad), fan-out, nodes that use one input twice, detached
branches, view and shape round trips, several roots. The same choices drive
both libraries, so the graphs are the same node for node. Checked against
PyTorch:

- with multithreading disabled, the nodes run in PyTorch's order (a pre-hook
  on every node records its name) and the leaves get PyTorch's gradients;
- tensor hooks that scale gradients, on leaves and intermediates, run in
  PyTorch's order, and retained gradients equal PyTorch's;
- ``grad(roots, inputs=...)`` over leaves and intermediate tensors, unused
  ones included, equals ``torch.autograd.grad``, with tensor hooks too;
- ``await backward`` on the workers (under asyncio and Trio), with
  ``retain_graph`` and a second pass, accumulates PyTorch's gradients;
- ``create_graph`` gradients, on the caller and on the CPU worker, differentiate again
  to PyTorch's second order;
- the same programs spread over several devices (the fake backend of
  ``tests/fake_backend.py``) get the single-device PyTorch gradients.

Ops with more than two differentiable inputs are left out on purpose: when
three or more leaf accumulators become ready at once, PyTorch's
``std::priority_queue`` pops equal keys in an unspecified order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aiograd as ag

torch = pytest.importorskip("torch")

SHAPE = (2, 3)
SEEDS = range(40)
DEVICES = ("cpu", "fake:0", "fake:1", "fake:2")  # fake: tests/fake_backend.py


def _unary(name: str, fn: Callable[[Any, Any], Any]) -> tuple[str, int, Callable[..., Any]]:
    return name, 1, fn


def _binary(name: str, fn: Callable[[Any, Any, Any], Any]) -> tuple[str, int, Callable[..., Any]]:
    return name, 2, fn


# Each op maps (2, 3) tensors to a (2, 3) tensor and keeps values moderate.
OPS = [
    _binary("mul", lambda lib, a, b: a * b),
    _binary("add", lambda lib, a, b: a + b),
    _binary("sub", lambda lib, a, b: a - b),
    _binary("div", lambda lib, a, b: a / (b * b + 1.0)),
    _binary("where", lambda lib, a, b: lib.where(a > b, a, b * 0.5)),
    _binary("matmul", lambda lib, a, b: (a @ b.transpose(0, 1)) @ a * 0.1),
    _binary("cat_slice", lambda lib, a, b: lib.cat([a, b])[1:3]),
    _binary("stack_select", lambda lib, a, b: lib.stack([a, b])[1] - a),
    _unary("square", lambda lib, a: a * a),
    _unary("tanh", lambda lib, a: a.tanh()),
    _unary("sigmoid", lambda lib, a: a.sigmoid()),
    _unary("scale", lambda lib, a: a * 0.7 + 0.1),
    _unary("neg", lambda lib, a: -a),
    _unary("pow", lambda lib, a: (a * a + 1.0) ** 0.5),
    _unary("softmax", lambda lib, a: a.softmax(1)),
    # reshape is left out: PyTorch names its node by the input's strides
    _unary("views", lambda lib, a: a.unsqueeze(0).permute(0, 2, 1).squeeze(0).transpose(0, 1)),
    _unary("expand", lambda lib, a: a.sum(0, keepdim=True).expand(2, 3) * 0.5),
    _unary("mean_row", lambda lib, a: a - a.mean(1, keepdim=True)),
    _unary("detached", lambda lib, a: a * a.detach()),
    _unary("inplace", lambda lib, a: a.clone().mul_(0.5).add_(a)),
    _binary("view_writes", lambda lib, a, b: _view_writes(a, b)),
]


def _view_writes(a: Any, b: Any) -> Any:
    """In-place writes through views (CopySlices), and a view read after them."""
    y = a * 1.0
    col = y[:, 0]
    y[:, 1:].mul_(b[:, :2].tanh())
    y[0] += b[1] * 0.5
    return y + col.unsqueeze(1)


def _torch_name(node: Any) -> str:
    return node.name().replace("torch::autograd::", "")


class Program:
    """One random program: its choices, replayable with either library."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.leaves = [rng.standard_normal(SHAPE) for _ in range(rng.integers(2, 5))]
        self.leaf_grad = [bool(rng.random() < 0.8) or i == 0 for i in range(len(self.leaves))]
        self.steps: list[tuple[int, tuple[int, ...]]] = []
        requires_grad = list(self.leaf_grad)  # every op is differentiable in every input
        for _ in range(rng.integers(6, 30)):
            op = int(rng.integers(len(OPS)))
            # operands lean to recent tensors (depth) but reach back (fan-out)
            count = len(requires_grad)
            picks = tuple(int(count - 1 - min(rng.geometric(0.35) - 1, count - 1))
                          for _ in range(OPS[op][1]))
            self.steps.append((op, picks))
            requires_grad.append(any(requires_grad[i] for i in picks))
        differentiable = [i for i, rg in enumerate(requires_grad) if rg]
        later = differentiable[len(differentiable) // 2:]
        self.root_picks = sorted({later[i] for i in rng.integers(len(later), size=3)}
                                 if rng.random() < 0.6 else {later[-1]})
        self.root_grads = [rng.standard_normal(SHAPE) for _ in self.root_picks]
        self.input_picks = sorted({differentiable[i]
                                   for i in rng.integers(len(differentiable), size=3)})
        self.hook_picks = [differentiable[i] for i in rng.integers(len(differentiable), size=4)]
        # where each step runs when the program is spread over devices (its own
        # generator: the choices above stay those of the single-device program)
        spread = np.random.default_rng(seed + 10_000)
        self.places = [DEVICES[i] for i in spread.integers(len(DEVICES), size=len(self.steps))]

    def build(self, lib: Any, *, spread: bool = False) -> list[Any]:
        """All tensors of the program: the leaves, then one per step.

        ``spread``: each step first copies its operands to its device in
        ``places`` (with ``.to()``); the leaves stay on the CPU.
        """
        values = [lib.tensor(a.copy(), requires_grad=rg)
                  for a, rg in zip(self.leaves, self.leaf_grad)]
        for (op, picks), place in zip(self.steps, self.places):
            operands = [values[i] for i in picks]
            if spread:
                operands = [t.to(place) for t in operands]
            values.append(OPS[op][2](lib, *operands))
        return values

    def roots(self, values: list[Any]) -> list[Any]:
        return [values[i] for i in self.root_picks]

    def describe(self) -> str:
        """The program as text, for failure messages: ``t5 = mul(t2, t4)``, ..."""
        n = len(self.leaves)
        lines = [f"t{i} = leaf(requires_grad={rg})" for i, rg in enumerate(self.leaf_grad)]
        lines += [f"t{n + k} = {OPS[op][0]}({', '.join(f't{i}' for i in picks)})"
                  for k, (op, picks) in enumerate(self.steps)]
        return "\n".join(lines + [f"roots: {self.root_picks}"])

    def grad_tensors(self, lib: Any, roots: list[Any] | None = None) -> list[Any]:
        """The roots' gradients; with ``roots``, each on its root's device."""
        grads = [lib.tensor(g.copy()) for g in self.root_grads]
        if roots is not None:
            grads = [g.to(r.device) for g, r in zip(grads, roots)]
        return grads


def _built(seed: int) -> tuple[Program, list[Any], list[Any]]:
    program = Program(seed)
    ours, theirs = program.build(ag), program.build(torch)
    assert all(theirs[i].requires_grad for i in program.root_picks + program.input_picks)
    return program, ours, theirs


def _assert_grads_equal(ours: list[Any], theirs: list[Any]) -> None:
    assert len(ours) == len(theirs)
    for i, (g, tg) in enumerate(zip(ours, theirs)):
        assert (g is None) == (tg is None), f"tensor {i}: {g} vs {tg}"
        if g is not None:
            np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10, atol=1e-12,
                                       err_msg=f"tensor {i}")


def _hook_every_node(roots: list[Any], names: list[str], name_of: Callable[[Any], str]) -> None:
    stack, seen = [r.grad_fn for r in roots], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        node.register_prehook(lambda grad_outputs, n=node: names.append(name_of(n)))
        stack.extend(fn for fn, _ in node.next_functions)


@pytest.mark.parametrize("seed", SEEDS)
def test_node_order_and_leaf_grads_equal_pytorch(seed: int) -> None:
    program, ours, theirs = _built(seed)
    our_names: list[str] = []
    their_names: list[str] = []
    _hook_every_node(program.roots(ours), our_names, lambda n: n.name())
    _hook_every_node(program.roots(theirs), their_names, _torch_name)
    with ag.set_multithreading_enabled(False):
        ag.backward_sync(program.roots(ours), program.grad_tensors(ag))
    with torch.autograd.set_multithreading_enabled(False):
        torch.autograd.backward(program.roots(theirs), program.grad_tensors(torch))
    assert our_names == their_names, program.describe()
    n = len(program.leaves)
    _assert_grads_equal([t.grad for t in ours[:n]], [t.grad for t in theirs[:n]])


def _scale_at_hook_picks(program: Program, values: list[Any]) -> list[int]:
    """Hook ``program.hook_picks`` (some twice): hook k scales the gradient by 0.5 + k and
    logs k in the list returned."""
    calls: list[int] = []
    for k, i in enumerate(program.hook_picks):
        values[i].register_hook(lambda g, k=k: (calls.append(k), g * (0.5 + k))[1])
    return calls


@pytest.mark.parametrize("seed", SEEDS)
def test_tensor_hooks_and_retained_grads_equal_pytorch(seed: int) -> None:
    # Hooks on leaves and intermediates (some tensors twice) scale the gradient;
    # each tensor hooked also retains its grad. The hooks' calls come in
    # PyTorch's order and every gradient downstream of them equals PyTorch's.
    program, ours, theirs = _built(seed)
    our_calls = _scale_at_hook_picks(program, ours)
    their_calls = _scale_at_hook_picks(program, theirs)
    for values in (ours, theirs):
        for i in program.hook_picks:
            if values[i].grad_fn is not None:
                values[i].retain_grad()
    with ag.set_multithreading_enabled(False):
        ag.backward_sync(program.roots(ours), program.grad_tensors(ag))
    with torch.autograd.set_multithreading_enabled(False):
        torch.autograd.backward(program.roots(theirs), program.grad_tensors(torch))
    assert our_calls == their_calls, program.describe()
    picked = sorted(set(range(len(program.leaves))) | set(program.hook_picks))
    _assert_grads_equal([ours[i].grad for i in picked], [theirs[i].grad for i in picked])


@pytest.mark.parametrize("seed", SEEDS)
def test_grad_with_tensor_hooks_equals_pytorch(seed: int) -> None:
    # grad() captures an input's gradient before that tensor's hooks run when its
    # node also runs for another input, and after them when it only captures
    # (seed evaluate_function): the hooks' calls and the results are PyTorch's.
    program, ours, theirs = _built(seed)
    our_calls = _scale_at_hook_picks(program, ours)
    their_calls = _scale_at_hook_picks(program, theirs)
    got = ag.grad_sync(program.roots(ours), [ours[i] for i in program.input_picks],
                       program.grad_tensors(ag), allow_unused=True)
    expected = torch.autograd.grad(program.roots(theirs),
                                   [theirs[i] for i in program.input_picks],
                                   program.grad_tensors(torch), allow_unused=True)
    assert our_calls == their_calls, program.describe()
    _assert_grads_equal(list(got), list(expected))


@pytest.mark.parametrize("seed", SEEDS)
def test_grad_of_leaves_and_intermediates_equals_pytorch(seed: int) -> None:
    program, ours, theirs = _built(seed)
    picks = program.input_picks
    got = ag.grad_sync(program.roots(ours), [ours[i] for i in picks],
                       program.grad_tensors(ag), allow_unused=True)
    expected = torch.autograd.grad(program.roots(theirs), [theirs[i] for i in picks],
                                   program.grad_tensors(torch), allow_unused=True)
    _assert_grads_equal(list(got), list(expected))


@pytest.mark.anyio
@pytest.mark.timeout(30)
@pytest.mark.parametrize("seed", SEEDS[::4])
async def test_await_backward_twice_on_the_workers_equals_pytorch(seed: int,
                                                                   workers_only: None) -> None:
    program, ours, theirs = _built(seed)
    for _ in range(2):
        await ag.backward(program.roots(ours), program.grad_tensors(ag), retain_graph=True)
        torch.autograd.backward(program.roots(theirs), program.grad_tensors(torch),
                                retain_graph=True)
    n = len(program.leaves)
    _assert_grads_equal([t.grad for t in ours[:n]], [t.grad for t in theirs[:n]])


def _squared_norms(firsts: Any) -> list[Any]:
    """What the second-order tests differentiate: |g|^2 of each non-constant first gradient."""
    return [(g * g).sum() for g in firsts if g is not None and g.requires_grad]


def _second_order_of_pytorch(program: Program, theirs: list[Any],
                             leaves: list[int]) -> tuple[int, tuple[Any, ...] | None]:
    """How many first gradients are not constant, and the second-order gradients."""
    inputs = [theirs[i] for i in leaves]
    firsts = torch.autograd.grad(program.roots(theirs), inputs, program.grad_tensors(torch),
                                 create_graph=True, allow_unused=True)
    norms = _squared_norms(firsts)
    if not norms:  # every first gradient is constant: nothing to differentiate
        return 0, None
    return len(norms), torch.autograd.grad(sum(norms), inputs, allow_unused=True)


@pytest.mark.parametrize("seed", SEEDS[::2])
def test_second_order_grads_equal_pytorch(seed: int) -> None:
    program, ours, theirs = _built(seed)
    leaves = [i for i in range(len(program.leaves)) if program.leaf_grad[i]]
    count, expected = _second_order_of_pytorch(program, theirs, leaves)
    inputs = [ours[i] for i in leaves]
    norms = _squared_norms(ag.grad_sync(program.roots(ours), inputs, program.grad_tensors(ag),
                                        create_graph=True, allow_unused=True))
    assert len(norms) == count
    if expected is not None:
        _assert_grads_equal(list(ag.grad_sync(sum(norms), inputs, allow_unused=True)),
                            list(expected))


@pytest.mark.anyio
@pytest.mark.timeout(30)
@pytest.mark.parametrize("seed", SEEDS[1::4])
async def test_second_order_grads_on_the_workers_equal_pytorch(seed: int,
                                                                workers_only: None) -> None:
    # create_graph on the CPU worker: the nodes record their formulas there
    program, ours, theirs = _built(seed)
    leaves = [i for i in range(len(program.leaves)) if program.leaf_grad[i]]
    count, expected = _second_order_of_pytorch(program, theirs, leaves)
    inputs = [ours[i] for i in leaves]
    norms = _squared_norms(await ag.grad(program.roots(ours), inputs, program.grad_tensors(ag),
                                         create_graph=True, allow_unused=True))
    assert len(norms) == count
    if expected is not None:
        _assert_grads_equal(list(await ag.grad(sum(norms), inputs, allow_unused=True)),
                            list(expected))


@pytest.mark.anyio
@pytest.mark.timeout(60)
@pytest.mark.parametrize("seed", SEEDS[::2])
@pytest.mark.parametrize("multithreading", [True, False])
async def test_graphs_spread_over_devices_get_pytorchs_gradients(
        seed: int, multithreading: bool, fake_backend: Any) -> None:
    # Each step runs on a random device (three fake ones and the CPU), so nodes
    # hand gradients between the device workers; grad() of intermediates (on
    # their devices) and the leaves' gradients equal a single-device PyTorch
    # run of the same program.
    program, _, theirs = _built(seed)
    inputs = program.input_picks
    expected = torch.autograd.grad(program.roots(theirs), [theirs[i] for i in inputs],
                                   program.grad_tensors(torch), allow_unused=True,
                                   retain_graph=True)
    torch.autograd.backward(program.roots(theirs), program.grad_tensors(torch))
    ours = program.build(ag, spread=True)
    roots = program.roots(ours)
    with ag.set_multithreading_enabled(multithreading):
        got = await ag.grad(roots, [ours[i] for i in inputs], program.grad_tensors(ag, roots),
                            allow_unused=True, retain_graph=True)
        await ag.backward(roots, program.grad_tensors(ag, roots))
    n = len(program.leaves)
    assert {str(t.device) for t in ours[n:]} > {"cpu"}
    for i, g in zip(inputs, got):
        assert g is None or g.device is ours[i].device
    _assert_grads_equal([None if g is None else g.cpu() for g in got], list(expected))
    _assert_grads_equal([t.grad for t in ours[:n]], [t.grad for t in theirs[:n]])
