"""Imports point one way (DESIGN §5): model ← quota ← state ← placement ← capacity ← engine ←
service ← cli, with ``capacity`` built on placement and used by the engine.

- ``kernels`` is a leaf: the standard library, numpy and numba, and itself; any layer may use it.
- Only ``service`` talks gRPC (grpc and the generated stubs ``strata.policy``), besides the
  clients below.
- ``kube`` and ``ctl`` are clients of the gRPC API: each imports only itself, ``service.client``,
  ``model``, ``errors`` and the generated stubs, never the engine's internals or grpc directly
  (``ctl`` also takes the client side of TLS from ``service.tls``: its channel credentials).
- ``simulate`` replays traces on the engine: it imports ``engine`` and the layers below, never
  ``service``.
- ``kube``, ``ctl`` and ``simulate`` are entry points: only ``cli`` (and each itself) imports them.

``from X import Y`` is recorded as ``X.Y``, so ``from strata_policy import engine`` is caught.
"""

from __future__ import annotations

import ast
import sys
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
    "testing": "cli",
}
GRPC = ("grpc", "grpc_status", "grpc_health", "grpc_reflection")
STUBS = ("strata.policy",)
KERNELS_MAY_IMPORT = ("numpy", "numba", "strata_policy.kernels")
CLIENT_MAY_IMPORT = (
    "strata_policy.service.client",
    "strata_policy.model",
    "strata_policy.errors",
    *STUBS,
)
MAY_IMPORT = {
    "kube": ("strata_policy.kube", *CLIENT_MAY_IMPORT),
    "ctl": (
        "strata_policy.ctl",
        *CLIENT_MAY_IMPORT,
        "strata_policy.service.tls.channel_credentials",
        "strata_policy.service.tls.TlsConfigError",
    ),
}
SIMULATE_ON = "engine"  # simulate imports this layer and the ones below
ENTRY_POINTS = ("kube", "ctl", "simulate")  # imported by cli only


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


def _talks_grpc(name: str) -> bool:
    return name.split(".", maxsplit=1)[0] in GRPC or _within(name, STUBS)


def _kernels_violations(imports: set[str]) -> list[str]:
    out = []
    for name in sorted(imports):
        first = name.split(".")[0]
        if first == "__future__" or first in sys.stdlib_module_names:
            continue
        if not _within(name, KERNELS_MAY_IMPORT):
            out.append(f"kernels imports {name}: a leaf (numpy, numba and itself)")
    return out


def _client_violations(top: str, imports: set[str]) -> list[str]:
    out = []
    allowed = MAY_IMPORT[top]
    for name in sorted(imports):
        if name.startswith("strata") and not _within(name, allowed):
            out.append(f"{top} imports {name}: a client of the API ({', '.join(allowed)})")
        if name.split(".")[0] in GRPC:
            out.append(f"{top} imports {name}: talk to Strata through service.client")
    return out


