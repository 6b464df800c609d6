"""A local HTTP server that speaks enough of the Kubernetes API for ResourceBindings (and, as extra
collections, any other list + watch path such as ``/api/v1/nodes`` and ``/api/v1/pods``).

list (with resourceVersion, limit/continue), watch (chunked JSON lines: ADDED / MODIFIED / DELETED /
BOOKMARK / ERROR), get, and merge-patch; plus knobs to expire the event history (410 Gone), to
drop a watch connection mid-stream, and to deliver watch events late (``watch_lag`` seconds after the
write, or not before ``release_watch``) while GET already serves the write, as a real API server's
watch cache and a client's informer lag behind etcd; coordination.k8s.io Leases (GET, POST, PUT with
resourceVersion conflicts) for leader election, and a log of which process patched while who held
the Lease. Objects are stored as JSON so a "restarted" client reads exactly what an earlier one
persisted. ``latency`` makes a GET or a PATCH of one object, or a LIST of a collection, answer as late
as a real API server does (a base plus a seeded exponential tail, slept in the request's own thread).

Users: a bearer token ``user:<name>`` authenticates as ``<name>`` (``RunningFake.user_kubeconfig``),
any other token as ``DEFAULT_USER`` (the member role's service account); a ``SelfSubjectReview``
(``authentication.k8s.io/v1``) answers who that is, as kube-apiserver 1.28+ does. A collection's
``admit`` hook is the mutating admission of a PATCH (old object, patched object, user): the member
webhook in the loop, as the real API server calls it.
"""

from __future__ import annotations

import copy
import json
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.support.kube import failure_status, merge_patch, send_json, write_kubeconfig

PREFIX = "/apis/work.karmada.io/v1alpha2"
LEASES = "/apis/coordination.k8s.io/v1"
SELF_SUBJECT_REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
DEFAULT_USER = "system:serviceaccount:flink-failover:flink-failover"


class Refused(Exception):
    """Raised by an ``admit`` hook: the PATCH is denied with this message (400)."""


@dataclass
class Event:
    rv: int
    type: str
    obj: dict[str, Any]
    stored_at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class PatchSeen:
    """A ResourceBinding patch as the server saw it: when, from whom, and who held each Lease then."""

    at: float
    user_agent: str
    holders: tuple[str, ...]
    namespace: str
    name: str
    body: dict[str, Any]


