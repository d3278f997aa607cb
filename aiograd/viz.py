"""Pictures of the backward graph: ``to_dot`` (Graphviz DOT text) and ``render``.

``to_dot(loss)`` walks ``grad_fn``/``next_functions`` from a tensor (or from a
node) and writes one DOT node per backward node, labelled with its name and
the shapes of the tensors it saved; each leaf (``AccumulateGrad``) is shown
with its variable's shape; nodes with hooks are drawn in orange. Reading the
graph changes nothing in it (no saved tensor is unpacked, so it works after
the graph was freed: saved shapes then read "freed").

``render(...)`` needs the ``graphviz`` Python package and its ``dot`` binary.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._tensor import Tensor
from .graph._node import AccumulateGrad, Node
from .graph._saved import SavedTensor

__all__ = ["render", "to_dot"]

_HOOK_COLOR = "orange"
_LEAF_COLOR = "lightblue"
_ROOT_COLOR = "palegreen"


def _shape(shape: Any) -> str:
    return str(tuple(int(d) for d in shape))


def _saved(node: Node) -> Iterator[tuple[str, SavedTensor]]:
    """The node's saved tensors, by attribute name (slots of every class, then the dict)."""
    names: list[str] = []
    for cls in type(node).__mro__:
        names.extend(s for s in getattr(cls, "__slots__", ()) if s not in names)
    names.extend(k for k in getattr(node, "__dict__", {}) if k not in names)
    for name in names:
        value = getattr(node, name, None)
        if isinstance(value, SavedTensor):
            yield name.rstrip("_"), value
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                if isinstance(item, SavedTensor):
                    yield f"{name.rstrip('_')}[{i}]", item


def _saved_shape(saved: SavedTensor) -> str:
    if saved.data is not None:
        return _shape(saved.data.shape)
    shape = getattr(saved.packed, "shape", None)
    return "freed" if shape is None else _shape(shape)


def _has_hooks(node: Node) -> bool:
    hooked = bool(node._pre_hooks or node._post_hooks or node._tensor_pre_hooks
                  or node._retains_grad_hooks)
    if isinstance(node, AccumulateGrad):
        hooked = hooked or node.has_tensor_hooks()
    return hooked


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped + '"'


def _label(node: Node, params: dict[int, str]) -> str:
    if isinstance(node, AccumulateGrad):
        var = node.variable
        if var is None:
            return "AccumulateGrad\n(leaf freed)"
        name = params.get(id(var))
        head = f"{name}\n" if name else ""
        return f"{head}AccumulateGrad\n{_shape(var.shape)} {var.dtype}"
    lines = [node.name()]
    lines += [f"{name}: {_saved_shape(saved)}" for name, saved in _saved(node)]
    return "\n".join(lines)


def to_dot(root: Tensor | Node, *, params: dict[str, Tensor] | None = None,
           name: str = "backward") -> str:
    """The backward graph reachable from ``root`` as Graphviz DOT text.

    ``root``: a tensor with a ``grad_fn`` or a backward node. ``params``:
    optional names for leaves (e.g. ``dict(model.named_parameters())``).
    """
    if isinstance(root, Tensor):
        node = root.grad_fn
        if node is None:
            raise ValueError("to_dot(): the tensor has no grad_fn (it is a leaf or does not "
                             "require grad), so there is no backward graph to draw")
    elif isinstance(root, Node):
        node = root
    else:
        raise TypeError(f"to_dot(): root must be a Tensor or a backward Node, "
                        f"got {type(root).__name__}")
    names = {id(t): n for n, t in (params or {}).items()}
    ids: dict[int, str] = {}
    lines = [f"digraph {_quote(name)} {{",
             '  node [shape=box, style=filled, fillcolor=white, fontname="Helvetica"];']
    edges: list[tuple[int, int]] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in ids:
            continue
        key = ids[id(current)] = f"n{len(ids)}"
        fill = (_HOOK_COLOR if _has_hooks(current) else
                _LEAF_COLOR if isinstance(current, AccumulateGrad) else
                _ROOT_COLOR if current is node else "white")
        lines.append(f"  {key} [label={_quote(_label(current, names))}, fillcolor={fill}];")
        for edge in current.next_edges:
            if edge is None:
                continue
            child = edge[0]
            stack.append(child)
            edges.append((id(current), id(child)))
    for a, b in edges:
        lines.append(f"  {ids[a]} -> {ids[b]};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(root: Tensor | Node, path: str | Path, *, format: str | None = None,
           params: dict[str, Tensor] | None = None) -> Path:
    """Render ``to_dot(root)`` to ``path`` (format from its suffix: ``svg``, ``png``, ...).

    Needs the ``graphviz`` Python package and Graphviz's ``dot`` binary on PATH.
    Returns the path written.
    """
    try:
        import graphviz
    except ImportError as exc:
        raise RuntimeError("aiograd.viz.render() needs the 'graphviz' Python package "
                           "(pip install graphviz) and Graphviz's 'dot' binary") from exc
    path = Path(path)
    fmt = format or path.suffix.lstrip(".") or "svg"
    data = graphviz.Source(to_dot(root, params=params)).pipe(format=fmt)
    path.write_bytes(data)
    return path
