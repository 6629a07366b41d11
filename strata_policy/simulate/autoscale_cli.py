"""``strata-policy simulate --protocol autoscale``: the figures of docs/capacity.md.

TRACE is ``day`` (the seeded synthetic day of ``autoscale_catalog.synthetic_day``) or an openb
folder / pod list (its node shapes become the catalog, priced by ``autoscale_catalog``; its
pods arrive and leave on their own clock divided by ``--speedup``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from strata_policy.capacity import NodeGroup
from strata_policy.model import Policy, Scope
from strata_policy.placement.place import PlacementOptions
from strata_policy.simulate import autoscale, autoscale_report
from strata_policy.simulate.autoscale_baselines import ClusterAutoscaler, Karpenter
from strata_policy.simulate.autoscale_catalog import day_catalog, openb_catalog, synthetic_day
from strata_policy.simulate.autoscale_failures import schedule
from strata_policy.simulate.autoscalers import StrataAutoscaler
from strata_policy.simulate.trace import TimedWorkload, load_trace

MOST = PlacementOptions(policy=Policy.MOST_ALLOCATED)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The autoscale protocol's own flags."""
    p.add_argument("--speedup", type=float, default=1.0, help="autoscale: divide trace times")
    p.add_argument("--delay", type=float, default=120.0, help="autoscale: provisioning delay, s")
    p.add_argument("--step", type=float, default=60.0, help="autoscale: decision period, s")
    p.add_argument("--hours", type=int, default=24, help="autoscale: the synthetic day's hours")
    p.add_argument(
        "--autoscalers", default="",
        help="autoscale: comma-separated names to run (default: all; see docs/capacity.md)",
    )  # fmt: skip
    p.add_argument(
        "--failures", type=int, default=0,
        help="autoscale: fail this many domains (a node, then a zone, in turn) at seeded times",
    )  # fmt: skip


def autoscalers() -> list[autoscale.Autoscaler]:
    """Strata, then each baseline with kube's default scheduler and with MOST_ALLOCATED."""
    return [
        StrataAutoscaler(),
        ClusterAutoscaler("least-waste"),
        ClusterAutoscaler("price"),
        Karpenter(),
        ClusterAutoscaler("least-waste", placement=MOST),
        ClusterAutoscaler("price", placement=MOST),
        Karpenter(placement=MOST, name="karpenter+most-allocated"),
    ]


def inputs(
    trace: str, args: argparse.Namespace
) -> tuple[list[NodeGroup], list[Scope], list[TimedWorkload]]:
    """The catalog, scopes and timed workloads for TRACE."""
    if trace == "day":
        scopes, timed = synthetic_day(_seed(args), args.hours)
        return day_catalog(), scopes, timed
    loaded = load_trace(Path(trace), args.nodes)
    timed = list(loaded.workloads)
    if args.head:
        timed = timed[: args.head]
    scopes = list(loaded.scopes) or sorted(
        {Scope(id=tw.workload.scope_id) for tw in timed}, key=lambda s: s.id
    )
    return openb_catalog(loaded.nodes), scopes, timed


def _chosen(args: argparse.Namespace) -> list[autoscale.Autoscaler]:
    """The autoscalers ``--autoscalers`` names (all when empty); an unknown name is an error."""
    every = autoscalers()
    if not args.autoscalers:
        return every
    names = [n for n in str(args.autoscalers).split(",") if n]
    known = {a.name: a for a in every}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown autoscaler {', '.join(unknown)}: one of {', '.join(known)}")
    return [known[n] for n in names]


def _seed(args: argparse.Namespace) -> int:
    """The first of ``--seeds``: the synthetic day's and the failures' seed."""
    return int(str(args.seeds).split(",")[0].split("-")[0])


def run(args: argparse.Namespace) -> int:
    """Replay each trace under every autoscaler; print the table; CSV and plot when asked."""
    timelines = []
    for trace in args.traces:
        groups, scopes, timed = inputs(str(trace), args)
        rows = []
        seed = _seed(args)
        end_s = max(((tw.departure_ms or tw.arrival_ms) for tw in timed), default=0) / 1000
        failures = schedule(seed, end_s / args.speedup, args.failures) if args.failures else []
        for scaler in _chosen(args):
            t = autoscale.replay(
                scaler, groups, scopes, timed,
                speedup=args.speedup, step_s=args.step, delay_s=args.delay,
                failures=failures, seed=seed,
            )  # fmt: skip
            timelines.append(t)
            rows.append(autoscale.summarise(t, args.step))
            if not args.no_progress:
                print(f"{trace}: {scaler.name} done", file=sys.stderr, flush=True)
        print(
            f"\n{trace} (speedup {args.speedup:g}, step {args.step:g} s, delay {args.delay:g} s)\n"
        )
        print(autoscale_report.table(rows))
        print()
        print(autoscale_report.breakdown(rows))
    if args.csv:
        autoscale_report.write_csv(args.csv, timelines)
    if args.plot:
        autoscale_report.plot(args.plot, timelines)
    return 0
