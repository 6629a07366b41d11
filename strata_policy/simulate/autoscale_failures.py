"""Failures in the autoscaling replay: at seeded times the replay fails a node or a zone, and
records whether what ran there within guarantees re-placed on the rest.

Just before a failure, the N+1 check (``capacity.checks.n_plus_one``) is taken on the
cluster as it is: it names, per failure domain (each node, each zone), the scopes and
resources that would be short. The replay then picks the domain to fail (seeded, among the
domains that run something within a guarantee) and re-places for real, through the engine on
a copy of the cluster without the domain: every preemptible borrowed workload is reclaimed
(released), the surviving replicas of a gang stay where they are, and each lost
within-guarantee replica is placed on its own by the cluster's scheduler (its spread not
re-checked: a failover replica goes where there is room, as the check assumes). What does
not place is *actually short*. Then the failure is applied to the replay itself: the
domain's nodes go and their workloads wait again, and the autoscaler reacts.

``Failure.missed`` = a (scope, resource) actually short that the check did not name for
that domain: the goal is none. ``Failure.false_alarm`` = the check named the domain short
but everything re-placed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from strata_policy.capacity import checks
from strata_policy.capacity.catalog import ZONE_LABEL
from strata_policy.engine import Engine
from strata_policy.model import Decision, RunningWorkload, Snapshot, Workload
from strata_policy.placement.place import PlacementOptions
from strata_policy.state.cluster import ClusterState

NODE = "node"
ZONE = "zone"
_SCRATCH = "failover"

Short = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Failure:
    """One failure: when, which domain, what the check named short there, what was short."""

    time_s: float
    domain: str
    node_ids: tuple[str, ...]
    predicted: Short
    actual: Short

    @property
    def missed(self) -> Short:
        """Shortfalls the check did not name beforehand."""
        return tuple(k for k in self.actual if k not in self.predicted)

    @property
    def false_alarm(self) -> bool:
        """The check named the domain short but everything re-placed."""
        return bool(self.predicted) and not self.actual


def schedule(seed: int, end_s: float, count: int) -> list[tuple[float, str]]:
    """``count`` failure times in the middle 80 % of the run, a node then a zone in turn."""
    rng = random.Random(seed)
    times = sorted(rng.uniform(0.1 * end_s, 0.9 * end_s) for _ in range(count))
    return [(t, NODE if i % 2 == 0 else ZONE) for i, t in enumerate(times)]


def choose(
    state: ClusterState, kind: str, rng: random.Random
) -> tuple[str, tuple[str, ...]] | None:
    """The domain to fail: a node, or every node of a zone, that runs a replica within a
    guarantee (seeded); None when no domain does."""
    running = [rw for rw in state.workloads.values() if rw.placed]
    inside, _ = checks.within_guarantee(state.tree, running)
    busy = sorted({p.node_id for rw in running if rw.workload.id in inside for p in rw.placements})
    if not busy:
        return None
    if kind == NODE:
        nid = rng.choice(busy)
        return nid, (nid,)
    zone_of = {nd.id: nd.labels.get(ZONE_LABEL) for nd in state.nodes}
    zones = sorted({z for nid in busy if (z := zone_of.get(nid)) is not None})
    if not zones:
        return None
    z = rng.choice(zones)
    return f"{ZONE_LABEL}={z}", tuple(nd.id for nd in state.nodes if zone_of[nd.id] == z)


def predicted(state: ClusterState, domain: str, options: PlacementOptions) -> Short:
    """What the N+1 check names short for ``domain`` on the cluster as it is, re-placing with
    the cluster's scheduler (``options``), as ``actual`` does."""
    running = [rw for rw in state.workloads.values() if rw.placed]
    found = checks.n_plus_one(state.matrix, state.tree, running, options)
    return tuple(sorted({(c.scope_id, c.resource) for c in found if c.domain == domain}))


def actual(
    snapshot: Snapshot, state: ClusterState, node_ids: Sequence[str], options: PlacementOptions
) -> Short:
    """Re-place, through a scratch engine, what ``node_ids`` ran within guarantees (see the
    module docstring); the (scope, resource) pairs of the replicas that did not place."""
    gone = set(node_ids)
    running = [rw for rw in snapshot.workloads if rw.placed]
    inside, _ = checks.within_guarantee(state.tree, running)
    kept: list[RunningWorkload] = []
    lost: list[Workload] = []
    for rw in snapshot.workloads:
        w = rw.workload
        if rw.placed and w.preemptible and w.id not in inside:
            continue  # reclaimed: borrowed work makes room for guarantees
        stay = tuple(p for p in rw.placements if p.node_id not in gone)
        if rw.workload.id in inside:
            for i, p in enumerate(rw.placements):
                if p.node_id in gone:
                    lost.append(replace(w, id=f"{w.id}~{i}", replicas=1, spread_key=""))
        if len(stay) == len(rw.placements):
            kept.append(rw)
        elif stay:
            kept.append(replace(rw, workload=replace(w, replicas=len(stay)), placements=stay))
    if not lost:
        return ()
    nodes = tuple(nd for nd in snapshot.nodes if nd.id not in gone)
    engine = Engine(clock=lambda: 0)
    engine.push_snapshot(_SCRATCH, Snapshot(nodes, snapshot.scopes, tuple(kept)))
    lost.sort(key=lambda w: (-w.priority, w.id))
    result = engine.place(_SCRATCH, lost, options=options)
    by_id = {w.id: w for w in lost}
    short = {
        (by_id[r.workload_id].scope_id, res)
        for r in result.results
        if r.decision is not Decision.PLACED
        for res, amount in by_id[r.workload_id].request.items()
        if amount > 0
    }
    return tuple(sorted(short))
