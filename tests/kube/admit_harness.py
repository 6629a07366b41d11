"""An admission run against the protocol fake: sync once, decide, and check every update sent."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import kubernetes_validate
from protocol_fake import FakeApiServer, merge_patch

from strata_policy.kube.admit import AdmitConfig, Admitter, Outcome
from strata_policy.kube.api import HttpKubeApi
from strata_policy.kube.conventions import GpuConventions
from strata_policy.kube.gated import update_violations
from strata_policy.kube.mirror import PATHS
from strata_policy.kube.reflector import object_key
from strata_policy.kube.sync import Syncer
from strata_policy.service.client import Client

K8S_VERSION = "1.33"  # pinned: gated-pod rules are GA since 1.30


def validate(obj: Mapping[str, Any]) -> None:
    """Strict OpenAPI validation of a whole object for the pinned Kubernetes version."""
    kubernetes_validate.validate(dict(obj), K8S_VERSION, strict=True)


@dataclass
class AdmitRun:
    """The fake, a syncer and an admitter that records every update it checks."""

    fake: FakeApiServer
    syncer: Syncer
    admitter: Admitter
    checked: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)

    def objects(self) -> dict[str, dict[str, Any]]:
        return {
            kind: {object_key(o): o for o in self.fake.items(path)} for kind, path in PATHS.items()
        }

    def round(self) -> list[Outcome]:
        """Sync the cluster, then decide every gated group once."""
        self.syncer.push(self.objects())
        out = self.admitter.step(self.objects())
        self.syncer.push(self.objects())
        return out

    def pod(self, key: str) -> dict[str, Any]:
        return self.fake.objects["/api/v1/pods"][key]

    def writes(self, suffix: str = "") -> list[tuple[str, str, Any]]:
        return [r for r in self.fake.requests if r[1].endswith(suffix)]

    def check_everything_sent(self) -> None:
        """Every pod in the fake, Event and Eviction sent is schema-valid; every update legal."""
        for obj in self.fake.items("/api/v1/pods"):
            validate(obj)
        for _method, path, body in self.fake.requests:
            if path.endswith(("/events", "/eviction")):
                validate(body)
        for old, new in self.checked:
            assert update_violations(old, new) == []
            validate(new)


@contextmanager
def admit_run(
    client: Client,
    cluster_id: str,
    gpu: GpuConventions | None = None,
    eviction_attempts: int = 3,
) -> Iterator[AdmitRun]:
    """A fake API server with a syncer and an admitter wired to it."""
    fake = FakeApiServer()
    with fake.serve() as url:
        api = HttpKubeApi.for_host(url)
        syncer = Syncer(client, cluster_id, cache=None)  # type: ignore[arg-type]  # push() only
        checked: list[tuple[dict[str, Any], dict[str, Any]]] = []

        def recording_check(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
            checked.append((copy.deepcopy(dict(old)), copy.deepcopy(dict(new))))
            return update_violations(old, new)

        config = AdmitConfig(
            cluster_id,
            gpu=gpu or GpuConventions(),
            eviction_attempts=eviction_attempts,
            eviction_backoff_s=0.0,
        )
        admitter = Admitter(
            api,
            client,
            config,
            check=recording_check,
            now=lambda: datetime(2026, 1, 1, tzinfo=UTC),
            sleep=lambda s: None,
        )
        run = AdmitRun(fake, syncer, admitter, checked)
        yield run
        api.close()


__all__ = ["AdmitRun", "admit_run", "merge_patch", "validate"]
