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

``solve`` is that LP; its dual prices (per unit of each resource, per milli-GPU of each model
set) are the value the scale-up greedy assigns to what a node would hold. ``lower_bound`` is
the bound plans and the replay state: the same LP with tighter rows that every integral plan
still satisfies (usable sets per workload, nodes a spread gang or big replicas force; see its
docstring), so it stays ≤ the cost of any feasible plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from strata_policy.capacity.catalog import could_hold
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
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LpResult:
    """The optimum, and dual prices per resource and per GPU model set (0 where slack).

    ``exact`` is False when an integral bound (``lower_bound(integral=True)``) hit its time
    limit: ``value`` is then HiGHS's best proven bound (never below the LP's), not the
    integral optimum; still a valid lower bound, only a looser one."""

    value: float
    feasible: bool
    resource_prices: Mapping[str, float]
    model_prices: Mapping[frozenset[str], float]
    exact: bool = True


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


# The tight bound: the same LP with rows per usable set, and node-count rows.

_SHARE_LIMITS = (1, 2, 3)  # items above 1/(m+1) of every usable node: at most m per node
MILP_TIME_LIMIT_S = 2.0  # per integral solve; past it the bound proven so far (exact=False)
_MEMO_SIZE = 16384
_MEMO: dict[tuple[object, ...], LpResult] = {}


@dataclass(frozen=True, slots=True)
class _Demand:
    """Workloads alike (request, selector, model, spread, gang size): how many replicas."""

    exemplar: Workload
    replicas: int
    gangs: int


def lower_bound(
    columns: Sequence[GroupColumn],
    workloads: Sequence[Workload],
    fixed: Sequence[Node] = (),
    floors: Mapping[str, float] | None = None,
    *,
    integral: bool = False,
    time_limit_s: float = MILP_TIME_LIMIT_S,
) -> LpResult:
    """The LP of the module docstring, made tighter and still valid for any integral plan:

    - **usable sets**: a workload can only use the columns (and fixed nodes) one of its replicas
      fits (``could_hold``: selector, GPU model, every resource, a GPU share needs a device).
      For each distinct usable set ``A`` and resource ``r``:
      ``Σ_{c ∈ A} cap_c[r] x_c ≥ Σ_{w: A_w ⊆ A} D_w[r]`` (a plan holds every such ``w`` inside
      ``A``). The old rows are the case ``A`` = every column.
    - **gangs and spread**: a gang of ``k`` replicas spread by hostname (or by a label every
      usable column carries) needs ``k`` distinct nodes: ``Σ_{c ∈ A_w} x_c ≥ k``.
    - **big replicas**: replicas above ``1/(m+1)`` of a resource ``r`` on every node they could
      use go at most ``m`` to a node: ``Σ_{c ∈ A} x_c ≥ (their count) / m``, per ``r``.

    Fixed nodes (in no group, free) count as columns of price 0 held at their number. A
    workload no column or fixed node can hold is left out (no plan holds it).

    **integral** (the replay's bound): the same rows with every ``x_c`` an integer (a MILP,
    HiGHS branch and bound). Valid: a plan buys whole nodes, so its counts are an integral
    point of these rows and its cost is ≥ the integral optimum ≥ the LP optimum. This is the
    indivisibility the LP misses: 6 CPUs on 4-CPU nodes cost 2 nodes, not 1.5; a spread gang
    of 3 costs three whole nodes, not three fractions of the cheapest. The value
    reported is HiGHS's *proven* dual bound (``mip_dual_bound``, ≤ the integral optimum),
    never an incumbent, and at least the LP's optimum; past ``time_limit_s`` it is whatever
    was proven by then, with ``exact=False`` (never a wrong number, only a looser one).
    """
    cols, rows = rows_of(columns, workloads, fixed, floors)
    return _solve_rows(cols, rows, integral, time_limit_s)


Rows = list[tuple[list[float], float]]


