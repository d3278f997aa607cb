"""Views and in-place writes through them: ``CopySlices`` and ``AsStridedBackward0``.

Note [In-place writes to views]
    A view ``v`` of a root tensor ``r`` (``v._base is r``) shares ``r``'s
    memory and version counter. Writing ``v`` in place with autograd
    involved changes ``r`` too, so, as PyTorch's ``rebase_history`` does:

    - ``r`` gets a new grad_fn, ``CopySlices``: its first next edge is
      ``r``'s old edge, the others are those of the write's own node ``fn``
      (but its first, the view's old edge, which ``r``'s covers). Backward
      passes ``r``'s gradient through unchanged outside the view; inside it,
      ``fn``'s gradient for the view's old value replaces it.
    - Every view of ``r`` made with grad mode on that is still alive, ``v``
      included, gets a new grad_fn, ``AsStridedBackward0`` over ``r``'s:
      its gradient is scattered into zeros shaped like ``r``. The same
      happens when ``r`` itself, or any of its views, is written in place
      without autograd: a view's history always describes its current value.

    PyTorch makes a view's new grad_fn when it is next read; here it is made
    at the write, for all live views at once, so its sequence number is the
    write's, which can order it differently from PyTorch's (two views written
    in turn run in the opposite order).

    A view's place in its root is found from the arrays' addresses and
    strides (:class:`ViewGeometry`), so every view op is covered without
    recording how the view was made. Views made in no_grad mode are not
    registered and may not be written with autograd (PyTorch's rule).

    Two kinds of view may not be written with autograd, as in PyTorch
    (``mark_forbidden_view``): an output of a custom Function that is a view
    (made in its forward) or an input returned as is, whose history is the
    Function's backward, which no rebase could keep right; and an output of
    an op that returns several views (``split``, ``chunk``, ``unbind``).
    Views of such views inherit the mark. Writing one in place raises; after
    a write to its root its grad_fn becomes a node that raises in backward
    (PyTorch raises when the view is next read).
"""

from __future__ import annotations

import re
import threading
import weakref
from typing import Any

import numpy

from .._tensor import Tensor
from ..grad_mode import _grad_enabled
from ..graph._node import Node, grad_accumulator
from ..graph._saved import ERR_BACKWARD_TWICE
from . import _dual
from ._index_scatter import index_scatter_add
from ._record import record
from ._rule import Rule

__all__ = ["as_view", "forbidden_kind", "forbidden_view_error", "is_differentiable_view",
           "mark_forbidden_view", "rebase_view", "refresh_views"]

_registry_lock = threading.Lock()


class _ViewRef(weakref.ref[Tensor]):
    __slots__ = ("key",)

    key: int


class LiveViews:
    """The views of one root made with grad mode on, held weakly, by ``id``.

    Invariant: ``forbidden`` maps the keys of ``refs`` whose views may not be
    written with autograd to their kind, ``"function"`` or ``"multi_output"``
    (see the Note).
    """

    __slots__ = ("refs", "forbidden", "geometries", "_forget")

    def __init__(self) -> None:
        refs: dict[int, _ViewRef] = {}
        forbidden: dict[int, str] = {}
        # Invariant: geometries[key] is (weak refs to the view's and the root's arrays,
        #            the view's ViewGeometry in the root) for the arrays it was made of.
        geometries: dict[int, tuple[Any, Any, ViewGeometry | None]] = {}
        self.refs = refs
        self.forbidden = forbidden
        self.geometries = geometries

        def forget(ref: _ViewRef) -> None:
            refs.pop(ref.key, None)
            forbidden.pop(ref.key, None)
            geometries.pop(ref.key, None)

        self._forget = forget

    def add(self, view: Tensor) -> None:
        ref = _ViewRef(view, self._forget)
        ref.key = id(view)
        self.refs[ref.key] = ref

    def __contains__(self, view: Tensor) -> bool:
        ref = self.refs.get(id(view))
        return ref is not None and ref() is view

    def alive(self) -> list[Tensor]:
        views = (ref() for ref in tuple(self.refs.values()))
        return [v for v in views if v is not None]

    def geometry(self, view: Tensor, root: Tensor) -> ViewGeometry | None:
        """``ViewGeometry.of(view.data, root.data)``, made again only when either
        ``.data`` was replaced: a write renews every live view's history, so this
        keeps a write's cost per view at a node, not an address analysis."""
        key, data, base = id(view), view.data, root.data
        known = self.geometries.get(key)
        if known is not None and known[0]() is data and known[1]() is base:
            return known[2]
        geometry = ViewGeometry.of(data, base)
        try:
            self.geometries[key] = (weakref.ref(data), weakref.ref(base), geometry)
        except TypeError:  # an array type without weak references: not kept
            pass
        return geometry


