"""The heartbeat loop: renews every running copy's heartbeat on its own schedule, and steps a copy down
the moment its renew deadline passes, whatever the polls, the rechecks or another storage are doing.

Like client-go's leader election, renewing is kept apart from the work: the poll decides which copies
heartbeat (``observe`` and ``keep``), this loop looks at each of them every retry period (a fifth of a
poll), sends a renewal when one is due on the copy's own storage lane, under its deadline, and never
waits for it: a hung bucket holds only its own renewals, each failed at its deadline. What to do with a
copy is ``renewal.renewal``'s answer (pure); a step-down is a patch (``patcher.CopyPatcher.step_down``). A
copy whose spec carries the lease keeper is read before each renewal (``look_for_keeper``): once its
record shows the keeper writing it, it is not written but handed over, and left alone until its spec no
longer carries the keeper (``renewal``'s docstring says why). Read just before the write it would
replace, the record shows the keeper's renewal of the last poll if a keeper runs: a read at any other
moment could keep finding the agent's own write, both writers renewing once a poll. A handed-over
copy's record is read on (``takeback.read_due``: at least once a poll), and the copy is taken back once
it has not moved for the renew deadline (``takeback``'s docstring has the timing): renewed again at once,
stepped down if that fails, and handed over again once its keeper writes a new record.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, replace

from webhook.common.events import NORMAL, WARNING
from webhook.common.paths import StoragePath
from webhook.fencing import metrics
from webhook.fencing.background import Background
from webhook.fencing.copies import Copy, CopyState
from webhook.fencing.layout import Workload
from webhook.fencing.records import FencingStore, heartbeat_body
from webhook.fencing.renewal import (
    KeepRenewing,
    Renewal,
    Renewing,
    first_seen,
    keeper_renews,
    renewal,
    retry_seconds,
    step_down_reason,
)
from webhook.fencing.takeback import Watch, answered, failed, handed, identity, read_due, silent, taken_back
from webhook.policy.restore import FencingPolicy
from webhook.restore.snapshots import StorageError

log = logging.getLogger(__name__)

NEVER = float("-inf")

# The copies the loop keeps an entry for: running ones renew and may step down, stale ones asked to stop
# renew until their ack, and deleted or suspended ones (by someone else) until their operator reports the
# stop. A stepped-down copy has none: whoever resumes it renews first (``beat_now``), and a replica that
# did not sees it running again as if for the first time.
_KEPT = {
    CopyState.RUNNING: (True, True),
    CopyState.STOPPING: (True, False),
    CopyState.ENDING: (True, False),
}


@dataclass
class _Entry:
    copy: Copy
    state: Renewing
    beats: bool
    # Its spec carries the keeper: each renewal first reads the record, and leaves the copy to the keeper
    # once it shows the keeper writing it for this epoch (the copy's judged epoch, from the poll).
    looking: int | None = None
    # The start of the agent's own last renewal that succeeded (at first sight, the stand-in ``renewed``
    # starts from): a keeper's record found over it landed after it. A take-back's ``renewed`` is none.
    wrote: float = NEVER
    watch: Watch | None = None  # handed over: its keeper's record as last read
    # Taken back: its keeper's last record (found again, it is no renewal) and the start of the last read
    # that found it (a newer record landed after it).
    stale: tuple[str | None, float] | None = None
    reading: bool = False  # a read of its handed-over record is in flight
    quiet: float | None = None  # taken back, how long its record had not moved: said once the agent writes


@dataclass(frozen=True, kw_only=True)
class KeeperRead:
    """One read of a copy's heartbeat record (``Renewer._keeper_record``)."""

    answered: bool  # the storage answered within the call deadline
    record: str | None = None  # the keeper's record (``takeback.identity``), when it renews for the epoch


# ``told(copy, type, reason, action, note)``: an Event on the copy's object (``patcher.CopyPatcher.event``).
Told = Callable[[Copy, str, str, str, str], None]


def _untold(copy: Copy, kind: str, reason: str, action: str, note: str) -> None:
    return None


