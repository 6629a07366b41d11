"""Batch orders: FIFO, PRIORITY and FAIR (hierarchical weighted DRF, no head-of-line blocking)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest

from strata_policy.errors import InvalidArgument
from strata_policy.model import Order, Scope, Workload
from strata_policy.model.resources import Resources
from strata_policy.quota import QuotaTree, batch_order, check_admit
from strata_policy.testing import resources, scope, workload


def run_batch(
    tree: QuotaTree, batch: Sequence[Workload], order: Order, capacity: Resources
) -> list[str]:
    """The engine's loop in miniature: take each yielded index, charge it when it fits."""
    admitted = []
    for i in batch_order(tree, batch, order, capacity):
        w = batch[i]
        if check_admit(tree, w, capacity).fits:
            tree.charge(w.scope_id, w.total)
            admitted.append(w.id)
    return admitted


def test_drf_paper_example() -> None:
    """DRF §4.1: 9 CPU, 18 GiB; A's ⟨1 CPU, 4 GiB⟩, B's ⟨3 CPU, 1 GiB⟩ → A gets 3, B gets 2."""
    tree = QuotaTree.build([scope("A"), scope("B")])
    batch = [workload(f"a{i}", "A", cpu=1, memory_gi=4) for i in range(6)]
    batch += [workload(f"b{i}", "B", cpu=3, memory_gi=1) for i in range(6)]
    admitted = run_batch(tree, batch, Order.FAIR, resources(cpu=9, memory_gi=18))
    assert Counter(wid[0] for wid in admitted) == {"a": 3, "b": 2}
    assert admitted == ["a0", "b0", "a1", "b1", "a2"]


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        pytest.param(Order.FIFO, [0, 1, 2, 3], id="fifo: request order"),
        pytest.param(Order.PRIORITY, [2, 3, 1, 0], id="priority desc, then queued_at_ms"),
    ],
)
def test_simple_orders(order: Order, expected: list[int]) -> None:
    """FIFO keeps request order; PRIORITY sorts by priority, queue time, then request order."""
    tree = QuotaTree.build([scope("a")])
    batch = [
        workload("w0", "a", priority=0, queued_at_ms=5),
        workload("w1", "a", priority=1, queued_at_ms=9),
        workload("w2", "a", priority=2, queued_at_ms=9),
        workload("w3", "a", priority=1, queued_at_ms=1),
    ]
    assert list(batch_order(tree, batch, order, resources(cpu=1))) == expected


def fair_ids(scopes: Sequence[Scope], batch: Sequence[Workload], cpus: int) -> list[str]:
    """The FAIR admission sequence of ``batch`` (cpu only) on ``cpus`` CPUs."""
    return run_batch(QuotaTree.build(scopes), batch, Order.FAIR, resources(cpu=cpus))


def cpu_tasks(sid: str, n: int, cpu: float = 1, prefix: str = "") -> list[Workload]:
    """``n`` one-CPU workloads in scope ``sid``."""
    return [workload(f"{prefix or sid}{i}", sid, cpu=cpu) for i in range(n)]


@pytest.mark.parametrize(
    ("scopes", "batch", "cpus", "expected"),
    [
        pytest.param(
            [scope("a"), scope("b")],
            cpu_tasks("a", 3) + cpu_tasks("b", 3),
            4,
            ["a0", "b0", "a1", "b1"],
            id="equal weights alternate",
        ),
        pytest.param(
            [scope("a", weight=2), scope("b")],
            cpu_tasks("a", 4) + cpu_tasks("b", 4),
            6,
            ["a0", "b0", "a1", "a2", "b1", "a3"],
            id="weight 2 gets twice the share",
        ),
        pytest.param(
            [scope("o1"), scope("x", parent="o1"), scope("y", parent="o1"), scope("o2")],
            cpu_tasks("x", 2) + cpu_tasks("y", 2) + cpu_tasks("o2", 4),
            4,
            ["x0", "o20", "y0", "o21"],
            id="hierarchical: orgs first, then teams inside",
        ),
        pytest.param(
            [scope("a"), scope("b")],
            [workload("huge", "a", cpu=10), *cpu_tasks("a", 2), *cpu_tasks("b", 2)],
            4,
            ["a0", "b0", "a1", "b1"],
            id="a workload that cannot fit does not block the ones behind it",
        ),
        pytest.param(
            [scope("p"), scope("c", parent="p")],
            cpu_tasks("p", 2, prefix="own") + cpu_tasks("c", 2),
            4,
            ["c0", "own0", "c1", "own1"],
            id="inner scope's own workloads compete as one more child",
        ),
        pytest.param(
            [scope("a"), scope("b")],
            [
                workload("lo", "a", cpu=1, priority=0),
                workload("hi", "a", cpu=1, priority=9),
                *cpu_tasks("b", 1),
            ],
            2,
            ["hi", "b0"],
            id="within a scope higher priority first",
        ),
    ],
)
def test_fair(
    scopes: Sequence[Scope], batch: list[Workload], cpus: int, expected: list[str]
) -> None:
    """FAIR serves the subtree with the lowest weighted dominant share at every level."""
    assert fair_ids(scopes, batch, cpus) == expected


def test_fair_counts_running_usage() -> None:
    """A tenant already holding quota waits until the others catch up."""
    tree = QuotaTree.build([scope("a"), scope("b")])
    tree.charge("a", resources(cpu=2))
    batch = cpu_tasks("a", 2) + cpu_tasks("b", 3)
    assert run_batch(tree, batch, Order.FAIR, resources(cpu=6)) == ["b0", "b1", "a0", "b2"]


def test_fair_unknown_scope_is_invalid_argument() -> None:
    """FAIR rejects a workload in an unknown scope before yielding anything."""
    tree = QuotaTree.build([scope("a")])
    with pytest.raises(InvalidArgument):
        batch_order(tree, [workload("w", "nope")], Order.FAIR, resources(cpu=1))
