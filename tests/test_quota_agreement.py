"""Admit ≡ dry-run Reclaim (DESIGN §2) through the engine, on every path that decides quota:
one-workload Admit, batch Admit, Place of inline workloads one by one and
through the batch lane (``engine.place``)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from test_quota_reclaim_properties import contested, pending, worlds

from strata_policy.engine import Engine
from strata_policy.engine.place import FAST_PATH_MIN
from strata_policy.model import (
    Decision,
    Node,
    ReasonCode,
    ReclaimResult,
    RunningWorkload,
    Scope,
    Snapshot,
    Workload,
    WorkloadResult,
)
from strata_policy.testing import node, scope, workload

FILLERS = tuple(workload(f"fill-{i}", "fill", cpu=0.001) for i in range(FAST_PATH_MIN))


def scalar(amounts: dict[str, int]) -> dict[str, int]:
    """The quota worlds' small ``gpu`` amounts as a plain scalar resource (``rdma``), so that
    any amount is a valid request and a valid node capacity."""
    return {("rdma" if r == "gpu" else r): a for r, a in amounts.items()}


def engine_of(
    world: tuple[list[Scope], list[RunningWorkload], dict[str, int]],
) -> Engine:
    """An engine holding the world as cluster "c": one node of the world's capacity, the
    scopes (and an empty top-level ``fill`` for the fillers: its G is 0, so it changes no
    other scope's), and the running workloads admitted (holding quota, no nodes)."""
    scopes, running, capacity = world
    scopes = [replace(s, guarantee=scalar(s.guarantee), limit=scalar(s.limit)) for s in scopes]
    held = tuple(
        replace(rw, workload=replace(rw.workload, request=scalar(rw.workload.request)))
        for rw in running
    )
    engine = Engine(clock=lambda: 5)
    nodes = (Node("n0", scalar(capacity)),)
    engine.push_snapshot("c", Snapshot(nodes, (*scopes, scope("fill")), held))
    return engine


def answers(engine: Engine, w: Workload) -> dict[str, WorkloadResult]:
    """``w``'s result on every quota path, each a dry run (``w`` is decided first on each)."""
    return {
        "admit one": engine.admit("c", [w], dry_run=True).results[0],
        "admit batch": engine.admit("c", [w, FILLERS[0]], dry_run=True).results[0],
        "place one": engine.place("c", [w], dry_run=True).results[0],
        "place lane": engine.place("c", [w, *FILLERS[1:]], dry_run=True).results[0],
    }


def agree(result: WorkloadResult, reclaim: ReclaimResult) -> None:
    """NEEDS_RECLAIM exactly when Reclaim is satisfiable with victims, the same victims;
    DENIED exactly when it is not; LIMIT_EXCEEDED first when a limit is the cause."""
    if result.decision is Decision.NEEDS_RECLAIM:
        assert reclaim.satisfiable
        assert result.victims == reclaim.victims
        assert reclaim.victims
    elif result.decision is Decision.DENIED:
        assert not reclaim.satisfiable
    else:  # ADMITTED, or PLACED/UNPLACED: quota let it in as things stand
        assert reclaim.satisfiable
        assert reclaim.victims == ()
    codes = [r.code for r in result.reasons]
    if ReasonCode.LIMIT_EXCEEDED in codes:
        assert codes[0] == ReasonCode.LIMIT_EXCEEDED


@settings(max_examples=100, deadline=None)
@given(world=st.one_of(worlds(), contested()), data=st.data())
def test_every_admit_path_agrees_with_dry_run_reclaim(
    world: tuple[list[Scope], list[RunningWorkload], dict[str, int]], data: st.DataObject
) -> None:
    """Single, batch, Place one by one and Place's batch lane all answer as a dry-run Reclaim."""
    engine = engine_of(world)
    w = pending(data, world[0])
    w = replace(w, request=scalar(w.request))
    reclaim = engine.reclaim("c", w, dry_run=True)
    for path, result in answers(engine, w).items():
        try:
            agree(result, reclaim)
        except AssertionError as exc:
            raise AssertionError(f"{path}: {result} vs {reclaim}") from exc


def test_limit_needs_reclaim_on_every_path() -> None:
    """A limit with lower-priority work inside it: NEEDS_RECLAIM with LIMIT_EXCEEDED first on
    every path, and the committed Reclaim evicts exactly those victims."""
    engine = Engine(clock=lambda: 5)
    scopes = (scope("team", limit={"gpu": 4000}), scope("fill"))
    engine.push_snapshot("c", Snapshot((node("n0", gpus=8),), scopes))
    engine.admit("c", [workload("low", "team", gpu_milli=4000, priority=-1)])
    w = workload("w", "team", gpu_milli=2000, priority=5)
    reclaim = engine.reclaim("c", w, dry_run=True)
    assert [v.workload_id for v in reclaim.victims] == ["low"]
    for path, result in answers(engine, w).items():
        assert result.decision is Decision.NEEDS_RECLAIM, path
        assert result.reasons[0].code == ReasonCode.LIMIT_EXCEEDED, path
        agree(result, reclaim)
    assert engine.reclaim("c", w).victims == reclaim.victims
