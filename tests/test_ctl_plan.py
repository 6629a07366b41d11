"""``ctl plan FILE``: the plan as tables, and a bad catalog as one error line."""

from __future__ import annotations

from pathlib import Path

from ctl_kit import EXAMPLES, Run, demo, no_ambient_cluster, one_error_line, run

__all__ = ["demo", "no_ambient_cluster", "run"]  # fixtures used by name


def test_plan_example(run: Run, demo: str) -> None:
    """examples/plan.yaml adds one A100 node and one T4 node and states the bound."""
    ran = run("plan", str(EXAMPLES / "plan.yaml"), "-c", demo)
    assert ran.code == 0, ran.err
    assert "dry run" in ran.out
    assert "lower bound" in ran.out
    rows = {line.split()[0]: line.split()[1] for line in ran.out.splitlines() if line[:4] in
            ("a100", "t4x1")}  # fmt: skip
    assert rows == {"a100x8": "1", "t4x1": "1"}


def test_plan_bad_price(run: Run, demo: str, tmp_path: Path) -> None:
    """A negative price is one error line naming the field."""
    bad = tmp_path / "plan.yaml"
    bad.write_text(
        "nodeGroups:\n  - id: g\n    template: {id: g-, capacity: {cpu: 4}}\n"
        "    pricePerHour: -1\n    maxCount: 1\n"
    )
    ran = run("plan", str(bad), "-c", demo)
    assert ran.code == 1
    assert "price_per_hour" in one_error_line(ran)
