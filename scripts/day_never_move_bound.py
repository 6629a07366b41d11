"""A lower bound on the synthetic day's cost for any plan that never moves PostgreSQL.

    PYTHONPATH=. python scripts/day_never_move_bound.py 42 1 2 [--replay]

The replay's LP bound (``capacity.bound`` per step) may put the database's CPU into the spare
CPU of GPU nodes that exist only in the daytime. A plan cannot: a PostgreSQL replica is not
preemptible, so the nodes holding the steady clusters (those present from 0 h to the end)
exist all day. This LP prices exactly that and nothing more, so every plan that never moves a
non-preemptible replica costs at least its value (docs/capacity.md, "Against the goal").

Variables: ``s_g`` nodes of group ``g`` present all day (price × 24 h); per distinct demand of
the minutes (inference and the non-steady clusters), ``x_g`` further nodes, ``v_{z,m}`` GPUs of
model ``m`` in zone ``z``'s all-day nodes used by inference and ``q_{z,r}`` of their resource
``r`` used by the non-steady clusters. Rows, per distinct demand: the all-day nodes of each
zone hold that zone's steady replicas plus the inference they take (2 CPU and 8 GiB per replica:
4 CPU / 16 GiB per T4 of half-T4 replicas, 2 CPU / 8 GiB per A10) plus ``q``; their GPUs hold
``v``; GPUs and CPU/memory of the rest hold the rest. Every integral plan that keeps the steady
replicas where they started gives a feasible point, so the optimum is a lower bound.

The replay's own bound (``capacity/time_bound.py``) now prices the same thing in general
(each replica on one column's nodes, a non-preemptible one on the same column all its life,
one replica of a zone-spread gang per zone) plus whole nodes per step and the provisioning
lead, and comes out higher; ``--replay`` prints it beside this one, from the day's demand
per minute exactly as the replay builds it (what has arrived and not left), without running
an autoscaler.
"""

from __future__ import annotations

import sys

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import lil_matrix

from strata_policy.capacity import NodeGroup, time_bound
from strata_policy.model.resources import CPU, GPU, MEMORY
from strata_policy.simulate import autoscale_cost
from strata_policy.simulate.autoscale_catalog import GI, ZONE, day_catalog, synthetic_day
from strata_policy.simulate.trace import TimedWorkload

RESOURCES = (CPU, MEMORY)
MODELS = ("T4", "A10")
ZONES = ("a", "b", "c")
PER_GPU = {  # an inference replica's CPU (milli) and memory per milli-GPU of its model
    ("T4", CPU): 4.0, ("T4", MEMORY): 16 * GI / 1000,
    ("A10", CPU): 2.0, ("A10", MEMORY): 8 * GI / 1000,
}  # fmt: skip
Demand = tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]


def _steady(tw: TimedWorkload) -> bool:
    return tw.workload.scope_id == "db" and tw.arrival_ms == 0 and tw.departure_ms is None


def minutes(timed: list[TimedWorkload], hours: int) -> dict[Demand, int]:
    """Each distinct (inference, non-steady database) demand of the day's minutes, and how many
    minutes have it."""
    out: dict[Demand, int] = {}
    for t in range(hours * 60):
        now = t * 60_000
        inference = dict.fromkeys((*RESOURCES, *MODELS), 0)
        other = dict.fromkeys(RESOURCES, 0)
        for tw in timed:
            if tw.arrival_ms > now or (tw.departure_ms is not None and tw.departure_ms <= now):
                continue
            w = tw.workload
            if w.scope_id == "db":
                if not _steady(tw):
                    for r in RESOURCES:
                        other[r] += w.request.get(r, 0) * w.replicas
                continue
            for r in RESOURCES:
                inference[r] += w.request.get(r, 0) * w.replicas
            inference[w.gpu_model] += w.request.get(GPU, 0) * w.replicas
        key = (tuple(sorted(inference.items())), tuple(sorted(other.items())))
        out[key] = out.get(key, 0) + 1
    return out


def _cap(g: NodeGroup, r: str) -> int:
    if r in MODELS:
        return g.template.capacity.get(GPU, 0) if g.template.gpu_model == r else 0
    return g.template.capacity.get(r, 0)