def _violations(top: str, source: str) -> list[str]:
    """The imports of a module of package ``top`` that break the rules above."""
    imports = _imports(source)
    if top == "kernels":
        return _kernels_violations(imports)
    if top in MAY_IMPORT:
        return _client_violations(top, imports)
    highest = LAYERS.index(SIMULATE_ON if top == "simulate" else LAYER_OF[top])
    out: list[str] = []
    for name in sorted(imports):
        if name.startswith("strata_policy."):
            other = name.split(".")[1]
            if other in ENTRY_POINTS:
                if top not in (other, "cli"):
                    out.append(f"{top} imports {name}: only cli imports {other}")
            elif other not in LAYER_OF and other != "kernels":
                out.append(f"{top} imports {name}: not a package of DESIGN §5")
            elif other != "kernels" and LAYERS.index(LAYER_OF[other]) > highest:
                out.append(f"{top} imports {name}: an upper layer")
        if _talks_grpc(name) and top != "service":
            out.append(f"{top} imports {name}: only service talks gRPC")
    return out


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_one_way(path: Path) -> None:
    """A module imports only what the rules of the module docstring allow it."""
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
        pytest.param("kernels", "import structlog", True, id="kernels: a third-party package"),
        pytest.param("kernels", "from strata_policy import model", True, id="kernels: model"),
        pytest.param("kernels", "import grpc", True, id="kernels: grpc"),
        pytest.param("kernels", "from numba import njit", False, id="kernels: numba"),
        pytest.param(
            "placement", "from strata_policy.engine import core", True, id="placement: engine"
        ),
        pytest.param(
            "placement", "from strata_policy import capacity", True, id="placement: capacity"
        ),
        pytest.param(
            "capacity", "from strata_policy.engine import Engine", True, id="capacity: engine"
        ),
        pytest.param(
            "capacity", "from strata_policy.placement import place", False, id="capacity: placement"
        ),
        pytest.param(
            "engine",
            "from strata_policy.capacity import plan_capacity",
            False,
            id="engine: capacity",
        ),
        pytest.param("engine", "from strata_policy import simulate", True, id="engine: simulate"),
        pytest.param("service", "from strata_policy.ctl import render", True, id="service: ctl"),
        pytest.param("ctl", "from strata_policy.engine import Engine", True, id="ctl: engine"),
        pytest.param("ctl", "from strata_policy.state import nodes", True, id="ctl: state"),
        pytest.param("ctl", "import grpc", True, id="ctl: grpc directly"),
        pytest.param(
            "ctl",
            "from strata_policy.service.tls import server_credentials",
            True,
            id="ctl: the server side of TLS",
        ),
        pytest.param(
            "ctl", "from strata_policy.service.client import Client", False, id="ctl: client"
        ),
        pytest.param(
            "ctl",
            "from strata_policy.service.tls import channel_credentials",
            False,
            id="ctl: client TLS credentials",
        ),
        pytest.param(
            "ctl", "from strata_policy.errors import InvalidArgument", False, id="ctl: errors"
        ),
        pytest.param("ctl", "from strata.policy.v1 import types_pb2", False, id="ctl: stubs"),
        pytest.param("ctl", "from strata_policy.kube import sync", True, id="ctl: kube"),
        pytest.param(
            "simulate", "from strata_policy.service import servicer", True, id="simulate: service"
        ),
        pytest.param("simulate", "import grpc", True, id="simulate: grpc"),
        pytest.param("simulate", "from strata_policy.cli import main", True, id="simulate: cli"),
        pytest.param(
            "simulate", "from strata_policy.engine import Engine", False, id="simulate: engine"
        ),
        pytest.param(
            "simulate", "from strata_policy.capacity import bound", False, id="simulate: capacity"
        ),
        pytest.param(
            "state",
            "from strata_policy.placement.inputs import static_mask",
            True,
            id="state: placement's inputs",
        ),
        pytest.param(
            "state",
            "from strata_policy.engine.commit import Store",
            True,
            id="state: the clusters' registry (the engine's)",
        ),
        pytest.param(
            "engine",
            "from strata_policy.service import request_limits",
            True,
            id="engine: the service's size checks",
        ),
        pytest.param(
            "service",
            "from strata_policy.state.request_checks import check_batch",
            False,
            id="service: the request checks",
        ),
        pytest.param(
            "kernels",
            "from strata_policy.service.result_encoder import write_records",
            True,
            id="kernels: a codec's wrapper",
        ),
        pytest.param(
            "placement",
            "from strata_policy.engine.place import FAST_PATH_MIN",
            True,
            id="placement: the Place use case",
        ),
        pytest.param("cli", "from strata_policy.simulate import cli", False, id="cli: simulate"),
        pytest.param("cli", "from strata_policy.ctl import commands", False, id="cli: ctl"),
    ],
)
def test_wrong_imports_are_caught(top: str, source: str, bad: bool) -> None:
    """The rule itself: a deliberately wrong import is reported, a right one is not."""
    assert bool(_violations(top, source)) is bad
