"""``strata-policy``: ``serve`` the engine, operate it with ``ctl``, replay traces (``simulate``).

Every ``serve`` flag has a ``STRATA_*`` environment variable (``--address`` ↔
``STRATA_ADDRESS``); a flag wins over the variable. ``ctl`` talks to a running server over gRPC
and prints readable tables, or the raw response with ``-o json|yaml``.

This module is a thin dispatcher: the top level is a Click group (``--version``, shell
completion, ``completion SHELL``), ``ctl`` is Click (``strata_policy.ctl``), ``kube`` is helper
H's ``strata_policy.kube.cli.main`` imported when used, and ``serve``/``simulate`` keep their
argparse parsers (``build_parser``), to which their arguments are handed unchanged.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO, TypeVar

import click
import structlog

from strata_policy.ctl.commands import ctl
from strata_policy.ctl.session import CtlError
from strata_policy.service.config import ServerConfig
from strata_policy.state.request_checks import Limits

T = TypeVar("T")


def _env(name: str, default: str) -> str:
    return os.environ.get(f"STRATA_{name.upper()}", default)


def _checked(name: str, parse: Callable[[str], T]) -> Callable[[str], T]:
    """``parse`` for the flag whose variable is ``STRATA_<NAME>``. Its default is the variable's
    text (argparse parses a string default like a value given on the line, and only for the
    command that runs, so a bad variable never breaks another command); an error says which
    variable when the bad text is the variable's."""

    def checked(text: str) -> T:
        try:
            return parse(text)
        except argparse.ArgumentTypeError as exc:
            variable = f"STRATA_{name.upper()}"
            if os.environ.get(variable) == text:
                raise argparse.ArgumentTypeError(f"{exc} (from ${variable})") from None
            raise

    checked.__name__ = getattr(parse, "__name__", name)  # argparse names it in some messages
    return checked


def _one_of(*choices: str) -> Callable[[str], str]:
    """A choice flag, any case (``WARNING`` as ``warning``)."""

    def one_of(text: str) -> str:
        value = text.lower()
        if value not in choices:
            listed = ", ".join(repr(c) for c in choices)
            raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {listed})")
        return value

    return one_of


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


def _positive_int(text: str) -> int:
    """A count flag (workers, slots, bytes, sizes): a whole number of at least 1. Zero or less
    would fail later with a traceback (``--workers 0``) or mean something else to gRPC (a
    negative message size is "unlimited"), so it is a usage error here."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seconds(text: str) -> float:
    """A duration flag: a finite number of seconds, zero or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be zero or more seconds, got {text}")
    return value