def never_move_bound(seed: int, hours: int = 24) -> float:
    """The LP's optimum in dollars for the seeded day (see the module docstring)."""
    _, timed = synthetic_day(seed, hours)
    groups = day_catalog(ZONES)
    demands = minutes(timed, hours)
    steady = {  # per zone: one replica of each steady cluster
        r: sum(tw.workload.request.get(r, 0) for tw in timed if _steady(tw)) for r in RESOURCES
    }
    n_g, per = len(groups), len(groups) + 2 * len(ZONES) * 2
    zone = [g.template.label(ZONE) for g in groups]
    cost = np.zeros(n_g + len(demands) * per)
    cost[:n_g] = [g.price_per_hour * hours for g in groups]
    rows = lil_matrix((len(demands) * 16, cost.size))
    rhs: list[float] = []
    for k, (key, minutes_k) in enumerate(demands.items()):
        base = n_g + k * per
        cost[base : base + n_g] = [g.price_per_hour * minutes_k / 60 for g in groups]
        inference, other = dict(key[0]), dict(key[1])
        for zi, z in enumerate(ZONES):
            v = [base + n_g + zi * 2 + mi for mi in range(2)]
            q = [base + n_g + 6 + zi * 2 + ri for ri in range(2)]
            for ri, r in enumerate(RESOURCES):  # all-day room of zone z, per replica's share
                row = len(rhs)
                for gi, g in enumerate(groups):
                    if zone[gi] == z:
                        rows[row, gi] = -_cap(g, r) / steady[r]
                for mi, m in enumerate(MODELS):
                    rows[row, v[mi]] = PER_GPU[(m, r)] / steady[r]
                rows[row, q[ri]] = 1 / steady[r]
                rhs.append(-1.0)  # each zone holds one replica of every steady cluster
            for mi, m in enumerate(MODELS):  # all-day GPUs of zone z hold v
                row = len(rhs)
                for gi, g in enumerate(groups):
                    if zone[gi] == z:
                        rows[row, gi] = -_cap(g, m) / 1000
                rows[row, v[mi]] = 1 / 1000
                rhs.append(0.0)
        for mi, m in enumerate(MODELS):  # the rest of each model on the further nodes
            if inference[m] <= 0:
                continue
            row = len(rhs)
            for gi, g in enumerate(groups):
                rows[row, base + gi] = -_cap(g, m) / inference[m]
            for zi in range(len(ZONES)):
                rows[row, base + n_g + zi * 2 + mi] = -1 / inference[m]
            rhs.append(-1.0)
        for ri, r in enumerate(RESOURCES):  # the rest of CPU and memory on the further nodes
            need = inference[r] + other[r]
            if need <= 0:
                continue
            row = len(rhs)
            for gi, g in enumerate(groups):
                rows[row, base + gi] = -_cap(g, r) / need
            for zi in range(len(ZONES)):
                for mi, m in enumerate(MODELS):
                    rows[row, base + n_g + zi * 2 + mi] = -PER_GPU[(m, r)] / need
                rows[row, base + n_g + 6 + zi * 2 + ri] = -1 / need
            rhs.append(-1.0)
    lp = linprog(cost, A_ub=rows[: len(rhs)].tocsr(), b_ub=np.array(rhs), method="highs")
    if lp.status != 0:
        raise RuntimeError(f"the LP did not solve: {lp.message}")
    return float(lp.fun)


def replay_bound(seed: int, hours: int = 24, step_s: float = 60.0, delay_s: float = 120.0) -> float:
    """The replay's bound (``simulate --protocol autoscale``) of the seeded day, in dollars."""
    _, timed = synthetic_day(seed, hours)
    groups = day_catalog(ZONES)
    steps = []
    for t in range(hours * 3600 // int(step_s) + 2):  # the replay's steps: to the end + 1
        now = t * step_s * 1000
        steps.append([tw.workload for tw in timed if tw.arrival_ms <= now
                      and (tw.departure_ms is None or tw.departure_ms > now)])  # fmt: skip
    floors = [autoscale_cost.step_bound(groups, d)[0] for d in steps]
    lead = int(delay_s // step_s)
    joined = time_bound.time_bound(autoscale_cost.columns(groups), steps, floors, step_s / 3600,
                                   lead=lead)  # fmt: skip
    return joined.value


def main(argv: list[str]) -> int:
    """Print the bound for each seed given (default 42); ``--replay``: the replay's too."""
    replay = "--replay" in argv
    for seed in [int(a) for a in argv if a != "--replay"] or [42]:
        bound = never_move_bound(seed)
        print(f"seed {seed}: a plan that never moves PostgreSQL costs >= {bound:.2f} $")
        if replay:
            print(f"seed {seed}: the replay's bound is {replay_bound(seed):.2f} $")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
