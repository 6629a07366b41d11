"""An UpdateSnapshot delta applied to the live state in place, at the cost of what it changes.

The plain path (``rebuild``) applies the delta to the whole snapshot, validates the result and
builds the dense state again: O(cluster) for one pod event. ``apply_in_place`` changes the live
``ClusterState`` inside the caller's open transaction instead, in the order the plain path's
result implies (removals first, then upserts):

1. workloads removed, and the old version of every upserted workload that is held (it keeps its
   admission number, as it keeps its place in the plain path's snapshot);
2. scopes: fields of a scope under the same parent are patched (``QuotaTree.with_scopes``); a
   scope added, removed or moved re-shapes the tree from each scope's own usage, O(tree);
3. nodes: a node upserted unchanged costs nothing; any other change gives a matrix of the new
   nodes carrying every running allocation (``node_changes.rebuilt``): O(nodes) vectorised, with
   the placement caches of the old matrix dropped (they are keyed by its node data);
4. upserted workloads charged and allocated (``ClusterState.put``).

Node order is the plain path's: an upserted node keeps its row, a new one is appended, a removed
one's row closes up; scopes likewise; workloads keep admission order, new ones last in the
delta's order. The journal gets the delta itself (the caller's).

**Honest by construction.** ``apply_in_place`` commits only when it can tell the plain path
would accept the delta and build this very state; whenever a check fails, or a change is
refused on the way (a replica that does not fit, an unknown id), it returns False and the caller
rolls back and runs ``rebuild``, which reports the exact errors and field paths it always did.
A Hypothesis property (tests/test_live_updates.py) holds the two paths equal: the same errors
for every delta, and the same state and answers to every later call.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import cast

import numpy as np

from strata_policy.errors import FieldViolation, StrataError
from strata_policy.model import Node, RunningWorkload, Scope
from strata_policy.model.resources import MAX_AMOUNT
from strata_policy.state import node_changes, request_checks, validate
from strata_policy.state.changes import Delta, apply_delta
from strata_policy.state.cluster import ClusterState

SizeCheck = Callable[[int, int, int], None]  # ``Limits.check_sizes``: nodes, scopes, workloads


def rebuild(state: ClusterState, delta: Delta, check_sizes: SizeCheck) -> ClusterState:
    """The plain path: the state of ``state``'s snapshot after ``delta``, built again whole, at
    the next generation. Raises what is wrong with the delta or its result."""
    snap, violations = apply_delta(state.snapshot(), delta)
    check_sizes(len(snap.nodes), len(snap.scopes), len(snap.workloads))
    # The delta's own items first, with the delta's paths; the whole result (parents,
    # cycles, references) only when they are clean, so no problem is reported twice.
    request_checks.check(violations)
    request_checks.check(validate.snapshot_shape(snap))
    return ClusterState.build(state.cluster_id, snap, state.generation + 1, state.task_mix)


def apply_in_place(state: ClusterState, delta: Delta) -> bool:
    """Apply ``delta`` to ``state`` in its open transaction (see the module docstring); False
    when the plain path must decide, with changes made that the caller rolls back."""
    if not _items_valid(delta):
        return False
    try:
        seqs = _remove_workloads(state, delta)
        if seqs is None or not _change_scopes(state, delta) or not _change_nodes(state, delta):
            return False
        return _upsert_workloads(state, delta, seqs)
    except (StrataError, ValueError):  # refused on the way: the plain path names why
        return False


def _items_valid(delta: Delta) -> bool:
    """The delta's own items as ``apply_delta`` checks them: valid, ids distinct."""
    out: list[FieldViolation] = []
    for n in delta.upsert_nodes:
        validate.node(n, "", out)
    for s in delta.upsert_scopes:
        validate.scope(s, "", out)
    return (
        not out
        and _distinct([n.id for n in delta.upsert_nodes])
        and _distinct([s.id for s in delta.upsert_scopes])
        and _distinct([rw.workload.id for rw in delta.upsert_workloads])
    )


def _distinct(ids: list[str]) -> bool:
    return len(set(ids)) == len(ids)


def _remove_workloads(state: ClusterState, delta: Delta) -> dict[str, int] | None:
    """Step 1, in one bulk change; the admission numbers of the upserted workloads that replace
    held ones. None when a removed id is unknown or named twice."""
    held = state.workloads
    removed = delta.remove_workload_ids
    if not all(w in held for w in removed) or len(set(removed)) != len(removed):
        return None
    gone = set(removed)
    seqs = {
        wid: state.seq_of(wid)
        for wid in (rw.workload.id for rw in delta.upsert_workloads)
        if wid in held and wid not in gone
    }
    if removed or seqs:
        state.remove_many([*removed, *seqs])
    return seqs


