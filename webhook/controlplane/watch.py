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

from webhook.common.kubeclient import ApiFailure, Backoff, Listed, WatchEnded, WatchEvent
from webhook.controlplane.binding import Binding, is_flink_binding
from webhook.controlplane.capture import capture
from webhook.controlplane.lookup import BindingCache, Entry
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

    def patch_annotation(
        self, namespace: str, name: str, key: str, value: str
    ) -> Mapping[str, Any] | ApiFailure: ...


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
            self.cache.put(Entry(binding, stored.record))
            return binding.key
        previous = self.cache.get(*binding.key)
        if previous is not None and previous.binding.uid != binding.uid:
            previous = None  # deleted and created again under the same name: a new workload
        base, written_at = self._base(binding, stored, previous)
        written = previous.written if previous is not None else None
        result = capture(base, stored, binding, self.clock())
        write = result.write
        if write and result.record == written and 0 <= _version(binding.resource_version) < written_at:
            # The event predates our last write and its annotation is older than what we wrote: the same
            # record again would be an identical patch (recorded: 107 of 209 before this check).
            write = False
        entry = Entry(binding, result.record, written_at, written, persisted=not write)
        self.cache.put(entry)
        if write:
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
class CaptureWhileLeading:
    """What runs under the election: a follower keeps the webhook's cache warm with a read-only watch; the
    leader runs a capturing watch, which lists first, so every binding that changed while nobody led is
    captured from its current state when the new leader starts."""

    make: Callable[[bool], Watcher]  # capture? -> a new watcher on the shared cache
    current: Watcher | None = None

    def follow(self) -> None:
        self._switch(capture=False)

    def lead(self) -> None:
        self._switch(capture=True)

    def _switch(self, capture: bool) -> None:
        if self.current is not None:
            self.current.stop.set()
        self.current = self.make(capture)
        name = "resourcebinding-capture" if capture else "resourcebinding-follow"
        threading.Thread(target=self.current.run, name=name, daemon=True).start()