class Renewer:
    """``step_down(copy, reason)`` suspends the copy (``patcher.CopyPatcher.step_down``); True when it
    went through. ``written()``: the time a heartbeat body says it was written."""

    def __init__(
        self,
        cluster: str,
        policy: FencingPolicy,
        store: FencingStore,
        step_down: Callable[[Copy, str], Awaitable[bool]],
        written: Callable[[], str],
        told: Told = _untold,
    ) -> None:
        self.cluster = cluster
        self._told = told
        self.policy = policy
        self.store = store
        self._step_down = step_down
        self._written = written
        self._entries: dict[Workload, _Entry] = {}
        # Heartbeats this agent wrote that no entry renews: a release's or a resume's own beat before a
        # poll sees the copy run, a stepped-down copy's last one. When, and where: one whose copy goes
        # (or is stopped) is removed at the next poll all the same.
        self._beaten: dict[Workload, tuple[float, StoragePath]] = {}
        self._tasks = Background()  # what ``tick`` started
        self._renewing: dict[Workload, asyncio.Task[None]] = {}  # the renewal in flight, per copy

    # --- what the poll tells it --------------------------------------------------------------------
    def observe(
        self, found: list[Copy], now: float, kinds: Collection[str] | None = None
    ) -> list[tuple[Workload, StoragePath]]:
        """The copies a poll listed: an entry for every running or stopping one (a new one, or one
        running again, counts as renewed ``first_seen``); the others are dropped. Returns where the
        heartbeats lie of the dropped copies that are gone or no longer ours to heartbeat (the agent
        removes them), and of the copies this agent beat for (a release, a resume) that went before a
        poll saw them run. ``kinds``: the kinds the poll listed (None: every kind); a copy of a kind
        whose listing failed is not gone, and is left as it was."""
        listed = {c.patched: c for c in found}

        def unlisted(workload: Workload) -> bool:
            return kinds is not None and workload.kind not in kinds

        for workload, copy in listed.items():
            kept = _KEPT.get(copy.state)
            if kept is None or copy.folder is None:
                continue
            beats, may_step_down = kept
            entry = self._entries.get(workload)
            if entry is None and not may_step_down and not copy.operator.active:
                # Stopping or ending, never renewed here, and no job active by its status (a restore
                # superseded while held, an object that never ran): it is not given a heartbeat.
                continue
            if entry is None:
                beaten = self._beaten.pop(workload, None)
                renewed = max(first_seen(now, self.policy), beaten[0] if beaten else NEVER)
                self._entries[workload] = _Entry(
                    copy, Renewing(renewed, NEVER, may_step_down), beats, wrote=renewed
                )
                continue
            renewed = entry.state.renewed
            keeper = entry.state.keeper and copy.guarded and not _new_session_job_id(entry.copy, copy)
            started = copy.state is CopyState.RUNNING and entry.copy.state is not CopyState.RUNNING
            if started or keeper != entry.state.keeper:
                # Started again (resumed, perhaps by another replica), or the keeper gone from its spec:
                # as if first seen, unless renewed since.
                renewed = max(renewed, first_seen(now, self.policy))
                entry.wrote = max(entry.wrote, renewed)
            entry.copy, entry.beats = copy, beats
            entry.looking = entry.looking if copy.guarded else None
            entry.watch = entry.watch if keeper else None
            entry.state = replace(entry.state, may_step_down=may_step_down, renewed=renewed, keeper=keeper)
        dropped = []
        for workload in [w for w in self._entries if w not in listed or listed[w].state not in _KEPT]:
            if workload not in listed and unlisted(workload):
                continue  # its kind could not be listed: unknown, not gone
            entry = self._entries.pop(workload)
            after = listed.get(workload)
            if (
                entry.beats
                and entry.copy.folder is not None
                and (after is None or after.state is CopyState.IDLE)
            ):
                dropped.append((workload, entry.copy.folder))
        # Beaten for (a release, a resume) and gone, or stopped, before any poll saw the copy run; or
        # stepped down, and gone since.
        for workload, (_, folder) in list(self._beaten.items()):
            after = listed.get(workload)
            if after is None and unlisted(workload):
                continue
            if after is None or after.state is CopyState.IDLE:
                del self._beaten[workload]
                dropped.append((workload, folder))
        # A blue/green child that goes (the operator deletes the old one after a transition) shares its
        # heartbeat with the child that runs on: that heartbeat stays.
        beating = {e.copy.folder for e in self._entries.values()}
        beating |= {folder for _, folder in self._beaten.values()}
        return [(w, folder) for w, folder in dropped if folder not in beating]

    def keep(self, copy: Copy, effect: KeepRenewing, listed_at: float) -> None:
        """A poll's decision: keep renewing the copy; ``confirmed``: its listing started at ``listed_at``
        found no newer fence."""
        entry = self._entries.get(copy.patched)
        if entry is None:
            return
        entry.beats = True
        may_step_down = (
            entry.state.may_step_down and effect.may_step_down
        )  # a stale copy is suspended already
        confirmed = max(entry.state.confirmed, listed_at) if effect.confirmed else entry.state.confirmed
        entry.state = replace(entry.state, confirmed=confirmed, may_step_down=may_step_down)

    def look_for_keeper(self, workload: Workload, epoch: int) -> None:
        """A poll's decision: the copy's spec carries the keeper; read its record before each renewal."""
        entry = self._entries.get(workload)
        if entry is not None:
            entry.looking = epoch

    def hand_over(self, workload: Workload, record: str | None, started: float) -> None:
        """The keeper in the copy's pod renews its heartbeat (its ``record``, read at ``started``, says
        so): renew it no more and never step it down, while its spec carries the keeper and its record
        moves (``takeback``). Its heartbeat is still removed when the copy goes (``observe``)."""
        entry = self._entries.get(workload)
        if entry is not None and entry.copy.guarded and not entry.state.keeper:
            entry.state = replace(entry.state, keeper=True)
            since = max(entry.wrote, entry.stale[1] if entry.stale else NEVER)
            entry.watch, entry.stale = handed(record, since, started), None
            if entry.quiet is not None:  # its record moved just after the take-back: nothing to say
                entry.quiet = None
                log.info("heartbeat left to the keeper again", extra={"fields": {"object": str(workload)}})
                return
            metrics.KEEPER_HANDOVERS.inc()
            log.info(
                "heartbeat left to the keeper in the job's pod", extra={"fields": {"object": str(workload)}}
            )
            note = (
                f"the lease keeper in the JobManager's pod renews the heartbeat (epoch {entry.looking}): "
                "the agent leaves this copy to it, and takes it back if its record stops moving"
            )
            self._told(entry.copy, NORMAL, "KeeperRenews", "Heartbeat", note)

    def kept(self, workload: Workload) -> bool:
        """The copy's keeper renews its heartbeat (``hand_over``)."""
        entry = self._entries.get(workload)
        return entry is not None and entry.state.keeper

    def drop(self, workload: Workload) -> None:
        """The copy is acknowledged stopped (its heartbeat goes with the ack): renew it no more."""
        self._entries.pop(workload, None)

    def renewed(self, workload: Workload, default: float) -> float:
        entry = self._entries.get(workload)
        return entry.state.renewed if entry is not None else default

    async def beat_now(self, copy: Copy) -> None:
        """Renew before the next effect of a chain (a release, a resume); raises ``StorageError``."""
        if copy.folder is None:
            raise StorageError("no checkpoint directory")
        start = asyncio.get_running_loop().time()
        await self.store.lanes.run(self.store.beat_call(copy.folder, self._body(copy)))
        self._renewed(copy.patched, start, copy.folder)

    # --- the loop ----------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        period = retry_seconds(self.policy)
        while not stop.is_set():
            self.tick()
            await pause(stop, period)

    def cancel(self) -> None:
        """The agent stops: what is in flight is dropped (a renewal then fails at the storage, or lands)."""
        self._tasks.cancel()

    def tick(self) -> list[asyncio.Task[None]]:
        """One look at every entry: renewals and step-downs are started, never waited for."""
        now = asyncio.get_running_loop().time()
        started = []
        for workload, entry in list(self._entries.items()):
            watching = self._watching(workload, entry, now)
            if watching is not None:
                started.append(watching)
            state = entry.state if entry.beats else replace(entry.state, in_flight=True)
            decision = renewal(state, now, self.policy)
            if decision is Renewal.STEP_DOWN:
                reason = step_down_reason(entry.state, now)
                started.append(self._tasks.spawn(self._down(workload, entry, reason)))
            elif decision is Renewal.BEAT and entry.copy.folder is not None:
                entry.state = replace(entry.state, attempted=now, in_flight=True)
                task = self._tasks.spawn(self._renew(workload, entry.copy, entry.copy.folder, now))
                self._renewing[workload] = task
                task.add_done_callback(functools.partial(self._settled, workload))
                started.append(task)
        return started

    def _watching(self, workload: Workload, entry: _Entry, now: float) -> asyncio.Task[None] | None:
        """A running copy handed over: taken back once its record is silent, else read when due."""
        watch = entry.watch
        if not entry.state.keeper or watch is None or not entry.state.may_step_down:
            return None  # a stale copy's keeper stopped at the fence: it is not taken back
        if not entry.reading and entry.copy.folder is not None and read_due(watch, now, self.policy):
            entry.reading = True  # judged once answered, on what it found; meanwhile on what was found
            return self._tasks.spawn(self._look(workload, entry, entry.copy.folder, now))
        self._judge(workload, entry, now)
        return None

    def _judge(self, workload: Workload, entry: _Entry, now: float) -> None:
        watch = entry.watch
        if watch is None or not entry.state.keeper or not entry.state.may_step_down:
            return
        quiet = silent(watch, now, self.policy)
        if quiet is not None:
            self._take_back(workload, entry, watch, quiet, now)

    async def _keeper_record(self, entry: _Entry, folder: StoragePath) -> KeeperRead:
        """Read the copy's heartbeat record (on its heartbeat lane, under the call deadline), for the
        take-back's watch (``_look``) and before a renewal (``_keeper_writes``): the keeper's record when
        it shows the keeper renewing for the epoch looked for, else None. A read that fails says nothing
        (``KeeperRead.answered`` false): counted here, once, as the heartbeat storage's error; the watch
        does not move on it, and the renewal it came before writes as if no keeper ran (the write then
        says whether the storage answers)."""
        try:
            body = await self.store.lanes.run(self.store.heartbeat_call(folder))
        except StorageError:
            metrics.STORAGE_ERRORS.labels("heartbeat").inc()
            return KeeperRead(answered=False)
        epoch = entry.looking
        found = epoch is not None and keeper_renews(self.cluster, epoch, body, _kept_job_id(entry.copy))
        return KeeperRead(answered=True, record=identity(body) if found else None)

    async def _look(self, workload: Workload, entry: _Entry, folder: StoragePath, start: float) -> None:
        """Read a handed-over copy's record, and judge the copy on what it found."""
        try:
            read = await self._keeper_record(entry, folder)
        finally:
            entry.reading = False
        if self._entries.get(workload) is not entry or entry.watch is None:
            return
        if read.answered:
            entry.watch = answered(entry.watch, read.record, start)
        else:
            entry.watch = failed(entry.watch, start)
        self._judge(workload, entry, asyncio.get_running_loop().time())

    def _take_back(self, workload: Workload, entry: _Entry, watch: Watch, quiet: float, now: float) -> None:
        """Its keeper's record has not moved for the renew deadline: the copy is the agent's again,
        renewed at once (``takeback.taken_back``)."""
        # Renewed a retry period from now, its record read first: a keeper's renewal that lands just
        # late (a record first seen right after the hand-over counts from the agent's own last write)
        # then hands the copy over again, unsaid and unwritten. The deadline is ``renewed``'s.
        renewed = max(entry.state.renewed, taken_back(watch, self.policy))
        entry.state = replace(entry.state, keeper=False, renewed=renewed, attempted=now)
        entry.watch, entry.stale, entry.quiet = None, (watch.record, watch.looked), quiet

    def _taken_back(self, workload: Workload, entry: _Entry) -> None:
        """Said once the renewal after a take-back writes: its read found no newer record of the keeper
        (one that landed just after the look that took the copy back hands it over again, unsaid)."""
        quiet, entry.quiet = entry.quiet, None
        if quiet is None:
            return
        metrics.KEEPER_TAKEBACKS.inc()
        log.warning(
            "heartbeat taken back from the keeper in the job's pod: its record has not moved",
            extra={"fields": {"object": str(workload), "silentSeconds": round(quiet, 1)}},
        )
        p = self.policy
        note = (
            f"the heartbeat the lease keeper renews has not moved for {quiet:.0f}s (renew deadline "
            f"{p.renew_deadline_seconds:g}s): the agent renews it again and steps this copy down if it "
            f"cannot within {p.poll_seconds:g}s; it leaves the copy to the keeper again once it renews"
        )
        self._told(entry.copy, WARNING, "KeeperSilent", "Heartbeat", note)

    def renewing(self, workload: Workload) -> asyncio.Task[None] | None:
        """The copy's renewal still in flight: a heartbeat removed before it lands would be written
        back by it, so whoever removes one waits for this first."""
        return self._renewing.get(workload)

    def _settled(self, workload: Workload, task: asyncio.Task[None]) -> None:
        if self._renewing.get(workload) is task:
            del self._renewing[workload]

    async def settle(self) -> None:
        """Wait for what ``tick`` started (tests that drive one pass at a time)."""
        await self._tasks.settle()

    async def _renew(self, workload: Workload, copy: Copy, folder: StoragePath, start: float) -> None:
        try:
            if await self._keeper_writes(workload, folder, start):
                return
            entry = self._entries.get(workload)
            if entry is not None:
                self._taken_back(workload, entry)
            await self.store.lanes.run(self.store.beat_call(folder, self._body(copy)))
        except StorageError as exc:
            metrics.STORAGE_ERRORS.labels("heartbeat").inc()
            metrics.RENEWALS.labels("failed").inc()
            log.warning(
                "heartbeat not renewed", extra={"fields": {"object": str(workload), "error": str(exc)}}
            )
            ok = False
        else:
            metrics.RENEWALS.labels("ok").inc()
            ok = True
        entry = self._entries.get(workload)
        if entry is not None:
            entry.state = replace(entry.state, in_flight=False)
        if ok:
            self._renewed(workload, start)

    async def _keeper_writes(self, workload: Workload, folder: StoragePath, start: float) -> bool:
        """The copy's keeper renewed its record since this agent's last write (read first where its spec
        carries the keeper): the copy is handed over, and this renewal writes nothing. The record of a
        keeper it was taken back from is no renewal: only a new one hands it over again."""
        entry = self._entries.get(workload)
        if entry is None or entry.looking is None or not entry.copy.guarded:
            return False
        record = (await self._keeper_record(entry, folder)).record
        if record is None or (entry.stale is not None and record == entry.stale[0]):
            return False
        self.hand_over(workload, record, start)
        entry.state = replace(entry.state, in_flight=False)
        return True

    async def _down(self, workload: Workload, entry: _Entry, reason: str) -> None:
        self._taken_back(workload, entry)  # taken back and never renewed since: said before it goes
        entry.state = replace(entry.state, may_step_down=False)  # once: the next poll says what it is
        if not await self._step_down(entry.copy, reason):
            current = self._entries.get(workload)
            if current is entry:
                entry.state = replace(entry.state, may_step_down=True)  # the patch failed: again next tick
            return
        if self._entries.get(workload) is entry:
            del self._entries[workload]  # if it runs again (resumed elsewhere), it is a new sight
            if entry.copy.folder is not None:  # its heartbeat stays until the copy is gone or stopped
                self._beaten[workload] = (entry.state.renewed, entry.copy.folder)

    def _renewed(self, workload: Workload, start: float, folder: StoragePath | None = None) -> None:
        entry = self._entries.get(workload)
        if entry is None:
            if folder is not None:  # a beat before the copy runs (a renewal has an entry, or is moot)
                before = self._beaten.get(workload)
                self._beaten[workload] = (max(before[0] if before else NEVER, start), folder)
            return
        entry.state = replace(entry.state, renewed=max(entry.state.renewed, start))
        entry.wrote = max(entry.wrote, start)

    def _body(self, copy: Copy) -> dict[str, object]:
        return heartbeat_body(
            copy.workload, self.cluster, copy.epoch, copy.job_id, self._written(), _session_name(copy)
        )


