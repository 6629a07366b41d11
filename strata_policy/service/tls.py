"""Transport security: TLS for the server, mutual TLS when a client CA is given.

``--tls-cert``/``--tls-key`` turn TLS on; ``--tls-client-ca`` additionally makes the server
demand a client certificate signed by that CA (``require_client_auth=True``), so only holders of
such a certificate can even open a connection. Bearer tokens (``service.auth``) then decide what
an authenticated caller may do. Files are PEM; a missing or empty file is a start-up error that
names the flag, never a server quietly running in plaintext.
"""

from __future__ import annotations

from pathlib import Path

import grpc


class TlsConfigError(ValueError):
    """A TLS file is missing, unreadable or empty, or a cert was given without its key."""


def read_pem(path: str | Path, what: str) -> bytes:
    """The bytes of a PEM file; ``TlsConfigError`` naming ``what`` when it cannot be used."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TlsConfigError(f"{what}: cannot read {str(path)!r}: {exc.strerror}") from exc
    if b"-----BEGIN " not in data:
        raise TlsConfigError(f"{what}: {str(path)!r} is not a PEM file")
    return data


def server_credentials(
    cert_path: str | Path, key_path: str | Path, client_ca_path: str | Path | None = None
) -> grpc.ServerCredentials:
    """Server TLS credentials; with ``client_ca_path``, clients must present a cert it signed."""
    if not cert_path or not key_path:
        raise TlsConfigError("--tls-cert and --tls-key must be given together")
    cert = read_pem(cert_path, "--tls-cert")
    key = read_pem(key_path, "--tls-key")
    client_ca = read_pem(client_ca_path, "--tls-client-ca") if client_ca_path else None
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


def channel_credentials(
    ca_path: str | Path | None = None,
    cert_path: str | Path | None = None,
    key_path: str | Path | None = None,
) -> grpc.ChannelCredentials:
    """Client TLS credentials: trust ``ca_path`` (or the system roots); present a cert for mTLS."""
    if bool(cert_path) != bool(key_path):
        raise TlsConfigError("a client certificate and its key must be given together")
    return grpc.ssl_channel_credentials(
        root_certificates=read_pem(ca_path, "CA certificate") if ca_path else None,
        private_key=read_pem(key_path, "client key") if key_path else None,
        certificate_chain=read_pem(cert_path, "client certificate") if cert_path else None,
    )
