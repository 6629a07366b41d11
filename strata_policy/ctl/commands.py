"""The ``ctl`` subcommands: push, get, delete, import-openb, quota, usage, admit, place, release,
reclaim. Files are JSON or YAML in the proto JSON mapping (what ``grpcurl -d`` takes)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from strata_policy.ctl import render
from strata_policy.ctl.openb import snapshot_from_openb
from strata_policy.model.resources import parse_resources
from strata_policy.service.client import Client, RpcError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ctl`` and its commands."""
    ctl = sub.add_parser("ctl", help="operate a running server")
    ctl.add_argument("--address", default=os.environ.get("STRATA_ADDRESS", "127.0.0.1:50051"))
    ctl.add_argument("--token", default=os.environ.get("STRATA_TOKEN", ""), help="bearer token")
    ctl.add_argument("--tls-ca", default="", help="CA certificate: use TLS")
    ctl.add_argument("--tls-cert", default="", help="client certificate (mutual TLS)")
    ctl.add_argument("--tls-key", default="", help="client key (mutual TLS)")
    ctl.add_argument("--output", "-o", choices=("table", "json"), default="table")
    cmds = ctl.add_subparsers(dest="ctl_command", required=True)

    p = cmds.add_parser("push", help="push a snapshot file (JSON/YAML)")
    p.add_argument("file", type=Path)
    p.add_argument("--cluster", default="", help="cluster id (default: the file's clusterId)")
    p.add_argument("--dry-run", action="store_true")
    p.set_defaults(handler=_push)

    p = cmds.add_parser("get", help="the scope tree with usage, guarantee and limit")
    p.add_argument("cluster")
    p.add_argument("--snapshot", action="store_true", help="include the whole snapshot (json)")
    p.set_defaults(handler=_get)

    p = cmds.add_parser("usage", help="usage, guarantee, limit, borrowed and scopes at limit")
    p.add_argument("cluster")
    p.set_defaults(handler=_usage)

    p = cmds.add_parser("delete", help="forget a cluster")
    p.add_argument("cluster")
    p.set_defaults(handler=_delete)

    p = cmds.add_parser("import-openb", help="a snapshot from the openb node list CSV")
    p.add_argument("nodes_csv", type=Path)
    p.add_argument("--cluster", default="", help="push it to this cluster instead of printing")
    p.add_argument("--scope", default="default", help="one top-level scope to create")
    p.set_defaults(handler=_import_openb)

    quota = cmds.add_parser("quota", help="set or show a scope's guarantee and limit")
    qcmds = quota.add_subparsers(dest="quota_command", required=True)
    p = qcmds.add_parser("set", help="set guarantee/limit (human units: gpu=8,cpu=64,memory=256Gi)")
    p.add_argument("scope")
    p.add_argument("--cluster", required=True)
    p.add_argument("--guarantee", default=None)
    p.add_argument("--limit", default=None)
    p.add_argument("--parent", default=None, help="parent scope (new scopes)")
    p.add_argument("--weight", type=float, default=None)
    p.set_defaults(handler=_quota_set)
    p = qcmds.add_parser("get", help="the quota tree")
    p.add_argument("cluster")
    p.set_defaults(handler=_get)

    for name, method, render_fn in (
        ("admit", "Admit", render.results),
        ("place", "Place", render.results),
        ("reclaim", "Reclaim", render.victims),
    ):
        p = cmds.add_parser(name, help=f"send a {method} request file (JSON/YAML)")
        p.add_argument("file", type=Path)
        p.add_argument("--cluster", default="")
        p.add_argument("--dry-run", action="store_true")
        if name == "place":
            p.add_argument("--policy", default="", help="e.g. FRAGMENTATION_AWARE")
        p.set_defaults(handler=_request, method=method, render_fn=render_fn)

    p = cmds.add_parser("release", help="release workloads: by id, or a Release request file")
    p.add_argument("cluster_or_file", help="cluster id, or a request file (JSON/YAML)")
    p.add_argument("workload_ids", nargs="*")
    p.add_argument("--dry-run", action="store_true")
    p.set_defaults(handler=_release)


def _client(args: argparse.Namespace) -> Client:
    credentials = None
    if args.tls_ca:
        from strata_policy.service.tls import channel_credentials  # noqa: PLC0415  # TLS only

        credentials = channel_credentials(args.tls_ca, args.tls_cert or None, args.tls_key or None)
    return Client(args.address, token=args.token, credentials=credentials)


def _load(path: Path) -> dict[str, Any]:
    text = sys.stdin.read() if str(path) == "-" else path.read_text()
    data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    if not isinstance(data, dict):
        raise SystemExit(f"{path}: expected a mapping at the top level")
    return data


