"""Benchmarks: each bench_*.py exposes run() -> list[str] (markdown lines)."""
