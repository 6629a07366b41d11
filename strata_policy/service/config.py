"""The server's configuration; light to import (the CLI builds it before importing the server)."""

from __future__ import annotations

from dataclasses import dataclass, field

from strata_policy.state.request_checks import Limits


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything ``strata-policy serve`` takes (flags and ``STRATA_*`` variables)."""

    address: str = "127.0.0.1:50051"
    workers: int = 8
    max_message_bytes: int = 256 * 1024 * 1024
    max_concurrent_rpcs: int = 256
    drain_seconds: float = 0.0
    grace_seconds: float = 10.0
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""
    token_file: str = ""
    state_dir: str = ""
    checkpoint_every: int = 1000
    metrics_address: str = ""
    metrics_auth: str = "auto"  # auto | token | none (service/metrics_http.py)
    health_address: str = ""  # plaintext health-only listener (service/health_port.py)
    limits: Limits = field(default_factory=Limits)
