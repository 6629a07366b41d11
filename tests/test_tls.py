"""TLS and mutual TLS with certificates generated here: who can open a connection at all."""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from strata_policy.cli import main
from strata_policy.service.config import ServerConfig
from strata_policy.service.server import Server
from strata_policy.service.tls import (
    CertificateFiles,
    TlsConfigError,
    channel_credentials,
    server_credentials,
)

Key = ec.EllipticCurvePrivateKey


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _cert(
    subject: str, key: Key, issuer: tuple[x509.Name, Key] | None, *, ca: bool, server: bool
) -> x509.Certificate:
    """A certificate for ``subject`` signed by ``issuer`` (self-signed when None)."""
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = issuer if issuer is not None else (_name(subject), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


@dataclass(frozen=True, slots=True)
class Pki:
    """Paths of the PEM files one test run uses."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    rogue_cert: Path
    rogue_key: Path
    renewed_ca: Path
    renewed_cert: Path
    renewed_key: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA, a server cert for 127.0.0.1, a client cert from the CA, and a rogue client cert."""
    out = tmp_path_factory.mktemp("pki")

    def write(name: str, cert: x509.Certificate, key: Key | None = None) -> tuple[Path, Path]:
        (out / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        if key is not None:
            (out / f"{name}.key").write_bytes(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
        return out / f"{name}.crt", out / f"{name}.key"

    ca_key = ec.generate_private_key(ec.SECP256R1())
    rogue_ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("strata test CA", ca_key, None, ca=True, server=False)
    rogue_ca = _cert("rogue CA", rogue_ca_key, None, ca=True, server=False)
    ca_path, _ = write("ca", ca)

    def leaf(name: str, issuer: tuple[x509.Name, Key], server: bool) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        return write(name, _cert(name, key, issuer, ca=False, server=server), key)

    s = leaf("server", (ca.subject, ca_key), True)
    c = leaf("client", (ca.subject, ca_key), False)
    r = leaf("rogue", (rogue_ca.subject, rogue_ca_key), False)
    renewed_ca_key = ec.generate_private_key(ec.SECP256R1())
    renewed_ca = _cert("renewed CA", renewed_ca_key, None, ca=True, server=False)
    renewed_ca_path, _ = write("renewed-ca", renewed_ca)
    n = leaf("renewed", (renewed_ca.subject, renewed_ca_key), True)
    return Pki(ca_path, *s, *c, *r, renewed_ca_path, *n)


@pytest.fixture(scope="module", params=[False, True], ids=["tls", "mtls"])
def endpoint(request: pytest.FixtureRequest, pki: Pki) -> Iterator[tuple[str, bool]]:
    """A health-only server with TLS, or mutual TLS (client CA given)."""
    mutual: bool = request.param
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), srv)
    creds = server_credentials(pki.server_cert, pki.server_key, pki.ca if mutual else None)
    port = srv.add_secure_port("127.0.0.1:0", creds)
    srv.start()
    yield f"127.0.0.1:{port}", mutual
    srv.stop(None)


def _check(target: str, creds: grpc.ChannelCredentials | None) -> bool:
    """Whether a health check over these credentials succeeds."""
    channel = grpc.insecure_channel(target) if creds is None else grpc.secure_channel(target, creds)
    try:
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
    except grpc.RpcError as exc:
        if exc.code() is grpc.StatusCode.UNAVAILABLE:  # type: ignore[attr-defined]  # a Call too
            return False  # refused in the handshake
        raise
    finally:
        channel.close()
    return True


@pytest.mark.parametrize(
    ("client", "ok_tls", "ok_mtls"),
    [
        pytest.param("trusting, no cert", True, False, id="server-auth only client"),
        pytest.param("trusting, CA cert", True, True, id="client cert from the CA"),
        pytest.param("trusting, rogue cert", True, False, id="client cert from another CA"),
        pytest.param("not trusting", False, False, id="client without the CA"),
        pytest.param("plaintext", False, False, id="plaintext client"),
    ],
)
def test_who_can_connect(
    endpoint: tuple[str, bool], pki: Pki, client: str, ok_tls: bool, ok_mtls: bool
) -> None:
    """TLS needs a client that trusts the CA; mutual TLS also needs a client cert the CA signed."""
    target, mutual = endpoint
    creds: grpc.ChannelCredentials | None
    if client == "plaintext":
        creds = None
    elif client == "not trusting":
        creds = channel_credentials(pki.client_cert, pki.client_cert, pki.client_key)
    elif client == "trusting, CA cert":
        creds = channel_credentials(pki.ca, pki.client_cert, pki.client_key)
    elif client == "trusting, rogue cert":
        creds = channel_credentials(pki.ca, pki.rogue_cert, pki.rogue_key)
    else:
        creds = channel_credentials(pki.ca)
    assert _check(target, creds) is (ok_mtls if mutual else ok_tls)


@pytest.mark.parametrize(
    ("which", "message"),
    [
        pytest.param("missing cert", "--tls-cert: cannot read", id="missing cert file"),
        pytest.param("not pem", "--tls-key: .* is not a PEM file", id="key not PEM"),
        pytest.param("no key", "must be given together", id="cert without key"),
        pytest.param("missing ca", "--tls-client-ca: cannot read", id="missing client CA"),
    ],
)
def test_bad_files_fail_at_start(tmp_path: Path, pki: Pki, which: str, message: str) -> None:
    """A TLS file that cannot be used is a start-up error naming the flag."""
    garbage = tmp_path / "garbage.key"
    garbage.write_text("not a key")
    args: dict[str, tuple[str | Path, str | Path, str | Path | None]] = {
        "missing cert": (tmp_path / "absent.crt", pki.server_key, None),
        "not pem": (pki.server_cert, garbage, None),
        "no key": (pki.server_cert, "", None),
        "missing ca": (pki.server_cert, pki.server_key, tmp_path / "absent-ca.crt"),
    }
    with pytest.raises(TlsConfigError, match=message):
        server_credentials(*args[which])


def test_client_cert_needs_its_key(pki: Pki) -> None:
    """A client certificate without its key is refused before any connection."""
    with pytest.raises(TlsConfigError, match="together"):
        channel_credentials(pki.ca, pki.client_cert, None)


def test_client_ca_alone_is_refused(pki: Pki) -> None:
    """--tls-client-ca without --tls-cert/--tls-key refuses to start (it once ran plaintext)."""
    with pytest.raises(TlsConfigError, match="must be given together"):
        Server(ServerConfig(address="127.0.0.1:0", tls_client_ca=str(pki.ca)))


def _replace(target: Path, source: Path) -> None:
    """Replace ``target`` by a copy of ``source`` in one rename, as a Secret update does."""
    staged = target.with_suffix(".new")
    shutil.copyfile(source, staged)
    os.replace(staged, target)


def test_renewed_certificate_is_served_without_restart(tmp_path: Path, pki: Pki) -> None:
    """Certificate and key files rewritten in place: the next connection gets the new one; an
    unusable rewrite keeps the last good certificate."""
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    shutil.copyfile(pki.server_cert, cert)
    shutil.copyfile(pki.server_key, key)
    srv = Server(ServerConfig(address="127.0.0.1:0", tls_cert=str(cert), tls_key=str(key)))
    target = f"127.0.0.1:{srv.port}"
    try:
        assert _check(target, channel_credentials(pki.ca))
        assert not _check(target, channel_credentials(pki.renewed_ca))
        _replace(cert, pki.renewed_cert)
        _replace(key, pki.renewed_key)
        assert _check(target, channel_credentials(pki.renewed_ca))
        assert not _check(target, channel_credentials(pki.ca))
        key.write_text("half written")
        assert _check(target, channel_credentials(pki.renewed_ca))
    finally:
        srv.grpc.stop(0)


def test_key_of_another_certificate_fails_at_start(pki: Pki) -> None:
    """A key that is not the certificate's is a start-up error naming --tls-key (gRPC alone
    failed to open the port and the server said "in use?")."""
    with pytest.raises(TlsConfigError, match=r"--tls-key: .* is not the key of the certificate"):
        server_credentials(pki.server_cert, pki.renewed_key)


def test_renewal_with_a_mismatched_key_keeps_the_loaded_pair(tmp_path: Path, pki: Pki) -> None:
    """A certificate renewed before its key is written keeps the last good pair (no "reloaded"),
    and the pair is taken once the key follows."""
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    shutil.copyfile(pki.server_cert, cert)
    shutil.copyfile(pki.server_key, key)
    files = CertificateFiles(cert, key, None)
    loaded = files.configuration
    _replace(cert, pki.renewed_cert)
    assert files.fetch() is None
    assert files.configuration is loaded
    _replace(key, pki.renewed_key)
    assert files.fetch() is not None
    assert files.configuration is not loaded


def test_ctl_without_tls_ca_is_told_about_tls(pki: Pki, capsys: pytest.CaptureFixture[str]) -> None:
    """ctl in plaintext against a TLS server: the error suggests --tls-ca, not only make serve."""
    srv = Server(
        ServerConfig(
            address="127.0.0.1:0", tls_cert=str(pki.server_cert), tls_key=str(pki.server_key)
        )
    )
    try:
        assert main(["ctl", "--address", f"127.0.0.1:{srv.port}", "clusters"]) == 1
    finally:
        srv.grpc.stop(0)
    err = capsys.readouterr().err
    assert "if it uses TLS, pass --tls-ca" in err
