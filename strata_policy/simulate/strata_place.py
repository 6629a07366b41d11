"""How the replay places pending work in a cluster Strata serves (the ``strata`` row).

DESIGN §9: in such a cluster pods are admitted and placed by Strata and released to
kube-scheduler pinned to the chosen node. So for that row the replay places what waits as
Strata decides, and every baseline keeps its kube-scheduler policy (``Engine.place`` in
arrival order):

- A workload the plan put (partly) on a node it ordered **waits for that node**, as a
  nominated pod does: once every node it was given is ready, it runs exactly there (the GPU
  devices chosen as Place would: the fullest device a share fits, else the first free ones).
  If its room went in between, or a node it was given is gone, the nomination lapses and it is
  placed like the rest. While its node is coming, it runs at once if the ready nodes hold it
  (room freed since the plan): work never waits for a node when room is ready; the node
  ordered for it takes the next arrivals or is consolidated.
- The rest is placed by ``arrange.arrange`` over the ready nodes (steady CPU work last, into
  the spare room of GPU nodes that stay), with the row's policy.

Placements are committed as a kube sync reports bound pods (``UpdateSnapshot``), in one delta.
"""

from __future__ import annotations

from collections.abc import Sequence, Set

from strata_policy.capacity import scratch
from strata_policy.capacity.arrange import arrange
from strata_policy.engine import Engine
from strata_policy.model import Placement, RunningWorkload, Workload
from strata_policy.model.resources import GPU, MILLI_PER_GPU
from strata_policy.placement.place import PlacementOptions
from strata_policy.state.changes import Delta
from strata_policy.state.nodes import NodeMatrix


def place(
    engine: Engine,
    cluster: str,
    queue: Sequence[Workload],
    nominated: dict[str, tuple[str, ...]],
    coming: set[str],
    options: PlacementOptions,
    leaving: Set[str] = frozenset(),
) -> list[str]:
    """Place ``queue`` (arrival order) as the module docstring says; returns the ids placed.
    ``nominated`` (workload id to one node id per replica) is updated: entries of workloads
    placed, gone or whose node will not come are dropped. ``coming``: ordered node ids;
    ``leaving``: nodes whose removal is due when their replacements are ready: a nomination
    naming one lapses, and ``arrange`` puts no steady CPU work there (it would be moved when
    the node goes); other work may use their room until they go (blocking it for all work
    left more openb pods waiting until they left, and placing non-preemptible work in a pass
    of its own changed the day's arrangement for the worse)."""
    state = engine.store.slot(cluster).require(cluster)
    m = state.matrix.copy()
    blocked: scratch.Blocked = []
    for nid in leaving:
        if nid in m.index:
            blocked += scratch.block(m, m.index[nid])
    waiting = {w.id for w in queue}
    for wid in [wid for wid in nominated if wid not in waiting]:
        del nominated[wid]
    commits: list[RunningWorkload] = []
    rest: list[Workload] = []
    early: set[str] = set()
    for w in queue:
        node_ids = nominated.get(w.id)
        if node_ids is None:
            rest.append(w)
            continue
        if any(nid in leaving for nid in node_ids):
            del nominated[w.id]
            rest.append(w)
        elif all(nid in m.index for nid in node_ids):
            del nominated[w.id]
            placements = pinned(m, w, node_ids)
            if placements is not None:
                commits.append(RunningWorkload(w, placements))
            else:
                rest.append(w)
        elif all(nid in m.index or nid in coming for nid in node_ids):
            early.add(w.id)  # waits for its node, unless the ready nodes hold it now
            rest.append(w)
        else:
            del nominated[w.id]
            rest.append(w)
    scratch.unblock(m, blocked)
    if rest:
        running = [*(rw for rw in state.workloads.values() if rw.placed), *commits]
        for w, o in zip(rest, arrange(m, rest, options, running, leaving), strict=True):
            if o.placed:
                commits.append(RunningWorkload(w, o.placements))
                nominated.pop(w.id, None)
    if commits:
        engine.update_snapshot(cluster, Delta(upsert_workloads=tuple(commits)))
    return [rw.workload.id for rw in commits]


def pinned(m: NodeMatrix, w: Workload, node_ids: Sequence[str]) -> tuple[Placement, ...] | None:
    """``w``'s replicas on ``node_ids`` (one each), allocated on ``m``; ``None`` (and ``m``
    unchanged) when one does not fit there."""
    done: list[tuple[int, tuple[int, ...]]] = []
    out: list[Placement] = []
    for nid in node_ids:
        n = m.index[nid]
        devices = _devices(m, n, w.request.get(GPU, 0))
        if devices is None or m.replica_fit_error(n, w.request, devices) is not None:
            for k, d in reversed(done):
                m.deallocate(k, w.request, d)
            return None
        m.allocate(n, w.request, devices)
        done.append((n, devices))
        out.append(Placement(nid, devices))
    return tuple(out)


def _devices(m: NodeMatrix, n: int, gpu: int) -> tuple[int, ...] | None:
    """The devices a replica asking ``gpu`` milli takes on node ``n``: for a share, the
    fullest device it fits; for whole GPUs, the first free ones; ``None`` if none fit."""
    if gpu <= 0:
        return ()
    free = [int(f) for f in m.gpu_free[n, : int(m.gpu_devices[n])]]
    if gpu < MILLI_PER_GPU:
        fits = [(f, d) for d, f in enumerate(free) if f >= gpu]
        return (min(fits)[1],) if fits else None
    whole = [d for d, f in enumerate(free) if f == MILLI_PER_GPU]
    want = gpu // MILLI_PER_GPU
    return tuple(whole[:want]) if len(whole) >= want else None
