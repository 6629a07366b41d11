"""Who is calling, for idempotency: ``request_id`` is remembered per caller (DESIGN §4).

A caller is its bearer token when it sends one (the same token is the same caller, whichever
connection it comes on; the token file's grants are per token), else its client certificate's
identity under mutual TLS (the subject alternative name, else the common name), else anonymous
(``""``: every caller without credentials shares one namespace of request ids). The peer's
address is not an identity: a client that reconnects gets a new port, and its retries must
still find their first answers.

Identities are digests, so they are short and fixed in size whatever a client sends (they are
kept as part of every remembered answer's key) and a memory dump shows no token.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import grpc

from strata_policy.service.auth import bearer_token

_CERT_NAMES = ("x509_subject_alternative_name", "x509_common_name")


def caller_identity(context: grpc.ServicerContext) -> str:
    """The calling identity of an RPC (see the module docstring): ``token:…``, ``cert:…`` or
    ``""``."""
    token = bearer_token(context.invocation_metadata())
    if token is not None:
        return "token:" + _short(token.encode())
    # grpc-stubs types the values as bytes; gRPC gives a sequence of bytes per property.
    auth: Mapping[str, Sequence[bytes]] = context.auth_context()  # type: ignore[assignment]
    for name in _CERT_NAMES:
        values = auth.get(name)
        if values:
            return "cert:" + _short(values[0])
    return ""


def _short(value: bytes) -> str:
    return hashlib.sha256(value).hexdigest()[:32]
