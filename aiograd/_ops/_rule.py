"""The rule table: one declaration per differentiable op, its node class generated.

A :class:`Rule` states what PyTorch's ``derivatives.yaml`` states for an op:
the node's name (PyTorch's, ``ExpBackward0``), what the node saves
(:class:`Saved`, in PyTorch's order of saving), the numbers it keeps, and one
backward formula per input that may need a gradient (HIPS autograd's
``defvjp``). From it the rule builds, once, at import time:

- the node class: ``__slots__`` named as the saves and keeps (``node.self_``),
  ``release_variables`` releasing exactly the saves, ``name()`` PyTorch's;
- ``apply``: unpacks the saves and calls the formula of each input whose edge
  is not None (needs-grad masking), specialised for one input and one save;
- :meth:`Rule.record`: edges, plain result when no edge, node, saves, record.
  ``Rule.unary`` is the same for a one-input op, generated without loops: it is
  the hot forward path.

Formulas are called ``formula(grad, *unpacked_saves, *keeps)`` and follow
Note [Dual backward formulas]. A formula that needs the node itself (the engine
state, or to choose how to unpack) is declared ``whole=``: it is ``apply``,
called ``whole(node, grads, create_graph, *saved_tensors, *keeps)`` with the
:class:`SavedTensor` objects unpacked by it, and masks by ``node.next_edges``.

``RULES`` maps every node name to its rule: the sweep test iterates it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any, ClassVar

from .._tensor import Tensor
from ..devices import Device
from ..graph._node import Node
from ..graph._saved import SavedTensor
from ._record import edges_of, plain, record, save

__all__ = ["RULES", "SAVES_INPUT", "SAVES_OUTPUT", "Rule", "RuleNode", "Saved"]

Formula = Callable[..., Any]
Whole = Callable[..., Sequence[Any]]


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


def _unpacker(save: Saved) -> Callable[[RuleNode, bool], Any]:
    """``(node, create_graph) -> value`` of one saved slot (None stays None)."""
    get = attrgetter(save.name)
    raw = save.raw

    def unpack(node: RuleNode, create_graph: bool) -> Any:
        saved: SavedTensor | None = get(node)
        if saved is None:
            return None
        return saved.unpack(node, False if raw else create_graph)

    return unpack


class Rule:
    """A differentiable op's declaration; see the module docstring.

    ``grads[i]`` is the formula of input ``i`` (the ``i``-th tensor given to
    :meth:`record`); ``saves`` the tensors kept, strings meaning ``Saved(name)``
    and ``"result"`` meaning ``Saved("result", output=True)``; ``keeps`` the
    names of non-tensor values (numbers, shapes) kept as they are. ``variant``
    names a second rule with the same node name (``AddBackward0`` with an alpha): its
    key in ``RULES`` is ``"name (variant)"``.
    """

    node_cls: type[RuleNode]

    def __init__(self, name: str, *grads: Formula, saves: Sequence[Saved | str] = (),
                 keeps: Sequence[str] = (), whole: Whole | None = None,
                 doc: str | None = None, variant: str | None = None) -> None:
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
        self.inputs_saved = tuple(s for s in self.saves if not s.output)
        self.output_save = next((s for s in self.saves if s.output), None)
        names = [s.name for s in self.saves] + list(self.keeps)
        if len(set(names)) != len(names):
            raise ValueError(f"Rule {name}: saves and keeps repeat a name: {names}")
        self.node_cls = self._make_class(doc)
        self.unary = self._make_unary()
        RULES[key] = self

    def __repr__(self) -> str:
        return f"Rule({self.key!r})"

    # ---- the generated node class ----

    def _make_class(self, doc: str | None) -> type[RuleNode]:
        getters = [attrgetter(s.name) for s in self.saves]

        def release_variables(node: RuleNode) -> None:
            for get in getters:
                saved = get(node)
                if saved is not None:
                    saved.release()

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
        keep_get = [attrgetter(k) for k in self.keeps]
        whole = self.whole
        if whole is not None:
            save_get = [attrgetter(s.name) for s in self.saves]

            def apply_whole(node: RuleNode, grads: list[Any], create_graph: bool) -> Any:
                return whole(node, grads, create_graph, *[get(node) for get in save_get],
                             *[get(node) for get in keep_get])

            return apply_whole
        grads = self.grads
        if len(grads) == 1 and not keep_get and len(self.saves) <= 1:
            return _apply_one(grads[0], self.saves[0] if self.saves else None)
        if len(grads) == 2 and not keep_get and not self.saves:
            return _apply_two(grads[0], grads[1])
        unpackers = [_unpacker(s) for s in self.saves]

        def apply(node: RuleNode, gs: list[Any], create_graph: bool) -> Any:
            g = gs[0]
            values = [u(node, create_graph) for u in unpackers]
            values += [get(node) for get in keep_get]
            return tuple(None if edge is None else f(g, *values)
                         for f, edge in zip(grads, node.next_edges))

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

    def make(self, edges: tuple[tuple[Node, int] | None, ...], saved: Sequence[Tensor | None] = (),
             keeps: Sequence[Any] = ()) -> RuleNode:
        """A node over ``edges`` holding ``saved`` and ``keeps`` (the output save, if any,
        is set by the caller: :meth:`record`, or an in-place op)."""
        node = self.node_cls(edges)
        for spec, t in zip(self.inputs_saved, saved):
            if t is not None and (spec.only_for is None or edges[spec.only_for] is not None):
                setattr(node, spec.name, save(t))
            else:
                setattr(node, spec.name, None)
        for name, value in zip(self.keeps, keeps):
            setattr(node, name, value)
        return node

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


def _apply_one(formula: Formula, spec: Saved | None
               ) -> Callable[[RuleNode, list[Any], bool], Any]:
    """``apply`` of a one-input rule with at most one (never None) save: one formula
    call, no loop."""
    if spec is None:
        def apply_nothing(node: RuleNode, grads: list[Any], create_graph: bool) -> Any:
            return (formula(grads[0]),)

        return apply_nothing
    get = attrgetter(spec.name)
    if spec.raw:
        def apply_raw(node: RuleNode, grads: list[Any], create_graph: bool) -> Any:
            return (formula(grads[0], get(node).unpack(node, False)),)

        return apply_raw

    def apply_saved(node: RuleNode, grads: list[Any], create_graph: bool) -> Any:
        return (formula(grads[0], get(node).unpack(node, create_graph)),)

    return apply_saved


def _apply_two(first: Formula, second: Formula) -> Callable[[RuleNode, list[Any], bool], Any]:
    """``apply`` of a two-input rule that saves nothing (``a + b``): no loop."""

    def apply_two(node: RuleNode, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        e0, e1 = node.next_edges
        return (None if e0 is None else first(g), None if e1 is None else second(g))

    return apply_two
