"""Protocol 1's workload and node order: the FGD paper's construction, seeded.

The trace's pods sorted by name and shuffled with the seed, then tuned to ``tune`` × the
cluster's GPU milli: while short, pods drawn uniformly with replacement from the trace are
appended until the next draw would overshoot; while over, random pods are deleted. The nodes are
shuffled with the seed too (the paper prefixes node names with a per-seed random string and
breaks ties by name; our engine breaks ties to the lowest snapshot index, so a shuffled snapshot
is the same rule). Pods and nodes use independent streams of the seed, so changing one never
changes the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from strata_policy.model import Scope, Snapshot, Workload
from strata_policy.model.resources import GPU
from strata_policy.simulate.trace import Trace

DEFAULT_TUNE = 1.3


def gpu_of(w: Workload) -> int:
    """The milli-GPUs a workload asks for in all (request × replicas)."""
    return w.request.get(GPU, 0) * w.replicas


def build_arrivals(
    workloads: Sequence[Workload], gpu_capacity: int, seed: int, tune: float = DEFAULT_TUNE
) -> list[Workload]:
    """The paper's arrival list: sorted by id, shuffled, then tuned to ``tune`` × GPU capacity.

    Appended copies get ids ``<id>#<k>`` (k counts appended pods) so every arrival is distinct.
    """
    rng = np.random.default_rng(seed)
    pool = sorted(workloads, key=lambda w: w.id)
    arrivals = [pool[i] for i in rng.permutation(len(pool))]
    target = tune * gpu_capacity
    requested = sum(gpu_of(w) for w in arrivals)
    if requested < target and pool:
        appended = 0
        while True:
            pick = pool[int(rng.integers(len(pool)))]
            if requested + gpu_of(pick) > target:
                break
            appended += 1
            arrivals.append(replace(pick, id=f"{pick.id}#{appended}"))
            requested += gpu_of(pick)
    while requested > target and arrivals:
        gone = arrivals.pop(int(rng.integers(len(arrivals))))
        requested -= gpu_of(gone)
    return arrivals


def shuffled_nodes(trace: Trace, seed: int) -> Snapshot:
    """The trace's nodes in the seed's random order, one unlimited scope per workload scope.

    Protocol 1 measures placement alone, so the scopes carry no guarantee or limit.
    """
    rng = np.random.default_rng([seed, 1])
    nodes = [trace.nodes[i] for i in rng.permutation(len(trace.nodes))]
    scope_ids = sorted({t.workload.scope_id for t in trace.workloads})
    return Snapshot(nodes=tuple(nodes), scopes=tuple(Scope(id=s) for s in scope_ids))
