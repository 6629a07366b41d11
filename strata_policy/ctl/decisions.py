"""``ctl admit|place|reclaim|release``: send a decision request, print the answer.

A "no" (DENIED, UNPLACED, NEEDS_RECLAIM, a reclaim with no victims) is a normal answer and exits
0, as the API treats it; ``--fail-on-deny`` makes it exit 1 for scripts that must stop on one.
Request files are read by ``ctl.request_files`` (quantities, line-numbered errors) and their
resource names checked against the cluster's; a dry run says so in its output.
"""

from __future__ import annotations

from typing import Any

import click

from strata_policy.ctl import render
from strata_policy.ctl.request_files import Decoded, load
from strata_policy.ctl.resource_names import check_names
from strata_policy.ctl.session import Session, pass_session
from strata_policy.model.resources import RESERVED
from strata_policy.service.client import ORDERS, POLICIES, request_descriptor

YES = frozenset({"DECISION_ADMITTED", "DECISION_PLACED"})

file_argument = click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
dry_run_option = click.option("--dry-run", is_flag=True, help="decide, change nothing")
raw_option = click.option("--raw", is_flag=True, help="amounts in base units (proto JSON)")
fail_option = click.option(
    "--fail-on-deny", is_flag=True, help="exit 1 unless every workload is admitted/placed"
)


def _prepare(
    session: Session, file: str, message: Any, raw: bool, dry_run: bool
) -> tuple[str, Decoded]:
    """Read the file, settle the cluster, check resource names against the cluster's."""
    decoded = load(file, message, raw=raw)
    cluster = session.require_cluster(decoded.data.get("clusterId", ""))
    decoded.data["clusterId"] = cluster
    if dry_run:
        decoded.data["dryRun"] = True
    status = session.call("GetCluster", {"clusterId": cluster})
    check_names(decoded, set(RESERVED) | set(status.get("capacity", {})), f"cluster {cluster!r}")
    return cluster, decoded


def _decide(
    session: Session, method: str, decoded: Decoded, fail_on_deny: bool, placing: bool
) -> int:
    response = session.call(method, decoded.data, decoded)
    dry = bool(decoded.data.get("dryRun"))
    session.show(response, lambda: render.results(response, placing=placing, dry=dry))
    said_no = any(r.get("decision") not in YES for r in response.get("results", []))
    return 1 if fail_on_deny and said_no else 0


@click.command("admit")
@file_argument
@click.option("--order", type=click.Choice(ORDERS, case_sensitive=False), default=None)
@dry_run_option
@raw_option
@fail_option
@pass_session
def admit(
    session: Session, file: str, order: str | None, dry_run: bool, raw: bool, fail_on_deny: bool
) -> int:
    """Quota decisions for the workloads of an Admit request file."""
    _, decoded = _prepare(session, file, request_descriptor("Admit"), raw, dry_run)
    if order:
        decoded.data["order"] = f"ORDER_{order.upper()}"
    return _decide(session, "Admit", decoded, fail_on_deny, placing=False)


@click.command("place")
@file_argument
@click.option("--policy", type=click.Choice(POLICIES, case_sensitive=False), default=None)
@click.option("--order", type=click.Choice(ORDERS, case_sensitive=False), default=None)
@dry_run_option
@raw_option
@fail_option
@pass_session
def place(
    session: Session,
    file: str,
    policy: str | None,
    order: str | None,
    dry_run: bool,
    raw: bool,
    fail_on_deny: bool,
) -> int:
    """Nodes and GPU devices for the workloads of a Place request file (admitted in one step)."""
    _, decoded = _prepare(session, file, request_descriptor("Place"), raw, dry_run)
    if policy:
        decoded.data["policy"] = f"POLICY_{policy.upper()}"
    if order:
        decoded.data["order"] = f"ORDER_{order.upper()}"
    return _decide(session, "Place", decoded, fail_on_deny, placing=True)


@click.command("reclaim")
@file_argument
@click.option("--require-placement", is_flag=True, help="the victims must also free a node")
@dry_run_option
@raw_option
@click.option("--fail-on-deny", is_flag=True, help="exit 1 when no victim set makes room")
@pass_session
def reclaim(
    session: Session,
    file: str,
    require_placement: bool,
    dry_run: bool,
    raw: bool,
    fail_on_deny: bool,
) -> int:
    """Victims for a pending workload (a Reclaim request file); committed unless --dry-run."""
    _, decoded = _prepare(session, file, request_descriptor("Reclaim"), raw, dry_run)
    if require_placement:
        decoded.data["requirePlacement"] = True
    response = session.call("Reclaim", decoded.data, decoded)
    session.show(response, lambda: render.victims(response, dry=dry_run))
    return 1 if fail_on_deny and not response.get("satisfiable") else 0


@click.command("release")
@click.argument("workload_ids", nargs=-1)
@click.option("-f", "--file", "file", type=click.Path(dir_okay=False, allow_dash=True))
@dry_run_option
@pass_session
def release(
    session: Session, workload_ids: tuple[str, ...], file: str | None, dry_run: bool
) -> int:
    """Free workloads: by id (ctl release job-1 job-2) or from a Release request file (-f)."""
    decoded: Decoded | None = None
    request: dict[str, Any]
    if file:
        decoded = load(file, request_descriptor("Release"))
        request = decoded.data
        request["workloadIds"] = [*request.get("workloadIds", []), *workload_ids]
    elif workload_ids:
        request = {"workloadIds": list(workload_ids)}
    else:
        raise click.UsageError("name the workloads to release, or a request file with -f")
    request["clusterId"] = session.require_cluster(request.get("clusterId", ""))
    if dry_run:
        request["dryRun"] = True
    response = session.call("Release", request, decoded)

    def text() -> str:
        out = f"generation {response['generation']}{render.dry_run(dry_run)}: released "
        out += ", ".join(response["released"]) or "-"
        if response.get("notFound"):
            out += f"; not found: {', '.join(response['notFound'])}"
        return out

    session.show(response, text)
    return 0
