"""``strata-policy ctl``: the group, and the commands about whole clusters.

``clusters``, ``get``, ``usage``, ``push``, ``delete`` and ``import-openb`` live here; quotas in
``ctl.quota``, decisions (admit, place, reclaim, release) in ``ctl.decisions``. The conventions
every command follows (``-c``, ``-o``, exit codes, one-line errors) are in ``ctl.session``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import yaml

from strata_policy.ctl import decisions, plan, quota, render
from strata_policy.ctl.openb import snapshot_from_openb
from strata_policy.ctl.request_files import Decoded, decode, read_text, top_level_keys
from strata_policy.ctl.resource_names import check_names
from strata_policy.ctl.session import CtlError, Session, pass_session
from strata_policy.model.quantity import format_quantity
from strata_policy.model.resources import RESERVED
from strata_policy.service.client import request_descriptor, snapshot_descriptor

SCOPE_RESOURCES = ("guarantee", "limit")


@click.group("ctl", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--address", envvar="STRATA_ADDRESS", default="127.0.0.1:50051", show_default=True)
@click.option("--token", envvar="STRATA_TOKEN", default="", help="bearer token ($STRATA_TOKEN)")
@click.option("--tls-ca", envvar="STRATA_TLS_CA", default="", help="CA certificate: use TLS")
@click.option("--tls-cert", envvar="STRATA_TLS_CERT", default="", help="client cert (mTLS)")
@click.option("--tls-key", envvar="STRATA_TLS_KEY", default="", help="client key (mTLS)")
@click.option(
    "-o", "--output", type=click.Choice(("table", "wide", "json", "yaml")), default="table"
)
@click.option("-c", "--cluster", envvar="STRATA_CLUSTER", default="", help="$STRATA_CLUSTER")
@click.pass_context
def ctl(ctx: click.Context, /, **options: Any) -> None:
    """Operate a running server: clusters, scopes and quotas, decisions.

    \b
    The cluster is always -c/--cluster (default $STRATA_CLUSTER); -o and -c may come before or
    after the subcommand. Files are YAML or JSON, amounts Kubernetes quantities (cpu: 4,
    memory: 4Gi, gpu: 0.5); --raw reads base units. Exit codes: 0 done, 1 error, 2 usage.
    """
    ctx.obj = Session(**options)
    if ctx.get_parameter_source("cluster") is click.core.ParameterSource.ENVIRONMENT:
        ctx.obj.cluster_from = "$STRATA_CLUSTER"


@ctl.command("clusters")
@pass_session
def clusters(session: Session) -> int:
    """The clusters this server holds (those your token may read)."""
    response = session.call("ListClusters", {})
    session.show(response, lambda: render.clusters(response))
    return 0


@ctl.command("get")
@click.option("--snapshot", is_flag=True, help="include the whole snapshot (with -o json|yaml)")
@pass_session
def get(session: Session, snapshot: bool) -> int:
    """The scope tree with usage, guarantee and limit."""
    cluster = session.require_cluster()
    response = session.call("GetCluster", {"clusterId": cluster, "includeSnapshot": snapshot})
    session.show(response, lambda: render.scope_tree(response, wide=session.wide))
    return 0


@ctl.command("usage")
@pass_session
def usage(session: Session) -> int:
    """Usage, guarantee, limit, what is borrowed and which scopes are at their limit."""
    cluster = session.require_cluster()
    response = session.call("GetCluster", {"clusterId": cluster})
    session.show(response, lambda: render.scope_tree(response, borrowed=True, wide=session.wide))
    return 0


@ctl.command("push")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--dry-run", is_flag=True, help="check and count, change nothing")
@click.option("--raw", is_flag=True, help="amounts are integers in base units (proto JSON)")
@pass_session
def push(session: Session, file: str, dry_run: bool, raw: bool) -> int:
    """Replace a cluster's whole state with a snapshot file (nodes, scopes, workloads).

    The file is a Snapshot, or a PushSnapshot request ({clusterId, snapshot}).
    """
    decoded = read_snapshot(file, raw=raw)
    cluster = session.require_cluster(decoded.data.get("clusterId", ""))
    snapshot = decoded.data.get("snapshot", {})
    request = {"clusterId": cluster, "snapshot": snapshot, "dryRun": dry_run}
    response = session.call("PushSnapshot", request, decoded)
    session.show(
        response,
        lambda: (
            f"cluster {cluster} at generation {response['generation']}: "
            f"{render.counts(response, 'node', 'scope', 'workload')}{render.dry_run(dry_run)}"
        ),
    )
    return 0


def read_snapshot(file: str, *, raw: bool) -> Decoded:
    """A snapshot file as a PushSnapshot request; resource names checked against its nodes."""
    text = read_text(file)
    if "snapshot" in top_level_keys(file, text):
        decoded = decode(file, text, request_descriptor("PushSnapshot"), raw=raw)
    else:
        inner = decode(file, text, snapshot_descriptor(), raw=raw)
        lines = {f"snapshot.{k}": v for k, v in inner.lines.items()}
        decoded = Decoded(file, {"snapshot": inner.data}, lines)
    nodes = decoded.data.get("snapshot", {}).get("nodes", [])
    known = set(RESERVED).union(*(n.get("capacity", {}) for n in nodes))
    check_names(decoded, known, "the snapshot")
    return decoded


@ctl.command("export")
@click.option("--raw", is_flag=True, help="amounts in base units (push it back with --raw)")
@pass_session
def export(session: Session, raw: bool) -> int:
    """The cluster's snapshot as a file ``ctl push`` takes back: YAML in quantities (-o json)."""
    cluster = session.require_cluster()
    response = session.call("GetCluster", {"clusterId": cluster, "includeSnapshot": True})
    snapshot = _amounts(_prune(response.get("snapshot", {})), quantities=not raw)
    if session.output == "json":
        click.echo(json.dumps(snapshot, indent=2))
    else:
        click.echo(yaml.safe_dump(snapshot, sort_keys=False).rstrip("\n"))
    return 0


