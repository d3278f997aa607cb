"""The rule table: one declaration per differentiable op, its node class generated.

A :class:`Rule` states what PyTorch's ``derivatives.yaml`` states for an op:
the node's name (PyTorch's, ``ExpBackward0``), what the node saves
(:class:`Saved`, in PyTorch's order of saving), the numbers it keeps, and one
backward formula per input that may need a gradient (HIPS autograd's
``defvjp``). From it the rule builds, once, at import time:

- the node class: ``__slots__`` named as the saves and keeps (``node.self_``),
  ``release_variables`` releasing exactly the saves, ``name()`` PyTorch's;
- ``apply``: unpacks the saves and calls the formula of each input whose edge
  is not None (needs-grad masking); generated as straight-line source per rule;
- ``Rule.make(edges, saved, keeps)``: the node with its saves and keeps set,
  generated as source too; :meth:`Rule.record`: edges, plain result when no
  edge, node, saves, record. ``Rule.unary`` is ``record`` for a one-input op
  without loops or tuples: the hot forward path.

Formulas are called ``formula(grad, *unpacked_saves, *keeps)`` and follow
Note [Dual backward formulas]. A formula that needs the node itself (the engine
state, or to choose how to unpack) is declared ``whole=``: it is ``apply``,
called ``whole(node, grads, create_graph, *saved_tensors, *keeps)`` with the
:class:`SavedTensor` objects unpacked by it, and masks by ``node.next_edges``.

``RULES`` maps every rule's key (its node name, with its variant if any) to
it: tests/test_op_sweep.py iterates it and fails for a rule without a case.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any, ClassVar, Protocol

from .._tensor import Tensor
from ..devices import Device
from ..graph._node import Node
from ..graph._saved import ERR_BACKWARD_TWICE, SavedTensor
from ._record import edges_of, plain, record, save

__all__ = ["FREED", "RULES", "SAVES_INPUT", "SAVES_OUTPUT", "Rule", "RuleNode", "Saved",
           "identity", "negated"]

Formula = Callable[..., Any]
Whole = Callable[..., Sequence[Any]]


def identity(g: Any) -> Any:
    """The formula ``g`` (inlined into the generated ``apply``)."""
    return g


def negated(g: Any) -> Any:
    """The formula ``-g`` (inlined into the generated ``apply``)."""
    return -g


_INLINED: dict[Any, str] = {identity: "g", negated: "-g"}

# A released node's freed keeps (``frees_keeps``).
FREED: Any = object()


class Saved:
    """One tensor a node saves, by the slot name PyTorch gives it (``self_``, ``other``,
    ``result``).

    ``output``: the op's own result (kept as its array, rebuilt on unpack; see
    Note [No reference cycles]); it is saved after the node is recorded.
    ``raw``: always unpacked as an array, also under create_graph (masks and
    conditions carry no gradient). ``only_for``: saved only when the edge of
    that input is not None (only its formula reads it).
    """

    __slots__ = ("name", "output", "raw", "only_for")

    def __init__(self, name: str, *, output: bool = False, raw: bool = False,
                 only_for: int | None = None) -> None:
        self.name = name
        self.output = output
        self.raw = raw
        self.only_for = only_for

    def __repr__(self) -> str:
        return f"Saved({self.name!r}, output={self.output}, raw={self.raw})"


class _Make(Protocol):
    def __call__(self, edges: tuple[tuple[Node, int] | None, ...],
                 saved: Sequence[Tensor | None] = (), keeps: Sequence[Any] = ()) -> RuleNode:
        ...


class RuleNode(Node):
    """The base of every generated node class; ``rule`` is its declaration."""

    __slots__ = ()

    rule: ClassVar[Rule]


#: The saves of a node keeping one tensor, its input or its output, in the slot ``saved``
#: (the name graph viewers show): most elementwise nodes.
SAVES_INPUT = (Saved("saved"),)
SAVES_OUTPUT = (Saved("saved", output=True),)

#: Every declared rule, by key (its node name, and its variant if any).
#: Invariant: RULES[r.key] is r for every Rule r.
RULES: dict[str, Rule] = {}


class Rule:
    """A differentiable op's declaration; see the module docstring.

    ``grads[i]`` is the formula of input ``i`` (the ``i``-th tensor given to
    :meth:`record`); ``saves`` the tensors kept, strings meaning ``Saved(name)``
    and ``"result"`` meaning ``Saved("result", output=True)``; ``keeps`` the
    names of non-tensor values (numbers, shapes) kept as they are. ``variant``
    names a second rule with the same node name (``AddBackward0`` with an alpha): its
    key in ``RULES`` is ``"name (variant)"``. ``frees_keeps``: the keeps are freed with
    the saves (PyTorch saves a number operand as a tensor), so a second backward raises
    the "backward through the graph a second time" error. A formula None: that input
    never gets a gradient (a number operand's edge).
    """

    node_cls: type[RuleNode]

    def __init__(self, name: str, *grads: Formula | None, saves: Sequence[Saved | str] = (),
                 keeps: Sequence[str] = (), whole: Whole | None = None,
                 doc: str | None = None, variant: str | None = None,
                 frees_keeps: bool = False) -> None:
        key = name if variant is None else f"{name} ({variant})"
        if key in RULES:
            raise ValueError(f"Rule: a rule {key!r} is already declared")
        if (whole is None) == (not grads):
            raise TypeError(f"Rule {name}: give one formula per input, or whole=, not both")
        self.name = name
        self.key = key
        self.grads = grads
        self.whole = whole
        self.saves = tuple(_saved(s) for s in saves)
        self.keeps = tuple(keeps)
        self.frees_keeps = frees_keeps
        self.inputs_saved = tuple(s for s in self.saves if not s.output)
        self.output_save = next((s for s in self.saves if s.output), None)
        names = [s.name for s in self.saves] + list(self.keeps)
        if len(set(names)) != len(names):
            raise ValueError(f"Rule {name}: saves and keeps repeat a name: {names}")
        self.node_cls = self._make_class(doc)
        self.make = self._make_make()
        self.unary = self._make_unary()
        RULES[key] = self

    def __repr__(self) -> str:
        return f"Rule({self.key!r})"

    # ---- the generated node class ----

    def _make_class(self, doc: str | None) -> type[RuleNode]:
        getters = [attrgetter(s.name) for s in self.saves]
        freed = self.keeps if self.frees_keeps else ()

        def release_variables(node: RuleNode) -> None:
            for get in getters:
                saved = get(node)
                if saved is not None:
                    saved.release()
            for name in freed:
                setattr(node, name, FREED)

        namespace: dict[str, Any] = {
            "__slots__": tuple(s.name for s in self.saves) + self.keeps,
            "__doc__": doc,
            "__module__": __name__,
            "__qualname__": self.name,
            "apply": self._make_apply(),
            "release_variables": release_variables,
            "rule": self,
        }
        return type(self.name, (RuleNode,), namespace)

    def _make_apply(self) -> Callable[[RuleNode, list[Any], bool], Any]:
        """``apply``, generated as source once per rule (as dataclasses does) so the
        backward runs straight-line code: no loop, no argument lists."""
        env: dict[str, Any] = {"FREED": FREED, "ERR": ERR_BACKWARD_TWICE}
        lines = ["def apply(node, grads, create_graph):"]
        for s in self.saves:
            lines.append(f"    saved_{s.name} = node.{s.name}")
        args = []
        for k in self.keeps:
            lines.append(f"    {k} = node.{k}")
            if self.frees_keeps:
                lines.append(f"    if {k} is FREED:\n        raise RuntimeError(ERR)")
        if self.whole is not None:
            env["whole"] = self.whole
            args = [f"saved_{s.name}" for s in self.saves] + list(self.keeps)
            lines.append(f"    return whole(node, grads, create_graph, {', '.join(args)})")
        else:
            for s in self.saves:
                flag = "False" if s.raw else "create_graph"
                lines.append(f"    {s.name} = None if saved_{s.name} is None else "
                             f"saved_{s.name}.unpack(node, {flag})")
            args = ["g"] + [s.name for s in self.saves] + list(self.keeps)
            lines.append("    g = grads[0]")
            edges = [f"e{i}" for i in range(len(self.grads))]
            lines.append(f"    {', '.join(edges)}, = node.next_edges")
            outs = []
            for i, formula in enumerate(self.grads):
                if formula is None:
                    outs.append("None")
                    continue
                call = _INLINED.get(formula)
                if call is None:
                    env[f"f{i}"] = formula
                    call = f"f{i}({', '.join(args)})"
                outs.append(call if len(self.grads) == 1 else
                            f"None if e{i} is None else {call}")
            lines.append(f"    return ({', '.join(outs)},)")
        exec("\n".join(lines), env)  # noqa: S102  (our own source, from identifiers)
        apply: Callable[[RuleNode, list[Any], bool], Any] = env["apply"]
        return apply

    # ---- recording ----

    def record(self, inputs: Sequence[Tensor | None], data: Any, device: Device,
               saved: Sequence[Tensor | None] = (), keeps: Sequence[Any] = ()) -> Tensor:
        """``data`` as the op's result, recorded over ``inputs`` (None: a number or a
        non-differentiable argument) when one requires grad, else plain.

        ``saved``: the tensors of the non-output saves, in declaration order (None
        saves nothing); ``keeps``: the kept values in declaration order.
        """
        edges = edges_of(*inputs)
        if edges is None:
            return plain(data, device)
        node = self.make(edges, saved, keeps)
        out = record(node, data, device)
        if self.output_save is not None:
            self.set_output(node, save(out, is_output=True))
        return out

    def set_output(self, node: RuleNode, saved: SavedTensor | None) -> None:
        """Set the output save of ``node`` (after it is recorded: the output must exist)."""
        if self.output_save is None:
            raise TypeError(f"{self.name} saves no output")
        setattr(node, self.output_save.name, saved)

    def _make_make(self) -> _Make:
        """``make(edges, saved=(), keeps=())``: a node over ``edges`` holding ``saved`` (the
        non-output saves, in declaration order; None, or an ``only_for`` input whose edge
        is None, saves nothing) and ``keeps``. The output save, if any, is set by the
        caller (:meth:`record`, or an in-place op). Generated as straight-line source."""
        env: dict[str, Any] = {"cls": self.node_cls, "save": save}
        lines = ["def make(edges, saved=(), keeps=()):", "    node = cls(edges)"]
        names = [s.name for s in self.inputs_saved]
        if names:
            lines.append(f"    {', '.join(names)}, = saved")
        for spec in self.inputs_saved:
            test = f"{spec.name} is not None"
            if spec.only_for is not None:
                test += f" and edges[{spec.only_for}] is not None"
            lines.append(f"    node.{spec.name} = save({spec.name}) if {test} else None")
        if self.keeps:
            lines.append(f"    {', '.join('node.' + k for k in self.keeps)}, = keeps")
        lines.append("    return node")
        exec("\n".join(lines), env)  # noqa: S102  (our own source, from identifiers)
        make: _Make = env["make"]
        return make

    def _make_unary(self) -> Callable[[Tensor, Any], Tensor]:
        """``unary(a, data)``: :meth:`record` for one input ``a`` saving nothing, ``a``, or
        the result, without loops or tuples (the hot path of elementwise ops)."""
        node_cls = self.node_cls
        if self.output_save is not None:
            slot = self.output_save.name

            def unary_output(a: Tensor, data: Any) -> Tensor:
                edges = edges_of(a)
                if edges is None:
                    return plain(data, a.device)
                node = node_cls(edges)
                out = record(node, data, a.device)
                setattr(node, slot, save(out, is_output=True))
                return out

            return unary_output
        if self.inputs_saved:
            slot = self.inputs_saved[0].name

            def unary_input(a: Tensor, data: Any) -> Tensor:
                edges = edges_of(a)
                if edges is None:
                    return plain(data, a.device)
                node = node_cls(edges)
                setattr(node, slot, save(a))
                return record(node, data, a.device)

            return unary_input

        def unary_nothing(a: Tensor, data: Any) -> Tensor:
            edges = edges_of(a)
            if edges is None:
                return plain(data, a.device)
            return record(node_cls(edges), data, a.device)

        return unary_nothing


def _saved(spec: Saved | str) -> Saved:
    if isinstance(spec, Saved):
        return spec
    return Saved(spec, output=spec == "result")
