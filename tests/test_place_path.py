"""How many of the package's modules one Place RPC runs through (issue 16: about 20 before the
engine/placement/encoder redesign; the goal was at most half).

One 1,000-workload Place goes through the handler the server registers for Place
(``servicer.method_handlers``: the request decoder, the servicer's ``Place``, the response
encoder) on the batch lane, and every Python function that runs is attributed to its module
(``sys.setprofile``; code inside numba kernels is not Python and is not seen, the kernels'
wrappers are). The count is pinned from above so that a new hop on the hot path is a
deliberate choice; docs/architecture.md names each module in the path's order.

Measured: 32 modules on main before the redesign (commit 92aae35); 32 after the engine split
(``engine.batch`` went, ``engine.commit``/``engine.place`` came); 36 once the typed index
(``placement.index``), the kernels' argument bundles (``kernels.arrays``, ``kernels.frag``'s
mode check) and the lazily made held workloads (``state.running_table``) joined. Then 28:
every check of a request in one module (``state.request_checks``, was ``state.validate``,
``state.limits``, ``service.request_limits``, ``engine.request_checks``: 36 -> 33); the
kernels' inputs behind one entry point and their outputs in one module (``placement.inputs``,
was ``kernel_inputs`` and ``static_masks``; ``placement.outputs``, was ``shared_placements``
and ``slot_builders``: 31); the batch lane in the Place use case (``engine.place``, was also
``engine.fast_place``: 30); the record kernels' wrappers in the codecs that call them (was
``kernels.proto_records``: 29); the GPU request rule beside the checks that use it (was
``model.resources``: 28). Then 26: the response encoder keys a placement by the fields it
writes, once per distinct tuple, instead of by ``Placement``'s dataclass hash and equality
(``model.objects``' 6,800 calls, and 1,800 of the encoder's 2,414, were per workload: 27);
FGD's mode is checked with the bundle it scores (``FragArrays.check``, was
``kernels.frag.check_fgd_mode``: 26). Then 16 (the tenth session), engine and state: the
clusters' registry and idempotency memory in the module of the commit protocol that uses them
(``engine.commit``, was ``state.store``); ``Engine`` assembled from its use cases' methods, so
the Place RPC calls ``engine.place``'s own (``engine.core`` forwarded it); many replicas
allocated as the matrix's own method (``state.nodes``, was ``state.allocation``); a request's
enums and placement options read by the servicer beside its other fields (was
``service.convert``); what a commit runs of ``state.cluster`` is ``state.cluster_core``, split
from building, reads and removals (no change to the count). Quota, kernels and placement: a
batch's quota steps in one module (``quota.batch``, was ``quota.fair``, ``quota.groups``,
``quota.bulk``); the batch kernel's wrapper beside the bundles it checks, one check call per
bundle (``kernels.arrays``, was also ``kernels.api``); the block search's Python side in the
placement index that owns it (``placement.index``, was ``kernels.search``; the lineage's caches
moved to ``placement.lineage``, off the path); a batch's results in columns with the other
values built through slots (``placement.outputs``, was ``model.columns``); FGD's task mix
counting a commit's workloads only when FGD next reads it (``state.taskmix`` left the path).

The 16 that stay each hold a concern of their own, and none is a hop:

- ``service``: ``place_request_decoder``, ``servicer`` (the handler, and a request's enums and
  placement options), ``result_encoder``.
- ``engine``: ``place`` (the use case, its batch lane, and ``Engine.place_columnar`` itself),
  ``commit`` (the clusters and their locks, idempotency, journal-first commit, the generation).
- ``placement``: ``place`` (the policy), ``inputs`` (kernel rows and masks), ``index`` (the
  caches of a matrix's state and their lifetimes, with the block search it owns), ``outputs``
  (the kernel's answer as values, a batch's PLACED results held in columns among them).
- ``state``: ``request_checks`` (every check of a request), ``cluster_core`` (the transaction
  and the adds a commit makes), ``nodes`` (the matrix, its replicas allocated one at a time or
  many at once), ``running_table`` (the held workloads).
- ``quota``: ``batch`` (a batch's quota steps: its groups, which the quota sums, the kernel
  rows and the checks share; its order; a run admitted whole), ``tree`` (usage and
  guarantees).
- ``kernels``: ``arrays`` (the batch kernel's validating wrapper, its argument bundles and
  their checks).

Without the JIT (``NUMBA_DISABLE_JIT=1``) the kernels themselves run as Python and would be
counted, so these tests measure the compiled path only and skip there.

Run this file with ``-s`` to see the modules and their calls.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import numba
import pytest
from fake_context import Context
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb

from strata_policy.engine import Engine
from strata_policy.model import Scope, Snapshot
from strata_policy.service.servicer import PolicyServicer, method_handlers
from strata_policy.testing import node

MAX_MODULES = 16
BATCH = 1000

pytestmark = pytest.mark.skipif(
    bool(numba.config.DISABLE_JIT), reason="without the JIT the kernels run as Python and count"
)


def _request(prefix: str) -> bytes:
    """A Place of ``BATCH`` alike single-replica workloads (the batch lane's case)."""
    return svc.PlaceRequest(
        cluster_id="c",
        workloads=[
            pb.Workload(id=f"{prefix}{i}", scope_id="a", request={"cpu": 100, "gpu": 100})
            for i in range(BATCH)
        ],
        policy=pb.POLICY_MOST_ALLOCATED,
        now_ms=1,
    ).SerializeToString()


def place_path_modules() -> dict[str, int]:
    """The ``strata_policy`` modules whose functions run in one Place RPC's handler, with
    how many calls each took (a warm-up call first, so that caches are as in a server)."""
    engine = Engine(clock=lambda: 1)
    nodes = tuple(node(f"n{i}", cpu=64, gpus=8) for i in range(200))
    engine.push_snapshot("c", Snapshot(nodes, (Scope("org"), Scope("a", "org"))))
    handler = method_handlers(PolicyServicer(engine))["Place"]

    def call(raw: bytes) -> bytes:
        request = handler.request_deserializer(raw)  # type: ignore[misc]
        response = handler.unary_unary(request, Context())  # type: ignore[misc, arg-type]
        return handler.response_serializer(response)  # type: ignore[misc, no-any-return]

    call(_request("warm-"))
    raw = _request("w")
    seen: dict[str, int] = {}

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if name.startswith("strata_policy"):
                seen[name] = seen.get(name, 0) + 1

    sys.setprofile(profile)
    try:
        answer = call(raw)
    finally:
        sys.setprofile(None)
    decoded = svc.PlaceResponse.FromString(answer)
    assert len(decoded.results) == BATCH
    assert all(r.placements for r in decoded.results)
    return seen


@pytest.fixture(scope="module")
def modules() -> dict[str, int]:
    """``place_path_modules()``, measured once for this file's tests."""
    return place_path_modules()


def test_one_place_rpc_crosses_a_bounded_number_of_modules(modules: dict[str, int]) -> None:
    """One 1,000-workload Place RPC runs code in at most ``MAX_MODULES`` package modules."""
    print("\n".join(f"{name} {calls}" for name, calls in sorted(modules.items())))
    print(f"{len(modules)} modules")
    assert "strata_policy.engine.place_one_by_one" not in modules  # the batch lane was taken
    assert len(modules) <= MAX_MODULES, sorted(modules)


def test_no_python_call_per_workload(modules: dict[str, int]) -> None:
    """No module on the path makes a Python call per workload (the encoder's placements are
    keyed in C, once per distinct tuple; each new placement value costs a few calls)."""
    assert max(modules.values()) < BATCH, sorted(modules.items(), key=lambda kv: -kv[1])[:3]
