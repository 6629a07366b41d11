"""Errors cross process boundaries intact (``simulate --jobs`` workers raise them to the parent)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from strata_policy import errors
from strata_policy.cli import main

SAMPLES: list[errors.StrataError] = [
    errors.StrataError("plain", metadata={"k": "v"}),
    errors.InvalidArgument(
        [errors.FieldViolation("a.b", "bad"), errors.FieldViolation("c", "worse")]
    ),
    errors.ClusterNotFound("c-1"),
    errors.GenerationConflict("c-1", 3, 4),
    errors.SizeLimitExceeded("max_nodes", 9, 8),
    errors.Unauthenticated("no token"),
    errors.PermissionDenied("read-only", cluster_id="c-1"),
    errors.InternalError("boom"),
    errors.ServerNotReady(1.5),
    errors.RequestIdReused("r-1", "admit"),
    errors.StorageUnavailable("c-1", "OSError: disk full"),
]


def _subclasses(cls: type[errors.StrataError]) -> list[type[errors.StrataError]]:
    out = [cls]
    for sub in cls.__subclasses__():
        out += _subclasses(sub)
    return out


def test_every_error_class_has_a_sample() -> None:
    """A new error class must be added to SAMPLES, so its pickling is checked too."""
    sampled = {type(e) for e in SAMPLES}
    assert [c.__name__ for c in _subclasses(errors.StrataError) if c not in sampled] == []


@pytest.mark.parametrize("error", [pytest.param(e, id=type(e).__name__) for e in SAMPLES])
def test_pickle_round_trip_keeps_every_field(error: errors.StrataError) -> None:
    """Unpickled, an error has the same class, message, args and fields as the original."""
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert str(back) == str(error)
    assert back.args == error.args
    assert vars(back) == vars(error)


def test_simulate_jobs_reports_a_bad_trace_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed trace found by a worker process is one line and exit 2, not a broken pool."""
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"nodes": []}))
    args = ["simulate", str(trace), "--policies", "BEST_FIT", "--jobs", "2", "--no-progress"]
    assert main(args) == 2
    assert capsys.readouterr().err.strip() == (
        f"strata-policy simulate: invalid request: trace: {trace}: no nodes"
    )


@pytest.mark.parametrize("flag", ["nodes", "scopes"])
def test_simulate_missing_side_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    """A --nodes or --scopes file that does not exist is refused before any replay starts."""
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"nodes": []}))
    missing = tmp_path / "missing"
    args = ["simulate", str(trace), "--protocol", "2", f"--{flag}", str(missing)]
    assert main(args) == 2
    assert capsys.readouterr().err.strip() == (
        f"strata-policy simulate: invalid request: {flag}: no such file: {missing}"
    )
