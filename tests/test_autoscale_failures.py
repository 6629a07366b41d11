"""Failures in the replay: a node or a zone fails, what ran there within guarantees re-places
or is short, and the N+1 check taken just before names every short domain."""

from __future__ import annotations

import random

import pytest
from capacity_kit import state_of

from strata_policy.model import Policy
from strata_policy.placement.place import PlacementOptions
from strata_policy.simulate import autoscale
from strata_policy.simulate.autoscale_catalog import day_catalog, synthetic_day
from strata_policy.simulate.autoscale_failures import (
    NODE,
    ZONE,
    actual,
    choose,
    predicted,
    schedule,
)
from strata_policy.simulate.autoscalers import StrataAutoscaler
from strata_policy.testing import node, resources, running, scope, snapshot, workload

Z = "topology.kubernetes.io/zone"
MOST = PlacementOptions(policy=Policy.MOST_ALLOCATED)
GUARANTEED = scope("g", guarantee=resources(cpu=4))
OTHER = scope("o")


def _nodes() -> list:  # type: ignore[type-arg]
    return [node("n1", 4, 16, labels={Z: "a"}), node("n2", 4, 16, labels={Z: "a"}),
            node("n3", 4, 16, labels={Z: "b"})]  # fmt: skip


DB = workload("db", "g", cpu=4, preemptible=False)


@pytest.mark.parametrize(
    ("others", "domain", "nodes", "short"),
    [
        pytest.param([], "n1", ("n1",), (), id="an empty node takes the failed one's replica"),
        pytest.param([running(workload("batch", "o", cpu=3), "n2"),
                      running(workload("web", "o", cpu=3), "n3")], "n1", ("n1",), (),
                     id="borrowed preemptible work is reclaimed to make room"),
        pytest.param([running(workload("a", "o", cpu=3, preemptible=False), "n2"),
                      running(workload("b", "o", cpu=3, preemptible=False), "n3")],
                     "n1", ("n1",), (("g", "cpu"),),
                     id="non-preemptible work leaves no room: short cpu for g"),
        pytest.param([running(workload("b", "o", cpu=3, preemptible=False), "n3")],
                     f"{Z}=a", ("n1", "n2"), (("g", "cpu"),),
                     id="zone a fails: zone b's node is full"),
        pytest.param([], f"{Z}=a", ("n1", "n2"), (), id="zone a fails: zone b's node is free"),
    ],
)  # fmt: skip
def test_failover_short_and_predicted(
    others: list, domain: str, nodes: tuple, short: tuple
) -> None:  # type: ignore[type-arg]
    """The replay's real re-placement and the N+1 check agree on named cases."""
    run = [running(DB, "n1"), *others]
    snap = snapshot(_nodes(), [GUARANTEED, OTHER], run)
    state = state_of(_nodes(), [GUARANTEED, OTHER], run)
    assert actual(snap, state, nodes, MOST) == short
    assert predicted(state, domain, MOST) == short


def test_choose_only_domains_running_guaranteed_work() -> None:
    """The failed node runs a replica within a guarantee; the zone is that node's zone."""
    run = [running(DB, "n3"), running(workload("x", "o", cpu=1), "n1")]
    state = state_of(_nodes(), [GUARANTEED, OTHER], run)
    assert choose(state, NODE, random.Random(1)) == ("n3", ("n3",))
    assert choose(state, ZONE, random.Random(1)) == (f"{Z}=b", ("n3",))


def test_schedule_is_seeded_and_alternates() -> None:
    """Failure times are seeded, inside the run, a node then a zone."""
    got = schedule(3, 1000.0, 4)
    assert got == schedule(3, 1000.0, 4)
    assert [k for _, k in got] == [NODE, ZONE, NODE, ZONE]
    assert all(100 <= t <= 900 for t, _ in got)


def test_replay_check_names_every_short_domain() -> None:
    """Two hours of the synthetic day with four failures: some domains turn out short, and
    every one had been named by the N+1 check just before (no miss)."""
    scopes, trace = synthetic_day(5, 2)
    failures = schedule(5, 2 * 3600, 4)
    t = autoscale.replay(StrataAutoscaler(), day_catalog(), scopes, trace, step_s=300,
                         failures=failures, seed=5)  # fmt: skip
    assert len(t.failures) == 4
    assert any(f.actual for f in t.failures)  # not vacuous: some domain was short
    assert all(not f.missed for f in t.failures)


LEAST = PlacementOptions(policy=Policy.LEAST_ALLOCATED)


@pytest.mark.parametrize(
    ("options", "short"),
    [
        pytest.param(MOST, (), id="packing scheduler: small replica to the fuller node, big fits"),
        pytest.param(LEAST, (("g", "cpu"),),
                     id="spreading scheduler: small replica to the empty node, big is short"),
    ],
)  # fmt: skip
def test_n_plus_one_packs_as_the_cluster_scheduler(options: PlacementOptions, short: tuple) -> None:  # type: ignore[type-arg]
    """Seed 2's missed zone in small: the N+1 check re-places as the cluster's scheduler does
    (priority, then id; its policy), so it names what the replay finds short (it used to
    pack with MOST_ALLOCATED whatever the cluster ran, and named nothing here)."""
    nodes = [node("n1", 8, 32), node("n2", 4, 16), node("n3", 4, 16)]
    run = [
        running(workload("a-small", "g", cpu=1, preemptible=False), "n1"),
        running(workload("b-big", "g", cpu=4, preemptible=False), "n1"),
        running(workload("busy", "o", cpu=3, preemptible=False), "n3"),
    ]
    scopes = [scope("g", guarantee=resources(cpu=5)), OTHER]
    snap = snapshot(nodes, scopes, run)
    state = state_of(nodes, scopes, run)
    assert actual(snap, state, ("n1",), options) == short
    assert predicted(state, "n1", options) == short
