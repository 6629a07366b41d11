"""``strata-policy simulate``: replay traces through the engine and compare policies.

The lead's ``strata_policy/cli.py`` calls ``register(subparsers)``; the parser it adds sets
``handler`` to ``run``, which returns the process exit code (0 done, 2 bad arguments).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import structlog

from strata_policy.errors import InvalidArgument
from strata_policy.simulate import autoscale_cli
from strata_policy.simulate.arrivals import DEFAULT_TUNE
from strata_policy.simulate.policies import DEFAULT_POLICIES, parse_policies
from strata_policy.simulate.progress import Progress
from strata_policy.simulate.protocol1 import Replay1Result
from strata_policy.simulate.protocol2 import Replay2Result
from strata_policy.simulate.report import (
    plot1,
    plot2,
    summarise,
    table1,
    table2,
    write_csv1,
    write_csv2,
)
from strata_policy.simulate.sweep import Replay, ReplayJob, executor_for, run_sweep
from strata_policy.simulate.variants import PAPER_VARIANTS, parse_variant

EPILOG = """examples:
  strata-policy simulate data/openb --seeds 42-51 --jobs 2 --plot alloc.png
  strata-policy simulate data/openb --policies RANDOM,FRAGMENTATION_AWARE --seeds 42
  strata-policy simulate cluster.json --protocol 2 --scopes scopes.json --csv timeline.csv
  strata-policy simulate data/openb --dask tcp://scheduler:8786 --seeds 42-51
  strata-policy simulate data/openb --variant gpuspec10,gpuspec33 --seeds 42-51 --jobs 2
