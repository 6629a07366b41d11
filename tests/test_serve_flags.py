"""`strata-policy serve` refuses a nonsensical number on its command line before starting."""

from __future__ import annotations

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
