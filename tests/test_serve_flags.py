"""`strata-policy serve` refuses a nonsensical number on its command line before starting."""

from __future__ import annotations

from typing import Any

import pytest

from strata_policy.cli import main


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(("--workers", "0"), "--workers: must be at least 1, got 0", id="no workers"),
        pytest.param(("--workers", "x"), "--workers: 'x' is not a whole number", id="workers text"),
        pytest.param(
            ("--max-message-bytes", "-5"),
            "--max-message-bytes: must be at least 1, got -5",
            id="negative message size (gRPC's 'unlimited')",
        ),
        pytest.param(
            ("--max-concurrent-rpcs", "0"),
            "--max-concurrent-rpcs: must be at least 1, got 0",
            id="no call slots",
        ),
        pytest.param(
            ("--drain-seconds", "-1"),
            "--drain-seconds: must be zero or more seconds, got -1",
            id="negative drain",
        ),
        pytest.param(
            ("--drain-seconds", "inf"),
            "--drain-seconds: must be zero or more seconds, got inf",
            id="endless drain",
        ),
        pytest.param(
            ("--checkpoint-every", "0"),
            "--checkpoint-every: must be at least 1, got 0",
            id="checkpoint every 0 changes",
        ),
        pytest.param(("--max-nodes", "0"), "--max-nodes: must be at least 1, got 0", id="limit"),
        pytest.param(
            ("--log-level", "verbose"),
            "--log-level: invalid choice: 'verbose'",
            id="unknown log level (was: info, silently)",
        ),
    ],
)
def test_bad_numbers_are_usage_errors(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], expected: str
) -> None:
    """Each bad number is exit 2 with one line naming the flag; no server starts."""
    assert main(["serve", "--address", "127.0.0.1:1", *args]) == 2
    err = capsys.readouterr().err
    assert f"error: argument {expected}" in err
    assert "Traceback" not in err
    assert "internal error" not in err


def test_log_level_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """--log-level takes WARNING as well as warning (Python's and most tools' spelling)."""
    seen: list[str] = []
    monkeypatch.setattr(
        "strata_policy.cli.configure_logging", lambda level, fmt: seen.append(level)
    )
    monkeypatch.setattr("strata_policy.service.server.serve", lambda config: 0)
    assert main(["serve", "--log-level", "WARNING"]) == 0
    assert seen == ["warning"]


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        pytest.param(
            "STRATA_WORKERS",
            "abc",
            "--workers: 'abc' is not a whole number (from $STRATA_WORKERS)",
            id="workers not a number (was: a ValueError traceback for every command)",
        ),
        pytest.param(
            "STRATA_MAX_NODES",
            "0",
            "--max-nodes: must be at least 1, got 0 (from $STRATA_MAX_NODES)",
            id="a limit of 0",
        ),
        pytest.param(
            "STRATA_DRAIN_SECONDS",
            "-3",
            "--drain-seconds: must be zero or more seconds, got -3 (from $STRATA_DRAIN_SECONDS)",
            id="negative drain",
        ),
        pytest.param(
            "STRATA_LOG_LEVEL",
            "bogus",
            "--log-level: invalid choice: 'bogus'",
            id="unknown log level (was: taken as given)",
        ),
        pytest.param(
            "STRATA_METRICS_AUTH",
            "maybe",
            "--metrics-auth: invalid choice: 'maybe'",
            id="unknown metrics auth",
        ),
    ],
)
def test_bad_variables_are_usage_errors(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str,
    expected: str,
) -> None:
    """A bad STRATA_* value is exit 2 with one line naming the flag and the variable."""
    monkeypatch.setenv(variable, value)
    assert main(["serve", "--address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert f"error: argument {expected}" in err
    assert variable in err
    assert "Traceback" not in err


def test_a_bad_serve_variable_does_not_break_other_commands(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """STRATA_WORKERS is read only by serve: `strata-policy --version` still works."""
    monkeypatch.setenv("STRATA_WORKERS", "abc")
    assert main(["--version"]) == 0
    assert "strata-policy" in capsys.readouterr().out


def test_variables_set_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """A good STRATA_* value becomes the flag's value, parsed like one given on the line."""
    seen: list[Any] = []
    monkeypatch.setenv("STRATA_WORKERS", "3")
    monkeypatch.setenv("STRATA_LOG_LEVEL", "ERROR")
    monkeypatch.setenv("STRATA_DRAIN_SECONDS", "1.5")
    monkeypatch.setattr(
        "strata_policy.cli.configure_logging", lambda level, fmt: seen.append(level)
    )
    monkeypatch.setattr(
        "strata_policy.service.server.serve", lambda config: seen.append(config) or 0
    )
    assert main(["serve"]) == 0
    assert seen[0] == "error"
    assert (seen[1].workers, seen[1].drain_seconds) == (3, 1.5)