def rows_of(
    columns: Sequence[GroupColumn],
    workloads: Sequence[Workload],
    fixed: Sequence[Node] = (),
    floors: Mapping[str, float] | None = None,
) -> tuple[list[GroupColumn], Rows]:
    """``lower_bound``'s columns (``columns`` then one per fixed-node shape) and rows
    (``coeffs · x ≥ rhs``); every integral plan holding ``workloads`` satisfies them."""
    keys = {k for w in workloads for k in w.node_selector} | {w.spread_key for w in workloads}
    probes, cols = _probes(columns, fixed, keys)
    demands = _demands(workloads)
    usable: dict[frozenset[int], list[_Demand]] = {}
    for d in demands:
        a = frozenset(i for i, p in enumerate(probes) if could_hold(p, d.exemplar))
        if a:
            usable.setdefault(a, []).append(d)
    sets = sorted(usable, key=lambda a: (len(a), sorted(a)))
    rows: Rows = []
    for a in sets:
        inside = [d for b in sets if b <= a for d in usable[b]]
        need: dict[str, int] = {}
        for d in inside:
            for r, amount in d.exemplar.request.items():
                need[r] = need.get(r, 0) + amount * d.replicas
        for r in sorted(need):
            if need[r] > 0:
                rows.append(([float(c.capacity.get(r, 0)) if i in a else 0.0
                              for i, c in enumerate(cols)], float(need[r])))  # fmt: skip
        nodes = _nodes_needed(a, inside, usable, probes)
        if nodes > 0:
            rows.append(([1.0 if i in a else 0.0 for i in range(len(cols))], nodes))
    for g, floor in sorted((floors or {}).items()):
        if floor > 0:
            rows.append(([1.0 if c.group == g else 0.0 for c in cols], floor))
    return cols, rows


def classes_of(
    columns: Sequence[GroupColumn], workloads: Sequence[Workload]
) -> list[tuple[frozenset[int], Workload, int, int]]:
    """``workloads`` as classes of alike ones (``_demands``): each class's usable set (the
    indexes of the columns one of its replicas fits, ``could_hold``), an exemplar, its
    replicas and its gangs (workloads). A class no column holds is left out (no plan holds
    it), as in ``rows_of``."""
    keys = {k for w in workloads for k in w.node_selector} | {w.spread_key for w in workloads}
    probes, _ = _probes(columns, (), keys)
    out = []
    for d in _demands(workloads):
        a = frozenset(i for i, p in enumerate(probes) if could_hold(p, d.exemplar))
        if a:
            out.append((a, d.exemplar, d.replicas, d.gangs))
    return out


def bound_of_rows(
    cols: Sequence[GroupColumn],
    rows: Sequence[tuple[list[float], float]],
    *,
    integral: bool = False,
    time_limit_s: float = MILP_TIME_LIMIT_S,
) -> LpResult:
    """``min Σ price·x`` over ``rows`` (``coeffs·x ≥ rhs``) and the columns' boxes: the
    solve behind ``lower_bound``, for rows put together by a caller (``time_bound`` asks for
    a fleet that holds several steps' demands at once, each by its own rows)."""
    return _solve_rows(cols, rows, integral, time_limit_s)


def _probes(
    columns: Sequence[GroupColumn], fixed: Sequence[Node], keys: set[str]
) -> tuple[list[Node], list[GroupColumn]]:
    """A node per column (for ``could_hold``) and the columns with the fixed nodes appended
    (one per shape, price 0, count fixed; only the label ``keys`` a workload selects or
    spreads on tell shapes apart)."""
    probes = [Node("", dict(c.capacity), dict(c.labels), False, c.gpu_model) for c in columns]
    cols = list(columns)
    shapes: dict[
        tuple[tuple[tuple[str, int], ...], tuple[tuple[str, str], ...], str], tuple[Node, int]
    ]
    shapes = {}
    for nd in fixed:
        if nd.unschedulable:
            continue
        labels = tuple(sorted((k, v) for k, v in nd.labels.items() if k in keys))
        key = (tuple(sorted(nd.capacity.items())), labels, nd.gpu_model)
        found = shapes.get(key)
        shapes[key] = (nd, found[1] + 1 if found else 1)
    for (_, labels, _), (nd, n) in shapes.items():
        probes.append(Node("", dict(nd.capacity), dict(labels), False, nd.gpu_model))
        cols.append(GroupColumn(0.0, dict(nd.capacity), nd.gpu_model, float(n), float(n)))
    return probes, cols


def _demands(workloads: Sequence[Workload]) -> list[_Demand]:
    """Workloads alike as one demand. Keys are unsorted item tuples (fast on 10⁴ workloads):
    two keys for one shape only split a demand, which leaves every row the same."""
    by_key: dict[tuple[object, ...], _Demand] = {}
    for w in workloads:
        spread = w.spread_key
        key = (
            tuple(w.request.items()), tuple(w.node_selector.items()) if w.node_selector else (),
            w.gpu_model, spread, w.replicas if spread else 1,
        )  # fmt: skip
        found = by_key.get(key)
        if found is None:
            by_key[key] = _Demand(w, w.replicas, 1)
        else:
            by_key[key] = _Demand(found.exemplar, found.replicas + w.replicas, found.gangs + 1)
    return [by_key[k] for k in sorted(by_key, key=repr)]


