"""A lower bound over a whole replay: every step's rows, joined by time (DESIGN §8).

The per-step bound (``bound.lower_bound``) prices each step's demand as if the fleet could be
rebuilt from scratch, ready at once, every step. A plan cannot, for two reasons this module
prices:

**Provisioning** (``lead``). In the replay a node is paid from the step it is ordered and
holds work only ``lead`` steps later (``simulate/autoscale.py``: a node ordered at step ``s``
costs its price at every step from ``s`` until it is removed, and joins the cluster at the
first step ``t`` with ``t·step ≥ s·step + delay``, so ``t - s ≥ lead = ⌊delay / step⌋``).
Nodes are never removed and brought back, so a node ready at step ``t + j`` (``0 ≤ j ≤
lead``) was ordered at or before ``t`` and still exists at ``t``: the fleet paid at ``t``
contains the ready fleet of each of the steps ``t .. t + lead``. It therefore satisfies the
rows of each of those steps' demands (every row is ``coeffs · x ≥ rhs`` with coefficients
≥ 0, so a larger fleet satisfies what a smaller one does), and its price is at least
``lead_floor[t]``, the integral optimum over all of those rows together. Nodes that exist at
step 0 are allowed ready at once (a plan may start with a fleet: that only lowers the bound).
A pod that lives one step costs a plan that holds it ``lead + 1`` steps of capacity; the
per-step bound charged one.

**Non-preemptible work never moves.** A non-preemptible replica is never moved (no plan,
consolidation or baseline moves one), so the node it sits on lives as long as it runs. The
per-step LP puts a steady database's CPU into the spare CPU of GPU nodes that come and go
with an inference load; a plan can only use the GPU nodes that stay, and an inference replica
it puts on such a node takes that node's CPU with its GPU.

Variables: ``x[t, c]`` = nodes of column ``c`` paid at step ``t`` (fractional), for each
window ``W`` of a binary split of the steps (the whole run, its halves, ..., ``depth``
levels) ``z[W, c]`` = nodes of ``c`` alive at every step of ``W``, and ``u[t, k]`` =
replicas of class ``k`` (alike workloads, ``bound.classes_of``) of step ``t`` that are not
pinned in ``t``'s leaf window and sit on a node alive through it. Minimise
``Σ_t step_h · price · x[t]`` subject to:

- **every step**: ``bound.rows_of`` of the demand of each step ``t .. t + lead`` on
  ``x[t]`` (usable sets, gangs, big replicas), and ``price · x[t] ≥ lead_floor[t]``;
- **pinning**: for each window ``W``, ``bound.rows_of`` of the non-preemptible workloads in
  the demand at every step of ``W`` on ``z[W]``: they sit, unmoved, on nodes alive
  through ``W``;
- **alive through**: ``z[W, c] ≤ z[W', c]`` for ``W'`` a half of ``W``, and
  ``z[W, c] ≤ x[t, c]`` for ``t`` in a leaf ``W``;
- **sharing the nodes that stay** (step ``t`` in leaf ``L`` with pinned work ``P``): every
  replica sits whole on one node of its usable set, either one alive through ``L`` or
  another. So for each usable set ``A`` of the step and resource ``r``:
  ``Σ_{c∈A} cap_c[r] z[L, c] ≥ P_A[r] + Σ_{k: A_k ⊆ A} req_k[r] u[t, k]`` and
  ``Σ_{c∈A} cap_c[r] (x[t, c] − z[L, c]) ≥ Σ_{k: A_k ⊆ A} req_k[r] (n_k − u[t, k])``,
  ``0 ≤ u[t, k] ≤ n_k``. Their sum is the step's own resource row; apart, an inference
  replica on a node that stays brings its CPU with its GPU (``scripts/day_never_move_bound.py``
  priced this for the synthetic day only).

A plan that holds every step's demand and never moves a non-preemptible replica gives a
feasible point (its paid fleet per step, its nodes alive through each window, how many of each
class sit on them), so the optimum is ≤ its cost. With the ``lead_floor`` rows it is ≥ the sum
of the per-step integral bounds (``lead_floor[t] ≥ floor[t]``). The comparator is a plan
that holds each step's demand (the waiting work too): a replay's autoscaler leaves new work
pending while nodes are provisioned (figures: ``never placed``, the pending percentiles), so
it can pay less than this yardstick; ``replay(held=True)`` bounds what its nodes did hold,
which is below what it paid by construction. A replay with failures moves non-preemptible work
(the failed nodes go): there the pinning rows do not hold and ``pinned=False`` leaves them out
(the lead rows still hold: every node is ordered and provisioned).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import linprog

from strata_policy.capacity.bound import GroupColumn, Rows, bound_of_rows, rows_of
from strata_policy.capacity.time_assign import Builder, assignment_rows
from strata_policy.model import Workload

DEPTH = 5  # window levels: the run, halves, quarters, ... (2^DEPTH leaves)
TIME_LIMIT_S = 600.0  # once per trace (memoised): lead floors and the joined LP together
JOINED = "joined over time, non-preemptible work pinned"
NOT_PINNED = "per step (pinning off: failures move non-preemptible work)"
NOTHING_PINNED = "per step (no non-preemptible work to pin)"
TIMED_OUT = "per step (the joined LP hit its time limit)"
INFEASIBLE = "per step (no plan holds the pinned demand within the groups' counts)"
LEAD_CUT = "lead floors past the time limit: the steps' own"


@dataclass(frozen=True, slots=True)
class TimeBound:
    """The whole replay's bound in dollars, its per-step share (``$/h``), and whether the
    joined LP was solved with pinning rows (else ``value`` is the sum of the lead floors:
    with no non-preemptible work to pin, the joined LP's optimum is exactly that sum);
    ``inexact``: the steps whose lead floor's MILP hit its time limit (a proven bound,
    looser)."""

    value: float
    per_step: tuple[float, ...]
    joined: bool
    why: str = ""  # how it was solved, for the replay's table
    inexact: frozenset[int] = frozenset()


def time_bound(
    columns: Sequence[GroupColumn],
    steps: Sequence[Sequence[Workload]],
    floors: Sequence[float],
    step_h: float,
    *,
    pinned: bool = True,
    lead: int = 0,
    depth: int = DEPTH,
    time_limit_s: float = TIME_LIMIT_S,
) -> TimeBound:
    """The bound of the module docstring; ``floors[t]`` is step ``t``'s integral bound and
    ``lead`` the steps a node is paid before it holds work. Memoised on the steps' workload
    ids (the replay asks once per autoscaler, same demand). Past ``time_limit_s`` the lead
    floors left are the steps' own maxima and the joined LP is dropped: looser, never wrong."""
    if len(steps) != len(floors):
        raise ValueError(f"{len(steps)} steps but {len(floors)} floors")
    if lead < 0:
        raise ValueError(f"lead must be >= 0 steps, not {lead}")
    key = (repr(columns), tuple(tuple(sorted(w.id for w in d)) for d in steps), tuple(floors),
           step_h, depth, lead, pinned)  # fmt: skip
    found = _MEMO.get(key)
    if found is not None:
        return found
    deadline = time.monotonic() + time_limit_s
    n_t = len(steps)
    rows = [rows_of(columns, d)[1] for d in steps] if columns else [[] for _ in steps]
    lead_floors, inexact, cut = _lead_floors(columns, rows, floors, lead, deadline)
    total = sum(lead_floors) * step_h
    windows = _windows(n_t, depth) if n_t else []
    pins = _pinned(steps, windows) if pinned else []
    why = NOTHING_PINNED if pinned else NOT_PINNED
    found = TimeBound(total, tuple(lead_floors), False, _with_cut(why, cut), inexact)
    if columns and any(pins):
        solved = None
        left = deadline - time.monotonic()
        if not cut and left > 0:
            solved = _solve(columns, steps, rows, lead_floors, step_h, lead, windows, pins, left)
        if solved is None:  # timed out: not memoised, it may finish given more time
            return TimeBound(total, tuple(lead_floors), False, _with_cut(TIMED_OUT, cut), inexact)
        found = replace(solved, inexact=inexact)
    if not cut:
        _MEMO.clear()  # one trace at a time: keep only the last
        _MEMO[key] = found
    return found


