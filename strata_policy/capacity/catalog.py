"""The node-group catalog: what a cluster may add, at what price, within which counts.

A ``NodeGroup`` is a template node (capacity, labels, ``gpu_model``, zone as the label
``topology.kubernetes.io/zone``), a price per hour and ``[min_count, max_count]``. Its current
count is computed from the snapshot: the nodes whose label ``strata.dev/node-group`` is the
group's id. A client may send the count; one that disagrees is a bad request, since a plan
built on a wrong count would break the group's bounds.

``validate_catalog`` checks the whole catalog against the cluster before anything is planned
and raises one ``InvalidArgument`` naming every bad field (``node_groups[3].price_per_hour``),
or ``SizeLimitExceeded`` for a catalog above ``MAX_NODE_GROUPS``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from strata_policy.errors import FieldViolation, InvalidArgument, SizeLimitExceeded
from strata_policy.model import HOSTNAME_KEY, Node, Workload
from strata_policy.model.resources import GPU, MILLI_PER_GPU, RESERVED

GROUP_LABEL = "strata.dev/node-group"
ZONE_LABEL = "topology.kubernetes.io/zone"
MAX_NODE_GROUPS = 1_000
MAX_GROUP_COUNT = 100_000
MAX_PRICE_PER_HOUR = 1e9


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """One group of the catalog; ``current_count`` None = computed from the snapshot."""

    id: str
    template: Node
    price_per_hour: float
    min_count: int = 0
    max_count: int = 0
    current_count: int | None = None

    def new_node(self, serial: int) -> Node:
        """The ``serial``-th node this plan adds to the group: the template, its id a prefix,
        carrying the group label (so that a snapshot with it counts it in the group)."""
        labels = {**self.template.labels, GROUP_LABEL: self.id}
        return Node(
            id=f"{self.template.id}{serial}",
            capacity=dict(self.template.capacity),
            labels=labels,
            unschedulable=False,
            gpu_model=self.template.gpu_model,
        )


def added_nodes(
    groups: Sequence[NodeGroup], scale_up: Sequence[tuple[str, Sequence[str]]]
) -> list[Node]:
    """The nodes a scale-up adds, from ``(group id, node ids)`` pairs, in that order: each is
    its group's template under the new id, carrying the group label."""
    by_id = {g.id: g for g in groups}
    out = []
    for gid, node_ids in scale_up:
        g = by_id[gid]
        for nid in node_ids:
            out.append(g.new_node(int(nid[len(g.template.id) :])))
    return out


def group_counts(nodes: Sequence[Node]) -> dict[str, int]:
    """Nodes per value of the group label."""
    counts: dict[str, int] = {}
    for nd in nodes:
        gid = nd.labels.get(GROUP_LABEL)
        if gid is not None:
            counts[gid] = counts.get(gid, 0) + 1
    return counts


def validate_catalog(
    groups: Sequence[NodeGroup],
    nodes: Sequence[Node],
    resources: Sequence[str],
    counts: Mapping[str, int] | None = None,
) -> None:
    """Raise for a catalog no plan can be built on; see the module docstring.

    ``counts`` are ``group_counts(nodes)`` when the caller has them. ``resources`` are the
    resource names the cluster knows (its nodes' columns plus what its
    workloads request): a template naming another one is ``unknown resource``. A template that
    no workload of the cluster or of the request could ever use (it fits none of them) is
    rejected: an empty or unschedulable template, or GPUs of no named model, could never be
    used (a template today's workloads do not fit is fine: a catalog outlives its workloads).
    """
    if len(groups) > MAX_NODE_GROUPS:
        raise SizeLimitExceeded("max_node_groups", len(groups), MAX_NODE_GROUPS)
    known = set(resources) | set(RESERVED)
    counts = group_counts(nodes) if counts is None else counts
    seen: set[str] = set()
    bad: list[FieldViolation] = []
    for i, g in enumerate(groups):
        at = f"node_groups[{i}]"
        bad.extend(_group_violations(at, g, known, counts))
        if g.id in seen:
            bad.append(FieldViolation(f"{at}.id", f"duplicate node group {g.id!r}"))
        seen.add(g.id)
    if bad:
        raise InvalidArgument(bad)


def _group_violations(
    at: str, g: NodeGroup, known: set[str], counts: Mapping[str, int]
) -> list[FieldViolation]:
    bad: list[FieldViolation] = []
    if not g.id:
        bad.append(FieldViolation(f"{at}.id", "must not be empty"))
    if not g.template.id:
        bad.append(FieldViolation(f"{at}.template.id", "must not be empty (the new nodes' prefix)"))
    price = g.price_per_hour
    if not math.isfinite(price) or price < 0 or price > MAX_PRICE_PER_HOUR:
        bad.append(FieldViolation(f"{at}.price_per_hour", f"must be in [0, 1e9], got {price}"))
    for name, value in (("min_count", g.min_count), ("max_count", g.max_count)):
        if not 0 <= value <= MAX_GROUP_COUNT:
            bad.append(FieldViolation(f"{at}.{name}", f"must be in [0, {MAX_GROUP_COUNT}]"))
    if g.min_count > g.max_count:
        bad.append(
            FieldViolation(f"{at}.min_count", f"{g.min_count} is above max_count {g.max_count}")
        )
    actual = counts.get(g.id, 0)
    if g.current_count is not None and g.current_count != actual:
        bad.append(
            FieldViolation(
                f"{at}.current_count",
                f"{g.current_count} disagrees with the snapshot's {actual} nodes labelled "
                f"{GROUP_LABEL}={g.id}",
            )
        )
    for r, amount in g.template.capacity.items():
        if r not in known:
            bad.append(FieldViolation(f'{at}.template.capacity["{r}"]', "unknown resource"))
        elif amount < 0:
            bad.append(FieldViolation(f'{at}.template.capacity["{r}"]', "must not be negative"))
    if g.template.capacity.get(GPU, 0) % MILLI_PER_GPU:
        bad.append(FieldViolation(f'{at}.template.capacity["gpu"]', "must be a multiple of 1000"))
    if not any(v > 0 for v in g.template.capacity.values()):
        bad.append(FieldViolation(f"{at}.template.capacity", "empty: no workload could use it"))
    if g.template.unschedulable:
        bad.append(FieldViolation(f"{at}.template.unschedulable", "no workload could use it"))
    if g.template.capacity.get(GPU, 0) and not g.template.gpu_model:
        bad.append(FieldViolation(f"{at}.template.gpu_model", "a GPU template names its model"))
    return bad


def spread_by_label(w: Workload) -> bool:
    """A gang spread by a label other than the hostname (a zone): one replica per value."""
    return bool(w.spread_key) and w.spread_key != HOSTNAME_KEY and w.replicas > 1


def could_hold(template: Node, w: Workload) -> bool:
    """Whether one replica of ``w`` fits an empty node of ``template`` (labels, model,
    every resource; a GPU share needs one device)."""
    for key, value in w.node_selector.items():
        if template.label(key) != value:
            return False
    models = w.gpu_models
    if models and template.gpu_model not in models:
        return False
    for r, amount in w.request.items():
        if amount > template.capacity.get(r, 0):
            return False
    gpu = w.request.get(GPU, 0)
    return not (0 < gpu < MILLI_PER_GPU and template.capacity.get(GPU, 0) < MILLI_PER_GPU)
