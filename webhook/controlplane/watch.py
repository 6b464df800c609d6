"""Capture: list + watch Flink ResourceBindings, keep them in a cache, persist each record when it changes.

The loop is ``common.listwatch`` (the stream ending, 410 Gone, a dropped connection, an unreachable API
server). On a restart it rebuilds from the records already stored in the annotations, so nothing
captured before is lost.

Records are persisted by a :class:`RecordWriter` on its own thread, newest first per binding: the watch
thread only folds events into the cache, so the cache the Work webhook reads is as fresh as the watch
(a patch's round trip used to hold every later event back: seconds behind during a fleet failover on
real Karmada), and a burst of events for one binding costs one patch. A patch that failed is retried
before the next watch.
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
from webhook.controlplane.record import BindingRecord, StoredRecord, read_annotation

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
    _warned: set[tuple[str, str, str, str]] = field(default_factory=set)  # removed purge modes said once
    _loop: ListWatch = field(init=False)
    writer: RecordWriter = field(init=False)

    def __post_init__(self) -> None:
        self.writer = RecordWriter(self.api, self.cache, self.annotation, self.stop, Backoff(), self._refold)
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
            before_watch=self.writer.retry_failed,
        )

    @property
    def resource_version(self) -> str:
        return self._loop.resource_version

    def run(self) -> None:
        """Until ``stop`` is set: list, then watch from the list's version; relist on 410 Gone."""
        if self.capture_enabled:
            threading.Thread(target=self.writer.run, name="resourcebinding-writer", daemon=True).start()
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
            self.writer.forget(key)
        self.cache.mark_synced()
        log.info("Flink ResourceBindings cached", extra={"fields": {"flink": len(seen)}})

    def _apply(self, kind: str, obj: Mapping[str, Any]) -> None:
        if kind == "DELETED":
            key = _key(obj)
            self.cache.remove(key)
            self.writer.forget(key)
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
        with self.writer.entries:  # the writer updates an entry's write marks under the same lock
            due = self._fold(binding, stored)
        if due is not None:
            self.writer.submit(binding, due)
        return binding.key

    def _fold(self, binding: Binding, stored: StoredRecord) -> BindingRecord | None:
        """One event into the cache (the caller holds ``writer.entries``): the record to patch, or None."""
        previous = self.cache.get(*binding.key)
        if previous is not None and previous.binding.uid != binding.uid:
            previous = None  # deleted and created again under the same name: a new workload
        base, written_at = self._base(binding, stored, previous)
        written = previous.written if previous is not None else None
        result = capture(base, stored, binding, self.clock())
        write = result.write
        if write and result.record == written and 0 <= _version(binding.resource_version) < written_at:
            # The event predates our last write and its annotation is older than what we wrote: the
            # same record again would be an identical patch (recorded: 107 of 209 before this check).
            write = False
        if write and self.writer.writing(binding.key, result.record):
            write = False  # this very record is on its way (an event that came while it was sent)
        unsettled = previous is not None and not previous.persisted
        persisted = not (write or unsettled)
        self.cache.put(Entry(binding, result.record, written_at, written, persisted, stored))
        return result.record if write else None

    def _refold(self, key: tuple[str, str]) -> None:
        """Our patch landed before another writer's, whose event came while ours was in flight and was
        folded into our record: the annotation is theirs, so fold that event again now that we are
        settled (we converge on it, or patch what it lacks), instead of holding a record nobody stored."""
        with self.writer.entries:
            entry = self.cache.get(*key)
            if entry is None or entry.stored is None or self.writer.unsettled(key):
                return  # gone, or another patch of ours is on its way: that one will be the annotation
            entry.persisted = True  # our patch landed; only what we folded it with is stale
            due = self._fold(entry.binding, entry.stored)
        if due is not None:
            self.writer.submit(entry.binding, due)

    def _warn_removed_purge_modes(self, binding: Binding) -> None:
        """A clear word, once per binding, cluster and value, for a purge mode Karmada v1.19 removed."""
        for cluster, mode, message in removed_purge_modes(binding):
            seen = (*binding.key, cluster, mode)
            if seen not in self._warned:
                self._warned.add(seen)
                log.warning("%s/%s: %s", binding.namespace, binding.name, message)

    def _base(
        self, binding: Binding, stored: StoredRecord, previous: Entry | None
    ) -> tuple[BindingRecord, int]:
        """What to fold the event into. The annotation is the record of truth (another writer, such as
        a second replica during a rollout, converges on it instead of fighting it), except when ours
        is newer: a patch of ours that has not landed, or an event older than our last write."""
        if previous is None:
            return stored.record, -1
        version = _version(binding.resource_version)
        older = 0 <= version < previous.written_at
        if self.writer.unsettled(binding.key) or older or not stored.present or stored.error:
            return previous.record, previous.written_at
        return stored.record, previous.written_at

    def halt(self) -> None:
        """Stop, and return only once no patch of ours is in flight: a leader stepping down writes nothing
        after this (the Lease may be another replica's the moment it returns)."""
        self.stop.set()
        self.writer.halt()


