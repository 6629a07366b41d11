"""Transport security: TLS for the server, mutual TLS when a client CA is given.

``--tls-cert``/``--tls-key`` turn TLS on; ``--tls-client-ca`` additionally makes the server
demand a client certificate signed by that CA (``require_client_auth=True``), so only holders of
such a certificate can even open a connection. Bearer tokens (``service.auth``) then decide what
an authenticated caller may do. Files are PEM; a missing or empty file, or a client CA without
the server's certificate and key, is a start-up error that names the flag, never a server
quietly running in plaintext.

The files are watched: on every new connection the server compares their size, inode and
modification time with what it loaded (three ``stat`` calls) and, when one changed, reads them
again, so a renewed certificate (cert-manager rewrites the Secret's files) is served without a
restart. Connections already open keep the certificate they were made with. Files that cannot
be used at that moment (half written, a key that is not PEM yet, a key that is not the
certificate's) are logged and the last good certificate stays in use; the next connection tries
again. A key that does not match its certificate is checked here because gRPC's own check only
writes to stderr: at start the port then fails to open ("cannot listen ... (in use?)"), and on a
reload the server said "reloaded" while gRPC kept the old certificate.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import grpc
import structlog

log = structlog.get_logger("strata.tls")


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
    """Server TLS credentials that follow changes to the files; with ``client_ca_path``, clients
    must present a certificate it signed."""
    files = CertificateFiles(cert_path, key_path, client_ca_path)
    return grpc.dynamic_ssl_server_credentials(
        files.configuration,
        files.fetch,  # type: ignore[arg-type]  # grpc-stubs omit the None that keeps the current
        require_client_authentication=client_ca_path is not None and client_ca_path != "",
    )


class CertificateFiles:
    """The server's PEM files and the configuration last read from them."""

    def __init__(
        self, cert_path: str | Path, key_path: str | Path, client_ca_path: str | Path | None
    ) -> None:
        if not cert_path or not key_path:
            raise TlsConfigError(
                "--tls-cert and --tls-key must be given together (and --tls-client-ca needs both)"
            )
        self.paths = [(Path(cert_path), "--tls-cert"), (Path(key_path), "--tls-key")]
        if client_ca_path:
            self.paths.append((Path(client_ca_path), "--tls-client-ca"))
        self.stamp = self._stamp()
        self.configuration = self._read()

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """gRPC's fetcher, called for each new connection: a new configuration when the files
        changed and can be read, else ``None`` (keep the current one)."""
        try:
            stamp = self._stamp()
        except TlsConfigError as exc:
            log.warning("tls files unreadable; keeping the loaded certificate", error=str(exc))
            return None
        if stamp == self.stamp:
            return None
        try:
            configuration = self._read()
        except TlsConfigError as exc:
            log.warning("tls files changed but unusable; keeping the loaded one", error=str(exc))
            return None
        self.stamp, self.configuration = stamp, configuration
        log.info("tls certificate reloaded", cert=str(self.paths[0][0]))
        return configuration

    def _stamp(self) -> tuple[tuple[int, int, int], ...]:
        stamps = []
        for path, what in self.paths:
            try:
                st = os.stat(path)
            except OSError as exc:
                raise TlsConfigError(f"{what}: cannot read {str(path)!r}: {exc.strerror}") from exc
            stamps.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(stamps)

    def _read(self) -> grpc.ServerCertificateConfiguration:
        pems = [read_pem(path, what) for path, what in self.paths]
        check_key_matches(self.paths[0][0], self.paths[1][0])
        return grpc.ssl_server_certificate_configuration(
            [(pems[1], pems[0])], root_certificates=pems[2] if len(pems) > 2 else None
        )


def check_key_matches(cert_path: Path, key_path: Path) -> None:
    """``TlsConfigError`` unless the key file holds the private key of the certificate file (an
    encrypted key is refused too: gRPC cannot use one)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert_path, key_path, password=lambda: b"")
    except (ssl.SSLError, ValueError) as exc:
        why = getattr(exc, "reason", None) or str(exc)
        raise TlsConfigError(
            f"--tls-key: {str(key_path)!r} is not the key of the certificate in --tls-cert "
            f"{str(cert_path)!r} ({why})"
        ) from None


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
