"""The many-clients benchmark's schedule: kinds interleaved within every round, no overlaps."""

from __future__ import annotations

import itertools

import pytest

from benchmarks.bench_clients import KINDS, schedule


@pytest.mark.parametrize(("rounds", "slices"), [(1, 1), (2, 3), (10, 5)])
def test_every_round_has_each_kind_in_every_slice(rounds: int, slices: int) -> None:
    """Each round holds ``slices`` slices of every kind, and each slice rotates their order."""
    plan = schedule(100.0, rounds, slices, 0.2, 0.02)
    assert len(plan) == rounds * slices * len(KINDS)
    for r in range(rounds):
        kinds = [s.kind for s in plan if s.round == r]
        assert all(kinds.count(k) == slices for k in KINDS)
        firsts = kinds[:: len(KINDS)]
        assert firsts == [KINDS[s % len(KINDS)] for s in range(slices)]


def test_slices_follow_one_another_with_the_gap() -> None:
    """Slices are back to back in time order, each ``seconds`` long, ``gap`` apart."""
    plan = schedule(100.0, 3, 4, 0.2, 0.02)
    assert plan[0].begin == 100.0
    for a, b in itertools.pairwise(plan):
        assert b.begin - a.end == pytest.approx(0.02)
        assert a.end - a.begin == pytest.approx(0.2)
    assert [s.round for s in plan] == sorted(s.round for s in plan)