@dataclass
class FakeKarmada:
    """One collection (by default ResourceBindings); get and patch are served for ResourceBindings only."""

    path: str = f"{PREFIX}/resourcebindings"
    api_version: str = "work.karmada.io/v1alpha2"
    list_kind: str = "ResourceBindingList"
    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    rv: int = 100
    oldest_watchable: int = 0  # a watch from an older version gets 410 Gone
    patches: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    drop_watch_after: int | None = None  # events, then cut the connection without ending the stream
    fail_next_lists: int = 0
    fail_next_gets: int = 0
    fail_next_patches: int = 0
    pending_error: dict[str, Any] | None = None
    watches_started: int = 0
    open_watches: int = 0
    watch_generation: int = 0  # end_watches() bumps it: every open stream ends normally
    patched_while_watching: list[bool] = field(default_factory=list)
    cond: threading.Condition = field(default_factory=threading.Condition)
    closing: bool = False
    watch_lag: float = 0.0  # seconds between a write and its watch event
    watch_held_from: int | None = None  # events from this resourceVersion on wait for release_watch()
    # coordination.k8s.io/v1 Leases (leader election), see the Lease section below
    leases: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    holders: list[tuple[float, str]] = field(default_factory=list)  # (monotonic time, new holder)
    patch_log: list[PatchSeen] = field(default_factory=list)
    # method -> (base seconds, mean of the exponential tail): how long a GET / PATCH of one object, or a
    # LIST of the collection, takes
    latency: dict[str, tuple[float, float]] = field(default_factory=dict)
    _latency_rng: random.Random = field(default_factory=lambda: random.Random(7))
    # (old, patched, user) -> the object stored: the mutating webhook of an HTTP PATCH (None: none)
    admit: Any = None
    # (phase, body): run in a ResourceBinding PATCH's own thread "before" it is stored and "after" it
    # is stored but before it is answered, so a test can order two clients' patches, and an answer
    # behind the watch events (a real API server's answer and its watch race)
    patch_hook: Any = None
    self_reviews: int = 0  # SelfSubjectReviews answered
    fail_self_reviews: bool = False  # answer them 404 (an API server older than 1.28)

    def delay(self, method: str) -> None:
        """Answer as late as a real API server would (the fake itself answers in microseconds)."""
        if method not in self.latency:
            return
        base, tail = self.latency[method]
        with self.cond:
            extra = self._latency_rng.expovariate(1 / tail) if tail > 0 else 0.0
        time.sleep(base + extra)

    # --- test-side API ---------------------------------------------------------------------------
    def upsert(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        with self.cond:
            obj = copy.deepcopy(dict(obj))
            meta = obj.setdefault("metadata", {})
            key = (meta.get("namespace", ""), meta["name"])
            current = self.objects.get(key)
            if current is not None:
                # Karmada's controllers update spec/status and keep the annotations they do not own.
                keep = current["metadata"].get("annotations", {})
                meta["annotations"] = {**keep, **meta.get("annotations", {})}
            return self._store(key, obj, "MODIFIED" if current else "ADDED")

    def delete(self, namespace: str, name: str) -> None:
        with self.cond:
            obj = self.objects.pop((namespace, name))
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self.events.append(Event(self.rv, "DELETED", copy.deepcopy(obj)))
            self.cond.notify_all()

    def expire_history(self) -> None:
        """etcd compaction: every version so far is too old to watch from."""
        with self.cond:
            self.oldest_watchable = self.rv + 1
            self.events.clear()
            self.cond.notify_all()

    def bookmark(self) -> None:
        """A BOOKMARK event: a newer resourceVersion, no object change."""
        with self.cond:
            self.rv += 1
            marker = {"apiVersion": self.api_version, "kind": self.list_kind.removesuffix("List")}
            self.events.append(
                Event(self.rv, "BOOKMARK", {**marker, "metadata": {"resourceVersion": str(self.rv)}})
            )
            self.cond.notify_all()

    def error_event(self, code: int, message: str) -> None:
        """An ERROR event other than 410, sent once on an open watch (the server gave up on it)."""
        with self.cond:
            self.pending_error = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "code": code,
                "message": message,
            }
            self.cond.notify_all()

    def upsert_unseen(self, obj: Mapping[str, Any]) -> None:
        """A change that no watch will deliver: it happened, then the history was compacted."""
        with self.cond:
            self.upsert(obj)
            self.oldest_watchable = self.rv + 1
            self.events.clear()
            self.cond.notify_all()

    def end_watches(self) -> None:
        """End every open watch stream normally (as the server's timeoutSeconds would)."""
        with self.cond:
            self.watch_generation += 1
            self.cond.notify_all()

    def hold_watch(self) -> None:
        """Writes from now on are served by GET but reach no watch until :meth:`release_watch`."""
        with self.cond:
            self.watch_held_from = self.rv + 1

    def release_watch(self) -> None:
        with self.cond:
            self.watch_held_from = None
            self.cond.notify_all()

    def deliverable(self, cursor: int) -> list[Event]:
        """Events after ``cursor`` a watch may send now: in order, stopping at the first one still lagging."""
        out = []
        now = time.monotonic()
        for event in self.events:
            if event.rv <= cursor:
                continue
            held = self.watch_held_from is not None and event.rv >= self.watch_held_from
            if held or now < event.stored_at + self.watch_lag:
                break
            out.append(event)
        return out

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        with self.cond:
            return copy.deepcopy(self.objects[(namespace, name)])

    def annotation(self, namespace: str, name: str, key: str) -> str | None:
        value = self.get(namespace, name)["metadata"].get("annotations", {}).get(key)
        return value if isinstance(value, str) else None

    def wait_for(self, predicate: Any, timeout: float = 90.0) -> bool:
        """``production.wait_for``, with ``predicate`` read under this server's lock (a consistent view)."""
        from tests.support.production import wait_for  # production builds its members on this module

        def held() -> bool:
            with self.cond:
                return bool(predicate())

        return wait_for(held, timeout)

    # --- Leases: GET, POST (409 when it exists), PUT (409 on a stale resourceVersion) -------------
    def lease_holder(self, namespace: str, name: str) -> str:
        with self.cond:
            lease = self.leases.get((namespace, name))
            return str(lease["spec"].get("holderIdentity") or "") if lease else ""

    def write_lease(self, namespace: str, name: str, body: dict[str, Any], create: bool) -> tuple[int, Any]:
        with self.cond:
            key = (namespace, name)
            current = self.leases.get(key)
            if create and current is not None:
                return 409, ("AlreadyExists", f'leases "{name}" already exists')
            if not create and current is None:
                return 404, ("NotFound", f'leases "{name}" not found')
            sent = str(body.get("metadata", {}).get("resourceVersion") or "")
            if current is not None and sent and sent != current["metadata"]["resourceVersion"]:
                return 409, (
                    "Conflict",
                    f'Operation cannot be fulfilled on leases "{name}": the object has been modified',
                )
            self.rv += 1
            stored = copy.deepcopy(body)
            stored["metadata"] = {**stored.get("metadata", {}), "namespace": namespace, "name": name}
            stored["metadata"]["resourceVersion"] = str(self.rv)
            before = current["spec"].get("holderIdentity") if current else None
            holder = stored.get("spec", {}).get("holderIdentity") or ""
            if holder != before:
                self.holders.append((time.monotonic(), holder))
            self.leases[key] = stored
            self.cond.notify_all()
            return (201 if create else 200), copy.deepcopy(stored)

    # --- server side -----------------------------------------------------------------------------
    def _store(self, key: tuple[str, str], obj: dict[str, Any], kind: str) -> dict[str, Any]:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        if self.api_version.startswith("flink.apache.org") and not obj["metadata"].get("uid"):
            # The API server names every object it stores, once (Events find it by that uid).
            previous = self.objects.get(key)
            obj["metadata"]["uid"] = (previous or {}).get("metadata", {}).get(
                "uid"
            ) or f"uid-{key[0]}-{key[1]}-{self.rv}"
        self.objects[key] = obj
        self.events.append(Event(self.rv, kind, copy.deepcopy(obj)))
        self.cond.notify_all()
        return copy.deepcopy(obj)

    def list_page(self, limit: int, cont: str) -> dict[str, Any]:
        with self.cond:
            keys = sorted(self.objects)
            start = int(cont) if cont else 0
            end = start + limit if limit else len(keys)
            meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
            if end < len(keys):
                meta["continue"] = str(end)
            return {
                "apiVersion": self.api_version,
                "kind": self.list_kind,
                "metadata": meta,
                "items": [copy.deepcopy(self.objects[k]) for k in keys[start:end]],  # one page only
            }

    def patch(
        self, namespace: str, name: str, body: dict[str, Any], user: str | None = None
    ) -> dict[str, Any] | None:
        """``user``: an HTTP PATCH's (its ``admit`` hook runs on it); None: the test's own write."""
        with self.cond:
            current = self.objects.get((namespace, name))
            if current is None:
                return None
            self.patches.append((namespace, name, copy.deepcopy(body)))
            patched = merge_patch(current, body)
            if user is not None and self.admit is not None:
                patched = self.admit(copy.deepcopy(current), patched, user)
            if patched == current:
                return copy.deepcopy(current)  # a no-op patch changes nothing, not even the version
            return self._store((namespace, name), patched, "MODIFIED")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle on, each answer waits for the client's delayed
    # ACK (~40 ms on Linux), a stall no real API server has.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _json(self, status: int, body: Any) -> None:
        send_json(self, status, body)

    def _status(self, code: int, reason: str, message: str) -> None:
        send_json(self, code, failure_status(code, reason, message))

    def _lease(self, method: str) -> bool:
        """Serve a Lease request; False when the path is not one."""
        url = urlparse(self.path)
        if not url.path.startswith(LEASES + "/namespaces/"):
            return False
        parts = url.path[len(LEASES) :].strip("/").split("/")
        fake = self.server.fake
        fake.requests.append(f"{method} {self.path}")
        if len(parts) not in (3, 4) or parts[2] != "leases" or (method == "POST") != (len(parts) == 3):
            self._status(405 if len(parts) in (3, 4) else 404, "MethodNotAllowed", f"{method} {url.path}")
            return True
        namespace = parts[1]
        if method == "GET":
            with fake.cond:
                lease = copy.deepcopy(fake.leases.get((namespace, parts[3])))
            if lease is None:
                self._status(404, "NotFound", f'leases "{parts[3]}" not found')
            else:
                self._json(200, lease)
            return True
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        if not isinstance(body, dict) or body.get("kind") != "Lease":
            self._status(400, "BadRequest", "body is not a Lease")
            return True
        name = parts[3] if method == "PUT" else str(body.get("metadata", {}).get("name") or "")
        if method == "PUT" and body.get("metadata", {}).get("name") not in (None, name):
            self._status(400, "BadRequest", "the name in the body does not match the URL")
            return True
        code, answer = fake.write_lease(namespace, name, body, create=method == "POST")
        if code >= 400:
            self._status(code, *answer)
        else:
            self._json(code, answer)
        return True

    def user(self) -> str:
        token = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        return token.removeprefix("user:") if token.startswith("user:") else DEFAULT_USER

    def do_POST(self) -> None:
        if self._lease("POST") or self._self_review() or self._create():
            return
        self._status(404, "NotFound", "no such path")

    def _self_review(self) -> bool:
        if urlparse(self.path).path != SELF_SUBJECT_REVIEWS:
            return False
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        fake = self.server.fake
        with fake.cond:
            fake.self_reviews += 1
            failing = fake.fail_self_reviews
        if failing:
            self._status(404, "NotFound", "the server could not find the requested resource")
            return True
        answer = {
            **(body if isinstance(body, dict) else {}),
            "status": {"userInfo": {"username": self.user()}},
        }
        self._json(201, answer)
        return True

    def _create(self) -> bool:
        """POST ``/apis/<group>/<version>/namespaces/<ns>/<plural>`` of a collection served here (Events)."""
        parts = urlparse(self.path).path.strip("/").split("/")
        if len(parts) != 6 or parts[0] != "apis" or parts[3] != "namespaces":
            return False
        store = self.server.stores.get(f"/apis/{parts[1]}/{parts[2]}/{parts[5]}")
        if store is None:
            return False
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        meta = body.setdefault("metadata", {})
        meta["namespace"] = parts[4]
        with store.cond:
            if (parts[4], meta.get("name", "")) in store.objects:
                self._status(409, "AlreadyExists", f"{parts[5]} {meta.get('name')!r} already exists")
                return True
            created = store.upsert(body)
        self._json(201, created)
        return True

    def do_PUT(self) -> None:
        if not self._lease("PUT"):
            self._status(404, "NotFound", "no such path")

    def do_GET(self) -> None:
        if self._lease("GET"):
            return
        url = urlparse(self.path)
        if url.path == "/version":  # what the member webhook reads for the keeper's native sidecar
            version = self.server.kube_version
            if not version:
                self._status(503, "ServiceUnavailable", "the API server is starting")
                return
            major, minor = version.removeprefix("v").split(".")[:2]
            self._json(200, {"major": major, "minor": minor, "gitVersion": version})
            return
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        fake = self.server.stores.get(url.path, self.server.fake)
        fake.requests.append(f"GET {self.path}")
        if url.path in self.server.stores:
            if query.get("watch") in ("true", "1", "True"):
                self._watch(
                    fake, int(query.get("resourceVersion") or 0), float(query.get("timeoutSeconds") or 30)
                )
                return
            if fake.fail_next_lists > 0:
                fake.fail_next_lists -= 1
                self._status(503, "ServiceUnavailable", "etcd is not ready")
                return
            fake.delay("LIST")
            self._json(200, fake.list_page(int(query.get("limit") or 0), query.get("continue", "")))
            return
        routed = self._object_route(url.path)
        if routed is not None and not url.path.startswith(PREFIX):
            store, namespace, name = routed
            store.delay("GET")
            with store.cond:
                found = store.objects.get((namespace, name))
            if found is None:
                self._status(404, "NotFound", f"{name!r} not found")
            else:
                self._json(200, found)
            return
        parts = url.path[len(PREFIX) :].strip("/").split("/")
        if (
            url.path.startswith(PREFIX)
            and len(parts) == 4
            and parts[0] == "namespaces"
            and parts[2] == "resourcebindings"
        ):
            fake.delay("GET")
            with fake.cond:
                obj = fake.objects.get((parts[1], parts[3]))
                failing = fake.fail_next_gets > 0
                fake.fail_next_gets = max(0, fake.fail_next_gets - 1)
            if failing:
                self._status(503, "ServiceUnavailable", "etcd is not ready")
            elif obj is None:
                self._status(404, "NotFound", f"resourcebindings {parts[3]!r} not found")
            else:
                self._json(200, obj)
            return
        self._status(404, "NotFound", "no such path")

    def _object_route(self, path: str) -> tuple[FakeKarmada, str, str] | None:
        """``/apis/<group>/<version>/namespaces/<ns>/<plural>/<name>`` of a collection served here."""
        parts = path.strip("/").split("/")
        if len(parts) != 7 or parts[0] != "apis" or parts[3] != "namespaces":
            return None
        store = self.server.stores.get(f"/apis/{parts[1]}/{parts[2]}/{parts[5]}")
        return None if store is None else (store, parts[4], parts[6])

    def do_PATCH(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        routed = self._object_route(urlparse(self.path).path)
        fake = routed[0] if routed is not None else self.server.fake
        fake.requests.append(f"PATCH {self.path} {self.headers.get('Content-Type')}")
        if self.headers.get("Content-Type") != "application/merge-patch+json":
            self._status(415, "UnsupportedMediaType", "only merge patches here")
            return
        if routed is not None and not self.path.startswith(PREFIX):
            fake.delay("PATCH")
            with fake.cond:
                failing = fake.fail_next_patches > 0
                fake.fail_next_patches = max(0, fake.fail_next_patches - 1)
            try:
                result = None if failing else fake.patch(routed[1], routed[2], body, self.user())
            except Refused as exc:
                self._status(400, "BadRequest", f"admission webhook denied the request: {exc}")
                return
            if failing:
                self._status(500, "InternalError", "etcdserver: request timed out")
            elif result is None:
                self._status(404, "NotFound", "not found")
            else:
                self._json(200, result)
            return
        parts = urlparse(self.path).path[len(PREFIX) :].strip("/").split("/")
        if len(parts) != 4 or parts[0] != "namespaces" or parts[2] != "resourcebindings":
            self._status(404, "NotFound", "no such path")
            return
        with fake.cond:
            fake.patched_while_watching.append(fake.open_watches > 0)
            holders = tuple(str(v["spec"].get("holderIdentity") or "") for v in fake.leases.values())
            seen = PatchSeen(
                time.monotonic(), self.headers.get("User-Agent") or "", holders, parts[1], parts[3], body
            )
            fake.patch_log.append(seen)
            failing = fake.fail_next_patches > 0
            fake.fail_next_patches = max(0, fake.fail_next_patches - 1)
        if failing:
            self._status(500, "InternalError", "etcdserver: request timed out")
            return
        fake.delay("PATCH")
        if fake.patch_hook is not None:
            fake.patch_hook("before", body)
        result = fake.patch(parts[1], parts[3], body)
        if fake.patch_hook is not None and result is not None:
            fake.patch_hook("after", body)
        if result is None:
            self._status(404, "NotFound", "not found")
        else:
            self._json(200, result)

    def _chunk(self, doc: Any) -> None:
        data = (json.dumps(doc) + "\n").encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _watch(self, fake: FakeKarmada, since: int, timeout: float) -> None:
        try:
            self._stream(fake, since, timeout)
        except (ConnectionError, BrokenPipeError):
            self.close_connection = True  # the client went away (a stopped loop, a timeout)

    def _stream(self, fake: FakeKarmada, since: int, timeout: float) -> None:
        with fake.cond:
            fake.open_watches += 1
            generation = fake.watch_generation
        try:
            self._events(fake, since, timeout, generation)
        finally:
            with fake.cond:
                fake.open_watches -= 1

    def _events(self, fake: FakeKarmada, since: int, timeout: float, generation: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with fake.cond:
            fake.watches_started += 1
            drop_after = fake.drop_watch_after
            fake.drop_watch_after = None
            fake.cond.notify_all()
        sent = 0
        cursor = since
        deadline = time.monotonic() + min(timeout, 30.0)
        while True:
            with fake.cond:
                gone = since < fake.oldest_watchable
                pending = [] if gone else fake.deliverable(cursor)
                if not gone and not pending and not fake.closing:
                    fake.cond.wait(0.01 if fake.watch_lag else 0.05)
                    gone = since < fake.oldest_watchable
                    pending = [] if gone else fake.deliverable(cursor)
                closing = fake.closing or fake.watch_generation != generation
                error, fake.pending_error = fake.pending_error, None
            if error is not None:
                self._chunk({"type": "ERROR", "object": error})
                break
            if gone:
                expired = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410}
                self._chunk(
                    {
                        "type": "ERROR",
                        "object": {**expired, "reason": "Expired", "message": "too old resource version"},
                    }
                )
                break
            for event in pending:
                if drop_after is not None and sent >= drop_after:
                    # Cut the connection in the middle of a chunk: the client sees a broken stream.
                    self.wfile.write(b'40\r\n{"type":"MODIFIED",')
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self._chunk({"type": event.type, "object": event.obj})
                cursor = event.rv
                sent += 1
            if closing or time.monotonic() > deadline:
                break
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # as a real API server's backlog: a client opening 32 connections at once
    fake: FakeKarmada
    stores: dict[str, FakeKarmada]  # list + watch path -> collection
    kube_version: str = "v1.31.2"  # GET /version; "": 503

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-answer (a killed server process) is not the fake's error."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass
class RunningFake:
    fake: FakeKarmada
    server: _Server
    thread: threading.Thread

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def kubeconfig(self, path: Path) -> Path:
        return write_kubeconfig(path, self.url, name="karmada")

    def user_kubeconfig(self, path: Path, user: str) -> Path:
        """A kubeconfig that authenticates as ``user`` (an engineer running kubectl or ``release``)."""
        return write_kubeconfig(path, self.url, token=f"user:{user}", name="karmada")

    @property
    def events(self) -> list[dict[str, Any]]:
        """The Events written to this API server (a member cluster's), oldest first."""
        store = self.server.stores.get("/apis/events.k8s.io/v1/events")
        if store is None:
            return []
        with store.cond:
            return sorted((copy.deepcopy(e) for e in store.objects.values()), key=lambda e: e["eventTime"])

    def event_reasons(self, name: str = "orders") -> list[str]:
        return [e["reason"] for e in self.events if e["regarding"]["name"] == name]

    def stop(self) -> None:
        for store in self.server.stores.values():
            with store.cond:
                store.closing = True
                store.cond.notify_all()
        self.server.shutdown()
        self.server.server_close()


def core_collection(resource: str) -> FakeKarmada:
    """A core/v1 collection (``nodes``, ``pods``) listed and watched cluster-wide."""
    kind = resource[:-1].capitalize()
    return FakeKarmada(path=f"/api/v1/{resource}", api_version="v1", list_kind=f"{kind}List")


def flink_collection(plural: str) -> FakeKarmada:
    """``flinkdeployments`` / ``flinksessionjobs`` of a member cluster, listed cluster-wide, patched
    and read one by one."""
    kind = {
        "flinkdeployments": "FlinkDeploymentList",
        "flinksessionjobs": "FlinkSessionJobList",
        "flinkbluegreendeployments": "FlinkBlueGreenDeploymentList",
    }[plural]
    return FakeKarmada(
        path=f"/apis/flink.apache.org/v1beta1/{plural}",
        api_version="flink.apache.org/v1beta1",
        list_kind=kind,
    )


def events_collection() -> FakeKarmada:
    """``events.k8s.io/v1`` Events: created (POST) and their series patched, listed for the tests."""
    return FakeKarmada(
        path="/apis/events.k8s.io/v1/events", api_version="events.k8s.io/v1", list_kind="EventList"
    )


def start_member_cluster(kube_version: str = "v1.31.2") -> RunningFake:
    """A member cluster's API for the fencing agent: its FlinkDeployments, FlinkSessionJobs,
    FlinkBlueGreenDeployments and Events (``RunningFake.events``); ``/version`` says ``kube_version``."""
    return start(
        flink_collection("flinkdeployments"),
        extra=(
            flink_collection("flinksessionjobs"),
            flink_collection("flinkbluegreendeployments"),
            events_collection(),
        ),
        kube_version=kube_version,
    )


def start(
    fake: FakeKarmada | None = None, extra: tuple[FakeKarmada, ...] = (), kube_version: str = "v1.31.2"
) -> RunningFake:
    fake = fake or FakeKarmada()
    server = _Server(("127.0.0.1", 0), _Handler)
    server.fake = fake
    server.kube_version = kube_version
    server.stores = {store.path: store for store in (fake, *extra)}
    thread = threading.Thread(target=server.serve_forever, name="fake-karmada", daemon=True)
    thread.start()
    return RunningFake(fake, server, thread)
