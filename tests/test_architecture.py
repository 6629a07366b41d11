"""Imports point one way: model ← quota ← state ← placement ← capacity ← engine ←
service ← cli.

``kube`` is a client of the gRPC API: it may import only itself, ``service.client``, ``model``
and the generated stubs (``strata.policy``), never the engine's internals or grpc directly.
``from X import Y`` is recorded as ``X.Y``, so ``from strata_policy import engine`` is caught.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "strata_policy"
LAYERS = ["model", "quota", "state", "placement", "capacity", "engine", "service", "cli"]
LAYER_OF = {
    "model": "model",
    "errors": "model",
    "quota": "quota",
    "state": "state",
    "placement": "placement",
    "capacity": "capacity",
    "engine": "engine",
    "service": "service",
    "cli": "cli",
    "ctl": "cli",
    "simulate": "cli",
    "testing": "cli",
}
GRPC = ("grpc", "grpc_status", "grpc_health", "grpc_reflection")
KUBE_MAY_IMPORT = ("strata_policy.kube", "strata_policy.service.client", "strata_policy.model")


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _top(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py")


def _imports(source: str) -> set[str]:
    """Every imported name: ``import X`` as ``X``, ``from X import Y`` as ``X.Y``."""
    tree = ast.parse(source)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _violations(top: str, source: str) -> list[str]:
    """The imports of a module of package ``top`` that break the rules above."""
    imports = _imports(source)
    out: list[str] = []
    if top == "kernels":
        ours = {i for i in imports if i.startswith("strata_policy")}
        return [i for i in sorted(ours) if not i.startswith("strata_policy.kernels")]
    if top == "kube":
        for name in sorted(imports):
            if name.startswith("strata_policy") and not _within(name, KUBE_MAY_IMPORT):
                out.append(f"kube imports {name}: only kube, service.client and model")
            if name.split(".")[0] in GRPC:
                out.append(f"kube imports {name}: talk to Strata through service.client")
        return out
    layer = LAYERS.index(LAYER_OF[top])
    for name in sorted(imports):
        if name.startswith("strata_policy."):
            other = name.split(".")[1]
            if other == "kernels":
                continue
            upward = other != "kube" and LAYERS.index(LAYER_OF[other]) > layer
            if upward or (other == "kube" and top != "cli"):
                out.append(f"{top} imports {name}")
        talks_grpc = name.split(".")[0] in GRPC or name.startswith("strata.policy")
        if talks_grpc and top != "service":
            out.append(f"{top} imports {name}: only service talks gRPC")
    return out


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_one_way(path: Path) -> None:
    """A module imports only its own layer and the layers below; kernels only numpy/numba."""
    top = _top(path)
    if top == "__init__":
        return
    assert _violations(top, path.read_text()) == []


@pytest.mark.parametrize(
    ("top", "source", "bad"),
    [
        pytest.param(
            "kube", "from strata_policy import engine", True, id="kube: from pkg import engine"
        ),
        pytest.param("kube", "from strata_policy.engine import Engine", True, id="kube: engine"),
        pytest.param("kube", "import strata_policy.state.cluster", True, id="kube: state"),
        pytest.param(
            "kube", "from strata_policy.service import servicer", True, id="kube: servicer"
        ),
        pytest.param("kube", "import grpc", True, id="kube: grpc directly"),
        pytest.param(
            "kube", "from strata_policy.service.client import Client", False, id="kube: client"
        ),
        pytest.param("kube", "from strata_policy.model import Node", False, id="kube: model"),
        pytest.param("kube", "from strata.policy.v1 import types_pb2", False, id="kube: stubs"),
        pytest.param(
            "model", "from strata_policy import service", True, id="model: from pkg import"
        ),
        pytest.param("quota", "from strata_policy.kube import sync", True, id="quota: kube"),
        pytest.param("cli", "from strata_policy.kube.cli import main", False, id="cli: kube"),
        pytest.param("state", "from strata.policy.v1 import types_pb2", True, id="state: stubs"),
    ],
)
def test_wrong_imports_are_caught(top: str, source: str, bad: bool) -> None:
    """The rule itself: a deliberately wrong import is reported, a right one is not."""
    assert bool(_violations(top, source)) is bad
