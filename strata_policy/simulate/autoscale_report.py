"""The autoscaling replay's outputs: the table, the cost breakdown, the CSV and the plot."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from strata_policy.simulate.autoscale import Summary, Timeline


def table(rows: Sequence[Summary]) -> str:
    """The figures side by side (markdown), then one line on the bound: integral at every
    step, or how many steps hit the solver's time limit (their bound is the one proven by
    then: looser, never wrong). ``never placed`` = workloads whose departure passed while
    they waited (counted in the pending percentiles until their departure); those that
    arrived and left between two steps are counted on a line of their own."""
    lines = [
        "| autoscaler | cost $ | lower bound $ | cost / bound | pending p50 s | pending p99 s "
        "| never placed | evictions | node churn | guarantee violations |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in rows:
        lines.append(
            f"| {s.name} | {s.cost:.2f} | {s.lower_bound:.2f} | {s.ratio:.3f} | {s.p50_s:.0f} "
            f"| {s.p99_s:.0f} | {s.never_placed} | {s.evictions} | {s.churn} "
            f"| {s.violations}/{s.checked} |"
        )
    lines.append("")
    lines.append(bound_note(rows))
    unseen = max((s.unseen for s in rows), default=0)
    if unseen:
        lines.append(
            f"{unseen} workloads arrived and left between two steps (seen by no decision, "
            "the same for every autoscaler): not in the pending percentiles"
        )
    return "\n".join(lines)


def bound_note(rows: Sequence[Summary]) -> str:
    """How the bound was solved: integral optimum at every step, or where it was not; and
    whether it was joined over time (non-preemptible work pinned; not with failures)."""
    inexact = [s for s in rows if s.inexact]
    hows = sorted({s.bound_how for s in rows if s.bound_how})
    how = "; " + ", ".join(hows) if hows else ""
    if not inexact:
        return f"bound: integral node counts (MILP), optimal at every step{how}"
    worst = max(inexact, key=lambda s: s.inexact)
    return (
        f"bound: integral node counts (MILP){how}; {worst.inexact} of {worst.steps} steps "
        f"({worst.name}) hit the time limit and count the bound proven by then (looser)"
    )


def breakdown(rows: Sequence[Summary]) -> str:
    """Where each autoscaler's cost above the bound goes (markdown): nodes ordered but not yet
    ready, ready nodes holding nothing, the unused share of the busy ones; nodes added and
    removed; failed domains (``--failures``): how many were actually short, how many of those
    the N+1 check had not named (missed), how many it named that re-placed (false alarms)."""
    lines = [
        "| autoscaler | cost $ | over bound $ | provisioning $ | empty $ | idle $ | added "
        "| removed | failures: short / missed / false alarms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in rows:
        lines.append(
            f"| {s.name} | {s.cost:.2f} | {s.cost - s.lower_bound:.2f} | {s.provisioning:.2f} "
            f"| {s.empty:.2f} | {s.idle:.2f} | {s.added} | {s.removed} "
            f"| {s.failures}: {s.short} / {s.missed} / {s.false_alarms} |"
        )
    return "\n".join(lines)


def write_csv(path: Path, timelines: Sequence[Timeline]) -> None:
    """Per step: autoscaler, hour, cost per hour, bound per hour, pending workloads, then the
    breakdown per hour (provisioning, empty, idle) and the ready nodes per group
    (``group:count`` separated by spaces, groups by id): where the cost goes, per hour and
    group."""
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(
            ["autoscaler", "hour", "cost_per_hour", "bound_per_hour", "pending",
             "provisioning_per_hour", "empty_per_hour", "idle_per_hour", "ready_nodes"]
        )  # fmt: skip
        for t in timelines:
            for i, row in enumerate(
                zip(t.times_h, t.cost_per_hour, t.bound_per_hour, t.pending, strict=True)
            ):
                extra = [
                    f"{t.provisioning_per_hour[i]:.4f}" if i < len(t.provisioning_per_hour) else "",
                    f"{t.empty_per_hour[i]:.4f}" if i < len(t.empty_per_hour) else "",
                    f"{t.idle_per_hour[i]:.4f}" if i < len(t.idle_per_hour) else "",
                    " ".join(f"{g}:{n}" for g, n in sorted(t.ready[i].items()))
                    if i < len(t.ready) else "",
                ]  # fmt: skip
                out.writerow(
                    [t.name, f"{row[0]:.4f}", f"{row[1]:.4f}", f"{row[2]:.4f}", row[3], *extra]
                )


def plot(path: Path, timelines: Sequence[Timeline]) -> None:
    """Cost per hour and pending workloads over time, one line per autoscaler."""
    import matplotlib  # noqa: PLC0415  # optional dependency (the sim extra)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for t in timelines:
        top.plot(t.times_h, t.cost_per_hour, label=t.name)
        bottom.plot(t.times_h, t.pending, label=t.name)
    if timelines:
        top.plot(timelines[0].times_h, timelines[0].bound_per_hour, "k--", label="LP bound")
    top.set_ylabel("$ / hour")
    bottom.set_ylabel("pending workloads")
    bottom.set_xlabel("simulated hours")
    top.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