def _change_scopes(state: ClusterState, delta: Delta) -> bool:
    """Step 2: patch scope fields, or re-shape the tree when its shape changes."""
    if not delta.upsert_scopes and not delta.remove_scope_ids:
        return True
    tree = state.tree
    removed = set(delta.remove_scope_ids)
    if len(removed) != len(delta.remove_scope_ids) or not all(s in tree for s in removed):
        return False
    patched: dict[str, Scope] = {}
    reshaped = bool(removed)
    for s in delta.upsert_scopes:
        held = tree.scopes.get(s.id)
        if held is None or s.id in removed or held.parent_id != s.parent_id:
            reshaped = True
        elif held != s:
            patched[s.id] = s
    if not reshaped:
        if patched:
            scopes = tuple(patched.get(s.id, s) for s in state.scopes)
            state.swap_scopes(tree.with_scopes(patched), scopes)
        return True
    by_id = {s.id: s for s in state.scopes if s.id not in removed}
    for s in delta.upsert_scopes:
        by_id[s.id] = s
    scopes = tuple(by_id.values())
    out: list[FieldViolation] = []
    validate.scope_tree(scopes, "", out)
    if out or (removed and _holds_workloads(state, removed)):
        return False
    state.swap_scopes(tree.reshaped(scopes), scopes)
    return True


def _holds_workloads(state: ClusterState, scope_ids: set[str]) -> bool:
    """Whether a held workload is charged to one of ``scope_ids``: O(workloads), paid only
    when scopes are removed (a workload may request nothing, so usage alone cannot say)."""
    if any(state.tree.own_usage(s) for s in scope_ids):
        return True
    return any(rw.workload.scope_id in scope_ids for rw in state.workloads.values())


def _change_nodes(state: ClusterState, delta: Delta) -> bool:
    """Step 3: a new matrix when a node is added, removed or changed; nothing otherwise."""
    if not delta.upsert_nodes and not delta.remove_node_ids:
        return True
    matrix = state.matrix
    index = matrix.index
    removed = [index.get(nid, -1) for nid in delta.remove_node_ids]
    if -1 in removed or len(set(removed)) != len(removed):
        return False
    if removed and matrix.replicas[removed].any():
        return False  # a removed node still runs a replica
    gone = set(delta.remove_node_ids)
    replaced: dict[int, Node] = {}
    appended: list[Node] = []
    for n in delta.upsert_nodes:
        row = index.get(n.id)
        if row is None or n.id in gone:
            appended.append(n)
        elif matrix.nodes[row] != n:
            replaced[row] = n
    if not removed and not replaced and not appended:
        return True
    nodes = list(matrix.nodes)
    for row, n in replaced.items():
        nodes[row] = n
    old_row = np.arange(len(nodes), dtype=np.int64)
    if removed:
        keep = np.ones(len(nodes), dtype=np.bool_)
        keep[removed] = False
        old_row = np.flatnonzero(keep)
        nodes = [nodes[i] for i in old_row.tolist()]
        new_index = {n.id: i for i, n in enumerate(nodes)}
    else:
        new_index = dict(index) if appended else index
    changed = np.zeros(len(nodes) + len(appended), dtype=np.bool_)
    if replaced:
        changed[np.searchsorted(old_row, np.fromiter(replaced, dtype=np.int64))] = True
    for n in appended:
        new_index[n.id] = len(nodes)
        nodes.append(n)
    changed[len(old_row) :] = True
    old_row = np.concatenate((old_row, np.full(len(appended), -1, dtype=np.int64)))
    new = node_changes.rebuilt(matrix, tuple(nodes), old_row, changed, new_index)
    if new is None or len(new.resources) > validate.MAX_NODE_RESOURCES:
        return False
    # A total near int64's range is checked exactly by the plain path (validate.cluster_totals);
    # float64 sums are close enough to send every total above MAX_AMOUNT there.
    if bool(np.any(new.capacity.sum(axis=0, dtype=np.float64) > MAX_AMOUNT / 2)):
        return False
    state.swap_nodes(new)
    return True


def _upsert_workloads(state: ClusterState, delta: Delta, seqs: dict[str, int]) -> bool:
    """Step 4: each upserted workload valid against the new scopes and nodes, then held."""
    upserts = delta.upsert_workloads
    if not upserts:
        return True
    scopes = state.tree.scopes
    index = state.matrix.index
    plain = request_checks.workloads_plainly_valid(
        [rw.workload for rw in upserts], scopes, state.workloads
    ) and all(map(_placed_plainly, upserts, itertools.repeat(index)))
    if not plain:  # the field-by-field walk, as the plain path's validation would do it
        nodes = cast(Mapping[str, Node], index)  # read for membership only
        out: list[FieldViolation] = []
        for rw in upserts:
            validate.running_workload(rw, "", scopes, nodes, out)
            if out:
                return False
    fresh = [rw for rw in upserts if rw.workload.id not in seqs]
    state.add_many(fresh)  # in the delta's order, after every held one
    for rw in upserts:
        if rw.workload.id in seqs:
            state.put(rw, seqs[rw.workload.id])
    return True


def _placed_plainly(rw: RunningWorkload, index: Mapping[str, int]) -> bool:
    """The placement rules of ``validate.running_workload``, True only when none is broken
    (a False sends the delta to that walk): one placement per replica or none, known nodes,
    distinct devices, an admission time not before the epoch."""
    placements = rw.placements
    if rw.admitted_at_ms < 0 or (placements and len(placements) != rw.workload.replicas):
        return False
    for p in placements:
        devices = p.gpu_devices
        if p.node_id not in index or (len(devices) > 1 and len(set(devices)) != len(devices)):
            return False
    return True
