"""The Work webhook's binding read: the cache the capture loop keeps, the fresh GET, and what a read answers.

The webhook decides on the binding as the API server holds it now (:class:`FreshLookup`); the cache
(:class:`BindingCache`, written by ``watch.Watcher``) adds only the record capture has folded but not
persisted yet, and is what a failed GET falls back on. ``review --role control-plane`` reads bindings
from a file instead (``offline.StaticLookup``): both answer a :data:`BindingLookupResult`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from webhook.common.contract import Contract
from webhook.common.kubeclient import ApiFailure
from webhook.controlplane.binding import Binding
from webhook.controlplane.record import BindingRecord, StoredRecord, annotation_key, read_annotation

log = logging.getLogger(__name__)


@dataclass
class Entry:
    binding: Binding
    record: BindingRecord  # the newest record we hold; the annotation catches up through the patch
    written_at: int = -1  # resourceVersion our last successful patch produced (-1: none / unknown)
    written: BindingRecord | None = None  # what that patch wrote
    persisted: bool = True  # False while ``record`` is ahead of the annotation (patch pending or failed)
    stored: StoredRecord | None = None  # the annotation as ``binding``'s event carried it (capture only)


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

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


@dataclass(frozen=True)
class Found:
    binding: Binding
    record: BindingRecord
    source: str  # "cache", "api" or "file"


@dataclass(frozen=True)
class NotFound:
    source: str


@dataclass(frozen=True)
class LookupFailed:
    message: str
    cached: Found | None = None  # what the watch cache held, for the one answer that stays safe


BindingLookupResult = Found | NotFound | LookupFailed


class BindingLookup(Protocol):
    def lookup(self, namespace: str, name: str) -> BindingLookupResult: ...

    def cached(self, namespace: str, name: str) -> Found | None:
        """What the watch cache holds, without any request (None: nothing cached, or no cache)."""
        ...


class BindingReader(Protocol):
    def get_binding(
        self, namespace: str, name: str, timeout: float | None = None
    ) -> Mapping[str, Any] | ApiFailure | None: ...


def found_from_object(obj: Any, contract: Contract, source: str) -> Found:
    binding = Binding.from_object(obj)
    stored = read_annotation(obj.get("metadata", {}).get("annotations"), annotation_key(contract))
    if stored.error:
        log.warning("ignoring unreadable record on %s/%s: %s", binding.namespace, binding.name, stored.error)
    return Found(binding, stored.record, source)


@dataclass
class FreshLookup:
    """The webhook's view: the binding as the API server holds it now, never the watch cache alone.

    Karmada creates a Work 1-25 ms after the scheduler's write that caused it (recorded), sooner than a
    watch delivers that write. A GET without resourceVersion is a quorum read: it returns every write
    that completed before it started, and the write that caused the Work completed before the Work
    CREATE was even sent. The cache contributes only the record capture has folded but not persisted
    yet, and is the fallback when the GET fails (see ``handler.WorkHandler``).
    """

    cache: BindingCache
    api: BindingReader | None
    contract: Contract
    get_timeout: float = 2.0

    def cached(self, namespace: str, name: str) -> Found | None:
        if not self.cache.synced:
            return None
        entry = self.cache.get(namespace, name)
        return Found(entry.binding, entry.record, "cache") if entry is not None else None

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
