"""The LP lower bound on the cost of holding a demand over the catalog (DESIGN §8).

    minimise   Σ_g price_g · x_g
    subject to Σ_g cap_g[r] · x_g ≥ D[r] − fixed[r]                 for every resource r
               Σ_{g: model_g ∈ M} gpu_g · x_g ≥ D_M − fixed_M       for every GPU model set M
               lo_g ≤ x_g ≤ hi_g                                    (fractional counts)

``D[r]`` sums ``request × replicas`` of every workload the plan holds; ``D_M`` the GPU milli of
the workloads whose ``gpu_model`` allows only models in ``M``; ``fixed`` is the capacity of the
nodes in no group (they cost 0 and stay). An integral plan is a feasible point, so the optimum
is ≤ its cost: every plan states its distance from optimal. Solved by HiGHS through
``scipy.optimize.linprog`` (a dual simplex: exact up to its 1e-7 feasibility tolerance); each
row is scaled by its right-hand side so bytes and millicores weigh alike.

``lp_prices`` returns the same LP's dual prices (per unit of each resource, per milli-GPU of
each model set): the value the scale-up greedy assigns to what a node would hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from strata_policy.model import Node, Workload
from strata_policy.model.resources import GPU


@dataclass(frozen=True, slots=True)
class GroupColumn:
    """One LP variable: a group's price, per-node capacity and model, count bounds."""

    price: float
    capacity: Mapping[str, int]
    gpu_model: str
    lo: float
    hi: float
    group: str = ""


@dataclass(frozen=True, slots=True)
class LpResult:
    """The optimum, and dual prices per resource and per GPU model set (0 where slack)."""

    value: float
    feasible: bool
    resource_prices: Mapping[str, float]
    model_prices: Mapping[frozenset[str], float]


def demand(workloads: Sequence[Workload]) -> tuple[dict[str, int], dict[frozenset[str], int]]:
    """Per resource, and per GPU model set, the totals of ``workloads``."""
    per_resource: dict[str, int] = {}
    per_models: dict[frozenset[str], int] = {}
    get = per_resource.get
    for w in workloads:
        k = w.replicas
        for r, amount in w.request.items():
            per_resource[r] = get(r, 0) + amount * k
        if w.gpu_model:  # the common case (no model) skips building the set
            models = w.gpu_models
            gpu = w.request.get(GPU, 0) * k
            if models and gpu:
                per_models[models] = per_models.get(models, 0) + gpu
    return per_resource, per_models


def solve(
    columns: Sequence[GroupColumn],
    per_resource: Mapping[str, int],
    per_models: Mapping[frozenset[str], int],
    fixed: Sequence[Node] = (),
    floors: Mapping[str, float] | None = None,
) -> LpResult:
    """Solve the LP above; an infeasible demand gives ``feasible=False`` and value 0.

    ``floors[g]`` adds the row Σ x_c ≥ floor over the columns of group ``g`` (a group whose
    nodes are several columns: its existing nodes by shape, and new nodes of its template)."""
    fixed_r: dict[str, int] = {}
    fixed_m: dict[frozenset[str], int] = {}
    for nd in fixed:
        for r, amount in nd.capacity.items():
            fixed_r[r] = fixed_r.get(r, 0) + amount
        for models in per_models:
            if nd.gpu_model in models:
                fixed_m[models] = fixed_m.get(models, 0) + nd.capacity.get(GPU, 0)
    rows: list[tuple[str | frozenset[str], list[float], float]] = []
    for r in sorted(per_resource):
        need = per_resource[r] - fixed_r.get(r, 0)
        if need > 0:
            rows.append((r, [float(c.capacity.get(r, 0)) / need for c in columns], 1.0))
    for models in sorted(per_models, key=sorted):
        need = per_models[models] - fixed_m.get(models, 0)
        if need > 0:
            coeffs = [
                float(c.capacity.get(GPU, 0)) / need if c.gpu_model in models else 0.0
                for c in columns
            ]
            rows.append((models, coeffs, 1.0))
    demand_rows = len(rows)
    for g, floor in sorted((floors or {}).items()):
        if floor > 0:
            rows.append((g, [1.0 / floor if c.group == g else 0.0 for c in columns], 1.0))
    lo = sum(c.price * c.lo for c in columns)
    if not columns:
        return LpResult(0.0, not rows, {}, {})
    bounds = [(c.lo, c.hi) for c in columns]
    cost = np.array([c.price for c in columns], dtype=np.float64)
    if not rows:
        return LpResult(lo, True, {}, {})
    a_ub = -np.array([coeffs for _, coeffs, _ in rows], dtype=np.float64)
    b_ub = -np.ones(len(rows), dtype=np.float64)
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0:
        return LpResult(0.0, False, {}, {})
    duals = -np.asarray(res.ineqlin.marginals, dtype=np.float64)
    r_prices: dict[str, float] = {}
    m_prices: dict[frozenset[str], float] = {}
    for (
        (key, _, _),
        dual,
    ) in zip(rows[:demand_rows], duals.tolist()[:demand_rows], strict=True):
        need = (
            per_resource[key] - fixed_r.get(key, 0)
            if isinstance(key, str)
            else (per_models[key] - fixed_m.get(key, 0))
        )
        unit = max(dual, 0.0) / need  # undo the row scaling: price per base unit
        if isinstance(key, str):
            r_prices[key] = unit
        else:
            m_prices[key] = unit
    return LpResult(float(res.fun), True, r_prices, m_prices)


def value_of(w: Workload, prices: LpResult) -> float:
    """One replica of ``w`` at the LP's dual prices."""
    total = sum(amount * prices.resource_prices.get(r, 0.0) for r, amount in w.request.items())
    gpu = w.request.get(GPU, 0)
    models = w.gpu_models
    if gpu and models:
        total += gpu * sum(p for m, p in prices.model_prices.items() if models <= m)
    return total
