"""The scope tree from Kubernetes objects: ``StrataScope``, namespace annotations, Kueue queues.

Sources, in order of precedence for one scope id:

1. a ``StrataScope`` (``strata.dev/v1alpha1``, cluster-scoped; id = ``metadata.name``;
   ``spec.parent``, ``spec.kind``, ``spec.guarantee``/``spec.limit`` as maps of Kubernetes
   quantities, ``spec.weight``);
2. a namespace with ``strata.dev/guarantee``, ``strata.dev/limit``, ``strata.dev/weight`` or
   ``strata.dev/parent`` annotations defines the scope its pods go to (kind ``namespace``);
3. every other scope id that a namespace or a parent names exists as an empty top-level scope,
   so a pod always has a scope and a typo never drops a tenant's work (it shows up unguarded).

A parent chain that loops is cut where it closes (the scope becomes top-level) and reported,
rather than sending the server a tree it must reject as a whole.

Kueue: a ClusterQueue or Cohort becomes a scope whose guarantee is the sum over flavors of
``nominalQuota`` and whose limit is nominal + ``borrowingLimit`` (absent when any flavor has no
borrowing limit: borrowing is then unbounded), so a Kueue user can compare decisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from strata_policy.kube.conventions import (
    DEFAULT_GPU,
    GUARANTEE_KEY,
    LIMIT_KEY,
    PARENT_KEY,
    SCOPE_KEY,
    WEIGHT_KEY,
    GpuConventions,
    TranslationError,
)
from strata_policy.kube.pods import strata_request
from strata_policy.kube.quantities import QuantityError, parse_quantity

COHORT_PREFIX = "cohort-"


def namespace_scope(namespace: Mapping[str, Any] | None, name: str) -> str:
    """The scope of pods in a namespace: its label, else its annotation, else its name."""
    meta = (namespace or {}).get("metadata") or {}
    label = (meta.get("labels") or {}).get(SCOPE_KEY)
    annotation = (meta.get("annotations") or {}).get(SCOPE_KEY)
    return str(label or annotation or name)


def amounts(what: str, quantities: Mapping[str, Any], gpu: GpuConventions) -> dict[str, int]:
    """A map of Kubernetes quantities as Strata amounts (``nvidia.com/gpu`` → ``gpu`` milli)."""
    try:
        exact = {str(k): parse_quantity(v) for k, v in quantities.items()}
        return strata_request(exact, gpu)
    except (QuantityError, TranslationError) as exc:
        raise TranslationError(what, str(exc)) from None


def parse_pairs(what: str, text: str) -> dict[str, str]:
    """``cpu=8,memory=32Gi`` → ``{"cpu": "8", "memory": "32Gi"}``."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise TranslationError(what, f"expected name=quantity, got {part!r}")
        out[name.strip()] = value.strip()
    return out


def _weight(what: str, value: object) -> float:
    try:
        weight = float(str(value))
    except ValueError:
        raise TranslationError(what, f"weight {value!r} is not a number") from None
    if not weight > 0:
        raise TranslationError(what, f"weight must be positive, got {value!r}")
    return weight


def _scope(
    scope_id: str,
    parent: str,
    kind: str,
    guarantee: dict[str, int],
    limit: dict[str, int],
    weight: float,
) -> dict[str, Any]:
    return {
        "id": scope_id,
        "parentId": parent,
        "kind": kind,
        "guarantee": guarantee,
        "limit": limit,
        "weight": weight,
    }


def strata_scope_to_scope(
    obj: Mapping[str, Any], gpu: GpuConventions = DEFAULT_GPU
) -> dict[str, Any]:
    """A ``StrataScope`` custom resource as a Strata ``Scope``."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    what = f"StrataScope {name}"
    spec = obj.get("spec") or {}
    return _scope(
        name,
        str(spec.get("parent") or ""),
        str(spec.get("kind") or ""),
        amounts(what, spec.get("guarantee") or {}, gpu),
        amounts(what, spec.get("limit") or {}, gpu),
        _weight(what, spec.get("weight", 1)),
    )


def namespace_defined_scope(
    namespace: Mapping[str, Any], gpu: GpuConventions = DEFAULT_GPU
) -> dict[str, Any] | None:
    """The scope a namespace's annotations define, or None when it sets none of them."""
    meta = namespace.get("metadata") or {}
    notes = meta.get("annotations") or {}
    if not any(k in notes for k in (GUARANTEE_KEY, LIMIT_KEY, WEIGHT_KEY, PARENT_KEY)):
        return None
    name = str(meta.get("name") or "")
    what = f"namespace {name}"
    return _scope(
        namespace_scope(namespace, name),
        str(notes.get(PARENT_KEY) or ""),
        "namespace",
        amounts(what, parse_pairs(what, str(notes.get(GUARANTEE_KEY) or "")), gpu),
        amounts(what, parse_pairs(what, str(notes.get(LIMIT_KEY) or "")), gpu),
        _weight(what, notes.get(WEIGHT_KEY, 1)),
    )