policies: any of FIRST_FIT BEST_FIT LEAST_ALLOCATED MOST_ALLOCATED BALANCED_ALLOCATION
  DOT_PRODUCT FRAGMENTATION_AWARE RANDOM, plus BEST_FIT:paper and FRAGMENTATION_AWARE:paper
  (the FGD paper's formulas); see docs/simulation.md.
variants: gpuspec<p> gpushare<p> multigpu<p> nongpu<p> (the FGD paper's trace families,
  e.g. gpuspec33 = GPU pods naming a GPU model hold 33 % of the GPU requests); "paper" = all
  sixteen the paper publishes."""


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]  # argparse's private generic
    """Add the ``simulate`` subcommand and its handler."""
    p = subparsers.add_parser(
        "simulate",
        help="replay a trace through the engine and compare placement policies",
        description=__doc__.splitlines()[0] if __doc__ else None,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "traces",
        nargs="+",
        type=Path,  # ``day`` (the synthetic day) is taken as a name by --protocol autoscale
        metavar="TRACE",
        help="an openb folder, an openb pod list CSV, or a JSON trace of ours",
    )
    p.add_argument(
        "--nodes",
        type=Path,
        default=None,
        help="openb node list (default: openb_node_list_gpu_node.csv beside the pods)",
    )
    p.add_argument(
        "--protocol",
        type=_protocol,
        default=1,
        help="1: the FGD paper's arrivals-only replay; 2: the trace's own clock; "
        "autoscale: autoscalers on the trace's clock (TRACE may be 'day'), docs/capacity.md",
    )
    p.add_argument("--policies", default=DEFAULT_POLICIES, help="comma-separated policies")
    p.add_argument("--seeds", default="42", help="e.g. 42, 42-51 or 42,45")
    p.add_argument(
        "--tune",
        type=float,
        default=DEFAULT_TUNE,
        help="protocol 1: arrived GPUs as a share of the cluster's (default 1.3)",
    )
    p.add_argument("--scopes", type=Path, default=None, help="protocol 2: a JSON scope file")
    p.add_argument("--head", type=int, default=0, help="replay only the first N workloads")
    p.add_argument(
        "--variant",
        default="",
        help="comma-separated trace variants to build from each trace (e.g. gpuspec33), "
        "'default' for the trace itself, 'paper' for the paper's sixteen",
    )
    p.add_argument(
        "--variant-seed", type=int, default=0, help="seed of the variants' draws (default 0)"
    )
    p.add_argument("--jobs", type=int, default=1, help="local worker processes")
    p.add_argument(
        "--dask",
        default="",
        metavar="ADDRESS",
        help="run the replays on a Dask scheduler, e.g. tcp://host:8786",
    )
    p.add_argument("--csv", type=Path, default=None, help="write per-replay figures here")
    p.add_argument("--plot", type=Path, default=None, help="write a PNG plot here (matplotlib)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    autoscale_cli.add_arguments(p)
    p.set_defaults(handler=run)


def _protocol(text: str) -> int | str:
    """``1``, ``2`` or ``autoscale``."""
    if text in ("1", "2"):
        return int(text)
    if text == "autoscale":
        return text
    raise argparse.ArgumentTypeError(f"invalid protocol {text!r}: 1, 2 or autoscale")


def quiet_engine_logs() -> None:
    """Keep the engine's per-call info logs off the table: a replay makes thousands of calls."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def parse_seeds(text: str) -> tuple[int, ...]:
    """``42``, ``42-51`` (inclusive) or ``42,45,50-51`` into seeds, order kept."""
    seeds: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, dash, high = part.partition("-")
        try:
            first, last = int(low), int(high) if dash else int(low)
        except ValueError:
            raise InvalidArgument.one("seeds", f"bad seed range {part!r}") from None
        if last < first:
            raise InvalidArgument.one("seeds", f"empty seed range {part!r}")
        seeds.extend(range(first, last + 1))
    if not seeds:
        raise InvalidArgument.one("seeds", "no seed given")
    return tuple(dict.fromkeys(seeds))


def parse_variants(text: str) -> tuple[str, ...]:
    """``gpuspec10,default`` into variant names (``""`` = the trace itself), order kept;
    ``paper`` expands to the paper's sixteen; an unknown name raises."""
    names: list[str] = []
    for part in filter(None, (p.strip().lower() for p in text.split(","))):
        if part == "default":
            names.append("")
        elif part == "paper":
            names.extend(PAPER_VARIANTS)
        else:
            names.append(parse_variant(part).name)
    return tuple(dict.fromkeys(names)) or ("",)


def build_jobs(args: argparse.Namespace) -> list[ReplayJob]:
    """Every (trace, variant, policy, seed) replay the arguments ask for, in table order."""
    policies = parse_policies(args.policies)
    seeds = parse_seeds(args.seeds)
    variants = parse_variants(args.variant)
    for trace in args.traces:
        if not trace.exists():
            raise InvalidArgument.one("traces", f"no such file or folder: {trace}")
    for flag, path in (("nodes", args.nodes), ("scopes", args.scopes)):
        if path and not path.is_file():
            raise InvalidArgument.one(flag, f"no such file: {path}")
    return [
        ReplayJob(
            trace_path=str(trace.resolve()),
            policy=policy,
            seed=seed,
            protocol=args.protocol,
            node_csv=str(args.nodes.resolve()) if args.nodes else "",
            scopes_path=str(args.scopes.resolve()) if args.scopes else "",
            tune=args.tune,
            head=args.head,
            variant=variant,
            variant_seed=args.variant_seed,
        )
        for trace in args.traces
        for variant in variants
        for policy in policies
        for seed in seeds
    ]


def run(args: argparse.Namespace) -> int:
    """Run the sweep, print the table, write the CSV and plot when asked.

    Bad arguments, and a trace or scope file found malformed only when a replay loads it, are
    one line and exit code 2 (not an "internal error"): both are the caller's input.
    """
    if args.protocol == "autoscale":
        quiet_engine_logs()
        return autoscale_cli.run(args)
    try:
        jobs = build_jobs(args)
        quiet_engine_logs()
        progress = Progress(len(jobs), enabled=not args.no_progress)
        with executor_for(args.jobs, args.dask) as executor:
            results: list[Replay] = run_sweep(jobs, executor, progress)
    except InvalidArgument as exc:
        print(f"strata-policy simulate: {exc}", file=sys.stderr)
        return 2
    if args.protocol == 1:
        ones = [r for r in results if isinstance(r, Replay1Result)]
        summaries = summarise(ones)
        print(table1(summaries))
        if args.csv:
            write_csv1(args.csv, ones)
        if args.plot:
            plot1(args.plot, summaries)
    else:
        twos = [r for r in results if isinstance(r, Replay2Result)]
        print(table2(twos))
        if args.csv:
            write_csv2(args.csv, twos)
        if args.plot:
            plot2(args.plot, twos)
    return 0
