"""A kernel batch's placements as shared ``Placement`` values.

``Placement`` values are immutable and a batch's replicas land on a limited set of (node,
devices): the values are cached in the lineage's caches (``placement.index``, so copies share
them) and a batch looks most of them up instead of building them. See ``batch_placements``.
"""

from __future__ import annotations

import numpy as np

from strata_policy.model.objects import Placement
from strata_policy.placement import slot_builders
from strata_policy.placement.index import MAX_PLACEMENTS, index_of
from strata_policy.placement.kernel_inputs import placement_of
from strata_policy.state.nodes import NodeMatrix
from strata_policy.state.validate import MAX_DEVICES_PER_NODE

# ``_DEVICES[d + 1]``: the shared device tuple of one replica on device ``d`` (-1: none)
_DEVICES: tuple[tuple[int, ...], ...] = ((), *((d,) for d in range(MAX_DEVICES_PER_NODE)))


def batch_placements(
    matrix: NodeMatrix,
    placed: np.ndarray,
    replicas: np.ndarray,
    n_devices: np.ndarray,
    offsets: np.ndarray,
    node: np.ndarray,
    devices: np.ndarray,
) -> list[tuple[Placement, ...]]:
    """Per workload of a kernel batch, its placements (``()`` where ``placed`` is false).

    A single replica on at most one device (nearly every workload of a big batch) is looked up
    by an integer code of (node, device) in a cache of one-placement tuples shared by copies of
    the matrix (a tuple and its ``Placement`` are immutable, and building them costs more than
    finding the node), one C-level ``map`` for the whole batch. The misses are built
    afterwards: the batch's new single placements (a node's or device's first use) by column
    (``slot_builders.placement_many``) and cached; gangs and several devices one at a time, through
    ``placement_of``'s cache.
    """
    width = devices.shape[1]
    code = np.full(len(replicas), -1, dtype=np.int64)
    single = placed & (replicas == 1) & (n_devices <= 1)
    rows = offsets[single]
    code[single] = node[rows] * (width + 1) + (devices[rows, 0] + 1 if width else 0)
    lineage = index_of(matrix).lineage
    cache = lineage.replica_tuples
    if len(cache) > MAX_PLACEMENTS:
        cache.clear()
    out: list[tuple[Placement, ...] | None] = list(map(cache.get, code.tolist()))
    misses = [w for w, found in enumerate(out) if found is None]
    if not misses:
        return out  # type: ignore[return-value]  # no None left
    miss = np.asarray(misses, dtype=np.int64)
    new = miss[code[miss] >= 0]  # one replica, at most one device, not cached yet: by column
    if new.size:
        rows = offsets[new]
        names = list(map(lineage.node_ids(matrix).__getitem__, node[rows].tolist()))
        devs = list(map(_DEVICES.__getitem__, (devices[rows, 0] + 1).tolist()))
        made = list(zip(slot_builders.placement_many(names, devs)))  # zip of one: 1-tuples
        cache.update(zip(code[new].tolist(), made, strict=True))
        for w, one in zip(new.tolist(), made, strict=True):
            out[w] = one
    rest = miss[code[miss] < 0].tolist()
    if rest:
        _gangs_and_unplaced(matrix, out, rest, placed, replicas, n_devices, offsets, node, devices)
    return out  # type: ignore[return-value]  # every None replaced


def _gangs_and_unplaced(
    matrix: NodeMatrix,
    out: list[tuple[Placement, ...] | None],
    rest: list[int],
    placed: np.ndarray,
    replicas: np.ndarray,
    n_devices: np.ndarray,
    offsets: np.ndarray,
    node: np.ndarray,
    devices: np.ndarray,
) -> None:
    """``batch_placements`` for unplaced workloads, gangs and several devices."""
    placed_list, reps, k_list = placed.tolist(), replicas.tolist(), n_devices.tolist()
    base, nodes = offsets.tolist(), node.tolist()
    widest = max(k_list, default=0)
    dev_list = devices[:, : max(widest, 1)].tolist()
    for w in rest:
        if not placed_list[w]:
            out[w] = ()
            continue
        k = k_list[w]
        first = base[w]
        chosen = []
        for i in range(first, first + reps[w]):
            devs = tuple(dev_list[i][:k]) if k > 1 else _DEVICES[dev_list[i][0] + 1] if k else ()
            chosen.append(placement_of(matrix, nodes[i], devs))
        out[w] = tuple(chosen)
