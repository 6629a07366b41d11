"""A MODEL of the API server's rules for updating a pod — not the API server's own code.

``update_violations(old, new)`` lists what the API server would refuse in an update of ``old``
to ``new``, for the rules Strata depends on (Kubernetes ≥ 1.30, where pod scheduling readiness,
KEP-3521, and mutable scheduling directives of gated pods, KEP-3838, are stable):

* ``spec.schedulingGates``: gates may be removed, in any order; never added after creation;
* ``spec.nodeSelector``: while the pod is gated, keys may be added, never changed or removed;
  once ungated, not at all;
* ``spec.nodeName``: never set or changed by an update (only the binding subresource binds, and
  it refuses a gated pod);
* ``spec.tolerations``: additions only;
* ``spec.affinity.nodeAffinity``: may be set while gated when it was absent; else unchanged;
* every other ``spec`` field: unchanged, except container and init container images,
  ``activeDeadlineSeconds`` and ``terminationGracePeriodSeconds``;
* ``metadata`` labels and annotations are free; name, namespace and uid never change.

Every update the admission controller produces goes through this check before it is sent, and
the tests run every produced update through it again. It checks Strata against the documented
contract, not against a server: a real cluster remains the final word (``make e2e-kube``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strata_policy.kube.conventions import GATE

FREE_SPEC = frozenset({"activeDeadlineSeconds", "terminationGracePeriodSeconds"})
CHECKED_SPEC = frozenset(
    {
        "schedulingGates",
        "nodeSelector",
        "nodeName",
        "tolerations",
        "affinity",
        "containers",
        "initContainers",
    }
)


def _gate_names(spec: Mapping[str, Any]) -> list[str]:
    return [str(g.get("name")) for g in spec.get("schedulingGates") or ()]


def _without_images(containers: Any) -> list[Any]:
    return [{k: v for k, v in c.items() if k != "image"} for c in containers or ()]


def update_violations(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What the API server would refuse in updating pod ``old`` to ``new`` (empty: allowed)."""
    out: list[str] = []
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    for key in ("name", "namespace", "uid"):
        if old_meta.get(key) != new_meta.get(key):
            out.append(f"metadata.{key}: may not change")
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    gated = bool(old_spec.get("schedulingGates"))
    old_gates, new_gates = _gate_names(old_spec), _gate_names(new_spec)
    added = [g for g in new_gates if g not in old_gates]
    if added:
        out.append(f"spec.schedulingGates: gates may only be removed, not added: {added}")
    if old_spec.get("nodeName") != new_spec.get("nodeName"):
        out.append("spec.nodeName: may not be set or changed by an update")
    old_sel = old_spec.get("nodeSelector") or {}
    new_sel = new_spec.get("nodeSelector") or {}
    if gated:
        changed = sorted(k for k in old_sel if new_sel.get(k) != old_sel[k])
        if changed:
            out.append(
                "spec.nodeSelector: only additions to spec.nodeSelector are allowed "
                f"(no mutations or deletions): {changed}"
            )
    elif old_sel != new_sel:
        out.append("spec.nodeSelector: may not change once the pod is not gated")
    old_tol = old_spec.get("tolerations") or []
    new_tol = new_spec.get("tolerations") or []
    if any(t not in new_tol for t in old_tol):
        out.append("spec.tolerations: existing tolerations may not be removed or changed")
    old_aff = (old_spec.get("affinity") or {}).get("nodeAffinity")
    new_aff = (new_spec.get("affinity") or {}).get("nodeAffinity")
    if old_aff != new_aff and not (gated and old_aff is None):
        out.append("spec.affinity.nodeAffinity: may only be set while gated and absent")
    old_pod_aff = {k: v for k, v in (old_spec.get("affinity") or {}).items() if k != "nodeAffinity"}
    new_pod_aff = {k: v for k, v in (new_spec.get("affinity") or {}).items() if k != "nodeAffinity"}
    if old_pod_aff != new_pod_aff:
        out.append("spec.affinity: pod (anti-)affinity may not change")
    for key in ("containers", "initContainers"):
        if _without_images(old_spec.get(key)) != _without_images(new_spec.get(key)):
            out.append(f"spec.{key}: only images may change")
    for key in sorted((old_spec.keys() | new_spec.keys()) - FREE_SPEC - CHECKED_SPEC):
        if old_spec.get(key) != new_spec.get(key):
            out.append(f"spec.{key}: may not change")
    return out


def is_gated_by_strata(pod: Mapping[str, Any]) -> bool:
    """The pod still carries Strata's gate."""
    return GATE in _gate_names(pod.get("spec") or {})