RESOURCE_MAPS = ("capacity", "guarantee", "limit", "request")
SORTED_MAPS = (*RESOURCE_MAPS, "labels")


def _amounts(value: Any, key: str = "", *, quantities: bool) -> Any:
    """Every resource map's amounts as quantities (``64``, ``256Gi``, ``0.5``) when
    ``quantities``, else as they came (base units). Resource maps and labels are written in
    sorted key order: the server's maps have no order, and an export must not change from one
    call to the next when the cluster has not (a diff of two exports shows what changed)."""
    if isinstance(value, dict):
        if key in SORTED_MAPS:
            items = sorted(value.items())
            if key in RESOURCE_MAPS and quantities:
                return {k: format_quantity(k, int(v)) for k, v in items}
            return dict(items)
        return {k: _amounts(v, k, quantities=quantities) for k, v in value.items()}
    if isinstance(value, list):
        return [_amounts(v, key, quantities=quantities) for v in value]
    return value


def _prune(value: Any, key: str = "") -> Any:
    """Without empty fields and zero numbers (the response prints every field). Booleans stay
    (``preemptible: false`` is not the default), and so do list items (``gpuDevices: [0]``) and
    resource maps' zeros (an explicit ``guarantee: {gpu: 0}`` is not an absent one)."""
    if isinstance(value, list):
        return [_prune(v, key) for v in value]
    if not isinstance(value, dict) or key in RESOURCE_MAPS:
        return value
    kept = {k: _prune(v, k) for k, v in value.items()}
    return {k: v for k, v in kept.items() if not _empty(v)}


def _empty(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return value in ({}, [], "", "0") or (isinstance(value, int | float) and value == 0)


@ctl.command("delete")
@pass_session
def delete(session: Session) -> int:
    """Forget a cluster (its state, generation and remembered request ids)."""
    cluster = session.require_cluster()
    response = session.call("DeleteCluster", {"clusterId": cluster})
    session.show(
        response, lambda: f"deleted {cluster} (was at generation {response['generation']})"
    )
    return 0


@ctl.command("import-openb")
@click.argument("nodes_csv", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--scope", default="default", show_default=True, help="one top-level scope")
@click.option("--push", "push_it", is_flag=True, help="push it to -c's cluster (else print it)")
@click.option("--dry-run", is_flag=True, help="with --push: check and count, change nothing")
@click.option("--raw", is_flag=True, help="print amounts in base units")
@pass_session
def import_openb(
    session: Session, nodes_csv: Path, scope: str, push_it: bool, dry_run: bool, raw: bool
) -> int:
    """A snapshot from the openb node list CSV (data/openb/): printed, or pushed with --push.

    Printed as YAML in quantities (or JSON with -o json), ready for ``ctl push``.
    """
    try:
        snapshot = snapshot_from_openb(nodes_csv, scope)
    except ValueError as exc:
        raise CtlError(str(exc)) from None
    if not push_it:
        if not raw:
            for node in snapshot["nodes"]:
                node["capacity"] = {
                    k: format_quantity(k, int(v)) for k, v in node["capacity"].items()
                }
        if session.output == "json":
            click.echo(json.dumps(snapshot, indent=1))
        else:
            click.echo(yaml.safe_dump(snapshot, sort_keys=False).rstrip("\n"))
        return 0
    cluster = session.require_cluster()
    request = {"clusterId": cluster, "snapshot": snapshot, "dryRun": dry_run}
    response = session.call("PushSnapshot", request)
    session.show(
        response,
        lambda: (
            f"cluster {cluster} at generation {response['generation']}: "
            f"{render.counts(response, 'node', 'scope')}{render.dry_run(dry_run)}"
        ),
    )
    return 0


for _command in (decisions.admit, decisions.place, decisions.reclaim, decisions.release):
    ctl.add_command(_command)
ctl.add_command(quota.quota)
ctl.add_command(plan.plan)
