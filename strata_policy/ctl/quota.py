"""``ctl quota set|get``: a scope's guarantee and limit, changed per resource.

``--guarantee gpu=8`` changes the GPU guarantee and keeps every other resource's, so two calls
(``--limit gpu=10`` then ``--limit cpu=100``) leave both limits set; ``--unset-limit gpu``
removes one, ``--unset-limit`` alone removes them all. The merge reads the scope at a generation
and writes it with ``expected_generation``, so a concurrent change is refused (ABORTED), never
overwritten. Resource names are checked against the cluster's before anything is sent, each
error naming the flag that carried it. Setting and unsetting one resource in one call, or naming
an existing scope with nothing to change, is a usage error: neither is sent as a commit.
"""

from __future__ import annotations

from typing import Any

import click

from strata_policy.ctl import render
from strata_policy.ctl.resource_names import unknown_name
from strata_policy.ctl.session import Session, pass_session
from strata_policy.model.quantity import QuantityError
from strata_policy.model.resources import RESERVED, parse_resources

ALL = "*"


@click.group("quota")
def quota() -> None:
    """Set or show scopes' guarantees and limits."""


def _amounts(flag: str, text: str | None) -> dict[str, int]:
    if text is None:
        return {}
    try:
        return parse_resources(text)
    except QuantityError as exc:
        raise click.BadParameter(str(exc), param_hint=flag) from None


def _names(text: str | None) -> set[str] | None:
    """``None`` (flag absent), ``{ALL}`` (given alone) or the names of ``gpu,cpu``."""
    if text is None:
        return None
    return {n.strip() for n in text.split(",") if n.strip()} or {ALL}


@quota.command("set")
@click.argument("scope")
@click.option("--guarantee", metavar="R=Q,...", help="e.g. gpu=8,cpu=64,memory=256Gi")
@click.option("--limit", metavar="R=Q,...", help="e.g. gpu=16")
@click.option(
    "--unset-guarantee", metavar="R,...", is_flag=False, flag_value=ALL, help="alone: all"
)
@click.option("--unset-limit", metavar="R,...", is_flag=False, flag_value=ALL, help="alone: all")
@click.option("--parent", default=None, help="parent scope (a new scope; '' = top level)")
@click.option("--kind", default=None, help="free text: org, team, project…")
@click.option("--weight", type=click.FloatRange(min=0, min_open=True), default=None)
@click.option("--dry-run", is_flag=True, help="check it, change nothing")
@pass_session
def quota_set(
    session: Session,
    scope: str,
    guarantee: str | None,
    limit: str | None,
    unset_guarantee: str | None,
    unset_limit: str | None,
    parent: str | None,
    kind: str | None,
    weight: float | None,
    dry_run: bool,
) -> int:
    """Create a scope or change its guarantee, limit, parent, kind or weight (per resource)."""
    changes = {
        "guarantee": (_amounts("--guarantee", guarantee), _names(unset_guarantee)),
        "limit": (_amounts("--limit", limit), _names(unset_limit)),
    }
    for field, (amounts, unset) in changes.items():
        both = sorted(set(amounts) & (unset or set()))
        if both:
            raise click.UsageError(
                f"--{field} and --unset-{field} both name {', '.join(both)}: choose one"
            )
    cluster = session.require_cluster()
    current = session.call("GetCluster", {"clusterId": cluster, "includeSnapshot": True})
    known = set(RESERVED) | set(current.get("capacity", {}))
    for field, (amounts, unset) in changes.items():
        for flag, names in ((f"--{field}", [*amounts]), (f"--unset-{field}", unset or set())):
            for name in sorted(set(names) - {ALL}):
                message = unknown_name(name, known, f"cluster {cluster!r}")
                if message:
                    raise click.BadParameter(message, param_hint=flag)
    scopes = {s["id"]: s for s in current.get("snapshot", {}).get("scopes", [])}
    asked = (guarantee, limit, unset_guarantee, unset_limit, parent, kind, weight)
    if scope in scopes and all(option is None for option in asked):
        raise click.UsageError(
            f"nothing to change on scope {scope!r}: give --guarantee, --limit, --unset-guarantee, "
            "--unset-limit, --parent, --kind or --weight"
        )
    if scope not in scopes and parent is None:
        parent = ""
    updated: dict[str, Any] = dict(scopes.get(scope, {"id": scope}))
    for field, (amounts, unset) in changes.items():
        values = {k: int(v) for k, v in updated.get(field, {}).items()}
        if unset is not None:
            values = {} if ALL in unset else {k: v for k, v in values.items() if k not in unset}
        values.update(amounts)
        updated[field] = {k: str(v) for k, v in values.items()}
    if parent is not None:
        updated["parentId"] = parent
    if kind is not None:
        updated["kind"] = kind
    if weight is not None:
        updated["weight"] = weight
    request = {
        "clusterId": cluster,
        "upsertScopes": [updated],
        "expectedGeneration": current["generation"],
        "dryRun": dry_run,
    }
    response = session.call("UpdateSnapshot", request)
    verb = "created" if scope not in scopes else "updated"
    session.show(
        response,
        lambda: (
            f"scope {scope} {verb}: guarantee {render.amounts(updated['guarantee'])} · "
            f"limit {render.amounts(updated['limit'])} · generation "
            f"{response['generation']}{render.dry_run(dry_run)}"
        ),
    )
    return 0


@quota.command("get")
@pass_session
def quota_get(session: Session) -> int:
    """The scope tree with usage, guarantee, limit and what is borrowed."""
    cluster = session.require_cluster()
    response = session.call("GetCluster", {"clusterId": cluster})
    session.show(response, lambda: render.scope_tree(response, borrowed=True, wide=session.wide))
    return 0
