"""A batch's workloads grouped by what the batch lane reads of them, so that each piece of work
that depends only on that is done once per group instead of once per workload.

The lane admits a run by summing it per scope and works out each workload's ``borrowed``
(``quota.bulk``), and turns each workload into the kernel's rows (``placement_inputs``). Both
read only the scope, the request, the replicas, the selector, the GPU model and the spread key;
a big batch has a handful of distinct combinations. Grouping costs one tuple key and one dict
read per workload; everything after it is per group.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from strata_policy.model import Workload


@dataclass(frozen=True, slots=True)
class Groups:
    """``group[i]`` is workload ``i``'s group; ``firsts[g]`` the first workload of group ``g``
    (groups numbered in order of first appearance), ``sizes[g]`` how many workloads it holds.
    Workloads of one group differ at most in id, priority, preemptible and queued_at_ms."""

    group: list[int]
    firsts: list[Workload]
    sizes: list[int]


def group(workloads: Sequence[Workload]) -> Groups:
    """Group ``workloads`` (see the module docstring)."""
    index: dict[tuple[object, ...], int] = {}
    ids: list[int] = []
    firsts: list[Workload] = []
    add = ids.append
    get = index.get
    for w in workloads:
        request = w.request
        selector = w.node_selector
        key = (  # flat: a tuple of tuples would cost a tuple per pair and hash them all
            w.scope_id,
            w.replicas,
            w.gpu_model,
            w.spread_key,
            len(request),
            *request,
            *request.values(),
            *(selector.items() if selector else ()),
        )
        g = get(key)
        if g is None:
            g = index[key] = len(firsts)
            firsts.append(w)
        add(g)
    counts = Counter(ids)
    return Groups(ids, firsts, [counts[g] for g in range(len(firsts))])
