"""Bearer-token authorization: which token may read or change which clusters.

The token file (YAML or JSON) lists grants::

    tokens:
      - {name: ops, token: "s3cret", clusters: ["*"], access: read-write}
      - {name: dashboards, token: "r3ad", clusters: [prod-a, prod-b], access: read-only}

Every call except health checks and server reflection (left open for probes and ``grpcurl``)
must carry ``authorization: Bearer <token>``. The check happens in two steps because the cluster
is inside the request:

1. Before the request is read: no token, a malformed header or an unknown token is
   UNAUTHENTICATED.
2. Once the request is deserialized, before the servicer runs: a token not granted the request's
   ``cluster_id`` is PERMISSION_DENIED; a read-only token may call GetCluster, and any mutating
   RPC only with ``dry_run`` set (DeleteCluster has no dry run, so never).
3. ListClusters names no cluster: every known token may call it, and its answer is cut down to
   the clusters the token is granted.

``service.calls.CallGate`` runs both steps (the first when gRPC looks up the handler, so an
unauthenticated request's bytes are never parsed). A denied call never reaches the servicer, so
it changes nothing. Errors are the package's own ``Unauthenticated``/``PermissionDenied``, ended
through ``service.status`` (one status table).
Tokens are kept only as SHA-256 digests and looked up by digest, so neither a memory dump
of the table nor the lookup's timing gives a token away.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from strata_policy.errors import PermissionDenied

READ_ONLY_METHODS = frozenset(
    {
        "/strata.policy.v1.PolicyService/GetCluster",
        "/strata.policy.v1.PolicyService/ListClusters",
        "/strata.policy.v1.PolicyService/PlanCapacity",  # always a dry run: read access
    }
)
# Methods that name no cluster: any token may call them, and the answer lists only the clusters
# its grant allows (``visible_to``), so a token never learns another tenant's cluster ids.
LISTING_METHODS = frozenset({"/strata.policy.v1.PolicyService/ListClusters"})
ACCESS_LEVELS = ("read-only", "read-write")
WILDCARD = "*"


class TokenFileError(ValueError):
    """The token file cannot be used; the message names the entry and the problem."""


@dataclass(frozen=True, slots=True)
class Grant:
    """What one token may do: its clusters (``*`` = all) and whether it may change them."""

    name: str
    clusters: frozenset[str]
    read_write: bool

    def allows_cluster(self, cluster_id: str) -> bool:
        """Whether the token may touch ``cluster_id`` at all."""
        return WILDCARD in self.clusters or cluster_id in self.clusters


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class TokenTable:
    """Grants by token digest; built from the token file."""

    def __init__(self, grants: Mapping[bytes, Grant]) -> None:
        self._grants = dict(grants)

    def __len__(self) -> int:
        return len(self._grants)

    @classmethod
    def from_dict(cls, data: object) -> TokenTable:
        """Parse ``{tokens: [...]}``; raises ``TokenFileError`` naming the first bad entry."""
        if not isinstance(data, Mapping) or not isinstance(data.get("tokens"), list):
            raise TokenFileError("the token file must be an object with a list under 'tokens'")
        grants: dict[bytes, Grant] = {}
        for i, entry in enumerate(data["tokens"]):
            where = f"tokens[{i}]"
            if not isinstance(entry, Mapping):
                raise TokenFileError(f"{where}: must be an object")
            token, clusters = entry.get("token"), entry.get("clusters")
            access, name = entry.get("access", "read-only"), entry.get("name", f"token-{i}")
            if not isinstance(token, str) or len(token) < 8:
                raise TokenFileError(f"{where}.token: must be a string of 8 or more characters")
            if (
                not isinstance(clusters, list)
                or not clusters
                or not all(isinstance(c, str) and c for c in clusters)
            ):
                raise TokenFileError(f"{where}.clusters: must be a non-empty list of cluster ids")
            if access not in ACCESS_LEVELS:
                raise TokenFileError(f"{where}.access: must be one of {', '.join(ACCESS_LEVELS)}")
            if not isinstance(name, str):
                raise TokenFileError(f"{where}.name: must be a string")
            key = _digest(token)
            if key in grants:
                raise TokenFileError(f"{where}.token: the same token is listed twice")
            grants[key] = Grant(name, frozenset(clusters), access == "read-write")
        return cls(grants)

    @classmethod
    def from_file(cls, path: str | Path) -> TokenTable:
        """Read a YAML or JSON token file (JSON is read as YAML, its superset)."""
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise TokenFileError(f"cannot read token file {str(path)!r}: {exc}") from exc
        return cls.from_dict(data)

    def lookup(self, token: str) -> Grant | None:
        """The grant for a presented token, or ``None``."""
        return self._grants.get(_digest(token))


def bearer_token(metadata: object) -> str | None:
    """The token of an ``authorization: Bearer <token>`` header, or ``None``."""
    for key, value in metadata or ():  # type: ignore[attr-defined]  # a sequence of pairs
        if key == "authorization" and isinstance(value, str):
            scheme, _, token = value.strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


def check_request(grant: Grant, method: str, request: object) -> None:
    """Raise ``PermissionDenied`` unless ``grant`` allows ``method`` with this ``request``."""
    if method in LISTING_METHODS:
        return
    cluster_id = getattr(request, "cluster_id", None)
    if not isinstance(cluster_id, str):
        if WILDCARD not in grant.clusters:
            raise PermissionDenied(f"token {grant.name!r} may only call per-cluster methods")
        cluster_id = ""
    elif not grant.allows_cluster(cluster_id):
        raise PermissionDenied(
            f"token {grant.name!r} is not allowed on cluster {cluster_id!r}", cluster_id
        )
    if grant.read_write or method in READ_ONLY_METHODS:
        return
    if getattr(request, "dry_run", False) is True:
        return
    short = method.rsplit("/", 1)[-1]
    raise PermissionDenied(
        f"token {grant.name!r} is read-only: {short} needs read-write access "
        "(or dry_run, where the method has it)",
        cluster_id,
    )


def visible_to(grant: Grant, method: str, response: Any) -> Any:
    """A listing method's answer cut down to the clusters ``grant`` allows; others unchanged."""
    if method not in LISTING_METHODS:
        return response
    kept = [c for c in response.clusters if grant.allows_cluster(c.cluster_id)]
    del response.clusters[:]
    response.clusters.extend(kept)
    return response
