"""``strata-policy``: ``serve`` the engine, operate it with ``ctl``, replay traces (``simulate``).

Every ``serve`` flag has a ``STRATA_*`` environment variable (``--address`` ↔
``STRATA_ADDRESS``); a flag wins over the variable. ``ctl`` talks to a running server over gRPC
and prints readable tables, or the raw response with ``--output json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import structlog

from strata_policy.ctl import commands
from strata_policy.service.config import ServerConfig
from strata_policy.state.limits import Limits


def _env(name: str, default: str) -> str:
    return os.environ.get(f"STRATA_{name.upper()}", default)


LOG_FORMATS = ("auto", "json", "console")


def log_renderer(fmt: str, stream: TextIO) -> str:
    """The renderer ``--log-format fmt`` means on ``stream``: ``auto`` is ``console`` on a
    terminal (a person reading) and ``json`` otherwise (a container, a pipe, a log shipper)."""
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {fmt!r}")
    if fmt != "auto":
        return fmt
    isatty = getattr(stream, "isatty", None)
    return "console" if callable(isatty) and isatty() else "json"


def configure_logging(level: str, fmt: str, stream: TextIO | None = None) -> None:
    """structlog to ``stream`` (stderr): one JSON object per line (``json``), coloured
    key=value lines (``console``), or ``auto``: console on a terminal, JSON otherwise."""
    import logging  # noqa: PLC0415  # only the server configures logging

    out = sys.stderr if stream is None else stream
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if log_renderer(fmt, out) == "json"
        else structlog.dev.ConsoleRenderer(colors=bool(out.isatty()))
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            getattr(logging, level.upper(), logging.INFO)
        ),
        # WriteLogger: one write and flush per line, about half PrintLogger's cost per RPC.
        logger_factory=structlog.WriteLoggerFactory(out),
        cache_logger_on_first_use=True,
    )


def _serve_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="run the gRPC server (in memory unless --state-dir)")
    d = ServerConfig()
    lim = Limits()
    p.add_argument("--address", default=_env("address", d.address), help="host:port to listen on")
    p.add_argument("--workers", type=int, default=int(_env("workers", str(d.workers))))
    p.add_argument(
        "--max-message-bytes",
        type=int,
        default=int(_env("max_message_bytes", str(d.max_message_bytes))),
    )
    p.add_argument(
        "--max-concurrent-rpcs",
        type=int,
        default=int(_env("max_concurrent_rpcs", str(d.max_concurrent_rpcs))),
    )
    p.add_argument("--log-level", default=_env("log_level", "info"))
    p.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=_env("log_format", "auto"),
        help="auto: console on a terminal, JSON otherwise",
    )
    p.add_argument("--drain-seconds", type=float, default=float(_env("drain_seconds", "0")))
    p.add_argument("--tls-cert", default=_env("tls_cert", ""))
    p.add_argument("--tls-key", default=_env("tls_key", ""))
    p.add_argument("--tls-client-ca", default=_env("tls_client_ca", ""), help="mutual TLS")
    p.add_argument("--token-file", default=_env("token_file", ""), help="bearer tokens (YAML/JSON)")
    p.add_argument("--state-dir", default=_env("state_dir", ""), help="durable state (SQLite)")
    p.add_argument(
        "--checkpoint-every",
        type=int,
        default=int(_env("checkpoint_every", str(d.checkpoint_every))),
        help="write a whole snapshot after this many changes to a cluster",
    )
    p.add_argument("--metrics-address", default=_env("metrics_address", ""), help="host:port")
    p.add_argument(
        "--metrics-auth",
        choices=("auto", "token", "none"),
        default=_env("metrics_auth", d.metrics_auth),
        help="/metrics needs a token-file token granted '*' (auto: when --token-file is set)",
    )
    p.add_argument(
        "--health-address",
        default=_env("health_address", d.health_address),
        help="host:port of a plaintext health-only gRPC listener for probes",
    )
    for name in (
        "max_clusters",
        "max_nodes",
        "max_scopes",
        "max_workloads",
        "max_batch",
        "max_batch_replicas",
    ):
        flag = "--" + name.replace("_", "-")
        p.add_argument(flag, type=int, default=int(_env(name, str(getattr(lim, name)))))
    p.set_defaults(handler=_run_serve)


def _run_serve(args: argparse.Namespace) -> int:
    from strata_policy.service.auth import TokenFileError  # noqa: PLC0415  # keeps `ctl` light
    from strata_policy.service.server import serve  # noqa: PLC0415
    from strata_policy.service.tls import TlsConfigError  # noqa: PLC0415
    from strata_policy.state.durable import JournalCorruptError  # noqa: PLC0415

    configure_logging(args.log_level, args.log_format)
    config = ServerConfig(
        address=args.address,
        workers=args.workers,
        max_message_bytes=args.max_message_bytes,
        max_concurrent_rpcs=args.max_concurrent_rpcs,
        drain_seconds=args.drain_seconds,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_client_ca=args.tls_client_ca,
        token_file=args.token_file,
        state_dir=args.state_dir,
        checkpoint_every=args.checkpoint_every,
        metrics_address=args.metrics_address,
        metrics_auth=args.metrics_auth,
        health_address=args.health_address,
        limits=Limits(
            max_clusters=args.max_clusters,
            max_nodes=args.max_nodes,
            max_scopes=args.max_scopes,
            max_workloads=args.max_workloads,
            max_batch=args.max_batch,
            max_batch_replicas=args.max_batch_replicas,
        ),
    )
    try:
        return serve(config)
    except (TokenFileError, TlsConfigError, JournalCorruptError, OSError) as exc:
        print(f"strata-policy: {exc}", file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    """The whole command line."""
    parser = argparse.ArgumentParser(prog="strata-policy", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _serve_parser(sub)
    commands.register(sub)
    try:
        from strata_policy.simulate.cli import register as register_simulate  # noqa: PLC0415
    except ImportError:  # the simulator's optional extras are missing
        pass
    else:
        register_simulate(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``strata-policy`` console script."""
    args = build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return code


def dump(data: object) -> None:
    """Print JSON (``--output json``)."""
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    raise SystemExit(main())
