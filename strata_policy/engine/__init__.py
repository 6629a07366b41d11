"""The engine layer: the use cases over one cluster's state, and the public in-process API.

``Engine`` (``engine.core``) takes the cluster's lock, replays remembered answers, runs a use
case inside a transaction and commits it journal first. Each use case lives in its own module:
``batch`` and ``fast_place`` (Admit, Place, Release), ``reclaim``, ``plan`` (PlanCapacity), with
``request_checks`` validating what a request carries against the cluster it targets.
"""

from strata_policy.engine.core import Engine, NotInPlace, admit_digest

__all__ = ["Engine", "NotInPlace", "admit_digest"]
