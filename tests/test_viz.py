"""aiograd.viz: the DOT text of a backward graph (names, saved shapes, leaves, hooks)."""

from __future__ import annotations

import re
import shutil

import pytest

import aiograd
from aiograd import nn, viz


def _mlp_loss():
    aiograd.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    loss = model(aiograd.randn(3, 4)).sum()
    return model, loss


def _structure(dot: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Node labels and edges of a DOT text; asserts every line is one we understand."""
    lines = dot.strip().splitlines()
    assert lines[0].startswith("digraph ") and lines[0].endswith("{") and lines[-1] == "}"
    nodes: dict[str, str] = {}
    edges: list[tuple[str, str]] = []
    for line in lines[1:-1]:
        if m := re.fullmatch(r'  (n\d+) \[label="((?:[^"\\]|\\.)*)", fillcolor=(\w+)\];', line):
            nodes[m.group(1)] = m.group(2) + "|" + m.group(3)
        elif m := re.fullmatch(r"  (n\d+) -> (n\d+);", line):
            edges.append((m.group(1), m.group(2)))
        else:
            assert line.startswith("  node ["), line
    assert all(a in nodes and b in nodes for a, b in edges)
    return nodes, edges


def test_dot_names_saved_shapes_and_leaves():
    model, loss = _mlp_loss()
    nodes, edges = _structure(viz.to_dot(loss, params=dict(model.named_parameters())))
    labels = list(nodes.values())
    assert sum(lab.startswith("AddmmBackward0") for lab in labels) == 2
    assert any(lab.startswith("ReluBackward0\\nsaved: (3, 8)") for lab in labels)
    assert any("0.weight\\nAccumulateGrad\\n(8, 4) float32|lightblue" in lab for lab in labels)
    assert any("2.bias\\nAccumulateGrad\\n(2,) float32" in lab for lab in labels)
    assert nodes["n0"] == "SumBackward0|palegreen"
    # one node per backward node, one edge per next edge
    assert len(nodes) == 8 and len(edges) == 7


def test_dot_highlights_hooks_and_matches_next_functions():
    model, loss = _mlp_loss()
    model[0].weight.register_hook(lambda g: g * 2)
    loss.grad_fn.register_hook(lambda gi, go: None)
    nodes, _ = _structure(viz.to_dot(loss.grad_fn))
    hooked = [lab for lab in nodes.values() if lab.endswith("|orange")]
    assert len(hooked) == 2
    assert any(lab.startswith("SumBackward0") for lab in hooked)
    assert any("(8, 4)" in lab for lab in hooked)


def test_dot_after_backward_says_freed():
    x = aiograd.randn(3, requires_grad=True)
    y = (x * x).sum()
    y.backward_sync()
    assert "freed" in viz.to_dot(y)


def test_to_dot_bad_input():
    with pytest.raises(ValueError, match="to_dot"):
        viz.to_dot(aiograd.randn(2))
    with pytest.raises(TypeError, match="to_dot"):
        viz.to_dot("loss")  # type: ignore[arg-type]


def test_dot_parses_with_graphviz_package():
    graphviz = pytest.importorskip("graphviz")
    _, loss = _mlp_loss()
    src = graphviz.Source(viz.to_dot(loss))
    assert "AddmmBackward0" in src.source


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot binary not installed")
@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_render(tmp_path, fmt):
    pytest.importorskip("graphviz")
    _, loss = _mlp_loss()
    out = viz.render(loss, tmp_path / f"g.{fmt}")
    data = out.read_bytes()
    if fmt == "svg":
        assert b"<svg" in data and b"AddmmBackward0" in data
    else:
        assert data.startswith(b"\x89PNG")
