"""The least a plan can cost on the synthetic day when its GPU nodes follow the GPU load.

    PYTHONPATH=. python scripts/day_follow_floor.py 42 1 2 [--line 333.93,336.52,335.35]

A plan **follows the load** when, at every 15-minute slot, it runs exactly the GPU nodes the
inference replicas of that slot need (``t4-1``: ⌈half-T4 replicas / 2⌉, ``a10-1``: one per
vision replica) and no more. Such a plan pays those GPU nodes (counted here only while they
are ready: the provisioning lead is left out, which only lowers the figure), plus the CPU
nodes that hold the PostgreSQL replicas the GPU nodes' spare room does not. A replica is never
moved, so a GPU node holding one stays all the replica's life: the GPU nodes a cluster can use
are at most the fewest of that model over its life (for the steady clusters, the night's 3
``t4-1`` and 2 ``a10-1``). A GPU node whose GPU is full keeps 4 CPUs (``t4-1``: two half-T4
replicas of 2 CPUs) or 6 (``a10-1``: one replica of 2 CPUs) for PostgreSQL; memory is 4 GiB
per CPU on every side, so CPU decides. Per minute, relaxing in the plan's favour (each cluster
alive then gets the largest such pool of any of them; the GPU nodes' zones chosen afresh), the
floor takes the fewest ``m-4`` nodes over every zone layout of that pool, packing each zone's
replicas (one per cluster) exactly into the GPU nodes' spare room and ``m-4`` nodes
(``m-16`` is priced as four ``m-4``, so it never helps). ``t4-4`` is priced as four ``t4-1``
and four ``m-4`` nodes exactly, so it never lowers the figure either.

With ``--keep K`` (a ``t4`` or ``a10`` count, e.g. ``--keep t4=1``), the plan also keeps K
more GPU nodes of that model all day, paid whenever the load would not have them: the figure a
plan reaches that buys, at 0 h, a GPU node the night does not need because it knows the
daytime load will (no autoscaler that sees only the past can know that on the day's first
hour).

``--line`` takes the best baseline's cost per seed and prints the 10 % line beside the floor.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math

from strata_policy.model.resources import CPU
from strata_policy.simulate.autoscale_catalog import synthetic_day

PRICE = {"t4": 0.786, "a10": 1.226, "m4": 0.192}
SPARE = {"t4": 4, "a10": 6}  # CPUs a GPU node keeps for PostgreSQL with its GPU full
SLOT_MIN = 15


def _loads(seed: int) -> tuple[list[dict[str, int]], list[tuple[int, int, int]]]:
    """Per 15-minute slot, the GPU nodes the load needs; PostgreSQL clusters as (CPUs per
    replica, first minute, last minute + 1)."""
    _, timed = synthetic_day(seed, 24)
    halves: dict[int, int] = {}
    vision: dict[int, int] = {}
    clusters = []
    for tw in timed:
        w = tw.workload
        start = tw.arrival_ms // 60_000
        if w.scope_id == "db":
            end = 24 * 60 if tw.departure_ms is None else tw.departure_ms // 60_000
            clusters.append((w.request[CPU] // 1000, start, end))
        elif w.gpu_model == "T4":
            halves[start // SLOT_MIN] = halves.get(start // SLOT_MIN, 0) + 1
        else:
            vision[start // SLOT_MIN] = vision.get(start // SLOT_MIN, 0) + 1
    slots = [
        {"t4": math.ceil(halves.get(s, 0) / 2), "a10": vision.get(s, 0)}
        for s in range(24 * 60 // SLOT_MIN)
    ]
    return slots, clusters


Item = tuple[int, int, int]  # a replica: CPUs, and the T4 and A10 pools its cluster may use
Bin = tuple[int, int, int]  # a GPU node's spare CPUs left, its model (0 T4, 1 A10), its rank


def _cpu_nodes(items: tuple[Item, ...]) -> int:
    """Fewest 4-CPU nodes for ``items`` (first-fit decreasing, optimal for sizes dividing 4)."""
    n1 = sum(1 for c, _, _ in items if c == 1)
    n2 = sum(1 for c, _, _ in items if c == 2)
    n4 = sum(1 for c, _, _ in items if c == 4)
    free = 2 if n2 % 2 else 0  # an odd 2-CPU replica leaves half a node
    return n4 + (n2 + 1) // 2 + max(0, math.ceil((n1 - free) / 4))


@functools.cache
def _with_cpu(items: tuple[Item, ...], bins: tuple[Bin, ...], cpu: tuple[Item, ...]) -> int:
    """Fewest 4-CPU nodes for one zone's replicas: ``cpu`` already go to CPU nodes, ``items``
    are still to place, each tried on every GPU node's spare room (``bins``) its cluster may
    use (a node of rank r serves a cluster whose pool of that model is > r) and on the CPU
    nodes: exact."""
    if not items:
        return _cpu_nodes(cpu)
    head, rest = items[0], items[1:]
    best = _with_cpu(rest, bins, tuple(sorted((*cpu, head), reverse=True)))
    size, t4, a10 = head
    for k, (cap, model, rank) in enumerate(bins):
        if cap >= size and rank < (t4, a10)[model]:
            left = tuple(sorted((*bins[:k], (cap - size, model, rank), *bins[k + 1 :])))
            best = min(best, _with_cpu(rest, left, cpu))
    return best


def _fewest(items: tuple[Item, ...]) -> int:
    """Fewest ``m-4`` nodes over the three zones and every zone layout of the GPU nodes the
    clusters of ``items`` may use (ranked: rank r serves a cluster whose pool is > r). Nodes
    whose ranks serve the same clusters are alike, so a layout is how many of each kind go to
    each zone."""
    kinds: list[tuple[Bin, int]] = []  # (a node of the kind, how many)
    for model, name in enumerate(("t4", "a10")):
        pools = sorted({i[1 + model] for i in items} - {0})
        low = 0
        for high in pools:
            kinds.append(((SPARE[name], model, low), high - low))
            low = high
    best = math.inf
    for layout in itertools.product(*(_splits(n) for _, n in kinds)):
        total = 0
        for z in range(3):
            bins = tuple(sorted(nd for (nd, _), split in zip(kinds, layout, strict=True)
                                for _ in range(split[z])))  # fmt: skip
            total += _with_cpu(items, bins, ())
            if total >= best:
                break
        best = min(best, total)
    return int(best)


def _splits(n: int) -> list[tuple[int, int, int]]:
    return [(i, j, n - i - j) for i in range(n + 1) for j in range(n + 1 - i)]


def floor(seed: int, keep: dict[str, int]) -> tuple[float, float, float]:
    """(GPU $, m-4 $, total $) of the best plan that follows the load (plus ``keep``)."""
    slots, clusters = _loads(seed)
    gpu = 0.0
    for s in slots:
        for m in ("t4", "a10"):
            gpu += max(s[m], keep.get(m, 0) + _night(slots, m)) * PRICE[m] / 4
    cpu = 0.0
    memo: dict[tuple[Item, ...], int] = {}
    for minute in range(24 * 60):
        items = []
        for c, a, b in clusters:
            if a <= minute < b:
                life = range(a // SLOT_MIN, (b - 1) // SLOT_MIN + 1)
                pools = [min(slots[s][m] for s in life) + keep.get(m, 0) for m in ("t4", "a10")]
                items.append((c, pools[0], pools[1]))
        key = tuple(sorted(items, reverse=True))
        if key not in memo:
            memo[key] = _fewest(key) if key else 0
        cpu += memo[key] * PRICE["m4"] / 60
    return gpu, cpu, gpu + cpu


def _night(slots: list[dict[str, int]], m: str) -> int:
    return min(s[m] for s in slots)


def main() -> None:
    """Print the floor per seed."""
    p = argparse.ArgumentParser()
    p.add_argument("seeds", nargs="+", type=int)
    p.add_argument("--keep", default="", help="e.g. t4=1,a10=1: GPU nodes kept all day")
    p.add_argument("--line", default="", help="the best baseline's cost per seed")
    args = p.parse_args()
    keep = {k: int(v) for k, v in (kv.split("=") for kv in args.keep.split(",") if kv)}
    best = [float(x) for x in args.line.split(",") if x]
    print("| seed | GPU nodes $ | m-4 $ | floor $ | best baseline $ | −10 % line $ |")
    print("|---|---|---|---|---|---|")
    for i, seed in enumerate(args.seeds):
        gpu, cpu, total = floor(seed, keep)
        base = f"{best[i]:.2f} | {0.9 * best[i]:.2f}" if i < len(best) else "— | —"
        print(f"| {seed} | {gpu:.2f} | {cpu:.2f} | {total:.2f} | {base} |")


if __name__ == "__main__":
    main()
