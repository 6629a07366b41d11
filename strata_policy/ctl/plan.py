"""``ctl plan FILE``: a capacity plan (PlanCapacity, always a dry run) for a node-group catalog.

The file is a PlanCapacity request (``nodeGroups``, optional ``workloads``, ``policy``,
``disruptionBudget``), read like every ctl request file (quantities, line-numbered errors).
The answer prints as four short tables (nodes to add, nodes to remove or replace, what cannot
be placed, capacity shortfalls) under one line with the cost per hour and its LP lower bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from strata_policy.ctl import render
from strata_policy.ctl.decisions import file_argument, raw_option
from strata_policy.ctl.request_files import load
from strata_policy.ctl.session import Session, pass_session
from strata_policy.service.client import POLICIES, request_descriptor


@click.command("plan")
@file_argument
@click.option("--policy", type=click.Choice(POLICIES, case_sensitive=False), default=None)
@click.option("--disruption-budget", type=click.IntRange(0), default=None, help="nodes at once")
@raw_option
@pass_session
def plan(
    session: Session, file: str, policy: str | None, disruption_budget: int | None, raw: bool
) -> int:
    """What to add, remove or replace for a node-group catalog (a PlanCapacity request file)."""
    decoded = load(file, request_descriptor("PlanCapacity"), raw=raw)
    decoded.data["clusterId"] = session.require_cluster(decoded.data.get("clusterId", ""))
    if policy:
        decoded.data["policy"] = f"POLICY_{policy.upper()}"
    if disruption_budget is not None:
        decoded.data["disruptionBudget"] = disruption_budget
    response = session.call("PlanCapacity", decoded.data, decoded)
    session.show(response, lambda: text(response))
    return 0


def text(response: Mapping[str, Any]) -> str:
    """The plan as tables (see the module docstring)."""
    cost, lower = float(response.get("costPerHour", 0)), float(response.get("lowerBoundPerHour", 0))
    gap = f" ({cost / lower:.2f} × the bound)" if lower > 0 else ""
    parts = [
        f"generation {response.get('generation', 0)}{render.dry_run(True)}\n"
        f"cost {cost:.4g}/h, lower bound {lower:.4g}/h{gap}"
    ]
    ups = [
        [s["nodeGroupId"], str(s.get("count", 0)), ", ".join(s.get("workloadIds", [])) or "-"]
        for s in response.get("scaleUp", [])
    ]
    if ups:
        parts.append(render.table(["ADD GROUP", "COUNT", "WORKLOADS"], ups))
    downs = [
        [
            c["nodeId"],
            c.get("action", "").removeprefix("CONSOLIDATION_ACTION_"),
            c.get("replacementGroupId") or "-",
            f"{float(c.get('savingPerHour', 0)):.4g}",
            ", ".join(f"{m['workloadId']}→{m['nodeId']}" for m in c.get("moves", [])) or "-",
        ]
        for c in response.get("consolidation", [])
    ]
    if downs:
        parts.append(render.table(["NODE", "ACTION", "REPLACEMENT", "SAVING/H", "MOVES"], downs))
    unplaced = [
        [u["workloadId"], "; ".join(r.get("message", "") for r in u.get("reasons", []))]
        for u in response.get("unplaceable", [])
    ]
    if unplaced:
        parts.append(render.table(["UNPLACEABLE", "WHY"], unplaced))
    checks = [
        [
            k.get("kind", "").removeprefix("CAPACITY_CHECK_KIND_"),
            k.get("domain") or "cluster",
            k.get("scopeId", ""),
            render.amounts({k.get("resource", ""): k.get("short", 0)}),
        ]
        for k in response.get("checks", [])
    ]
    if checks:
        parts.append(render.table(["CHECK", "DOMAIN", "SCOPE", "SHORT"], checks))
    return "\n\n".join(parts)