def _session_name(copy: Copy) -> str:
    """A FlinkSessionJob copy's session cluster (its restore record's, else ``spec.deploymentName``);
    "" for any other kind. The agent's heartbeat names it, so that cluster's keeper finds the job."""
    if copy.workload.kind != "FlinkSessionJob":
        return ""
    return copy.session.name if copy.session is not None else copy.resource.deployment_name


def _kept_job_id(copy: Copy) -> str:
    """The jobId a keeper's record must name to vouch for ``copy``: a FlinkSessionJob's (its session
    cluster's keeper keeps each job by its jobId); any, for a FlinkDeployment's own keeper."""
    return copy.job_id if copy.workload.kind == "FlinkSessionJob" else ""


def _new_session_job_id(before: Copy, after: Copy) -> bool:
    """A FlinkSessionJob whose jobId changed (an upgrade resubmitted it): its session cluster's keeper
    kept the former jobId and drops it, so the agent takes the copy back until the keeper adopts the new
    one (from the agent's own record, which names it)."""
    return after.workload.kind == "FlinkSessionJob" and before.job_id != after.job_id


async def pause(stop: asyncio.Event, seconds: float) -> None:
    """Wait ``seconds``, or less when ``stop`` is set meanwhile."""
    if seconds <= 0:
        await asyncio.sleep(0)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
