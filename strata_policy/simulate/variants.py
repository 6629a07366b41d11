"""Trace variants: the FGD paper's workload families, built from any openb-style trace.

The paper (Weng et al., ATC 2023, §6.3–6.5) evaluates FGD beyond the default trace on four
families of traces derived from it; its repository ships them as ``openb_pod_list_<family><n>``.
We build them from the trace itself, seeded and deterministic (the same trace, variant and seed
always give the same pods, in the same order, with the same ids):

- ``gpuspec<p>``: GPU pods naming a GPU model (``gpu_spec``) take ``p`` % of the GPU requests
  (milli). Pods are picked in a seeded order until their milli reaches the share; each gets a
  spec drawn from ``GPU_SPEC_MIX``, the specs the source cluster's constrained pods carry, in
  their proportions, among the specs under which the pod fits on at least one node alone (an
  8-GPU pod is never told to wait for a 2-GPU T4 node forever).
- ``gpushare<p>``: GPU-sharing pods (a share of one device) take ``p`` % of the GPU requests.
- ``multigpu<p>``: multi-GPU pods (two devices or more) take ``p`` % of the GPU requests.
- ``nongpu<p>``: CPU-only pods are ``p`` % of the pods (the paper's ``cpu050``…``cpu250``
  files: 5 %, 10 %, 20 %, 25 %).

The last three keep the trace's GPU request total (the non-GPU pods' count for ``nongpu``) and
resize the two pools it splits into: a pool that shrinks keeps a seeded random subset of its pods,
one that grows keeps all of them and adds copies drawn uniformly with replacement (ids
``<id>~<k>``), until the pool's milli (count) first reaches its target. The paper's arrival
construction then tunes every variant to 130 % of the cluster's GPUs as usual.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from strata_policy.errors import InvalidArgument
from strata_policy.model import Node, Workload
from strata_policy.model.resources import CPU, GPU, MEMORY, MILLI_PER_GPU
from strata_policy.simulate.trace import TimedWorkload, Trace

FAMILIES = ("gpuspec", "gpushare", "multigpu", "nongpu")
# The paper's published variants (its repository's trace files), in table order.
PAPER_VARIANTS = (
    "gpuspec10",
    "gpuspec20",
    "gpuspec25",
    "gpuspec33",
    "gpushare40",
    "gpushare60",
    "gpushare80",
    "gpushare100",
    "multigpu20",
    "multigpu30",
    "multigpu40",
    "multigpu50",
    "nongpu5",
    "nongpu10",
    "nongpu20",
    "nongpu25",
)

# ``gpu_spec`` values of the constrained GPU pods in the source cluster, with their counts in a
# sample of 430 consecutive pods (rows 0–212 and 3455–3676 of the FGD authors' gpuspec33 pod
# list, 140 constrained pods): the proportions a constrained pod's spec is drawn with.
GPU_SPEC_MIX: tuple[tuple[str, int], ...] = (
    ("T4", 72),
    ("P100", 17),
    ("V100M16|V100M32", 17),
    ("G2", 16),
    ("P100|V100M16|V100M32", 5),
    ("G2|P100|T4|V100M16|V100M32", 5),
    ("G3", 4),
    ("P100|T4|V100M16|V100M32", 2),
    ("A10|G2|T4|V100M16|V100M32", 1),
    ("V100M32", 1),
)

_NAME = re.compile(r"^(gpuspec|gpushare|multigpu|nongpu)(\d{1,3})$")


@dataclass(frozen=True, slots=True)
class Variant:
    """One variant: a family and its share in whole percent (``gpuspec33``)."""

    family: str
    percent: int

    @property
    def name(self) -> str:
        """``<family><percent>``, as on the command line."""
        return f"{self.family}{self.percent}"


def parse_variant(text: str) -> Variant:
    """``gpuspec33`` into a ``Variant``; an unknown family or a share over 100 % raises."""
    found = _NAME.match(text.strip().lower())
    if found is None:
        raise InvalidArgument.one(
            "variant", f"unknown variant {text!r}: <family><percent>, family one of {FAMILIES}"
        )
    family, percent = found.group(1), int(found.group(2))
    if percent > 100 or (family == "nongpu" and percent == 100):
        raise InvalidArgument.one("variant", f"{text!r}: share must be below 100 %")
    return Variant(family, percent)


def build_variant(trace: Trace, variant: Variant | str, seed: int = 0) -> Trace:
    """``trace`` turned into ``variant`` with the seeded draws of ``seed``; named
    ``<trace>+<variant>``. The nodes and scopes are unchanged."""
    v = parse_variant(variant) if isinstance(variant, str) else variant
    rng = np.random.default_rng([seed, _FAMILY_STREAM[v.family], v.percent])
    pods = list(trace.workloads)
    share = v.percent / 100.0
    if v.family == "gpuspec":
        out = _with_specs(pods, trace.nodes, share, rng)
    elif v.family == "nongpu":
        out = _nongpu(pods, share, rng)
    else:
        test = _is_share if v.family == "gpushare" else _is_multi
        out = _split_by_gpu(pods, test, share, rng)
    return Trace(f"{trace.name}+{v.name}", trace.nodes, tuple(out), trace.scopes)


_FAMILY_STREAM = {name: i for i, name in enumerate(FAMILIES)}


def _gpu(t: TimedWorkload) -> int:
    return int(t.workload.request.get(GPU, 0)) * t.workload.replicas


def _is_share(t: TimedWorkload) -> bool:
    return 0 < t.workload.request.get(GPU, 0) < MILLI_PER_GPU


def _is_multi(t: TimedWorkload) -> bool:
    return t.workload.request.get(GPU, 0) >= 2 * MILLI_PER_GPU


def _fits_alone(w: Workload, nodes: Sequence[Node], spec: str) -> bool:
    """Whether one replica of ``w`` under ``spec`` fits some empty node of an allowed model."""
    models = set(spec.split("|"))
    gpu = w.request.get(GPU, 0)
    need = max(gpu, MILLI_PER_GPU)  # a share needs one device
    return any(
        n.gpu_model in models
        and n.capacity.get(GPU, 0) >= need
        and n.capacity.get(CPU, 0) >= w.request.get(CPU, 0)
        and n.capacity.get(MEMORY, 0) >= w.request.get(MEMORY, 0)
        for n in nodes
    )


def _with_specs(
    pods: list[TimedWorkload], nodes: Sequence[Node], share: float, rng: np.random.Generator
) -> list[TimedWorkload]:
    """Give GPU pods, in a seeded order, a spec from ``GPU_SPEC_MIX`` until they hold
    ``share`` of the GPU milli. Pods that already name a model count towards the share."""
    target = share * sum(_gpu(t) for t in pods)
    held = sum(_gpu(t) for t in pods if t.workload.gpu_model)
    specs = [s for s, _ in GPU_SPEC_MIX]
    weights = np.array([c for _, c in GPU_SPEC_MIX], dtype=np.float64)
    candidates = sorted(
        (i for i, t in enumerate(pods) if _gpu(t) and not t.workload.gpu_model),
        key=lambda i: pods[i].workload.id,
    )
    allowed_for: dict[tuple[int, int, int], np.ndarray] = {}
    out = list(pods)
    for i in (candidates[j] for j in rng.permutation(len(candidates))):
        if held >= target:
            break
        w = pods[i].workload
        key = (w.request.get(CPU, 0), w.request.get(GPU, 0), w.request.get(MEMORY, 0))
        ok = allowed_for.get(key)
        if ok is None:
            ok = allowed_for[key] = np.array([_fits_alone(w, nodes, s) for s in specs])
        if not ok.any():
            continue
        p = np.where(ok, weights, 0.0)
        spec = specs[int(rng.choice(len(specs), p=p / p.sum()))]
        out[i] = replace(pods[i], workload=replace(w, gpu_model=spec))
        held += _gpu(pods[i])
    return out


def _resize(
    pool: list[TimedWorkload],
    target: float,
    size: Callable[[TimedWorkload], int],
    rng: np.random.Generator,
) -> list[TimedWorkload]:
    """A seeded subset of ``pool`` (or all of it plus copies drawn with replacement) whose total
    ``size`` first reaches ``target``; kept in the pool's order, copies after it."""
    pool = sorted(pool, key=lambda t: t.workload.id)
    if not pool or target <= 0:
        return []
    total = 0.0
    keep: list[int] = []
    for i in rng.permutation(len(pool)):
        if total >= target:
            break
        keep.append(int(i))
        total += size(pool[int(i)])
    out = [pool[i] for i in sorted(keep)]
    copies = 0
    while total < target:
        pick = pool[int(rng.integers(len(pool)))]
        copies += 1
        w = pick.workload
        out.append(replace(pick, workload=replace(w, id=f"{w.id}~{copies}")))
        total += size(pick)
    return out