def _show(args: argparse.Namespace, response: dict[str, Any], text: str) -> int:
    if args.output == "json":
        print(json.dumps(response, indent=2))
    else:
        print(text)
    return 0


def _run(args: argparse.Namespace, method: str, request: dict[str, Any]) -> dict[str, Any]:
    client = _client(args)
    try:
        return client.call(method, request)
    except RpcError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        client.close()


def _push(args: argparse.Namespace) -> int:
    data = _load(args.file)
    snapshot = data.get("snapshot", data)
    cluster = args.cluster or data.get("clusterId") or data.get("cluster_id") or ""
    if not cluster:
        raise SystemExit("name the cluster: --cluster ID (or clusterId in the file)")
    snapshot = {k: v for k, v in snapshot.items() if k not in ("clusterId", "cluster_id")}
    response = _run(
        args, "PushSnapshot", {"clusterId": cluster, "snapshot": snapshot, "dryRun": args.dry_run}
    )
    return _show(
        args,
        response,
        f"cluster {cluster} at generation {response['generation']}: {response['nodeCount']} nodes, "
        f"{response['scopeCount']} scopes, {response['workloadCount']} workloads",
    )


def _get(args: argparse.Namespace) -> int:
    snapshot = getattr(args, "snapshot", False)
    response = _run(args, "GetCluster", {"clusterId": args.cluster, "includeSnapshot": snapshot})
    return _show(args, response, render.scope_tree(response))


def _usage(args: argparse.Namespace) -> int:
    response = _run(args, "GetCluster", {"clusterId": args.cluster})
    return _show(args, response, render.scope_tree(response, borrowed=True))


def _delete(args: argparse.Namespace) -> int:
    response = _run(args, "DeleteCluster", {"clusterId": args.cluster})
    return _show(
        args, response, f"deleted {args.cluster} (was at generation {response['generation']})"
    )


def _import_openb(args: argparse.Namespace) -> int:
    snapshot = snapshot_from_openb(args.nodes_csv, args.scope)
    if not args.cluster:
        print(json.dumps({"snapshot": snapshot}, indent=1))
        return 0
    response = _run(args, "PushSnapshot", {"clusterId": args.cluster, "snapshot": snapshot})
    return _show(
        args,
        response,
        f"cluster {args.cluster} at generation {response['generation']}: "
        f"{response['nodeCount']} nodes",
    )


def _quota_set(args: argparse.Namespace) -> int:
    current = _run(args, "GetCluster", {"clusterId": args.cluster, "includeSnapshot": True})
    scopes = {s["id"]: s for s in current.get("snapshot", {}).get("scopes", [])}
    scope = dict(scopes.get(args.scope, {"id": args.scope}))
    try:
        if args.guarantee is not None:
            scope["guarantee"] = {k: str(v) for k, v in parse_resources(args.guarantee).items()}
        if args.limit is not None:
            scope["limit"] = {k: str(v) for k, v in parse_resources(args.limit).items()}
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    if args.parent is not None:
        scope["parentId"] = args.parent
    if args.weight is not None:
        scope["weight"] = args.weight
    response = _run(
        args,
        "UpdateSnapshot",
        {
            "clusterId": args.cluster,
            "upsertScopes": [scope],
            "expectedGeneration": current["generation"],
        },
    )
    after = _run(args, "GetCluster", {"clusterId": args.cluster})
    return _show(args, response, render.scope_tree(after, borrowed=True))


def _request(args: argparse.Namespace) -> int:
    data = _load(args.file)
    if args.cluster:
        data["clusterId"] = args.cluster
    if args.dry_run:
        data["dryRun"] = True
    if getattr(args, "policy", ""):
        policy = args.policy.upper()
        data["policy"] = policy if policy.startswith("POLICY_") else f"POLICY_{policy}"
    response = _run(args, args.method, data)
    return _show(args, response, args.render_fn(response))


def _release(args: argparse.Namespace) -> int:
    target = Path(args.cluster_or_file)
    if target.suffix in (".json", ".yaml", ".yml") and target.exists():
        request = _load(target)
    else:
        request = {"clusterId": args.cluster_or_file, "workloadIds": args.workload_ids}
    if args.dry_run:
        request["dryRun"] = True
    response = _run(args, "Release", request)
    text = f"generation {response['generation']}: released {', '.join(response['released']) or '-'}"
    if response.get("notFound"):
        text += f"; not found: {', '.join(response['notFound'])}"
    return _show(args, response, text)
