"""What a step of the autoscaling replay costs, and its bound: the columns the bound is over,
the step's integral bound, a running workload keyed by its nodes (the held bound's pinning),
the price of empty and idle capacity."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from strata_policy.capacity import NodeGroup, bound
from strata_policy.capacity.catalog import GROUP_LABEL
from strata_policy.model import Node, RunningWorkload, Workload
from strata_policy.state.nodes import NodeMatrix


def keyed(rw: RunningWorkload) -> Workload:
    """``rw``'s workload with its nodes in its id: pinned only while it stays on them."""
    nodes = ",".join(p.node_id for p in rw.placements)
    return replace(rw.workload, id=f"{rw.workload.id}@{nodes}")


def idle(
    matrix: NodeMatrix, nodes: Sequence[Node], by_id: dict[str, NodeGroup]
) -> tuple[float, float]:
    """Per hour: the price of the ready nodes that hold nothing, and of the unused share of the
    others (a node's price times one minus its busiest resource's utilisation: the part of
    it no packing of its current work could have saved less of)."""
    empty = idle = 0.0
    for n, nd in enumerate(nodes):
        g = by_id.get(nd.labels.get(GROUP_LABEL, ""))
        if g is None:
            continue
        cap, alloc = matrix.capacity[n], matrix.allocated[n]
        if not alloc.any():
            empty += g.price_per_hour
            continue
        util = max(float(a) / float(c) for a, c in zip(alloc, cap, strict=True) if c > 0)
        idle += g.price_per_hour * (1.0 - min(util, 1.0))
    return empty, idle


def step_bound(groups: Sequence[NodeGroup], demand: list[Workload]) -> tuple[float, bool]:
    """The step's integral bound, and whether it was solved to optimality."""
    lp = bound.lower_bound(columns(groups), demand, integral=True)
    return (lp.value, lp.exact) if lp.feasible else (0.0, True)


def columns(groups: Sequence[NodeGroup]) -> list[bound.GroupColumn]:
    """One column per group: its template's shape, 0 to ``max_count`` nodes."""
    columns = []
    for g in groups:
        template = g.new_node(0)
        columns.append(
            bound.GroupColumn(g.price_per_hour, template.capacity, template.gpu_model, 0.0,
                              float(g.max_count), g.id, template.labels)
        )  # fmt: skip
    return columns
