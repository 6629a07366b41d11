"""List, then watch: one kind of object mirrored into a shared ``Cache``, through 410s and drops.

The loop (the informer pattern, written out so every transition is tested)::

    list → replace the kind's objects, version := list's resourceVersion
    watch from version (bookmarks asked for):
        ADDED/MODIFIED → put;  DELETED → delete;  BOOKMARK → version only;  each moves version
        server closed the stream (its timeout) → watch again from version
        connection dropped / garbage line → back off, watch again from version
        410 Gone (HTTP or an in-stream ERROR) → back off, list again (the history is gone)
        any other error → back off, list again

A re-list replaces the kind's objects wholesale, so an object deleted while we were not watching
disappears; nothing is applied twice because the cache is keyed by object, not by event.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from strata_policy.kube.api import ApiError, KubeApi, StreamBroken, WatchExpired

JSON = dict[str, Any]


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` or ``name`` for cluster-scoped objects."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


@dataclass
class KindStats:
    """Counters for one kind (exposed as metrics by the controllers)."""

    lists: int = 0
    events: int = 0
    bookmarks: int = 0
    expired: int = 0
    broken: int = 0
    errors: int = 0


class Cache:
    """Objects by kind and key, each kind's version, and when the oldest unapplied change came.

    Writers are the reflectors; the reader is a controller that takes a ``copy()`` per batch.
    ``changed`` is set on every write so the controller can sleep until there is work.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.changed = threading.Event()
        self.objects: dict[str, dict[str, JSON]] = {}
        self.versions: dict[str, str] = {}
        self.listed: set[str] = set()
        self.pending_since: float | None = None
        self.stats: dict[str, KindStats] = {}

    def _touch(self) -> None:
        if self.pending_since is None:
            self.pending_since = self.clock()
        self.changed.set()

    def replace(self, kind: str, items: Iterable[JSON], version: str) -> None:
        """A fresh list of ``kind``."""
        with self.lock:
            self.objects[kind] = {object_key(o): o for o in items}
            self.versions[kind] = version
            self.listed.add(kind)
            self._touch()

    def apply(self, kind: str, event: Mapping[str, Any]) -> None:
        """One watch event (ADDED, MODIFIED, DELETED, BOOKMARK)."""
        obj = event.get("object") or {}
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        with self.lock:
            kind_objects = self.objects.setdefault(kind, {})
            if event["type"] in ("ADDED", "MODIFIED"):
                kind_objects[object_key(obj)] = dict(obj)
                self._touch()
            elif event["type"] == "DELETED":
                kind_objects.pop(object_key(obj), None)
                self._touch()
            if version:
                self.versions[kind] = version

    def copy(self) -> tuple[dict[str, dict[str, JSON]], float | None]:
        """The objects now (shallow copies per kind) and when the oldest change in it came."""
        with self.lock:
            since, self.pending_since = self.pending_since, None
            self.changed.clear()
            return {k: dict(v) for k, v in self.objects.items()}, since

    def ready(self, kinds: Iterable[str]) -> bool:
        """Every kind has been listed at least once."""
        with self.lock:
            return all(k in self.listed for k in kinds)


@dataclass
class Reflector:
    """Keeps ``cache[kind]`` equal to the objects at ``path`` on the API server."""

    api: KubeApi
    cache: Cache
    kind: str
    path: str
    watch_timeout_s: int = 300
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    optional: bool = False  # a 404 (e.g. the CRD is not installed) means "none", not "wait"
    stats: KindStats = field(default_factory=KindStats)

    def run(self, stop: threading.Event) -> None:
        """Until ``stop`` is set: list, watch, and recover from every failure by the rules above."""
        self.cache.stats[self.kind] = self.stats
        delay = self.backoff_s
        while not stop.is_set():
            try:
                self._list()
                delay = self.backoff_s
                self._watch_until_expired(stop)
            except WatchExpired:
                self.stats.expired += 1
            except ApiError as exc:
                self.stats.errors += 1
                if exc.status == 404 and self.optional:
                    self.cache.replace(self.kind, [], "")
                    delay = self.max_backoff_s  # look again now and then: it may be installed
            except (StreamBroken, OSError, ValueError):  # ValueError: a list that is not JSON
                self.stats.errors += 1
            if stop.wait(delay):
                return
            delay = min(delay * 2, self.max_backoff_s)

    def _list(self) -> None:
        items, version = self.api.list(self.path)
        self.stats.lists += 1
        self.cache.replace(self.kind, items, version)

    def _watch_until_expired(self, stop: threading.Event) -> None:
        """Watch and re-watch from the last version; returns only when stopped."""
        while not stop.is_set():
            version = self.cache.versions.get(self.kind, "")
            try:
                for event in self.api.watch(self.path, version, self.watch_timeout_s):
                    if event["type"] == "BOOKMARK":
                        self.stats.bookmarks += 1
                    else:
                        self.stats.events += 1
                    self.cache.apply(self.kind, event)
                    if stop.is_set():
                        return
            except StreamBroken:
                self.stats.broken += 1
                if stop.wait(self.backoff_s):
                    return
