"""Sweeps: traces × policies × seeds, each replay one job on a ``concurrent.futures`` executor.

Local processes by default (``--jobs N``; one job runs in this process), or a Dask distributed
cluster through ``Client(address).get_executor()`` (``--dask tcp://host:8786``): the same
``submit``/``as_completed`` code drives both, and the results come back in job order whatever
order they finish in, so the table and plot do not depend on where a replay ran. A job names its
trace by path and loads it in the worker (cached per process), so workers need the same files at
the same path; what travels is a small job description and a small result.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from strata_policy.simulate.arrivals import DEFAULT_TUNE
from strata_policy.simulate.policies import PolicySpec
from strata_policy.simulate.progress import Progress
from strata_policy.simulate.protocol1 import Replay1Result, replay1
from strata_policy.simulate.protocol2 import Replay2Result, replay2
from strata_policy.simulate.trace import Trace, load_scopes, load_trace
from strata_policy.simulate.variants import build_variant

Replay = Replay1Result | Replay2Result


@dataclass(frozen=True, slots=True)
class ReplayJob:
    """One replay: which trace (by path, then ``variant`` of it), policy, seed and protocol;
    ``head`` 0 = every pod."""

    trace_path: str
    policy: PolicySpec
    seed: int
    protocol: int = 1
    node_csv: str = ""
    scopes_path: str = ""
    tune: float = DEFAULT_TUNE
    head: int = 0
    variant: str = ""  # a trace variant (``simulate/variants.py``); "" = the trace as it is
    variant_seed: int = 0


@functools.lru_cache(maxsize=8)
def _load(
    trace_path: str, node_csv: str, scopes_path: str, head: int, variant: str, variant_seed: int
) -> Trace:
    trace = load_trace(Path(trace_path), Path(node_csv) if node_csv else None)
    if variant:
        trace = build_variant(trace, variant, variant_seed)
    if scopes_path:
        trace = trace.with_scopes(load_scopes(Path(scopes_path)))
    return trace.head(head) if head else trace


def run_job(job: ReplayJob) -> Replay:
    """Run one replay where this function is called (a worker process or this one)."""
    trace = _load(
        job.trace_path, job.node_csv, job.scopes_path, job.head, job.variant, job.variant_seed
    )
    if job.protocol == 2:
        return replay2(trace, job.policy, job.seed)
    return replay1(trace, job.policy, job.seed, tune=job.tune)


class _InlineExecutor(cf.Executor):
    """Runs each job at submit time: ``--jobs 1`` without a process to start."""

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]  # Executor's own signature
        future: cf.Future[object] = cf.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # the future carries any failure to the caller
            future.set_exception(exc)
        return future


@contextmanager
def executor_for(jobs: int = 1, dask: str = "") -> Iterator[cf.Executor]:
    """The executor a sweep runs on: Dask when given a scheduler address, else local processes."""
    if dask:
        from distributed import Client  # noqa: PLC0415  # optional extra, only for --dask

        client = Client(dask)  # type: ignore[no-untyped-call]  # distributed is unannotated
        try:
            yield client.get_executor()  # type: ignore[no-untyped-call]
        finally:
            client.close()  # type: ignore[no-untyped-call]
    elif jobs <= 1:
        yield _InlineExecutor()
    else:
        with cf.ProcessPoolExecutor(max_workers=jobs) as pool:
            yield pool


def run_sweep(
    jobs: Sequence[ReplayJob],
    executor: cf.Executor,
    progress: Progress | None = None,
    runner: Callable[[ReplayJob], Replay] = run_job,
) -> list[Replay]:
    """Submit every job, report each as it finishes, return the results in job order."""
    if isinstance(executor, _InlineExecutor):  # one by one here, so the bar moves as they finish
        done = []
        for job in jobs:
            done.append(runner(job))
            if progress is not None:
                progress.update()
        if progress is not None:
            progress.close()
        return done
    futures = [executor.submit(runner, job) for job in jobs]
    for future in cf.as_completed(futures):
        future.result()  # a failed replay stops the sweep with its own error
        if progress is not None:
            progress.update()
    if progress is not None:
        progress.close()
    return [f.result() for f in futures]