def _split_by_gpu(
    pods: list[TimedWorkload],
    test: Callable[[TimedWorkload], bool],
    share: float,
    rng: np.random.Generator,
) -> list[TimedWorkload]:
    """Resize the GPU pods passing ``test`` to ``share`` of the GPU milli, the other GPU pods to
    the rest; CPU-only pods unchanged."""
    gpu_pods = [t for t in pods if _gpu(t)]
    total = sum(_gpu(t) for t in gpu_pods)
    inside = [t for t in gpu_pods if test(t)]
    outside = [t for t in gpu_pods if not test(t)]
    if share > 0 and not inside:
        raise InvalidArgument.one("variant", "the trace has no pod of that kind to resize")
    cpu_only = [t for t in pods if not _gpu(t)]
    return (
        cpu_only
        + _resize(inside, share * total, _gpu, rng)
        + _resize(outside, (1 - share) * total, _gpu, rng)
    )


def _nongpu(
    pods: list[TimedWorkload], share: float, rng: np.random.Generator
) -> list[TimedWorkload]:
    """Resize the CPU-only pods so they are ``share`` of all pods; GPU pods unchanged."""
    gpu_pods = [t for t in pods if _gpu(t)]
    cpu_only = [t for t in pods if not _gpu(t)]
    if share > 0 and not cpu_only:
        raise InvalidArgument.one("variant", "the trace has no CPU-only pod to resize")
    count = round(share * len(gpu_pods) / (1 - share))
    return gpu_pods + _resize(cpu_only, count, lambda _t: 1, rng)