def _serve_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="run the gRPC server (in memory unless --state-dir)")
    d = ServerConfig()
    lim = Limits()
    p.add_argument("--address", default=_env("address", d.address), help="host:port to listen on")
    p.add_argument(
        "--workers",
        type=_checked("workers", _positive_int),
        default=_env("workers", str(d.workers)),
    )
    p.add_argument(
        "--max-message-bytes",
        type=_checked("max_message_bytes", _positive_int),
        default=_env("max_message_bytes", str(d.max_message_bytes)),
    )
    p.add_argument(
        "--max-concurrent-rpcs",
        type=_checked("max_concurrent_rpcs", _positive_int),
        default=_env("max_concurrent_rpcs", str(d.max_concurrent_rpcs)),
    )
    p.add_argument(
        "--log-level",
        type=_checked("log_level", _one_of("debug", "info", "warning", "error")),
        default=_env("log_level", "info"),
    )
    p.add_argument(
        "--log-format",
        type=_checked("log_format", _one_of(*LOG_FORMATS)),
        default=_env("log_format", "auto"),
        help="auto: console on a terminal, JSON otherwise",
    )
    p.add_argument(
        "--drain-seconds",
        type=_checked("drain_seconds", _seconds),
        default=_env("drain_seconds", "0"),
    )
    p.add_argument("--tls-cert", default=_env("tls_cert", ""))
    p.add_argument("--tls-key", default=_env("tls_key", ""))
    p.add_argument("--tls-client-ca", default=_env("tls_client_ca", ""), help="mutual TLS")
    p.add_argument("--token-file", default=_env("token_file", ""), help="bearer tokens (YAML/JSON)")
    p.add_argument("--state-dir", default=_env("state_dir", ""), help="durable state (SQLite)")
    p.add_argument(
        "--checkpoint-every",
        type=_checked("checkpoint_every", _positive_int),
        default=_env("checkpoint_every", str(d.checkpoint_every)),
        help="write a whole snapshot after this many changes to a cluster",
    )
    p.add_argument("--metrics-address", default=_env("metrics_address", ""), help="host:port")
    p.add_argument(
        "--metrics-auth",
        type=_checked("metrics_auth", _one_of("auto", "token", "none")),
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
        p.add_argument(
            flag,
            type=_checked(name, _positive_int),
            default=_env(name, str(getattr(lim, name))),
        )
    p.set_defaults(handler=_run_serve)


def _run_serve(args: argparse.Namespace) -> int:
    from strata_policy.service.auth import TokenFileError  # noqa: PLC0415  # keeps `ctl` light
    from strata_policy.service.server import serve  # noqa: PLC0415
    from strata_policy.service.tls import TlsConfigError  # noqa: PLC0415
    from strata_policy.state.durable import JournalError  # noqa: PLC0415

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
    except (TokenFileError, TlsConfigError, JournalError, OSError) as exc:
        print(f"strata-policy: {exc}", file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    """The argparse commands: ``serve`` and ``simulate`` (ctl and kube are dispatched apart)."""
    parser = argparse.ArgumentParser(prog="strata-policy", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _serve_parser(sub)
    try:
        from strata_policy.simulate.cli import register as register_simulate  # noqa: PLC0415
    except ImportError:  # the simulator's optional extras are missing
        pass
    else:
        register_simulate(sub)
    return parser


def _run_argparse(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    code: int = args.handler(args)
    return code


PASS_THROUGH = {
    "context_settings": {"ignore_unknown_options": True, "allow_extra_args": True},
    "add_help_option": False,
}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("strata-policy")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


@click.group("strata-policy", context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(_version(), "--version", "-V", prog_name="strata-policy")
def root() -> None:
    """Strata: a policy engine for multi-tenant clusters (quotas, placement, reclaim) over gRPC.

    \b
    Shell completion:  eval "$(strata-policy completion bash)"   (or zsh, fish)
    """


@root.command("serve", help="run the gRPC server (serve -h for its flags)", **PASS_THROUGH)
@click.pass_context
def _serve(ctx: click.Context) -> None:
    ctx.exit(_run_argparse(["serve", *ctx.args]))


@root.command("simulate", help="replay a trace and compare policies (simulate -h)", **PASS_THROUGH)
@click.pass_context
def _simulate(ctx: click.Context) -> None:
    ctx.exit(_run_argparse(["simulate", *ctx.args]))


@root.command("kube", help="connect a Kubernetes cluster to a server (kube -h)", **PASS_THROUGH)
@click.pass_context
def _kube(ctx: click.Context) -> None:
    import importlib  # noqa: PLC0415

    try:  # by name: helper H's package is optional and heavy, imported only when used
        kube_cli = importlib.import_module("strata_policy.kube.cli")
    except ImportError as exc:
        raise CtlError(f"kube is not available: {exc}") from None
    code: int = kube_cli.main(list(ctx.args))
    ctx.exit(code)


@root.command("completion")
@click.argument("shell", type=click.Choice(("bash", "zsh", "fish")))
def _completion(shell: str) -> None:
    """Print the shell completion script: eval "$(strata-policy completion bash)"."""
    from click.shell_completion import get_completion_class  # noqa: PLC0415

    cls = get_completion_class(shell)
    assert cls is not None, "click ships bash, zsh and fish"
    click.echo(cls(root, {}, "strata-policy", "_STRATA_POLICY_COMPLETE").source())


root.add_command(ctl)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``strata-policy`` console script: its exit code, never a traceback.

    0 done, 1 an error (one ``error: ...`` line), 2 a usage error (one line, with where to find
    help), 130 interrupted.
    """
    try:
        rv = root.main(
            args=list(sys.argv[1:] if argv is None else argv),
            prog_name="strata-policy",
            complete_var="_STRATA_POLICY_COMPLETE",
            standalone_mode=False,
        )
    except click.exceptions.NoArgsIsHelpError as exc:  # a group called bare: its help
        click.echo(exc.format_message(), err=True)
        return exc.exit_code
    except click.UsageError as exc:
        where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        click.echo(f"error: {exc.format_message()}{where}", err=True)
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except SystemExit as exc:  # argparse (serve, simulate) and shell completion exit this way
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except (KeyboardInterrupt, click.Abort):
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: one line, not a traceback; the report names the class
        click.echo(f"error: internal error ({type(exc).__name__}): {exc}", err=True)
        return 1
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    raise SystemExit(main())
