"""What the agent's poll reads of the storages before it decides: a copy's ownership records and, for a
held copy, the storage's time, each on its storage's lane under a deadline (``records.FencingStore``).

A poll (``begin``) learns each storage's time once, before any listing of that poll (ages measured from
it are never longer than they are), and lists a storage that holds several of its copies once for all of
them (a few pages where a listing per copy would be a request per copy per poll); a copy alone on its
storage, and every copy a recheck looks at between polls, lists its own folder (a poll's listing would be
older than the recheck). A read that fails is ``decide.Unreadable``: the copy is decided without records.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from webhook.common.paths import StoragePath
from webhook.fencing import metrics
from webhook.fencing.copies import Copy, CopyState
from webhook.fencing.decide import Unreadable
from webhook.fencing.protocol import Ownership
from webhook.fencing.records import FencingStore, Listing
from webhook.restore.snapshots import StorageError


@dataclass(frozen=True)
class Read:
    """A copy's records as one read found them."""

    records: Ownership | Unreadable
    listed_at: float  # monotonic start of the listing they come from (what they vouch for)
    storage_now: datetime | None = None  # the storage's time (read for a held copy only)


class PollReads:
    def __init__(self, store: FencingStore) -> None:
        self.store = store
        self._clocks: dict[StoragePath, asyncio.Future[datetime]] = {}  # storage time, once per poll
        # every workload's records on a storage, listed once per poll where it holds several copies
        self._trees: dict[StoragePath, asyncio.Future[tuple[float, dict[str, Listing]]]] = {}
        self._held_roots: set[StoragePath] = set()  # the storages this poll's held copies are on
        self._shared: set[StoragePath] = set()

    def begin(self, found: list[Copy]) -> None:
        """A new poll of these copies: its clocks and listings are read anew."""
        self._clocks.clear()
        self._trees.clear()
        self._held_roots = {c.clock for c in found if c.state is CopyState.HELD and c.clock is not None}
        self._shared = _shared_roots(found)

    def shares(self, copy: Copy) -> bool:
        """Its records come from this poll's one listing of its storage."""
        return copy.clock in self._shared

    async def records(self, copy: Copy, shared: bool) -> Read:
        """``shared``: from the poll's one listing of the copy's storage, else a listing of its folder."""
        storage_now = None
        listed_at = _mono()
        if copy.folder is None or copy.clock is None:  # the agent skips such a copy: never read as empty
            return Read(Unreadable("the copy names no fencing folder"), listed_at, storage_now)
        try:
            if copy.state is CopyState.HELD:
                storage_now = await self._storage_now(copy.clock)
            listed_at = _mono()
            if shared:
                listed_at, tree = await self._tree(copy.clock)
                found = tree.get(copy.folder.fs_path.rstrip("/"))
                return Read(found.ownership if found is not None else Ownership(), listed_at, storage_now)
            listing = await self.store.lanes.run(self.store.list_call(copy.folder))
            return Read(listing.ownership, listed_at, storage_now)
        except StorageError as exc:
            metrics.STORAGE_ERRORS.labels("agent").inc()
            return Read(Unreadable(str(exc)), listed_at, storage_now)

    async def _tree(self, root: StoragePath) -> tuple[float, dict[str, Listing]]:
        """The poll's one listing of a storage's records, and when it started (what it vouches for)."""
        known = self._trees.get(root)
        if known is None:

            async def listed() -> tuple[float, dict[str, Listing]]:
                if root in self._held_roots:
                    # after the storage's "now" a held copy counts its ages from (as its own listing
                    # would be); a failed clock is that copy's own error, not the other copies'
                    with contextlib.suppress(StorageError):
                        await self._storage_now(root)
                started = _mono()
                return started, await self.store.lanes.run(self.store.tree_call(root))

            known = self._trees[root] = asyncio.ensure_future(listed())
            known.add_done_callback(_retrieved)
        return await asyncio.shield(known)

    async def _storage_now(self, clock: StoragePath) -> datetime:
        """The storage's time, learnt once per poll per storage before any listing of this poll: ages
        measured from it are never longer than they are (a later "now" could only release sooner)."""
        known = self._clocks.get(clock)
        if known is None:
            call = self.store.clock_call(clock)
            known = self._clocks[clock] = asyncio.ensure_future(self.store.lanes.run(call))
            known.add_done_callback(_retrieved)  # its failure is each waiter's, even if none is left
        return await asyncio.shield(known)


def _shared_roots(found: list[Copy]) -> set[StoragePath]:
    """The storages a poll lists once for all their copies: those holding more than one copy it will
    read records for (one copy's own folder is the smaller listing)."""
    counts = Counter(
        c.clock
        for c in found
        if c.folder is not None and c.clock is not None and c.state is not CopyState.IDLE
    )
    return {root for root, n in counts.items() if root is not None and n > 1}


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _mono() -> float:
    return asyncio.get_running_loop().time()