@dataclass
class RecordWriter:
    """Persists the newest record of each binding, one patch at a time, in the order they changed.

    A record submitted again before its patch went out replaces the waiting one (one patch for a burst);
    a binding whose patch failed keeps its record and is retried by ``retry_failed`` (before every
    watch) and after a backoff. Until its record landed, a binding is *unsettled*: the watch folds its
    events into our newer record, not into the annotation they carry.
    """

    api: Api
    cache: BindingCache
    annotation: str
    stop: threading.Event
    backoff: Backoff
    # called once a patch of ours landed behind a newer event that carries another annotation
    overtaken: Callable[[tuple[str, str]], None]
    entries: threading.Lock = field(default_factory=threading.Lock)  # an entry's read-modify-write
    _waiting: dict[tuple[str, str], tuple[Binding, BindingRecord]] = field(default_factory=dict)
    _failed: dict[tuple[str, str], tuple[Binding, BindingRecord]] = field(default_factory=dict)
    _in_flight: tuple[str, str] | None = None
    _in_flight_record: BindingRecord | None = None
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _writing: threading.Lock = field(default_factory=threading.Lock)  # held while a patch is in flight

    def submit(self, binding: Binding, record: BindingRecord) -> None:
        with self._changed:
            self._failed.pop(binding.key, None)
            self._waiting[binding.key] = (binding, record)
            self._changed.notify()

    def unsettled(self, key: tuple[str, str]) -> bool:
        with self._changed:
            return self._queued(key) or key == self._in_flight

    def writing(self, key: tuple[str, str], record: BindingRecord) -> bool:
        """Is ``record`` the one waiting or being written for ``key``?"""
        with self._changed:
            waiting = self._waiting.get(key)
            if waiting is not None:
                return waiting[1] == record
            return key == self._in_flight and self._in_flight_record == record

    def _queued(self, key: tuple[str, str]) -> bool:
        return key in self._waiting or key in self._failed

    def forget(self, key: tuple[str, str]) -> None:
        with self._changed:
            self._waiting.pop(key, None)
            self._failed.pop(key, None)

    def retry_failed(self) -> None:
        with self._changed:
            for key, item in self._failed.items():
                self._waiting.setdefault(key, item)
            self._failed.clear()
            self._changed.notify()

    def halt(self) -> None:
        with self._changed:
            self._changed.notify_all()
        with self._writing:
            pass

    def run(self) -> None:
        while not self.stop.is_set():
            with self._changed:
                while not self._waiting and not self.stop.is_set():
                    self._changed.wait(1.0)
                if self.stop.is_set():
                    return
                key = next(iter(self._waiting))
                binding, record = self._waiting.pop(key)
                self._in_flight, self._in_flight_record = key, record
            ok, overtaken = self._write(binding, record)
            with self._changed:
                self._in_flight, self._in_flight_record = None, None
                if not ok and key not in self._waiting:
                    self._failed[key] = (binding, record)
            if overtaken:
                self.overtaken(key)
            if not ok:
                self.stop.wait(self.backoff.next())
                self.retry_failed()
            else:
                self.backoff.reset()

    def _write(self, binding: Binding, record: BindingRecord) -> tuple[bool, bool]:
        """(landed, overtaken): overtaken when the cache already holds an event newer than our patch
        whose annotation is another one (a second writer's patch landed after ours: the watch and the
        answer race, and the watch won)."""
        with self._writing:
            if self.stop.is_set():  # halted: the next leader captures from the binding as it is then
                return False, False
            answer = self.api.patch_annotation(
                binding.namespace, binding.name, self.annotation, record.dumps()
            )
        if isinstance(answer, ApiFailure):
            CAPTURE_PATCHES.labels("failed").inc()
            log.warning("persisting the record of %s/%s failed: %s", *binding.key, answer.message)
            return False, False
        CAPTURE_PATCHES.labels("ok").inc()
        overtaken = False
        with self.entries:
            entry = self.cache.get(*binding.key)
            if entry is not None and entry.binding.uid == binding.uid:
                entry.written_at = _version(_resource_version(answer))
                entry.written = record
                with self._changed:
                    queued = self._queued(binding.key)
                overtaken = (
                    _version(entry.binding.resource_version) > entry.written_at >= 0
                    and entry.stored is not None
                    and entry.stored.record != record
                )
                entry.persisted = entry.record == record and not queued and not overtaken
        if overtaken:
            log.info("a newer record of %s/%s landed after ours: folding it in", *binding.key)
        return True, overtaken


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
