"""Operator-facing `serve` options: log format by terminal, metrics auth and health flags."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from strata_policy.cli import build_parser, configure_logging, log_renderer


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        """Yes."""
        return True


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Put the test session's structlog configuration back afterwards."""
    saved: dict[str, Any] = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.mark.parametrize(
    ("fmt", "stream", "expected"),
    [
        pytest.param("auto", Terminal(), "console", id="auto on a terminal: console"),
        pytest.param("auto", io.StringIO(), "json", id="auto on a pipe or file: json"),
        pytest.param("json", Terminal(), "json", id="json forced on a terminal"),
        pytest.param("console", io.StringIO(), "console", id="console forced on a pipe"),
    ],
)
def test_log_renderer(fmt: str, stream: io.StringIO, expected: str) -> None:
    """--log-format auto picks console for a person at a terminal, JSON for everything else."""
    assert log_renderer(fmt, stream) == expected


def test_unknown_log_format_is_refused() -> None:
    """A format outside auto/json/console is a ValueError listing the choices."""
    with pytest.raises(ValueError, match="auto, json, console"):
        log_renderer("yaml", io.StringIO())


@pytest.mark.usefixtures("restore_logging")
def test_json_lines_off_a_terminal() -> None:
    """Off a terminal (auto), each event is one JSON object with level and UTC timestamp."""
    out = io.StringIO()
    configure_logging("info", "auto", out)
    structlog.get_logger("t").info("serving", port=1)
    structlog.get_logger("t").debug("hidden")
    (line,) = out.getvalue().splitlines()
    event = json.loads(line)
    assert event["event"] == "serving"
    assert event["port"] == 1
    assert event["level"] == "info"
    assert event["timestamp"].endswith("Z")


@pytest.mark.usefixtures("restore_logging")
def test_console_lines_on_a_terminal() -> None:
    """On a terminal (auto), events are human key=value lines, not JSON."""
    out = Terminal()
    configure_logging("info", "auto", out)
    structlog.get_logger("t").info("serving", port=1)
    text = out.getvalue()
    assert "serving" in text
    assert "port" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.splitlines()[0])


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        pytest.param([], {}, ("auto", "auto", ""), id="defaults"),
        pytest.param(
            ["--log-format", "json", "--metrics-auth", "none", "--health-address", ":8081"],
            {},
            ("json", "none", ":8081"),
            id="flags",
        ),
        pytest.param(
            [],
            {
                "STRATA_LOG_FORMAT": "console",
                "STRATA_METRICS_AUTH": "token",
                "STRATA_HEALTH_ADDRESS": "0.0.0.0:8081",
            },
            ("console", "token", "0.0.0.0:8081"),
            id="environment",
        ),
        pytest.param(
            ["--log-format", "json"],
            {"STRATA_LOG_FORMAT": "console"},
            ("json", "auto", ""),
            id="a flag wins over its variable",
        ),
    ],
)
def test_serve_flags(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], env: dict[str, str], expected: tuple[str, ...]
) -> None:
    """The new serve flags parse, with STRATA_* variables as defaults."""
    for name in ("STRATA_LOG_FORMAT", "STRATA_METRICS_AUTH", "STRATA_HEALTH_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = build_parser().parse_args(["serve", *argv])
    assert (args.log_format, args.metrics_auth, args.health_address) == expected


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--log-format", "yaml"], id="bad log format"),
        pytest.param(["--metrics-auth", "basic"], id="bad metrics auth"),
    ],
)
def test_bad_serve_flags_are_usage_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A value outside the choices exits 2 with argparse's one-line usage error."""
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(["serve", *argv])
    assert caught.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