_MEMO: dict[tuple[object, ...], TimeBound] = {}


def _with_cut(why: str, cut: bool) -> str:
    """``why``, and that the lead floors were cut short by the time limit when they were."""
    return f"{why}; {LEAD_CUT}" if cut else why


def _lead_floors(
    columns: Sequence[GroupColumn],
    rows: Sequence[Rows],
    floors: Sequence[float],
    lead: int,
    deadline: float,
) -> tuple[list[float], frozenset[int], bool]:
    """Per step ``t``: the integral optimum of the rows of steps ``t .. t + lead`` together
    (module docstring), never below any of those steps' floors; past ``deadline`` only that
    maximum (valid, looser; ``cut``). Also the steps whose MILP hit its time limit."""
    n_t = len(floors)
    out: list[float] = []
    inexact: set[int] = set()
    cut = False
    for t in range(n_t):
        ahead = max(floors[t : t + lead + 1], default=0.0)
        together = [r for j in range(t, min(n_t, t + lead + 1)) for r in rows[j]]
        if lead == 0 or not columns or not together or cut:
            out.append(ahead)
            continue
        if time.monotonic() > deadline:
            cut = True
            out.append(ahead)
            continue
        lp = bound_of_rows(columns, together, integral=True)
        if not lp.exact:
            inexact.add(t)
        out.append(max(lp.value, ahead) if lp.feasible else ahead)
    return out, frozenset(inexact), cut


