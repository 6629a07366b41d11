"""Imports point one way: model ← quota ← state ← policy ← capacity ← engine ← service ← cli."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "strata_policy"
LAYERS = ["model", "quota", "state", "policy", "capacity", "engine", "service", "cli"]
LAYER_OF = {
    "model": "model",
    "errors": "model",
    "quota": "quota",
    "state": "state",
    "policy": "policy",
    "capacity": "capacity",
    "engine": "engine",
    "usecases": "engine",
    "service": "service",
    "cli": "cli",
    "ctl": "cli",
    "simulate": "cli",
    "testing": "cli",
}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _top(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_one_way(path: Path) -> None:
    """A module imports only its own layer and the layers below; kernels only numpy/numba."""
    top = _top(path)
    if top == "__init__":
        return
    imports = _imports(path)
    if top == "kernels":
        ours = {i for i in imports if i.startswith("strata_policy")}
        assert all(i.startswith("strata_policy.kernels") for i in ours), ours
        return
    layer = LAYERS.index(LAYER_OF[top])
    for name in imports:
        if name.startswith("strata_policy."):
            other = name.split(".")[1]
            if other == "kernels":
                continue
            assert LAYERS.index(LAYER_OF[other]) <= layer, f"{top} imports {name}"
        if name.split(".")[0] in ("grpc", "grpc_status", "grpc_health", "grpc_reflection") or (
            name.startswith("strata.policy")
        ):
            assert top == "service", f"{top} imports {name}: only service talks gRPC"
