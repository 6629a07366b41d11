"""`make bench`: run every ``benchmarks/bench_*.py`` (or those named) and print their tables.

Each module exposes ``run() -> list[str]``: markdown lines with figures measured in one run,
each beside its baseline from the same run (ratios, never absolute bars). The output is what
``docs/benchmarks.md`` records, with the command that made it.
"""

from __future__ import annotations

import importlib
import platform
import sys
import time
from pathlib import Path


def main(names: list[str]) -> int:
    """Run the named benchmarks (all when none) and print markdown."""
    import logging  # noqa: PLC0415

    import structlog  # noqa: PLC0415

    # The engine's logs would interleave with the tables: keep warnings only, on stderr.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    here = Path(__file__).parent
    modules = sorted(p.stem for p in here.glob("bench_*.py"))
    chosen = [m for m in modules if not names or m.removeprefix("bench_") in names or m in names]
    print(
        f"# Benchmarks ({time.strftime('%Y-%m-%d')}, {platform.machine()}, "
        f"{platform.python_version()}, command: python -m benchmarks {' '.join(names)})".rstrip()
        + "\n"
    )
    for name in chosen:
        module = importlib.import_module(f"benchmarks.{name}")
        started = time.perf_counter()
        lines = module.run()
        print(f"## {name}\n")
        print("\n".join(lines))
        print(f"\n({time.perf_counter() - started:.1f} s)\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