def _nodes_needed(
    a: frozenset[int],
    inside: Sequence[_Demand],
    usable: Mapping[frozenset[int], Sequence[_Demand]],
    probes: Sequence[Node],
) -> float:
    """The most nodes of ``a`` that the gangs and the big replicas inside it force."""
    best = 0.0
    own = {id(d): b for b, ds in usable.items() for d in ds}
    for d in inside:
        w = d.exemplar
        if w.spread_key and w.replicas > 1:
            b = own[id(d)]
            if all(probes[i].label(w.spread_key) is not None for i in b):
                best = max(best, float(w.replicas))
    resources = sorted({r for d in inside for r in d.exemplar.request})
    for r in resources:
        shares = [(d.replicas, _share(d.exemplar, r, own[id(d)], probes)) for d in inside]
        for m in _SHARE_LIMITS:
            big = sum(k for k, share in shares if share > 1 / (m + 1))
            best = max(best, big / m)
    return best


def _share(w: Workload, r: str, usable: frozenset[int], probes: Sequence[Node]) -> float:
    """The least, over the nodes ``w`` could use, of its share of resource ``r`` there."""
    amount = w.request.get(r, 0)
    if amount <= 0:
        return 0.0
    return min(amount / probes[i].capacity[r] for i in usable)


def _solve_rows(
    cols: Sequence[GroupColumn],
    rows: Sequence[tuple[list[float], float]],
    integral: bool = False,
    time_limit_s: float = MILP_TIME_LIMIT_S,
) -> LpResult:
    """``min Σ price·x`` over ``rows`` (``coeffs·x ≥ rhs``, each scaled by its rhs); with
    ``integral``, over integral ``x`` (see ``lower_bound``). The integral solves are memoised:
    the replay asks for the same demand at many steps and for every autoscaler (a plan's LP
    is not: it is solved once per plan, and a memo would flatter repeated benchmark runs)."""
    if not cols:
        return LpResult(0.0, not rows, {}, {})
    if not rows:
        return LpResult(sum(c.price * c.lo for c in cols), True, {}, {})
    a_ub = -np.array([[v / rhs for v in coeffs] for coeffs, rhs in rows], dtype=np.float64)
    cost = np.array([c.price for c in cols], dtype=np.float64)
    box = np.array([(c.lo, c.hi) for c in cols], dtype=np.float64)
    key = (a_ub.tobytes(), a_ub.shape, cost.tobytes(), box.tobytes())
    found = _MEMO.get(key) if integral else None
    if found is not None:
        return found
    res = linprog(cost, A_ub=a_ub, b_ub=-np.ones(len(rows)), bounds=box, method="highs")
    if res.status != 0:
        return LpResult(0.0, False, {}, {})
    if not integral:
        return LpResult(float(res.fun), True, {}, {})
    out = _integral(cost, a_ub, box, float(res.fun), time_limit_s)
    if len(_MEMO) >= _MEMO_SIZE:
        _MEMO.clear()
    _MEMO[key] = out
    return out


def _integral(
    cost: np.ndarray, a_ub: np.ndarray, box: np.ndarray, lp: float, time_limit_s: float
) -> LpResult:
    """The integral optimum's proven lower bound (never below ``lp``, the relaxation's)."""
    lo = np.ceil(box[:, 0] - 1e-9)  # an integral count within [lo, hi]
    hi = np.floor(box[:, 1] + 1e-9)
    res = milp(
        cost,
        constraints=LinearConstraint(-a_ub, lb=np.ones(len(a_ub)), ub=np.inf),
        integrality=np.ones(len(cost)),
        bounds=Bounds(lo, hi),
        options={"time_limit": time_limit_s, "mip_rel_gap": 1e-6},
    )
    proven = getattr(res, "mip_dual_bound", None)
    if res.status == 2:  # integral infeasible (a box too narrow for whole nodes): the LP stands
        return LpResult(lp, True, {}, {}, exact=False)
    if proven is None or not np.isfinite(proven):
        return LpResult(lp, True, {}, {}, exact=False)
    return LpResult(max(float(proven), lp), True, {}, {}, exact=res.status == 0)
