"""The Tensor's declared surface (aiograd/_ops/methods.py) and the ops' import graph.

Every op method is declared once, in ``OpMethods``, and bound onto the Tensor by
``bind``; no module patches the Tensor class; the modules of ``aiograd/_ops/`` import
each other without a cycle, so none relies on another having been imported first.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import aiograd as ag
from aiograd._ops import methods

pytestmark = pytest.mark.timeout(120)

PACKAGE = pathlib.Path(ag.__file__).resolve().parent
OPS = PACKAGE / "_ops"


def _op_method_names() -> set[str]:
    return {name for name in vars(methods.OpMethods)
            if name not in methods._CLASS_MACHINERY}


def test_every_declared_method_is_the_tensors() -> None:
    names = _op_method_names()
    assert len(names) > 250
    for name in names:
        declared = vars(methods.OpMethods)[name]
        bound = vars(ag.Tensor)[name]
        # public methods are wrapped once at the boundary (Note [Errors at the public boundary])
        assert getattr(bound, "__wrapped__", bound) is declared, name


def test_bind_refuses_a_name_declared_twice() -> None:
    class Twice:
        def exp(self) -> None:
            pass

    with pytest.raises(TypeError, match=r"Tensor\.exp is declared twice"):
        methods.bind(Twice)


def _patches(path: pathlib.Path) -> list[str]:
    """``Tensor.x = ...`` and ``setattr(Tensor, ...)`` statements in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets = node.targets if isinstance(node, ast.Assign) else []
        for target in targets:
            for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                        and t.value.id == "Tensor"):
                    found.append(f"{path.name}:{node.lineno}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "setattr" and node.args
                and isinstance(node.args[0], ast.Name) and node.args[0].id == "Tensor"):
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_module_patches_the_tensor_class() -> None:
    patches = [p for path in sorted(PACKAGE.rglob("*.py")) for p in _patches(path)]
    assert patches == []


def _ops_imports() -> dict[str, set[str]]:
    """Each ``aiograd/_ops`` module and the sibling modules it imports (at any depth of
    its body: lazy imports count)."""
    modules = {p.stem for p in OPS.glob("*.py")} - {"__init__"}
    graph: dict[str, set[str]] = {}
    for name in modules:
        deps: set[str] = set()
        for node in ast.walk(ast.parse((OPS / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(alias.name for alias in node.names)
        graph[name] = deps & modules
    return graph


def test_the_ops_import_graph_is_acyclic() -> None:
    graph = _ops_imports()
    assert graph["methods"] >= {"unary", "arithmetic", "shape"}  # the walk sees imports
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            cycle = " -> ".join(path[path.index(name):] + (name,))
            pytest.fail(f"import cycle in aiograd/_ops: {cycle}")
        if name in done:
            return
        for dep in sorted(graph[name]):
            visit(dep, path + (name,))
        done.add(name)

    for name in sorted(graph):
        visit(name, ())

