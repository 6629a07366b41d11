"""A batch's workloads grouped by what the batch lane reads of them, so that each piece of work
that depends only on that is done once per group instead of once per workload.

The lane admits a run by summing it per scope and works out each workload's ``borrowed``
(``quota.bulk``), and turns each workload into the kernel's rows (``placement.inputs``). Both
read only the scope, the request, the replicas, the selector, the GPU model and the spread key;
a big batch has a handful of distinct combinations. Grouping costs one tuple key and one dict
read per workload; everything after it is per group.

A batch decoded from a request's bytes knows more for free: workloads read from one cached
encoding share one fields tuple (``service.place_request_decoder``), which the decoder hands
on as each workload's *tag*: workloads whose tags are the same object are equal in every field
but ``id`` and ``queued_at_ms``. The tags travel beside the workloads, as an explicit argument
(``Engine.place(..., tags=...)``), and ``group_tagged`` keys only one workload per distinct
tag, merging tags whose keys are equal, so the per-workload work is a few C-level passes
(``id``, a dict, ``Counter``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
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


def representatives(tags: Sequence[object]) -> list[int]:
    """The index of each distinct tag's (by identity) first workload, ascending."""
    ids = list(map(id, tags))
    return _firsts(ids, dict.fromkeys(ids))


def _firsts(ids: list[int], distinct: Iterable[int]) -> list[int]:
    """Where each of ``distinct`` (``ids``' distinct values in order of first appearance) first
    appears: each is found by a C-level ``index`` from where the one before it first appears,
    so the scans cover ``ids`` once in all."""
    out: list[int] = []
    start = 0
    for tag in distinct:
        start = ids.index(tag, start)
        out.append(start)
    return out


def group_tagged(workloads: Sequence[Workload], tags: Sequence[object]) -> Groups:
    """``group(workloads)`` where ``tags[i]`` is workload ``i``'s tag (the module docstring).

    The tags are counted (a ``Counter`` keeps them in order of first appearance) and only the
    first workload of each distinct tag is keyed, by ``group`` of those in that order, so that
    groups are numbered as ``group`` numbers them and a group's first workload is its first
    tag's; every workload then takes its tag's group, and a group's size is its tags' counts.
    Per workload this is a few C-level passes (``id``, ``Counter``, a dict lookup), no Python
    step; a batch of one tag (the common one) is told by one ``count``."""
    ids = list(map(id, tags))
    if ids and ids.count(ids[0]) == len(ids):
        return Groups([0] * len(ids), [workloads[0]], [len(ids)])
    counts = Counter(ids)
    keyed = group([workloads[i] for i in _firsts(ids, counts)])
    sizes = [0] * len(keyed.firsts)
    for g, n in zip(keyed.group, counts.values(), strict=True):
        sizes[g] += n
    if len(counts) == 1:
        return Groups([0] * len(ids), keyed.firsts, sizes)
    of_tag = dict(zip(counts, keyed.group, strict=True))
    return Groups(list(map(of_tag.__getitem__, ids)), keyed.firsts, sizes)