def _live_views(root: Tensor) -> LiveViews:
    views: LiveViews | None = root._views
    if views is None:
        with _registry_lock:
            views = root._views
            if views is None:
                views = root._views = LiveViews()
    return views


def mark_forbidden_view(out: Tensor, base: Tensor, kind: str) -> None:
    """Make ``out``, sharing ``base``'s memory, a view of ``base``'s root that may not be
    written with autograd: ``kind`` is ``"function"`` (an output of a custom Function)
    or ``"multi_output"`` (an output of split/chunk/unbind). See the Note."""
    root = base if base._base is None else base._base
    out._vc = root._vc
    out._base = root
    views = _live_views(root)
    if out not in views:
        views.add(out)
    views.forbidden[id(out)] = kind


def forbidden_kind(t: Tensor) -> str | None:
    """The kind of a view that may not be written with autograd, or None."""
    base = t._base
    views = None if base is None else base._views
    if views is None or not views.forbidden:
        return None
    kind = views.forbidden.get(id(t))
    return kind if kind is not None and t in views else None


_WHY = {
    "function": (
        "This view was created inside a custom Function (or because an input was "
        "returned as-is) and the autograd logic to handle view+inplace would override the "
        "custom backward associated with the custom Function, leading to incorrect "
        "gradients. This behavior is forbidden. You can fix this by cloning the output of "
        "the custom Function."
    ),
    "multi_output": (
        "This view is the output of a function that returns multiple views. Such "
        "functions do not allow the output views to be modified inplace. You should "
        "replace the inplace operation by an out-of-place one."
    ),
}


def forbidden_view_error(t: Tensor, kind: str, base_written: bool = False) -> RuntimeError:
    """PyTorch's error for a write to (or, ``base_written``, after a write to the root
    of) a view that may not be written with autograd."""
    name = re.sub(r"Backward\d*$", "", t.grad_fn.name()) if t.grad_fn is not None else "Function"
    what = ("its base or another view of its base has been modified inplace" if base_written
            else "is being modified inplace")
    return RuntimeError(f"Output {t.output_nr} of {name} is a view and {what}. {_WHY[kind]}")


class _ModifiedForbiddenView(Node):
    """The grad_fn of a view that may not be written, after its root was: raises."""

    __slots__ = ("message",)
    runs_without_grads = True

    message: str

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        raise RuntimeError(self.message)

    def name(self) -> str:
        return "ErrorBackward"


def as_view(out: Tensor, base: Tensor) -> Tensor:
    """Make ``out`` a view of ``base``. See Note [Views share the version counter]
    in :mod:`.shape`; with grad mode on, also Note [In-place writes to views]."""
    root = base if base._base is None else base._base
    out._vc = base._vc
    out._base = root
    if _grad_enabled.get():
        views = _live_views(root)
        views.add(out)
        if views.forbidden:  # a view of a view that may not be written inherits the mark
            kind = views.forbidden.get(id(base))
            if kind is not None:
                views.forbidden[id(out)] = kind
    return out


def is_differentiable_view(t: Tensor) -> bool:
    """True if ``t`` is a view made with grad mode on (one that may be written with autograd)."""
    base = t._base
    return base is not None and base._views is not None and t in base._views


