"""Capture: list + watch Flink ResourceBindings, keep them in a cache, persist each record when it changes.

The loop survives what a long watch meets: the stream ending (watch again from the last
resourceVersion), 410 Gone (relist), a dropped connection or an unreachable API server (reconnect
with capped exponential backoff). On a restart it rebuilds from the records already stored in the
annotations, so nothing captured before is lost. A patch that failed is retried on the next pass.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from prometheus_client import Counter

from webhook.common.contract import Contract
from webhook.common.kubeclient import ApiFailure, Backoff, Listed, WatchEnded, WatchEvent
from webhook.controlplane.binding import Binding, is_flink_binding
from webhook.controlplane.capture import capture
from webhook.controlplane.handler import BindingLookupResult, Found, LookupFailed, NotFound, found_from_object
from webhook.controlplane.record import Record, StoredRecord, read_annotation

log = logging.getLogger(__name__)

CAPTURE_PATCHES = Counter(
    "flink_failover_capture_patches_total",
    "Records persisted on ResourceBindings (merge patches sent)",
    ["result"],
)
WATCH_RESTARTS = Counter(
    "flink_failover_watch_restarts_total", "ResourceBinding watch restarts, by cause", ["cause"]
)
EVENTS = Counter("flink_failover_watch_events_total", "ResourceBinding watch events handled", ["type"])


class Api(Protocol):
    def list_bindings(self) -> Listed | ApiFailure: ...

    def watch_bindings(self, resource_version: str) -> Iterator[WatchEvent | WatchEnded | ApiFailure]: ...

    def get_binding(
        self, namespace: str, name: str, timeout: float | None = None
    ) -> Mapping[str, Any] | ApiFailure | None: ...

    def patch_annotation(
        self, namespace: str, name: str, key: str, value: str
    ) -> Mapping[str, Any] | ApiFailure: ...


@dataclass
class Entry:
    obj: Mapping[str, Any]
    binding: Binding
    record: Record  # the newest record we hold; the annotation catches up through the patch
    written_at: int = -1  # resourceVersion our last successful patch produced (-1: none / unknown)
    written: Record | None = None  # what that patch wrote
    persisted: bool = True  # False while ``record`` is ahead of the annotation (patch pending or failed)


class BindingCache:
    """Flink ResourceBindings by (namespace, name), shared by the watch thread and the webhook threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], Entry] = {}
        self._synced = threading.Event()

    def get(self, namespace: str, name: str) -> Entry | None:
        with self._lock:
            return self._entries.get((namespace, name))

    def put(self, entry: Entry) -> None:
        with self._lock:
            self._entries[entry.binding.key] = entry

    def remove(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def keys(self) -> set[tuple[str, str]]:
        with self._lock:
            return set(self._entries)

    def mark_synced(self) -> None:
        self._synced.set()

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float) -> bool:
        return self._synced.wait(timeout)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


