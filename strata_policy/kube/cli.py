"""``strata-policy kube …``: run the controllers, or translate Kubernetes objects offline.

* ``kube sync``: list/watch Nodes, Pods, Namespaces and StrataScopes; keep the Strata cluster
  equal to them (``sync.py``);
* ``kube admit``: the same sync, plus admission of pods gated by ``strata.dev/admission``
  (``admit.py``); ``--no-sync`` when another process syncs;
* ``kube translate FILE…``: print the Strata objects for Kubernetes objects in YAML/JSON files
  (Nodes, Pods, StrataScopes, Kueue ClusterQueues/Cohorts, CloudNativePG Clusters, KServe
  InferenceServices), so a Kueue user can compare decisions without a controller running.

Both controllers stop cleanly on SIGTERM or SIGINT: watches are interrupted, threads joined, and
the process exits 0.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry, start_http_server

from strata_policy.kube.admit import AdmitConfig, Admitter
from strata_policy.kube.api import HttpKubeApi
from strata_policy.kube.conventions import GpuConventions, TranslationError
from strata_policy.kube.metrics import KubeCollector
from strata_policy.kube.mirror import OPTIONAL, PATHS
from strata_policy.kube.nodes import node_to_strata
from strata_policy.kube.platforms import cnpg_cluster_to_workload, inference_service_to_workloads
from strata_policy.kube.pods import pod_to_workload
from strata_policy.kube.reflector import Cache, Reflector
from strata_policy.kube.scopes import kueue_to_scopes, strata_scope_to_scope
from strata_policy.kube.sync import Syncer
from strata_policy.service.client import Client

TRANSLATE_KINDS = (
    "Node",
    "Pod",
    "StrataScope",
    "ClusterQueue",
    "Cohort",
    "Cluster",
    "InferenceService",
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strata-policy kube", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("sync", "keep a Strata cluster equal to the Kubernetes cluster"),
        ("admit", "sync, and admit and place pods gated by strata.dev/admission"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--server", default="127.0.0.1:50051", help="Strata gRPC address")
        p.add_argument("--token", default="", help="bearer token for the Strata server")
        p.add_argument("--cluster", required=True, help="Strata cluster id to keep in sync")
        p.add_argument("--context", default=None, help="kubeconfig context (outside a pod)")
        p.add_argument("--batch-window", type=float, default=0.2, help="seconds per batch")
        p.add_argument("--metrics-port", type=int, default=0, help="Prometheus port (0 = off)")
        p.add_argument("--gpu-style", choices=("strata", "hami", "gpushare"), default="strata")
        p.add_argument("--device-memory-mib", type=int, default=0)
        p.add_argument("--shared-replicas", type=int, default=1)
        p.add_argument("--ignore-taint", action="append", default=None, metavar="KEY")
        if name == "admit":
            p.add_argument("--policy", default="POLICY_UNSPECIFIED", help="Place policy enum")
            p.add_argument("--no-sync", action="store_true", help="another process syncs")
    t = sub.add_parser("translate", help="print Strata objects for Kubernetes YAML/JSON files")
    t.add_argument("files", nargs="+", type=Path)
    t.add_argument("--scope", default="default", help="scope for workloads (Pods, platforms)")
    t.add_argument("--gpu-style", choices=("strata", "hami", "gpushare"), default="strata")
    t.add_argument("--device-memory-mib", type=int, default=0)
    t.add_argument("--shared-replicas", type=int, default=1)
    t.add_argument("--ignore-taint", action="append", default=None, metavar="KEY")
    return parser


def _gpu(args: argparse.Namespace) -> GpuConventions:
    taints = tuple(args.ignore_taint) if args.ignore_taint is not None else ("nvidia.com/gpu",)
    return GpuConventions(
        shared_replicas=args.shared_replicas,
        device_memory_mib=args.device_memory_mib,
        ignore_taint_keys=taints,
        device_style=args.gpu_style,
    )


def translate(objects: Sequence[dict[str, Any]], scope: str, gpu: GpuConventions) -> dict[str, Any]:
    """Strata nodes, scopes and workloads for a list of Kubernetes objects (errors listed)."""
    out: dict[str, list[Any]] = {"nodes": [], "scopes": [], "workloads": [], "errors": []}
    queues = [o for o in objects if o.get("kind") == "ClusterQueue"]
    cohorts = [o for o in objects if o.get("kind") == "Cohort"]
    handlers: dict[str, Callable[[dict[str, Any]], None]] = {
        "Node": lambda o: out["nodes"].append(node_to_strata(o, gpu)),
        "Pod": lambda o: out["workloads"].append(pod_to_workload(o, scope, gpu)),
        "StrataScope": lambda o: out["scopes"].append(strata_scope_to_scope(o, gpu)),
        "Cluster": lambda o: out["workloads"].append(cnpg_cluster_to_workload(o, scope, gpu=gpu)),
        "InferenceService": lambda o: out["workloads"].extend(
            inference_service_to_workloads(o, scope, gpu=gpu)
        ),
    }
    for obj in objects:
        kind = str(obj.get("kind"))
        try:
            if kind in handlers:
                handlers[kind](obj)
            elif kind not in ("ClusterQueue", "Cohort"):
                out["errors"].append(
                    f"{kind}: not translated (one of {', '.join(TRANSLATE_KINDS)})"
                )
        except (TranslationError, ValueError, KeyError, TypeError) as exc:
            out["errors"].append(f"{kind}: {exc}")
    try:
        out["scopes"] += kueue_to_scopes(queues, cohorts, gpu)
    except (TranslationError, ValueError) as exc:
        out["errors"].append(f"Kueue: {exc}")
    return out


def _load(files: Sequence[Path]) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind", "").endswith("List"):
                objects += [i for i in doc.get("items") or () if isinstance(i, dict)]
            elif isinstance(doc, dict):
                objects.append(doc)
    return objects


def _run_controllers(args: argparse.Namespace) -> int:
    gpu = _gpu(args)
    api = HttpKubeApi.from_environment(args.context)
    client = Client(args.server, token=args.token)
    cache = Cache()
    syncer = Syncer(client, args.cluster, cache, gpu, batch_window_s=args.batch_window)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    threads = [
        threading.Thread(
            target=Reflector(api, cache, kind, path, optional=kind in OPTIONAL).run,
            args=(stop,),
            name=kind,
        )
        for kind, path in PATHS.items()
    ]
    if not (args.command == "admit" and args.no_sync):
        threads.append(threading.Thread(target=syncer.run, args=(stop, tuple(PATHS)), name="sync"))
    if args.command == "admit":
        admitter = Admitter(api, client, AdmitConfig(args.cluster, gpu, policy=args.policy))
        threads.append(threading.Thread(target=_admit_loop, args=(admitter, cache, stop)))
    if args.metrics_port:
        registry = CollectorRegistry()
        registry.register(KubeCollector(cache, syncer))
        start_http_server(args.metrics_port, registry=registry)
    for t in threads:
        t.start()
    stop.wait()
    api.close()
    for t in threads:
        t.join(timeout=10)
    client.close()
    return 0


def _admit_loop(admitter: Admitter, cache: Cache, stop: threading.Event) -> None:
    """Decide gated pods about once a second, on the reflectors' latest objects."""
    while not stop.wait(1.0):
        if not cache.ready(PATHS):
            continue
        with cache.lock:
            objects = {k: dict(v) for k, v in cache.objects.items()}
        for outcome in admitter.step(objects):
            print(json.dumps(outcome.__dict__), flush=True)


def main(argv: list[str]) -> int:
    """Entry point: ``strata_policy.kube.cli.main(sys.argv[2:])`` from the main CLI."""
    args = _parser().parse_args(argv)
    if args.command == "translate":
        try:
            objects = _load(args.files)
        except (OSError, yaml.YAMLError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        result = translate(objects, args.scope, _gpu(args))
        print(json.dumps(result, indent=2, sort_keys=True))
        return 1 if result["errors"] else 0
    return _run_controllers(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