class ViewGeometry:
    """Where a view's elements are in its root, counted in elements.

    Invariant: ``offset``/``root_offset`` are the view's/root's first element
    relative to the lowest address of the root's memory, which spans ``span``.
    """

    __slots__ = ("shape", "strides", "offset", "root_shape", "root_strides", "root_offset",
                 "span", "root_c_contiguous")

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    root_shape: tuple[int, ...]
    root_strides: tuple[int, ...]
    root_offset: int
    span: int
    root_c_contiguous: bool

    @classmethod
    def of(cls, view: Any, root: Any) -> ViewGeometry | None:
        """The geometry of array ``view`` in array ``root``; None if it is not inside it."""
        size = root.itemsize
        if view.dtype != root.dtype:
            return None
        v_ptr, r_ptr = _address(view), _address(root)
        r_lo, r_hi = _extent(r_ptr, root, size)
        v_lo, v_hi = _extent(v_ptr, view, size)
        if view.size and not (r_lo <= v_lo and v_hi <= r_hi):
            return None
        if any(s % size for s in (v_ptr - r_lo, r_ptr - r_lo, *view.strides, *root.strides)):
            return None
        g = cls()
        g.shape, g.root_shape = tuple(view.shape), tuple(root.shape)
        g.strides = tuple(s // size for s in view.strides)
        g.root_strides = tuple(s // size for s in root.strides)
        g.offset, g.root_offset = (v_ptr - r_lo) // size, (r_ptr - r_lo) // size
        g.span = max(r_hi - r_lo, size) // size
        g.root_c_contiguous = bool(root.flags.c_contiguous)
        return g

    def root_index(self, xp: Any) -> Any:
        """For each element of the view, the index of its root element in C order."""
        if self.root_c_contiguous:  # memory order is C order
            index = xp.full(self.shape, self.offset - self.root_offset, dtype=numpy.int64)
            for d, (n, stride) in enumerate(zip(self.shape, self.strides)):
                step = xp.arange(n, dtype=numpy.int64) * stride
                index += step.reshape((n,) + (1,) * (len(self.shape) - d - 1))
            return index
        order = xp.empty(self.span, dtype=numpy.int64)
        at = xp.lib.stride_tricks.as_strided
        root = at(order[self.root_offset:], self.root_shape, _bytes(self.root_strides))
        root[...] = xp.arange(root.size, dtype=numpy.int64).reshape(self.root_shape)
        return at(order[self.offset:], self.shape, _bytes(self.strides)).copy()

    @property
    def root_size(self) -> int:
        n = 1
        for s in self.root_shape:
            n *= s
        return n

    @property
    def overlaps(self) -> bool:
        """True if several elements of the view share memory (an expanded dim)."""
        return any(stride == 0 and n > 1 for n, stride in zip(self.shape, self.strides))

    def scatter_flat(self, g: Any, index: Any) -> Any:
        """Zeros of the root's size (flat) with ``g`` (shaped like the view) added at ``index``
        (:meth:`root_index`)."""
        return index_scatter_add(g, (self.root_size,), (index,), not self.overlaps,
                                 "AsStridedScatterBackward0")


def _bytes(strides: tuple[int, ...]) -> tuple[int, ...]:
    """Strides in elements as strides of an int64 array."""
    return tuple(s * 8 for s in strides)


def _address(array: Any) -> int:
    interface = getattr(array, "__array_interface__", None)
    if interface is None:
        interface = array.__cuda_array_interface__
    return int(interface["data"][0])


def _extent(ptr: int, array: Any, itemsize: int) -> tuple[int, int]:
    """The lowest address of ``array``'s elements and one past its highest byte."""
    lo = hi = ptr
    for n, stride in zip(array.shape, array.strides):
        if n == 0:
            return ptr, ptr
        if stride < 0:
            lo += stride * (n - 1)
        else:
            hi += stride * (n - 1)
    return lo, hi + itemsize


def _as_strided_grad(g: Any, geometry: ViewGeometry) -> Any:
    """The view's gradient scattered into zeros shaped like its root."""
    flat = geometry.scatter_flat(g, geometry.root_index(_dual.xp_of(g)))
    return _dual.reshape(flat, geometry.root_shape)


AsStridedBackward0 = Rule(
    "AsStridedBackward0", _as_strided_grad, keeps=("geometry",),
    doc="The grad_fn of a view after an in-place write to its memory (see the Note).")


class CopySlices(Node):
    """A root's grad_fn after an in-place write through one of its views (see the Note)."""

    __slots__ = ("fn", "geometry")

    fn: Node | None  # None once released
    geometry: ViewGeometry

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        fn = self.fn
        if fn is None:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        g = grads[0]
        geometry = self.geometry
        index = geometry.root_index(_dual.xp_of(g))
        flat = _dual.reshape(g, (geometry.root_size,))
        grads_in = list(fn.apply([flat[index]], create_graph))
        if self.next_edges[0] is None:
            grads_in[0] = None
            return grads_in
        inside = grads_in[0]
        if type(g) is Tensor:  # create_graph: record the gradient's history
            keep = g.device.xp.ones(geometry.root_size, dtype=bool)
            keep[index] = False
            result = _dual.where(keep, flat, 0.0)
            if inside is not None:
                result = result + geometry.scatter_flat(inside, index)
        else:
            result = g.flatten()
            result[index] = 0 if inside is None else inside
        grads_in[0] = _dual.reshape(result, geometry.root_shape)
        return grads_in

    def release_variables(self) -> None:
        fn = self.fn
        if fn is not None:
            fn.release_variables()
            self.fn = None


def _edge(t: Tensor) -> tuple[Node, int] | None:
    if not t._rg:
        return None
    if t.grad_fn is not None:
        return (t.grad_fn, t.output_nr)
    return (t._accumulator or grad_accumulator(t), 0)


def set_history(t: Tensor, node: Node) -> None:
    """Make ``node`` ``t``'s grad_fn (its output 0); a retained grad follows (PyTorch's rule)."""
    retains = t._retains_grad
    if retains:  # the retains-grad hook follows t to its new version
        del t.grad_fn._retains_grad_hooks[t.output_nr]
        t._retains_grad = False
    record(node, t.data, t.device)  # sets the node's input metadata
    t.grad_fn = node
    t.output_nr = 0
    t._rg = True
    if retains:
        t.retain_grad()


def rebase_view(view: Tensor, root: Tensor, fn: Node) -> None:
    """Record the write of ``view`` (of ``root``, its ``_base``) by ``fn`` as the root's
    ``CopySlices``."""
    geometry = ViewGeometry.of(view.data, root.data)
    if geometry is None:
        raise RuntimeError(
            f"in-place write to a view (shape {list(view.shape)}) whose memory is no longer "
            f"part of its base's (shape {list(root.shape)}): the base's .data was replaced; "
            "clone() the view before writing it"
        )
    node = CopySlices((_edge(root),) + fn.next_edges[1:])
    node.fn, node.geometry = fn, geometry
    set_history(root, node)


def refresh_views(root: Tensor, views: LiveViews) -> None:
    """After an in-place write to ``root``'s memory: new grad_fns for its live ``views``
    (``root._views``)."""
    edge = _edge(root)
    if edge is None:
        return
    forbidden = views.forbidden
    for view in views.alive():
        kind = forbidden.get(id(view))
        if kind is not None:
            if type(view.grad_fn) is not _ModifiedForbiddenView:
                node = _ModifiedForbiddenView(())
                node.message = str(forbidden_view_error(view, kind, base_written=True))
                set_history(view, node)
            continue
        geometry = views.geometry(view, root)
        if geometry is None:  # root.data was replaced: no longer a view
            continue
        set_history(view, AsStridedBackward0.make((edge,), (), (geometry,)))