@dataclass
class Watcher:
    api: Api
    cache: BindingCache
    annotation: str
    clock: Callable[[], datetime]
    capture_enabled: bool = True
    backoff: Backoff = field(default_factory=Backoff)
    stop: threading.Event = field(default_factory=threading.Event)
    resource_version: str = ""
    restarts: dict[str, int] = field(default_factory=dict)
    _dirty: set[tuple[str, str]] = field(default_factory=set)

    def run(self) -> None:
        """Until ``stop`` is set: list, then watch from the list's version; relist on 410 Gone."""
        while not self.stop.is_set():
            if not self.resource_version and not self._relist():
                self._pause("list-failed")
                continue
            self._flush()
            self._watch_once()

    def _pause(self, cause: str) -> None:
        self.restarts[cause] = self.restarts.get(cause, 0) + 1
        WATCH_RESTARTS.labels(cause).inc()
        self.stop.wait(self.backoff.next())

    def _relist(self) -> bool:
        listed = self.api.list_bindings()
        if isinstance(listed, ApiFailure):
            log.warning("listing ResourceBindings failed: %s", listed.message)
            return False
        seen = set()
        for obj in listed.items:
            key = self._handle(obj)
            if key is not None:
                seen.add(key)
        for key in self.cache.keys() - seen:  # deleted while we were not watching
            self.cache.remove(key)
            self._dirty.discard(key)
        self.resource_version = listed.resource_version
        self.cache.mark_synced()
        self.backoff.reset()
        log.info(
            "ResourceBindings listed", extra={"fields": {"flink": len(seen), "rv": self.resource_version}}
        )
        return True

    def _watch_once(self) -> None:
        for item in self.api.watch_bindings(self.resource_version):
            if self.stop.is_set():
                return
            if isinstance(item, WatchEnded):
                return  # the server's timeout: watch again from where we are
            if isinstance(item, ApiFailure):
                if item.gone:
                    self._gone()
                else:
                    log.warning("ResourceBinding watch broke: %s", item.message)
                    self._pause("disconnected")
                return
            EVENTS.labels(item.type or "unknown").inc()
            if item.type == "ERROR":
                code = item.object.get("code")
                if code == 410:
                    self._gone()
                else:
                    log.warning("ResourceBinding watch error event: %s", item.object.get("message"))
                    self._pause("error-event")
                return
            version = _resource_version(item.object)
            if item.type in ("ADDED", "MODIFIED"):
                self._handle(item.object)
            elif item.type == "DELETED":
                key = _key(item.object)
                self.cache.remove(key)
                self._dirty.discard(key)
            if version:
                self.resource_version = version
            self.backoff.reset()

    def _gone(self) -> None:
        log.info("ResourceBinding watch expired (410 Gone): relisting")
        self.restarts["gone"] = self.restarts.get("gone", 0) + 1
        WATCH_RESTARTS.labels("gone").inc()
        self.resource_version = ""

    def _handle(self, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        if not is_flink_binding(obj):
            return None
        binding = Binding.from_object(obj)
        stored = read_annotation(_annotations(obj), self.annotation)
        if stored.error:
            log.warning("unreadable record on %s/%s: %s", binding.namespace, binding.name, stored.error)
        if not self.capture_enabled:
            self.cache.put(Entry(obj, binding, stored.record))
            return binding.key
        previous = self.cache.get(*binding.key)
        if previous is not None and previous.binding.uid != binding.uid:
            previous = None  # deleted and created again under the same name: a new workload
        base, written_at = self._base(binding, stored, previous)
        written = previous.written if previous is not None else None
        result = capture(base, stored, binding, self.annotation, self.clock())
        patch = result.patch
        if (
            patch is not None
            and result.record == written
            and 0 <= _version(binding.resource_version) < written_at
        ):
            # The event predates our last write and its annotation is older than what we wrote: the same
            # record again would be an identical patch (recorded: 107 of 209 before this check).
            patch = None
        entry = Entry(obj, binding, result.record, written_at, written, persisted=patch is None)
        self.cache.put(entry)
        if patch is not None:
            self._persist(binding, result.record)
        return binding.key

    def _base(self, binding: Binding, stored: StoredRecord, previous: Entry | None) -> tuple[Record, int]:
        """What to fold the event into. The annotation is the record of truth (another writer, such as
        a second replica during a rollout, converges on it instead of fighting it), except when ours
        is newer: a patch of ours that has not landed, or an event older than our last write."""
        if previous is None:
            return stored.record, -1
        version = _version(binding.resource_version)
        older = 0 <= version < previous.written_at
        if binding.key in self._dirty or older or not stored.present or stored.error:
            return previous.record, previous.written_at
        return stored.record, previous.written_at

    def _persist(self, binding: Binding, record: Record) -> None:
        answer = self.api.patch_annotation(binding.namespace, binding.name, self.annotation, record.dumps())
        if isinstance(answer, ApiFailure):
            CAPTURE_PATCHES.labels("failed").inc()
            self._dirty.add(binding.key)
            log.warning("persisting the record of %s/%s failed: %s", *binding.key, answer.message)
            return
        CAPTURE_PATCHES.labels("ok").inc()
        self._dirty.discard(binding.key)
        entry = self.cache.get(*binding.key)
        if entry is not None and entry.binding.uid == binding.uid:
            entry.written_at = _version(_resource_version(answer))
            entry.written = record
            entry.persisted = entry.record == record

    def _flush(self) -> None:
        """Retry the patches that failed; the next watch pass retries again if it fails once more."""
        for key in sorted(self._dirty):
            entry = self.cache.get(*key)
            if entry is None:
                self._dirty.discard(key)
                continue
            self._persist(entry.binding, entry.record)


def _annotations(obj: Mapping[str, Any]) -> Any:
    meta = obj.get("metadata")
    return meta.get("annotations") if isinstance(meta, Mapping) else None


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    raw_meta = obj.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    return (str(meta.get("namespace", "")), str(meta.get("name", "")))


def _version(text: str) -> int:
    """resourceVersion as a number to order events by; -1 when it is not one (it is opaque in principle,
    etcd revisions in practice): then nothing is judged older than our write."""
    try:
        return int(text)
    except ValueError:
        return -1


def _resource_version(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""


@dataclass
class FreshLookup:
    """The webhook's view: the binding as the API server holds it now, never the watch cache alone.

    Karmada creates a Work 1-25 ms after the scheduler's write that caused it (recorded), sooner than a
    watch delivers that write. A GET without resourceVersion is a quorum read: it returns every write
    that completed before it started, and the write that caused the Work completed before the Work
    CREATE was even sent. The cache contributes only the record capture has folded but not persisted
    yet, and is the fallback when the GET fails (see ``handler._fallback``).
    """

    cache: BindingCache
    api: Api | None
    contract: Contract
    get_timeout: float = 2.0

    def lookup(self, namespace: str, name: str) -> BindingLookupResult:
        # Taken before the GET: a record persisted by now is in what the GET returns.
        entry = self.cache.get(namespace, name)
        ahead = entry is not None and not entry.persisted
        cached = Found(entry.binding, entry.record, "cache") if entry is not None else None
        if self.api is None:
            return LookupFailed("Karmada API client not available", cached)
        obj = self.api.get_binding(namespace, name, self.get_timeout)
        if isinstance(obj, ApiFailure):
            return LookupFailed(obj.message, cached)
        if obj is None:
            return NotFound("api")
        fresh = found_from_object(obj, self.contract, "api")
        if entry is not None and entry.binding.uid == fresh.binding.uid and (ahead or fresh.record.empty):
            return Found(fresh.binding, entry.record, "api")
        return fresh
