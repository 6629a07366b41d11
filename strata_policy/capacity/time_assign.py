"""The joined bound's per-column assignment rows (``time_bound``): which column's nodes hold
each replica, with a non-preemptible replica's column the same all its life.

The rows of ``bound.rows_of`` sum a resource over a usable set of columns: a GPU node's CPU
taken by a database may then be counted again for the inference replica its GPU holds, the
replica's CPU coming from a CPU node. On the synthetic day the joined LP put PostgreSQL on
the CPU of all-day GPU nodes whose GPUs served inference, whose CPU an extra CPU node gave.

Variables, per step ``t``: ``y[t, k, c]`` = replicas of class ``k`` (alike workloads of the
step that may move, ``bound.classes_of``) on nodes of column ``c`` in ``k``'s usable set;
per non-preemptible workload ``w`` present at contiguous steps: ``p[w, c]``, its replicas on
column ``c``, one value for its whole life. Rows:

- **capacity per column**: ``cap_c[r] · x[t, c] ≥ Σ_{w present at t} req_w[r] p[w, c] +
  Σ_k req_k[r] y[t, k, c]`` for every resource ``r``: the nodes of column ``c`` paid at
  ``t`` hold, each replica whole, what sits on them at ``t``;
- **everything placed**: ``Σ_c y[t, k, c] ≥ n_k``, ``Σ_c p[w, c] ≥ replicas_w``;
- **spread by a label**: a gang's replicas take distinct values of its ``spread_key``, so
  over the columns carrying value ``v``, ``Σ y[t, k, c] ≤`` the class's gangs
  (``Σ p[w, c] ≤ 1``); only when every usable column carries the label.

Valid for any integral plan that holds every step's demand and never moves a non-preemptible
replica: its fleet paid at ``t`` contains the nodes ready at ``t``; counting each replica on
the column of the node that holds it satisfies every row; a non-preemptible replica stays on
its node, hence its column. Summing the capacity rows over a usable set gives the usable-set
rows back, so these only tighten.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.sparse import coo_matrix

from strata_policy.capacity.bound import GroupColumn, classes_of
from strata_policy.capacity.catalog import spread_by_label
from strata_policy.model import Workload


class Builder:
    """Sparse ``≥`` rows, each scaled by its right-hand side (or kept as is when it is 0),
    and the variables past the first ``n`` fixed ones, with their upper bounds."""

    def __init__(self, n: int) -> None:
        self.r: list[int] = []
        self.c: list[int] = []
        self.v: list[float] = []
        self.rhs: list[float] = []
        self.n = n
        self.extra_hi: list[float] = []

    def var(self, hi: float) -> int:
        """A new variable in ``[0, hi]``; its index."""
        self.extra_hi.append(hi)
        return self.n + len(self.extra_hi) - 1

    def row(self, coeffs: dict[int, float], rhs: float, *, scaled: bool = False) -> None:
        """``coeffs · x ≥ rhs``; ``scaled``: the caller already scaled it (kept as is)."""
        scale = rhs if rhs > 0 and not scaled else 1.0
        i = len(self.rhs)
        for j, v in coeffs.items():
            self.r.append(i)
            self.c.append(j)
            self.v.append(-v / scale)  # linprog wants A_ub x ≤ b_ub
        self.rhs.append(-rhs / scale)

    def matrix(self) -> tuple[object, np.ndarray]:
        """``A_ub``, ``b_ub`` over every variable."""
        n = self.n + len(self.extra_hi)
        a = coo_matrix((self.v, (self.r, self.c)), shape=(len(self.rhs), n)).tocsr()
        return a, np.array(self.rhs, dtype=np.float64)


def assignment_rows(
    b: Builder,
    columns: Sequence[GroupColumn],
    steps: Sequence[Sequence[Workload]],
    stays: Sequence[Workload],
) -> None:
    """The module docstring's rows on ``x[t, c]`` (variable ``t · len(columns) + c``);
    ``stays``: the non-preemptible workloads present at contiguous steps."""
    n_c = len(columns)
    fixed: dict[str, list[tuple[int, int]]] = {}  # workload id -> (column, variable)
    for w in stays:
        found = classes_of(columns, [w])
        if not found:
            continue
        a, _, replicas, _ = found[0]
        fixed[w.id] = [(c, b.var(float(replicas))) for c in sorted(a)]
        b.row({v: 1.0 for _, v in fixed[w.id]}, float(replicas))
        _spread(b, columns, w, a, fixed[w.id], 1)
    by_id = {w.id: w for w in stays}
    for t, demand in enumerate(steps):
        load: dict[int, dict[str, dict[int, float]]] = {}  # column -> resource -> var -> req
        for w in demand:
            for c, v in fixed.get(w.id, ()):
                for r, amount in by_id[w.id].request.items():
                    if amount:
                        load.setdefault(c, {}).setdefault(r, {})[v] = float(amount)
        free = [w for w in demand if w.id not in fixed]
        for a, w, n, gangs in classes_of(columns, free):
            placed = [(c, b.var(float(n))) for c in sorted(a)]
            b.row({v: 1.0 for _, v in placed}, float(n))
            _spread(b, columns, w, a, placed, gangs)
            for c, v in placed:
                for r, amount in w.request.items():
                    if amount:
                        load.setdefault(c, {}).setdefault(r, {})[v] = float(amount)
        for c in sorted(load):
            for r in sorted(load[c]):
                cap = float(columns[c].capacity.get(r, 0))
                if cap <= 0:
                    continue
                coeffs = {j: -amount / cap for j, amount in load[c][r].items()}
                coeffs[t * n_c + c] = 1.0
                b.row(coeffs, 0.0, scaled=True)


def _spread(
    b: Builder,
    columns: Sequence[GroupColumn],
    w: Workload,
    usable: frozenset[int],
    placed: Sequence[tuple[int, int]],
    gangs: int,
) -> None:
    """At most ``gangs`` replicas over the columns of each value of ``w``'s spread label."""
    if not spread_by_label(w):
        return
    key = w.spread_key
    values = {c: columns[c].labels.get(key) for c in usable}
    if any(v is None for v in values.values()):
        return
    for value in sorted({v for v in values.values() if v is not None}):
        b.row({v: -1.0 for c, v in placed if values[c] == value}, -float(gangs), scaled=True)