def scope_tree(
    strata_scopes: Iterable[Mapping[str, Any]],
    namespaces: Iterable[Mapping[str, Any]],
    referenced: Iterable[str] = (),
    gpu: GpuConventions = DEFAULT_GPU,
) -> tuple[list[dict[str, Any]], list[str]]:
    """All scopes (sorted by id) and the problems met (bad objects skipped, loops cut)."""
    problems: list[str] = []
    scopes: dict[str, dict[str, Any]] = {}
    for obj in strata_scopes:
        try:
            scope = strata_scope_to_scope(obj, gpu)
        except TranslationError as exc:
            problems.append(str(exc))
            continue
        scopes[scope["id"]] = scope
    for ns in namespaces:
        try:
            defined = namespace_defined_scope(ns, gpu)
        except TranslationError as exc:
            problems.append(str(exc))
            continue
        if defined is not None and defined["id"] not in scopes:
            scopes[defined["id"]] = defined
    wanted = set(referenced)
    wanted.update(s["parentId"] for s in scopes.values() if s["parentId"])
    for scope_id in sorted(wanted - scopes.keys()):
        if scope_id:
            scopes[scope_id] = _scope(scope_id, "", "", {}, {}, 1.0)
    for scope_id in sorted(scopes):
        seen = {scope_id}
        parent = scopes[scope_id]["parentId"]
        while parent:
            if parent in seen:
                problems.append(f"scope {scope_id}: parent chain loops at {parent}; made top-level")
                scopes[scope_id]["parentId"] = ""
                break
            seen.add(parent)
            parent = scopes[parent]["parentId"]
    return [scopes[k] for k in sorted(scopes)], problems


def _kueue_quota(
    what: str, spec: Mapping[str, Any], gpu: GpuConventions
) -> tuple[dict[str, int], dict[str, int]]:
    nominal: dict[str, Decimal] = {}
    ceiling: dict[str, Decimal] = {}
    unbounded: set[str] = set()
    try:
        for group in spec.get("resourceGroups") or ():
            for flavor in group.get("flavors") or ():
                for res in flavor.get("resources") or ():
                    name = str(res["name"])
                    quota = parse_quantity(res.get("nominalQuota", 0))
                    nominal[name] = nominal.get(name, Decimal(0)) + quota
                    if "borrowingLimit" in res:
                        borrow = parse_quantity(res["borrowingLimit"])
                        ceiling[name] = ceiling.get(name, Decimal(0)) + quota + borrow
                    else:
                        unbounded.add(name)
    except (QuantityError, KeyError) as exc:
        raise TranslationError(what, f"bad resource quota: {exc}") from None
    bounded = {k: v for k, v in ceiling.items() if k not in unbounded}
    return amounts(what, nominal, gpu), amounts(what, bounded, gpu)


def kueue_to_scopes(
    cluster_queues: Iterable[Mapping[str, Any]],
    cohorts: Iterable[Mapping[str, Any]] = (),
    gpu: GpuConventions = DEFAULT_GPU,
) -> list[dict[str, Any]]:
    """Kueue ClusterQueues and Cohorts as Strata scopes (cohorts as ``cohort-<name>`` parents)."""
    out: dict[str, dict[str, Any]] = {}
    for cohort in cohorts:
        name = str((cohort.get("metadata") or {}).get("name") or "")
        spec = cohort.get("spec") or {}
        guarantee, limit = _kueue_quota(f"Cohort {name}", spec, gpu)
        parent = spec.get("parentName") or spec.get("parent") or ""
        weight = (spec.get("fairSharing") or {}).get("weight", 1)
        out[COHORT_PREFIX + name] = _scope(
            COHORT_PREFIX + name,
            COHORT_PREFIX + str(parent) if parent else "",
            "cohort",
            guarantee,
            limit,
            _weight(f"Cohort {name}", weight),
        )
    for cq in cluster_queues:
        name = str((cq.get("metadata") or {}).get("name") or "")
        spec = cq.get("spec") or {}
        guarantee, limit = _kueue_quota(f"ClusterQueue {name}", spec, gpu)
        cohort_name = spec.get("cohortName") or spec.get("cohort") or ""
        weight = (spec.get("fairSharing") or {}).get("weight", 1)
        out[name] = _scope(
            name,
            COHORT_PREFIX + str(cohort_name) if cohort_name else "",
            "clusterqueue",
            guarantee,
            limit,
            _weight(f"ClusterQueue {name}", weight),
        )
    for scope in list(out.values()):
        parent = scope["parentId"]
        if parent and parent not in out:
            out[parent] = _scope(parent, "", "cohort", {}, {}, 1.0)
    return [out[k] for k in sorted(out)]
