"""``einsum``: Einstein summation, built from differentiable ops.

The equation is contracted operand by operand, each step with the ops that
do it fastest: ``diagonal`` for a letter repeated in one operand, ``sum``
for a letter no later operand or the output needs, a batched ``matmul``
(after ``permute`` and ``reshape``) for letters two operands share, a
broadcast ``mul`` when they share none, and a final ``permute`` into the
output's order. Gradients, to any order, are those of these ops; the
result's node is PyTorch's in the common cases (``ViewBackward0`` after a
contraction, ``PermuteBackward0`` for a transpose, ``SumBackward1``,
``MulBackward0`` for an outer product).
"""

from __future__ import annotations

import math
import string
from typing import Any

from .._tensor import Tensor

__all__ = ["einsum"]


def _parse(equation: str, operands: tuple[Tensor, ...]) -> tuple[list[list[str]], list[str]]:
    """Each operand's letters (an ellipsis spelled with fresh letters) and the output's."""
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): argument 'equation' must be str, not "
                        f"{type(equation).__name__}")
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise RuntimeError(
            "einsum(): more operands were provided than specified in the equation"
            if len(operands) > len(terms) else
            "einsum(): fewer operands were provided than specified in the equation")
    used = set(eq) - set(".,->")
    bad = [c for c in used if c not in string.ascii_letters]
    if bad:
        raise RuntimeError(f"einsum(): invalid subscript given at index {eq.index(bad[0])} in "
                         f"the equation string, subscripts must be in [a-zA-Z]")
    spare = iter(sorted(set(string.ascii_letters) - used))
    widest = 0
    splits: list[tuple[str, int, str]] = []  # (letters before ..., dims of ..., after)
    for term, t in zip(terms, operands):
        if not isinstance(t, Tensor):
            raise TypeError(f"einsum(): operands must be Tensors, got {type(t).__name__}")
        head, dots, tail = term.partition("...")
        explicit = len(head) + len(tail)
        n_ellipsis = t.ndim - explicit if dots else 0
        if (dots and n_ellipsis < 0) or (not dots and explicit != t.ndim):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                               f"({explicit}) does not match the number of dimensions "
                               f"({t.ndim}) for operand {len(splits)}"
                               f"{' and no ellipsis was given' if not dots else ''}")
        widest = max(widest, n_ellipsis)
        splits.append((head, n_ellipsis, tail))
    ellipsis = [next(spare) for _ in range(widest)]
    letters = [list(h) + ellipsis[widest - n:] + list(t) for h, n, t in splits]
    if arrow:
        out = list(rhs.replace("...", "".join(ellipsis)))
        twice = [c for i, c in enumerate(out) if c in out[:i]]
        if twice:
            raise RuntimeError(f"einsum(): output subscript {twice[0]} appears more than once "
                               "in the output")
        missing = [c for c in out if not any(c in ls for ls in letters)]
        if missing:
            raise RuntimeError(f"einsum(): output subscript {missing[0]} does not appear in the "
                             "equation for any input operand")
    else:
        counts = {c: sum(ls.count(c) for ls in letters) for ls in letters for c in ls}
        out = ellipsis + sorted(c for c in counts if counts[c] == 1 and c not in ellipsis)
    return letters, out


def _reduce_alone(t: Tensor, ls: list[str], keep: set[str]) -> tuple[Tensor, list[str]]:
    """Take the diagonal of repeated letters, then sum the letters ``keep`` lacks."""
    ls = list(ls)
    while len(set(ls)) != len(ls):
        c = next(c for i, c in enumerate(ls) if c in ls[:i])
        i, j = ls.index(c), len(ls) - 1 - ls[::-1].index(c)
        t = t.diagonal(0, i, j)  # the diagonal becomes the last dim
        ls = [x for k, x in enumerate(ls) if k not in (i, j)] + [c]
    drop = [i for i, c in enumerate(ls) if c not in keep]
    if drop:
        t = t.sum(dim=tuple(drop))
        ls = [c for c in ls if c in keep]
    return t, ls


def _contract(a: Tensor, la: list[str], b: Tensor, lb: list[str], keep: set[str],
              operand: int) -> tuple[Tensor, list[str]]:
    """``a`` and ``b`` (each already reduced; ``b`` is operand ``operand``) combined over
    their shared letters."""
    size = {**{c: a.shape[i] for i, c in enumerate(la)}, **{c: b.shape[i] for i, c in
                                                           enumerate(lb)}}
    for c in set(la) & set(lb):  # a size-1 dim broadcasts against the other's
        na, nb = a.shape[la.index(c)], b.shape[lb.index(c)]
        if na != nb and 1 not in (na, nb):
            raise RuntimeError(f"einsum(): subscript {c} has size {nb} for operand {operand} "
                               f"which does not broadcast with previously seen size {na}")
        size[c] = max(na, nb)
    batch = [c for c in la if c in lb and c in keep]
    summed = [c for c in la if c in lb and c not in keep]
    left = [c for c in la if c not in lb]
    right = [c for c in lb if c not in la]
    a = _arrange(a, la, batch + left + summed, size)
    b = _arrange(b, lb, batch + summed + right, size)
    dims = [size[c] for c in batch]
    if not summed:  # an outer product (per batch): a broadcast mul
        shape_a = dims + [size[c] for c in left] + [1] * len(right)
        shape_b = dims + [1] * len(left) + [size[c] for c in right]
        return a.reshape(shape_a) * b.reshape(shape_b), batch + left + right
    nb, nl, ns, nr = (math.prod(dims), math.prod(size[c] for c in left),
                      math.prod(size[c] for c in summed), math.prod(size[c] for c in right))
    out = a.reshape(nb, nl, ns).matmul(b.reshape(nb, ns, nr))
    return out.reshape(dims + [size[c] for c in left + right]), batch + left + right


def _arrange(t: Tensor, ls: list[str], order: list[str], size: dict[str, int]) -> Tensor:
    """``t`` with its dims in ``order``, size-1 dims expanded to ``size``."""
    perm = [ls.index(c) for c in order]
    if perm != list(range(len(perm))):
        t = t.permute(*perm)
    target = [size[c] for c in order]
    return t if list(t.shape) == target else t.expand(*target)


def einsum(equation: str, *operands: Any) -> Tensor:
    """Sum of products over the letters of ``equation`` (``"ij,jk->ik"``: a matmul),
    with ``...`` for broadcast dims, as PyTorch's; operands may also come as one list."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    letters, out = _parse(equation, operands)
    needed_later = [set(out).union(*letters[i + 1:]) for i in range(len(letters))]
    t, lt = _reduce_alone(operands[0], letters[0], needed_later[0])
    for i in range(1, len(letters)):
        keep = needed_later[i]
        u, lu = _reduce_alone(operands[i], letters[i], keep | set(lt))
        t, lt = _reduce_alone(t, lt, keep | set(lu))
        t, lt = _contract(t, lt, u, lu, keep, i)
    t, lt = _reduce_alone(t, lt, set(out))
    perm = [lt.index(c) for c in out]
    if t is operands[0] or perm != list(range(len(perm))):  # never the input itself
        t = t.permute(*perm)
    return t
