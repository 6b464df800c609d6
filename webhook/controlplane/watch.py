"""Capture: list + watch Flink ResourceBindings, keep them in a cache, persist each record when it changes.

The loop is ``common.listwatch`` (the stream ending, 410 Gone, a dropped connection, an unreachable API
server). On a restart it rebuilds from the records already stored in the annotations, so nothing
captured before is lost. A patch that failed is retried before the next watch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from prometheus_client import Counter

from webhook.common.kubeclient import ApiFailure, Backoff, Listed, Page, WatchEnded, WatchEvent
from webhook.common.listwatch import ListWatch
from webhook.controlplane.binding import Binding, is_flink_binding, removed_purge_modes
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
    """The capture loop: ``common.listwatch`` over the Flink ResourceBindings, folding each into the cache."""

    api: Api
    cache: BindingCache
    annotation: str
    clock: Callable[[], datetime]
    capture_enabled: bool = True
    backoff: Backoff = field(default_factory=Backoff)
    stop: threading.Event = field(default_factory=threading.Event)
    restarts: dict[str, int] = field(default_factory=dict)
    _dirty: set[tuple[str, str]] = field(default_factory=set)
    _writing: threading.Lock = field(default_factory=threading.Lock)  # held while a patch is in flight
    _warned: set[tuple[str, str, str, str]] = field(default_factory=set)  # removed purge modes said once
    _loop: ListWatch = field(init=False)

    def __post_init__(self) -> None:
        self._loop = ListWatch(
            "ResourceBindings",
            pages=self._pages,
            watch=self.api.watch_bindings,
            replace=self._replace,
            apply=self._apply,
            stop=self.stop,
            backoff=self.backoff,
            restarted=self._restarted,
            seen=lambda kind: EVENTS.labels(kind).inc(),
            before_watch=self._flush,
        )

    @property
    def resource_version(self) -> str:
        return self._loop.resource_version

    def run(self) -> None:
        """Until ``stop`` is set: list, then watch from the list's version; relist on 410 Gone."""
        self._loop.run()

    def _pages(self) -> list[Page | ApiFailure]:
        listed = self.api.list_bindings()  # all pages before anything is folded: a failed list folds nothing
        return [
            listed if isinstance(listed, ApiFailure) else Page(list(listed.items), listed.resource_version)
        ]

    def _restarted(self, cause: str) -> None:
        self.restarts[cause] = self.restarts.get(cause, 0) + 1
        WATCH_RESTARTS.labels(cause).inc()

    def _replace(self, objects: Iterable[Mapping[str, Any]]) -> None:
        seen = set()
        for obj in objects:
            key = self._handle(obj)
            if key is not None:
                seen.add(key)
        for key in self.cache.keys() - seen:  # deleted while we were not watching
            self.cache.remove(key)
            self._dirty.discard(key)
        self.cache.mark_synced()
        log.info("Flink ResourceBindings cached", extra={"fields": {"flink": len(seen)}})

    def _apply(self, kind: str, obj: Mapping[str, Any]) -> None:
        if kind == "DELETED":
            key = _key(obj)
            self.cache.remove(key)
            self._dirty.discard(key)
        else:
            self._handle(obj)

    def _handle(self, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        if not is_flink_binding(obj):
            return None
        binding = Binding.from_object(obj)
        self._warn_removed_purge_modes(binding)
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

    def _warn_removed_purge_modes(self, binding: Binding) -> None:
        """A clear word, once per binding, cluster and value, for a purge mode Karmada v1.19 removed."""
        for cluster, mode, message in removed_purge_modes(binding):
            seen = (*binding.key, cluster, mode)
            if seen not in self._warned:
                self._warned.add(seen)
                log.warning("%s/%s: %s", binding.namespace, binding.name, message)

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

    def halt(self) -> None:
        """Stop, and return only once no patch of ours is in flight: a leader stepping down writes nothing
        after this (the Lease may be another replica's the moment it returns)."""
        self.stop.set()
        with self._writing:
            pass

    def _persist(self, binding: Binding, record: Record) -> None:
        with self._writing:
            if self.stop.is_set():  # halted: the next leader captures from the binding as it is then
                self._dirty.add(binding.key)
                return
            answer = self.api.patch_annotation(
                binding.namespace, binding.name, self.annotation, record.dumps()
            )
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
            self.current.halt()  # before the election goes on: no record written once we stop leading
        self.current = self.make(capture)
        name = "resourcebinding-capture" if capture else "resourcebinding-follow"
        threading.Thread(target=self.current.run, name=name, daemon=True).start()
