"""A lower bound over a whole replay: every step's rows, joined by time (DESIGN §8).

The per-step bound (``bound.lower_bound``) prices each step's demand as if the fleet could be
rebuilt from scratch every step. A plan cannot: a non-preemptible replica is never moved (no
plan, consolidation or baseline moves one), so the node it sits on lives as long as it runs.
The per-step LP puts a steady database's CPU into the spare CPU of GPU nodes that come and go
with an inference load; a plan can only use the GPU nodes that stay.

Variables: ``x[t, c]`` = nodes of column ``c`` at step ``t`` (fractional), and for each window
``W`` of a binary split of the steps (the whole run, its halves, their halves, ``depth`` levels)
``z[W, c]`` = nodes of ``c`` alive at every step of ``W``. Minimise ``Σ_t step_h · price · x[t]``
subject to:

- **every step**: ``bound.rows_of`` of the step's demand on ``x[t]`` (usable sets, gangs, big
  replicas), and ``price · x[t] ≥ floor[t]``, the step's integral bound (a plan's fleet at
  ``t`` is an integral point of those rows, so its price is at least their integral optimum);
- **pinning**: for each window ``W``, ``bound.rows_of`` of the non-preemptible workloads in the
  demand at every step of ``W`` on ``z[W]``: they sit, unmoved, on nodes alive through ``W``;
- **alive through**: ``z[W, c] ≤ z[W', c]`` for ``W'`` a half of ``W``, and
  ``z[W, c] ≤ x[t, c]`` for ``t`` in a leaf ``W``: nodes alive through ``W`` are alive through
  any part of it and at any of its steps.

A plan that holds every step's demand and never moves a non-preemptible replica gives a
feasible point (its fleet per step, its nodes alive through each window), so the optimum is
≤ its cost. With the ``floor`` rows it is ≥ the sum of the per-step integral bounds. The
comparator is a plan that holds each step's demand (the waiting work too); a replay's
autoscaler leaves new work pending while nodes are provisioned, but pays for those nodes from
the moment they are ordered, so its fleet is paid while the bound's holds the work.
A replay with failures moves non-preemptible work (the failed nodes go): there the pinning rows
do not hold and ``pinned=False`` leaves them out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from strata_policy.capacity.bound import GroupColumn, rows_of
from strata_policy.model import Workload

DEPTH = 5  # window levels: the run, halves, quarters, ... (2^DEPTH leaves)
TIME_LIMIT_S = 600.0  # once per trace (memoised); about 30 s for a day of 1,440 steps
JOINED = "joined over time, non-preemptible work pinned"
NOT_PINNED = "per step (pinning off: failures move non-preemptible work)"
NOTHING_PINNED = "per step (no non-preemptible work to pin)"
TIMED_OUT = "per step (the joined LP hit its time limit)"


@dataclass(frozen=True, slots=True)
class TimeBound:
    """The whole replay's bound in dollars, its per-step share (``$/h``), and whether the
    joined LP was solved with pinning rows (else ``value`` is the sum of the per-step floors:
    with no non-preemptible work to pin, the joined LP's optimum is exactly that sum)."""

    value: float
    per_step: tuple[float, ...]
    joined: bool
    why: str = ""  # how it was solved, for the replay's table


def time_bound(
    columns: Sequence[GroupColumn],
    steps: Sequence[Sequence[Workload]],
    floors: Sequence[float],
    step_h: float,
    *,
    pinned: bool = True,
    depth: int = DEPTH,
    time_limit_s: float = TIME_LIMIT_S,
) -> TimeBound:
    """The bound of the module docstring; ``floors[t]`` is step ``t``'s integral bound.
    Memoised on the steps' workload ids (the replay asks once per autoscaler, same demand)."""
    if len(steps) != len(floors):
        raise ValueError(f"{len(steps)} steps but {len(floors)} floors")
    total = sum(floors) * step_h
    n_t, n_c = len(steps), len(columns)
    windows = _windows(n_t, depth) if n_t else []
    pins = _pinned(steps, windows) if pinned else []
    if not n_c or not any(pins):
        return TimeBound(total, tuple(floors), False, NOTHING_PINNED if pinned else NOT_PINNED)
    key = (repr(columns), tuple(tuple(sorted(w.id for w in d)) for d in steps), tuple(floors),
           step_h, depth)  # fmt: skip
    found = _MEMO.get(key)
    if found is None:
        found = _solve(columns, steps, floors, step_h, windows, pins, time_limit_s)
        if found.joined:  # a timed-out solve may finish given more time: not kept
            _MEMO.clear()  # one trace at a time: keep only the last
            _MEMO[key] = found
    return found if found.joined else TimeBound(total, tuple(floors), False, TIMED_OUT)


_MEMO: dict[tuple[object, ...], TimeBound] = {}


def _solve(
    columns: Sequence[GroupColumn],
    steps: Sequence[Sequence[Workload]],
    floors: Sequence[float],
    step_h: float,
    windows: Sequence[Window],
    pins: Sequence[Sequence[Workload]],
    time_limit_s: float,
) -> TimeBound:
    """The joined LP (module docstring); ``joined=False`` when HiGHS did not finish."""
    n_t, n_c = len(steps), len(columns)
    b = _Builder()
    price = [c.price for c in columns]
    for t, demand in enumerate(steps):
        _, rows = rows_of(columns, demand)
        for coeffs, rhs in rows:
            b.row({t * n_c + c: v for c, v in enumerate(coeffs) if v}, rhs)
        if floors[t] > 0:
            b.row({t * n_c + c: p for c, p in enumerate(price) if p}, floors[t])
    base = n_t * n_c
    n_z = len(windows) * n_c
    for k, (lo, hi, kids) in enumerate(windows):
        zk = base + k * n_c
        if pins[k]:
            for coeffs, rhs in rows_of(columns, pins[k])[1]:
                b.row({zk + c: v for c, v in enumerate(coeffs) if v}, rhs)
        for c in range(n_c):
            if kids:
                for kid in kids:
                    b.row({base + kid * n_c + c: 1.0, zk + c: -1.0}, 0.0)
            else:
                for t in range(lo, hi):
                    b.row({t * n_c + c: 1.0, zk + c: -1.0}, 0.0)
    n_x = n_t * n_c
    cost = np.zeros(n_x + n_z)
    cost[:n_x] = np.tile(np.array(price, dtype=np.float64) * step_h, n_t)
    box = [(c.lo, c.hi) for c in columns] * n_t + [(0.0, c.hi) for c in columns] * (n_z // n_c)
    a_ub, b_ub = b.matrix(n_x + n_z)
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=box, method="highs",
                  options={"time_limit": time_limit_s})  # fmt: skip
    if res.status != 0:
        return TimeBound(0.0, (), False)
    x = np.asarray(res.x[:n_x]).reshape(n_t, n_c)
    per_step = tuple(float(v) for v in x @ np.array(price, dtype=np.float64))
    return TimeBound(max(float(res.fun), sum(floors) * step_h), per_step, True, JOINED)


class _Builder:
    """Sparse ``≥`` rows, each scaled by its right-hand side (or kept as is when it is 0)."""

    def __init__(self) -> None:
        self.r: list[int] = []
        self.c: list[int] = []
        self.v: list[float] = []
        self.rhs: list[float] = []

    def row(self, coeffs: dict[int, float], rhs: float) -> None:
        scale = rhs if rhs > 0 else 1.0
        i = len(self.rhs)
        for j, v in coeffs.items():
            self.r.append(i)
            self.c.append(j)
            self.v.append(-v / scale)  # linprog wants A_ub x ≤ b_ub
        self.rhs.append(-rhs / scale)

    def matrix(self, n: int) -> tuple[object, np.ndarray]:
        a = coo_matrix((self.v, (self.r, self.c)), shape=(len(self.rhs), n)).tocsr()
        return a, np.array(self.rhs, dtype=np.float64)


Window = tuple[int, int, tuple[int, ...]]


def _windows(n_t: int, depth: int) -> list[Window]:
    """The binary split of ``[0, n_t)``: ``(lo, hi, children's indexes)``, parents first."""
    out: list[Window] = []
    todo: list[tuple[int, int, int, int]] = [(0, n_t, 0, -1)]  # lo, hi, level, parent
    parents: list[int] = []
    while todo:
        lo, hi, level, parent = todo.pop(0)
        k = len(out)
        out.append((lo, hi, ()))
        parents.append(parent)
        if level < depth and hi - lo >= 2:
            mid = (lo + hi) // 2
            todo += [(lo, mid, level + 1, k), (mid, hi, level + 1, k)]
    kids: dict[int, list[int]] = {}
    for k, p in enumerate(parents):
        if p >= 0:
            kids.setdefault(p, []).append(k)
    return [(lo, hi, tuple(kids.get(k, ()))) for k, (lo, hi, _) in enumerate(out)]


def _pinned(steps: Sequence[Sequence[Workload]], windows: Sequence[Window]) -> list[list[Workload]]:
    """Per window, the non-preemptible workloads in the demand at every one of its steps."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    runs: dict[str, int] = {}  # steps present (a contiguous presence has last - first + 1)
    by_id: dict[str, Workload] = {}
    for t, demand in enumerate(steps):
        for w in demand:
            if w.preemptible:
                continue
            first.setdefault(w.id, t)
            last[w.id] = t
            runs[w.id] = runs.get(w.id, 0) + 1
            by_id[w.id] = w
    spans = [(first[i], last[i], by_id[i]) for i in sorted(by_id)
             if runs[i] == last[i] - first[i] + 1]  # fmt: skip
    return [[w for a, z, w in spans if a <= lo and z >= hi - 1] for lo, hi, _ in windows]