def _solve(
    columns: Sequence[GroupColumn],
    steps: Sequence[Sequence[Workload]],
    rows: Sequence[Rows],
    floors: Sequence[float],
    step_h: float,
    lead: int,
    windows: Sequence[Window],
    pins: Sequence[Sequence[Workload]],
    time_limit_s: float,
) -> TimeBound | None:
    """The joined LP (module docstring); None when HiGHS did not finish; the floors' sum,
    not joined, when the LP is infeasible (the groups' counts cannot hold the demand).

    Steps whose every row is the same (same leaf window, demand, demands ahead and floor)
    share one ``x``, weighted by their count: averaging an optimum's ``x`` (and assignment)
    over such steps keeps every row and the cost, so the optimum is unchanged. The synthetic
    day's 1,440 steps are a few hundred such classes."""
    n_c = len(columns)
    leaf_of = _leaf_of(len(steps), windows)
    ids = [frozenset(w.id for w in d) for d in steps]
    key_of: dict[tuple[object, ...], int] = {}
    group = []  # step -> its class
    for t in range(len(steps)):
        key = (leaf_of[t], tuple(ids[t : t + lead + 1]), floors[t])
        group.append(key_of.setdefault(key, len(key_of)))
    first = {g: t for t, g in reversed(list(enumerate(group)))}
    weight = np.bincount(np.array(group, dtype=np.int64), minlength=len(key_of))
    n_g = len(key_of)
    base = n_g * n_c
    b = Builder(base + len(windows) * n_c)
    price = [c.price for c in columns]
    for g in range(n_g):
        t = first[g]
        for j in range(t, min(len(steps), t + lead + 1)):
            for coeffs, rhs in rows[j]:
                b.row({g * n_c + c: v for c, v in enumerate(coeffs) if v}, rhs)
        if floors[t] > 0:
            b.row({g * n_c + c: p for c, p in enumerate(price) if p}, floors[t])
        zl = base + leaf_of[t] * n_c
        for c in range(n_c):
            b.row({g * n_c + c: 1.0, zl + c: -1.0}, 0.0)
    for k, (_, _, kids) in enumerate(windows):
        zk = base + k * n_c
        if pins[k]:
            for coeffs, rhs in rows_of(columns, pins[k])[1]:
                b.row({zk + c: v for c, v in enumerate(coeffs) if v}, rhs)
        for c in range(n_c):
            for kid in kids:
                b.row({base + kid * n_c + c: 1.0, zk + c: -1.0}, 0.0)
    if _ASSIGN:
        assignment_rows(b, columns, [steps[first[g]] for g in range(n_g)], _stays(steps))
    cost = np.zeros(b.n + len(b.extra_hi))
    cost[:base] = np.outer(weight, np.array(price, dtype=np.float64) * step_h).ravel()
    box = ([(c.lo, c.hi) for c in columns] * n_g + [(0.0, c.hi) for c in columns] * len(windows)
           + [(0.0, h) for h in b.extra_hi])  # fmt: skip
    a_ub, b_ub = b.matrix()
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=box, method="highs",
                  options={"time_limit": time_limit_s})  # fmt: skip
    if res.status == 2:  # no plan holds the demand within the counts: the floors stand
        return TimeBound(sum(floors) * step_h, tuple(floors), False, INFEASIBLE)
    if res.status != 0:
        return None
    x = np.asarray(res.x[:base]).reshape(n_g, n_c) @ np.array(price, dtype=np.float64)
    per_step = tuple(float(x[g]) for g in group)
    return TimeBound(max(float(res.fun), sum(floors) * step_h), per_step, True, JOINED)


def _leaf_of(n_t: int, windows: Sequence[Window]) -> list[int]:
    """Per step, the index of the leaf window holding it."""
    out = [0] * n_t
    for k, (lo, hi, kids) in enumerate(windows):
        if not kids:
            out[lo:hi] = [k] * (hi - lo)
    return out


_ASSIGN = True  # the per-column assignment rows (``time_assign``); off only to measure them


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


def _stays(steps: Sequence[Sequence[Workload]]) -> list[Workload]:
    """The non-preemptible workloads present at contiguous steps, with their spans: one
    stays on its nodes from the first step to the last."""
    return [w for _, _, w in _spans(steps)]


def _spans(steps: Sequence[Sequence[Workload]]) -> list[tuple[int, int, Workload]]:
    """``(first, last, workload)`` of each non-preemptible workload present at contiguous
    steps, by id."""
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
    return [(first[i], last[i], by_id[i]) for i in sorted(by_id)
            if runs[i] == last[i] - first[i] + 1]  # fmt: skip


def _pinned(steps: Sequence[Sequence[Workload]], windows: Sequence[Window]) -> list[list[Workload]]:
    """Per window, the non-preemptible workloads in the demand at every one of its steps."""
    spans = _spans(steps)
    return [[w for a, z, w in spans if a <= lo and z >= hi - 1] for lo, hi, _ in windows]
