"""The /metrics listener: bearer tokens from the token file, and promtool on the shipped rules."""

from __future__ import annotations

import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from strata_policy.service.auth import TokenFileError
from strata_policy.service.config import ServerConfig
from strata_policy.service.metrics import Metrics
from strata_policy.service.metrics_http import metrics_tokens

PROMETHEUS = Path(__file__).resolve().parent.parent / "deploy" / "prometheus"
TOKENS = """\
tokens:
  - {name: prometheus, token: "scrape-token-1", clusters: ["*"], access: read-only}
  - {name: writer, token: "writer-token-1", clusters: ["*"], access: read-write}
  - {name: team-a, token: "team-a-token", clusters: [prod-a], access: read-write}
"""


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    """A token file with an all-cluster reader, an all-cluster writer and a one-cluster token."""
    path = tmp_path / "tokens.yaml"
    path.write_text(TOKENS)
    return path


@pytest.fixture
def guarded(token_file: Path) -> Iterator[int]:
    """A /metrics listener on loopback that takes the token file's tokens; yields its port."""
    m = Metrics.from_config(ServerConfig(token_file=str(token_file)))
    m.observe_rpc("Admit", "OK", 0.001)
    m.start_http("127.0.0.1:0")
    yield m.port
    m.stop_http()


def scrape(port: int, authorization: str | None) -> tuple[int, str, str]:
    """(HTTP status, body, WWW-Authenticate) of one GET /metrics."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read().decode(), ""
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers.get("WWW-Authenticate", "")


@pytest.mark.parametrize(
    ("authorization", "status", "says"),
    [
        pytest.param(None, 401, "missing bearer token", id="no header"),
        pytest.param("Bearer nope-nope-nope", 401, "unknown bearer token", id="unknown token"),
        pytest.param("Basic c2NyYXBlOnRva2Vu", 401, "missing bearer token", id="basic auth"),
        pytest.param("Bearer ", 401, "missing bearer token", id="empty token"),
        pytest.param("Bearer team-a-token", 403, "not granted every cluster", id="one cluster"),
        pytest.param("Bearer scrape-token-1", 200, "strata_rpcs_total", id="read-only, all"),
        pytest.param("bearer writer-token-1", 200, "strata_rpcs_total", id="writer, any case"),
    ],
)
def test_metrics_need_an_all_cluster_token(
    guarded: int, authorization: str | None, status: int, says: str
) -> None:
    """With a token file, /metrics answers only a token granted '*'; others get 401 or 403."""
    got, body, challenge = scrape(guarded, authorization)
    assert got == status
    assert says in body
    assert (challenge == 'Bearer realm="strata-metrics"') == (status == 401)
    if status != 200:
        assert "strata_" not in body  # nothing of the tenants' data leaks in a refusal


@pytest.mark.parametrize(
    ("mode", "has_file", "guarded_expected"),
    [
        pytest.param("auto", True, True, id="auto with a token file: guarded"),
        pytest.param("auto", False, False, id="auto without one: open"),
        pytest.param("token", True, True, id="token: guarded"),
        pytest.param("none", True, False, id="none: open (internal address)"),
    ],
)
def test_metrics_auth_modes(
    token_file: Path, mode: str, has_file: bool, guarded_expected: bool
) -> None:
    """--metrics-auth picks the token file's tokens or none."""
    tokens = metrics_tokens(mode, str(token_file) if has_file else "")
    assert (tokens is not None) == guarded_expected
    if tokens is not None:
        assert len(tokens) == 3


def test_token_mode_without_a_token_file_is_refused() -> None:
    """Asking for token auth with no token file is an error, never an open endpoint."""
    with pytest.raises(TokenFileError, match="needs --token-file"):
        metrics_tokens("token", "")


def test_unknown_mode_is_refused() -> None:
    """A mode outside auto/token/none is refused with the choices."""
    with pytest.raises(ValueError, match="auto, token, none"):
        metrics_tokens("basic", "")


def test_open_metrics_without_a_token_file() -> None:
    """Without a token file (auto), /metrics is open, as before."""
    m = Metrics.from_config(ServerConfig())
    m.start_http("127.0.0.1:0")
    try:
        status, body, _ = scrape(m.port, None)
    finally:
        m.stop_http()
    assert status == 200
    assert "strata_rpcs_total" in body


def test_port_in_use_is_one_clear_error() -> None:
    """A metrics address already taken is an OSError naming it."""
    first = Metrics()
    first.start_http("127.0.0.1:0")
    try:
        with pytest.raises(OSError, match=f"cannot listen for metrics on 127.0.0.1:{first.port}"):
            Metrics().start_http(f"127.0.0.1:{first.port}")
    finally:
        first.stop_http()


# --- promtool on the shipped rules and scrape config ------------------------------------------

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not installed (Debian: apt-get install prometheus; .ci/run does)",
)


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    """Run promtool in deploy/prometheus (bounded in time)."""
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], cwd=PROMETHEUS, capture_output=True, text=True, timeout=120, check=False
    )


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    """alerts.yaml is valid for Prometheus (syntax, PromQL, templates)."""
    result = promtool("check", "rules", "alerts.yaml")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_rule_unit_tests() -> None:
    """alerts.test.yaml: target down/absent, restarts, the first error, capacity, borrowing."""
    result = promtool("test", "rules", "alerts.test.yaml")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_checks_the_scrape_config() -> None:
    """prometheus.yaml (the scrape job with its bearer token file) is a valid configuration."""
    result = promtool("check", "config", "--syntax-only", "prometheus.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
