"""A loopback PROTOCOL FAKE of the Kubernetes API server — not a cluster, not an apiserver.

It speaks just enough of the HTTP list/watch protocol to test Strata's controllers over a real
socket: lists with a ``resourceVersion`` (and ``limit``/``continue`` pages), chunked watch streams
from a version with ADDED/MODIFIED/DELETED events, BOOKMARK events when asked for, ``410 Gone``
for a version older than the kept history (as an HTTP status or as an in-stream ERROR, the two
ways a real server answers), and connections dropped mid-stream. For ``kube admit`` it also takes
pod patches (merge and strategic merge of the fields Strata sends), Events and Evictions (with a
scripted ``429`` for a PodDisruptionBudget).

What it does NOT do, and the tests must not claim: validation (tests run every produced object
through ``kubernetes-validate`` and the gated-pod update checker instead), admission, defaulting,
field selectors, real resourceVersion semantics beyond a global counter, scheduling.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

JSON = dict[str, Any]
COLLECTIONS = {
    "/api/v1/nodes": ("NodeList", "v1", False),
    "/api/v1/namespaces": ("NamespaceList", "v1", False),
    "/api/v1/pods": ("PodList", "v1", True),
    "/apis/strata.dev/v1alpha1/stratascopes": ("StrataScopeList", "strata.dev/v1alpha1", False),
}


def key_of(obj: JSON) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (``None`` deletes); lists replaced wholesale."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


class FakeApiServer:
    """The fake's state and its scripted faults; ``serve()`` runs it on a loopback port."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.version = 1
        self.floor = 0  # history at or below this version is gone: older watches get 410
        self.objects: dict[str, dict[str, JSON]] = {path: {} for path in COLLECTIONS}
        self.history: list[tuple[int, str, str, JSON]] = []
        self.drops = 0
        self.expiries = 0
        self.bookmarks = 0
        self.page_size = 0  # >0: lists return pages of this size with a continue token
        self.expire_in_stream = True
        self.evict_blocked: dict[str, int] = {}  # pod key -> how many 429s before it succeeds
        self.requests: list[tuple[str, str, Any]] = []  # (method, path, body) of writes
        self.open_watches = 0
        self.jobs: dict[str, JSON] = {}  # "ns/name" -> a batch/v1 Job (read-only here)
        self.missing: set[str] = set()  # collections that answer 404 (a CRD not installed)
        self.authorizations: set[str] = set()  # Authorization headers seen

    # -- the test's side ------------------------------------------------------------------

    def put(self, path: str, obj: JSON) -> JSON:
        """Create or replace an object (ADDED or MODIFIED)."""
        with self.lock:
            obj = copy.deepcopy(obj)
            key = key_of(obj)
            kind = "MODIFIED" if key in self.objects[path] else "ADDED"
            self._write(path, key, kind, obj)
            return obj

    def delete(self, path: str, key: str) -> None:
        """Delete an object if it exists (DELETED)."""
        with self.lock:
            obj = self.objects[path].get(key)
            if obj is not None:
                self._write(path, key, "DELETED", copy.deepcopy(obj))

    def _write(self, path: str, key: str, kind: str, obj: JSON) -> None:
        self.version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        if kind == "DELETED":
            del self.objects[path][key]
        else:
            self.objects[path][key] = obj
        self.history.append((self.version, path, kind, copy.deepcopy(obj)))
        self.lock.notify_all()

    def compact(self) -> None:
        """Forget the history so far: a watch from an older version gets 410 Gone."""
        with self.lock:
            self.floor = self.version
            self.history = []
            self.lock.notify_all()

    def drop_watches(self) -> None:
        """Cut every open watch connection mid-stream."""
        with self.lock:
            self.drops += 1
            self.lock.notify_all()

    def expire_watches(self) -> None:
        """Send every open watch an in-stream ERROR 410 (then close), and compact."""
        with self.lock:
            self.floor = self.version
            self.history = []
            self.expiries += 1
            self.lock.notify_all()

    def bookmark(self) -> None:
        """Send a BOOKMARK at the current version to every watch that asked for bookmarks."""
        with self.lock:
            self.bookmarks += 1
            self.lock.notify_all()

    def items(self, path: str) -> list[JSON]:
        with self.lock:
            return [copy.deepcopy(o) for _, o in sorted(self.objects[path].items())]

    # -- the server ---------------------------------------------------------------------

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Run on 127.0.0.1 (a free port) and yield the base URL; stopped on exit."""
        fake = self

        class Handler(_Handler):
            server_fake = fake

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
        thread.daemon = True
        thread.start()
        try:
            yield f"http://127.0.0.1:{httpd.server_address[1]}"
        finally:
            with self.lock:
                self.drops += 1
                self.lock.notify_all()
            httpd.shutdown()
            httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_fake: FakeApiServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _json(self, status: int, body: JSON) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _status(self, code: int, reason: str, message: str) -> None:
        self._json(
            code,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "code": code,
                "reason": reason,
                "message": message,
            },
        )

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"null")

    def do_GET(self) -> None:
        self.server_fake.authorizations.add(self.headers.get("Authorization") or "")
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if url.path in self.server_fake.missing:
            self._status(404, "NotFound", "the server could not find the requested resource")
            return
        if url.path in COLLECTIONS:
            if query.get("watch") in ("true", "1"):
                self._watch(url.path, query)
            else:
                self._list(url.path, query)
            return
        obj = self._find(url.path)
        if obj is None:
            self._status(404, "NotFound", f"{url.path} not found")
        else:
            self._json(200, obj)

    def _find(self, path: str) -> JSON | None:
        fake = self.server_fake
        parts = path.strip("/").split("/")
        if len(parts) == 7 and parts[:2] == ["apis", "batch"] and parts[5] == "jobs":
            job = fake.jobs.get(f"{parts[4]}/{parts[6]}")
            return copy.deepcopy(job) if job else None
        if len(parts) == 6 and parts[:2] == ["api", "v1"] and parts[4] == "pods":
            with fake.lock:
                obj = fake.objects["/api/v1/pods"].get(f"{parts[3]}/{parts[5]}")
                return copy.deepcopy(obj) if obj else None
        return None

    def _list(self, path: str, query: dict[str, str]) -> None:
        fake = self.server_fake
        kind, api_version, _ = COLLECTIONS[path]
        with fake.lock:
            items = [copy.deepcopy(o) for _, o in sorted(fake.objects[path].items())]
            version = str(fake.version)
        start = int(query.get("continue") or 0)
        meta: JSON = {"resourceVersion": version}
        if fake.page_size:
            end = start + fake.page_size
            if end < len(items):
                meta["continue"] = str(end)
            items = items[start:end]
        self._json(200, {"kind": kind, "apiVersion": api_version, "metadata": meta, "items": items})

    def _chunk(self, event: JSON) -> None:
        data = json.dumps(event).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _watch(self, path: str, query: dict[str, str]) -> None:
        fake = self.server_fake
        since = int(query.get("resourceVersion") or 0)
        bookmarks_wanted = query.get("allowWatchBookmarks") == "true"
        with fake.lock:
            expired = since < fake.floor
            in_stream = fake.expire_in_stream
        if expired and not in_stream:
            self._status(410, "Expired", f"too old resource version: {since} ({fake.floor})")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if expired:
            self._chunk(
                {
                    "type": "ERROR",
                    "object": {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "code": 410,
                        "reason": "Expired",
                        "message": f"too old resource version: {since}",
                    },
                }
            )
            self._end()
            return
        with fake.lock:
            drops, expiries, marks = fake.drops, fake.expiries, fake.bookmarks
            fake.open_watches += 1
        cursor = since
        try:
            while True:
                with fake.lock:
                    fake.lock.wait_for(
                        lambda m=marks, c=cursor: (
                            fake.drops != drops
                            or fake.expiries != expiries
                            or fake.bookmarks != m
                            or fake.version > c
                        ),
                        timeout=0.5,
                    )
                    pending = [(v, k, o) for v, p, k, o in fake.history if p == path and v > cursor]
                    dropped = fake.drops != drops
                    # history compacted past this watch: what it has not sent yet is gone, so
                    # it must end with 410 (as etcd ends a watch that fell behind compaction)
                    expiring = fake.expiries != expiries or cursor < fake.floor
                    bookmark = fake.bookmarks != marks
                    marks = fake.bookmarks
                    now = fake.version
                if dropped:
                    self.close_connection = True
                    self.connection.shutdown(2)  # mid-stream: no terminating chunk
                    return
                for version, kind, obj in pending:
                    self._chunk({"type": kind, "object": obj})
                    cursor = version
                if expiring:
                    self._chunk(
                        {
                            "type": "ERROR",
                            "object": {
                                "kind": "Status",
                                "code": 410,
                                "reason": "Expired",
                                "message": "history compacted",
                            },
                        }
                    )
                    self._end()
                    return
                if bookmark and bookmarks_wanted:
                    kind_name = COLLECTIONS[path][0].removesuffix("List")
                    self._chunk(
                        {
                            "type": "BOOKMARK",
                            "object": {
                                "kind": kind_name,
                                "apiVersion": COLLECTIONS[path][1],
                                "metadata": {"resourceVersion": str(now)},
                            },
                        }
                    )
                    cursor = max(cursor, now)
        except OSError:
            return
        finally:
            with fake.lock:
                fake.open_watches -= 1

    def _end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True

    def do_PATCH(self) -> None:
        fake = self.server_fake
        body = self._body()
        url = urlsplit(self.path)
        fake.requests.append(("PATCH", url.path, body))
        status = url.path.endswith("/status")
        path = url.path.removesuffix("/status")
        current = self._find(path)
        if current is None:
            self._status(404, "NotFound", f"{path} not found")
            return
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            self._status(409, "Conflict", "the object has been modified")
            return
        if status:  # strategic merge of status.conditions, keyed by type
            conditions = {
                c["type"]: c for c in (current.get("status") or {}).get("conditions") or ()
            }
            for c in (body.get("status") or {}).get("conditions") or ():
                conditions[c["type"]] = c
            patched = copy.deepcopy(current)
            patched.setdefault("status", {})["conditions"] = list(conditions.values())
        else:
            patched = merge_patch(current, body)
            patched["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        fake.put("/api/v1/pods", patched)
        self._json(200, self._find(path) or {})

    def do_POST(self) -> None:
        fake = self.server_fake
        body = self._body()
        url = urlsplit(self.path)
        fake.requests.append(("POST", url.path, body))
        parts = url.path.strip("/").split("/")
        if url.path.endswith("/events"):
            self._json(201, body)
        elif len(parts) == 7 and parts[4] == "pods" and parts[6] == "eviction":
            key = f"{parts[3]}/{parts[5]}"
            with fake.lock:
                left = fake.evict_blocked.get(key, 0)
                if left:
                    fake.evict_blocked[key] = left - 1
            if left:
                self._status(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                )
                return
            fake.delete("/api/v1/pods", key)
            self._json(201, {"kind": "Status", "status": "Success"})
        else:
            self._status(404, "NotFound", url.path)
