"""Capacity checks (DESIGN §8): GUARANTEE_BACKED as a packing, N_PLUS_ONE per node and zone."""

from __future__ import annotations

import pytest
from capacity_kit import plan, state_of

from strata_policy.capacity import CapacityCheck, CheckKind, checks
from strata_policy.testing import node, resources, running, scope, workload

ZONE = "topology.kubernetes.io/zone"
BACKED = CheckKind.GUARANTEE_BACKED
N1 = CheckKind.N_PLUS_ONE


def _gpu_node(nid: str, gpus: int = 2, zone: str = "") -> object:
    return node(nid, cpu=16, memory_gi=64, gpus=gpus, model="A100",
                labels={ZONE: zone} if zone else None)  # fmt: skip


def test_packing_not_a_sum() -> None:
    """2 GPUs are free, never 2 on one node: a guarantee of 2-GPU replicas is short 2 GPUs."""
    nodes = [_gpu_node("n1", 2), _gpu_node("n2", 2)]
    scopes = [scope("t", guarantee=resources(gpu_milli=2000)), scope("u")]
    run = [
        running(workload(f"y{i}", "u", gpu_milli=1000, preemptible=False), (f"n{i}", (0,)))
        for i in (1, 2)
    ]
    pending = [workload("pair", "t", gpu_milli=2000)]
    got = plan(nodes, scopes, [], pending, running=run, consolidate=False)
    assert list(got.checks) == [CapacityCheck(BACKED, "", "t", "gpu", 2000)]


@pytest.mark.parametrize(
    ("nodes", "scopes", "run", "want"),
    [
        pytest.param([_gpu_node("n1", 4)], [scope("t", guarantee=resources(gpu_milli=4000))], [],
                     [], id="backed: 4 GPUs guaranteed, 4 free"),
        pytest.param([_gpu_node("n1", 4)], [scope("t", guarantee=resources(gpu_milli=6000))], [],
                     [CapacityCheck(BACKED, "", "t", "gpu", 2000)],
                     id="short by a sum: 6 guaranteed, 4 exist"),
        pytest.param(
            [_gpu_node("n1", 2), _gpu_node("n2", 2)],
            [scope("t", guarantee=resources(gpu_milli=2000)), scope("u")],
            [running(workload("x", "t", gpu_milli=500), ("n1", (0,))),
             running(workload("y", "u", gpu_milli=500, preemptible=False), ("n2", (0,))),
             running(workload("big", "t", gpu_milli=1000), ("n2", (1,)))],
            [],
            id="packing: the rest of a guarantee fits as a share",
        ),
        pytest.param(
            [_gpu_node("n1", 2), _gpu_node("n2", 2)],
            [scope("t", guarantee=resources(gpu_milli=2000)), scope("u")],
            [running(workload("gang", "t", gpu_milli=2000), ("n1", (0, 1))),
             running(workload("y", "u", gpu_milli=500, preemptible=False), ("n2", (0,)))],
            [CapacityCheck(N1, "n1", "t", "gpu", 2000)],
            id="n+1: a 2-GPU replica has no node with 2 free devices",
        ),
        pytest.param(
            [_gpu_node("n1", 2), _gpu_node("n2", 2)],
            [scope("t", guarantee=resources(gpu_milli=2000)), scope("u")],
            [running(workload("gang", "t", gpu_milli=2000), ("n1", (0, 1))),
             running(workload("y", "u", gpu_milli=2000), ("n2", (0, 1)))],
            [],
            id="n+1: preemptible borrowed work would make room",
        ),
        pytest.param(
            [_gpu_node("a1", 2, "a"), _gpu_node("a2", 2, "a"), _gpu_node("b1", 2, "b")],
            [scope("t", guarantee=resources(gpu_milli=4000))],
            [running(workload("p", "t", gpu_milli=1000, replicas=4), ("a1", (0,)), ("a1", (1,)),
                     ("a2", (0,)), ("a2", (1,)))],
            [CapacityCheck(N1, f"{ZONE}=a", "t", "gpu", 2000)],
            id="n+1 per zone: zone a's 4 GPUs cannot fit on zone b's 2",
        ),
    ],
)  # fmt: skip
def test_checks(nodes: list, scopes: list, run: list, want: list) -> None:  # type: ignore[type-arg]
    """The plan's checks are exactly these shortfalls."""
    got = plan(nodes, scopes, [], running=run, consolidate=False)
    assert list(got.checks) == want


def test_guarantee_names_resources_it_counts() -> None:
    """A CPU guarantee counts its workloads' CPU only: a workload that also asks for memory
    still runs within it, so N+1 checks the node it runs on."""
    db = running(workload("db", "g", cpu=4, memory_gi=8, preemptible=False), "n1")
    state = state_of(
        [node("n1", 4, 16), node("n2", 2, 16)], [scope("g", guarantee=resources(cpu=4))], [db]
    )
    inside, _ = checks.within_guarantee(state.tree, [db])
    assert inside == {"db"}
    found = checks.n_plus_one(state.matrix, state.tree, [db])
    assert {(c.domain, c.resource) for c in found} == {("n1", "cpu"), ("n1", "memory")}
