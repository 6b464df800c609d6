"""Which Events to write, as client-go's ``EventCorrelator`` decides it: a rate limit per object, similar
Events combined, repeats counted in one Event's series. Pure: keys and the time are handed in.

Three steps, in client-go's order, for each occurrence:

1. **Spam filter**: a token bucket per object (``about``): a burst of ``burst`` Events, then one more per
   ``refill_seconds``; past it the occurrence is dropped. An object that is always unhealthy cannot flood
   etcd (client-go: 25, then one every 5 minutes).
2. **Aggregation**: occurrences that differ only by their note (same object, type and reason: ``similar``)
   are combined once ``max_similar`` different notes were seen within ``window`` seconds of each other:
   the Event written instead says ``(combined from similar events): <note>`` and counts on as one series.
3. **Series**: the same Event again within ``window`` of its first occurrence grows that Event's
   ``series.count`` instead of creating another.

Every table is bounded (least recently used out first), as client-go's LRU caches are.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TypeVar

SPAM_BURST = 25
SPAM_REFILL_SECONDS = 300.0
MAX_SIMILAR = 10  # different notes about one (object, type, reason) before they are combined
WINDOW = 600.0  # seconds: client-go's 10 minutes, for series and for similar notes alike
CACHE_SIZE = 4096
COMBINED = "(combined from similar events): "


@dataclass(frozen=True)
class Dropped:
    """Over the object's rate limit: nothing is written."""


@dataclass(frozen=True)
class New:
    """Create an Event with ``note``; ``series`` names it for ``created`` and later repeats."""

    note: str
    series: Hashable


@dataclass(frozen=True)
class Repeat:
    """Patch Event ``name``'s series to ``count``; when it is gone, ``vanished`` and write ``fallback``."""

    name: str
    count: int
    series: Hashable
    fallback: New


Step = Dropped | New | Repeat


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class _Similar:
    notes: set[str]
    last: float


@dataclass
class _Series:
    name: str
    count: int
    first: float


K = TypeVar("K")
V = TypeVar("V")


class _Bounded(OrderedDict[K, V]):
    """A mapping that forgets the least recently used key past ``size`` entries."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def touch(self, key: K, value: V) -> V:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)
        return value


class Correlator:
    """The three steps over one recorder's occurrences (not thread-safe: the recorder's thread owns it)."""

    def __init__(
        self,
        burst: int = SPAM_BURST,
        refill_seconds: float = SPAM_REFILL_SECONDS,
        max_similar: int = MAX_SIMILAR,
        window: float = WINDOW,
        size: int = CACHE_SIZE,
    ) -> None:
        self.burst, self.refill_seconds = burst, refill_seconds
        self.max_similar, self.window = max_similar, window
        self._buckets: _Bounded[Hashable, _Bucket] = _Bounded(size)
        self._similar: _Bounded[Hashable, _Similar] = _Bounded(size)
        self._series: _Bounded[Hashable, _Series] = _Bounded(size)

    def correlate(self, about: Hashable, similar: Hashable, note: str, now: float) -> Step:
        """What to write for an occurrence about ``about`` (the object), of kind ``similar`` (object, type,
        reason), saying ``note``, at ``now`` (monotonic seconds)."""
        if not self._allowed(about, now):
            return Dropped()
        new = self._aggregated(similar, note, now)
        series = self._series.get(new.series)
        if series is not None and now - series.first < self.window:
            series.count += 1
            self._series.touch(new.series, series)
            return Repeat(series.name, series.count, new.series, new)
        return new

    def created(self, series: Hashable, name: str, now: float) -> None:
        """The Event ``name`` was written for ``series``: repeats grow it from now on."""
        self._series.touch(series, _Series(name, 1, now))

    def vanished(self, series: Hashable) -> None:
        """The Event of ``series`` is gone (expired, deleted): the next occurrence writes a new one."""
        self._series.pop(series, None)

    def _allowed(self, about: Hashable, now: float) -> bool:
        bucket = self._buckets.get(about) or _Bucket(float(self.burst), now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) / self.refill_seconds)
        bucket.at = now
        allowed = bucket.tokens >= 1.0
        if allowed:
            bucket.tokens -= 1.0
        self._buckets.touch(about, bucket)
        return allowed

    def _aggregated(self, similar: Hashable, note: str, now: float) -> New:
        seen = self._similar.get(similar)
        if seen is None or now - seen.last > self.window:
            seen = _Similar(set(), now)
        seen.notes.add(note)
        seen.last = now
        self._similar.touch(similar, seen)
        if len(seen.notes) < self.max_similar:
            return New(note, (similar, note))
        seen.notes.discard(note)  # the set never grows past the limit
        return New(COMBINED + note, (similar, COMBINED))
