"""The fencing agent: one per member role replica, beside the webhook. It decides nothing itself, and
says in one place which call carries out which effect of a decision (``FencingAgent._apply``; the calls
are ``executors.py``'s and the heartbeat loop's).

Three loops share one event loop (``run``), so none of them waits for another:

- the **poll**, every ``pollSeconds``: lists each Flink kind of the cluster on its own, reads each copy's
  ownership records on its storage's own lane under a deadline, hands copy, records and times to
  ``decide.decide`` and executes its effects. The poll waits for its copies at most one poll as a whole; a
  copy whose storage has not answered is decided without records at the next one.
- the **recheck**, every fifth of a poll between polls: the copies a failover waits on (stale copies
  whose operator has not reported them stopped, held restores) are looked at again, each on its own, so
  a new job starts within about one poll of the old job's reported stop.
- the **heartbeat loop** (``renewer.Renewer``): renews the running copies' heartbeats and steps a copy
  down the moment its renew deadline passes.

A poll reads each copy's records through ``reads.PollReads`` and shows what it found through
``report.Report``: after every poll the agent's health (``report.Health``) for the webhook's admissions,
and the metrics.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from webhook.common.events import EventSink, NoEvents
from webhook.common.flink import BLUE_GREEN, FlinkResource
from webhook.common.kubeclient import ApiFailure
from webhook.fencing import copies, metrics
from webhook.fencing.copies import Copy, CopyState
from webhook.fencing.decide import Times, Unreadable, decide
from webhook.fencing.effects import (
    WAITING,
    Acknowledge,
    Action,
    Effect,
    Effects,
    MarkStopping,
    Release,
    Resume,
    RewriteHold,
    Stop,
    StorageHold,
    Supersede,
    Trouble,
    WriteFence,
    trouble_of,
)
from webhook.fencing.executors import Executors, HoldMarks, StorageProblem
from webhook.fencing.flinkapi import PLURALS, MemberApi
from webhook.fencing.lanes import Lanes
from webhook.fencing.patcher import CopyPatcher
from webhook.fencing.prechecker import Prechecker
from webhook.fencing.protocol import Ownership
from webhook.fencing.reads import PollReads
from webhook.fencing.records import FencingStore, Workload
from webhook.fencing.renewal import Beat, KeepRenewing, LookForKeeper, retry_seconds
from webhook.fencing.renewer import Renewer, pause
from webhook.fencing.report import Health, Report, Step, list_problem
from webhook.policy.restore import RestorePolicy
from webhook.restore.snapshots import StorageError
from webhook.restore.storage.search import CheckpointStorage

log = logging.getLogger(__name__)

KINDS = tuple(PLURALS)


class FencingAgent:
    def __init__(
        self,
        cluster: str,
        policy: RestorePolicy,
        api: MemberApi,
        storage: CheckpointStorage,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_health: Callable[[Health], None] | None = None,
        events: EventSink | None = None,
        lanes: Lanes | None = None,
    ) -> None:
        self.cluster = cluster
        self.api = api
        self.storage = storage
        self.lanes = lanes or Lanes(policy.fencing.call_timeout)
        self.store = FencingStore(storage, cluster, self.lanes)
        self.clock = clock
        self.events: EventSink = events or NoEvents()
        # The object's side first: the heartbeat loop steps a copy down and leaves its Events through
        # it, the executors patch through it. The loop knows no executor; the executors know the loop
        # only as ``executors.Heartbeats``.
        self.patcher = CopyPatcher(api, policy, self.events, clock)
        patcher = self.patcher
        self.renewer = Renewer(
            cluster, policy.fencing, self.store, patcher.step_down, patcher.now, patcher.event
        )
        self.holds = HoldMarks()
        self.executors = Executors(self.store, self.renewer, storage, patcher, self.holds)
        self.prechecker = Prechecker(storage)
        self.reads = PollReads(self.store)
        self.report = Report(cluster, patcher.event, clock, on_health)
        self._inflight: dict[Workload, asyncio.Task[Step]] = {}
        self._urgent: set[Workload] = set()  # stopping or held at the last poll: looked at between polls
        self._next_poll = 0.0
        # The session clusters of the last listing: a session job's directories may be its cluster's.
        self._sessions: copies.SessionClusters = {}

    @property
    def policy(self) -> RestorePolicy:
        """One policy for the loops and the executors, the patcher's (a test swaps it between polls)."""
        return self.patcher.policy

    @policy.setter
    def policy(self, policy: RestorePolicy) -> None:
        self.patcher.policy = policy

    # --- the loops -------------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        log.info("fencing agent started", extra={"fields": {"cluster": self.cluster}})
        loops = [
            asyncio.ensure_future(self._polls(stop)),
            asyncio.ensure_future(self._rechecks(stop)),
            asyncio.ensure_future(self.renewer.run(stop)),
        ]
        try:
            await asyncio.gather(*loops)
        finally:
            for task in [*loops, *self._inflight.values()]:
                task.cancel()
            self.executors.cancel()
            self.prechecker.cancel()
            self.renewer.cancel()

    async def _polls(self, stop: asyncio.Event) -> None:
        poll = self.policy.fencing.poll_seconds
        while not stop.is_set():
            started = self._mono()
            self._next_poll = started + poll
            try:
                await self.poll()
            except Exception:  # one bad poll must not end fencing for the cluster
                log.exception("fencing poll failed")
            await pause(stop, self._next_poll - self._mono())

    async def _rechecks(self, stop: asyncio.Event) -> None:
        quick = retry_seconds(self.policy.fencing)
        while not stop.is_set():
            await pause(stop, quick)
            if stop.is_set() or self._next_poll - self._mono() < quick / 2:
                continue  # the poll is about to look at everything
            try:
                await self.recheck()
            except Exception:
                log.exception("fencing recheck failed")

    async def recheck(self) -> list[Step]:
        """Look again at the copies the last poll found stopping or held: a GET and a step each, all at
        once, waited for at most until the next poll is due (a recheck never delays a poll)."""
        urgent = [w for w in self._urgent if not _running(self._inflight.get(w))]
        if not urgent:
            return []
        started = self._mono()
        found = await asyncio.gather(*(self.api.get(w.kind, w.namespace, w.name) for w in urgent))
        tasks: dict[Workload, asyncio.Task[Step]] = {}
        for workload, obj in zip(urgent, found, strict=True):
            if obj is None or isinstance(obj, ApiFailure):
                continue
            copy = copies.read_copy({**obj, "kind": workload.kind}, self.policy, self._sessions)
            if copy.workload.kind == BLUE_GREEN and copy.target is None:
                continue  # a held parent needs its children's listing: the next poll
            if copy.state not in _URGENT and copy.state is not CopyState.FENCED:
                continue
            self._remember(copy, started)
            tasks[workload] = self._inflight[workload] = asyncio.ensure_future(self._step(copy, started))
        if not tasks:
            return []
        await asyncio.wait(
            tasks.values(), timeout=max(self._next_poll - self._mono(), retry_seconds(self.policy.fencing))
        )
        steps = [t.result() for t in tasks.values() if t.done()]
        for step in steps:
            if step.action not in WAITING:
                self._urgent.discard(step.workload)  # done waiting: the next poll looks again
        self.report.log([s for s in steps if s.action not in (Action.HELD, Action.WAITING_FOR_OPERATOR)])
        return steps

    # --- one poll ------------------------------------------------------------------------------------
    async def poll(self) -> list[Step]:
        started = self._mono()
        listing = await self._list()
        if listing is None:
            self.report.health(started)
            return []
        found, kinds = listing
        self.reads.begin(found)
        # A copy of a kind whose listing failed is not gone: only the kinds listed say what is.
        for workload, folder in self.renewer.observe(found, started, kinds):
            self.executors.forget(workload, folder)
        submitted: dict[Workload, asyncio.Task[Step]] = {}
        unanswered: list[Awaitable[Step]] = []
        for copy in found:
            self._remember(copy, started)
            if _running(self._inflight.get(copy.patched)):
                # Its storage has not answered last poll's calls: decide without records, and leave the
                # storage alone (what such a decision does is an API call at most).
                still = Unreadable("storage calls of the last poll still unanswered")
                unanswered.append(self._execute(copy, self._decide(copy, still, started), started))
                continue
            task = asyncio.ensure_future(self._step(copy, started, self.reads.shares(copy)))
            self._inflight[copy.patched] = submitted[copy.patched] = task
        steps: list[Step] = list(await asyncio.gather(*unanswered))
        if submitted:
            await asyncio.wait(submitted.values(), timeout=self.policy.fencing.poll_seconds)
        for workload, task in submitted.items():
            if task.done():
                steps.append(task.result())
            else:
                steps.append(
                    Step(workload, Action.PENDING, "storage calls still unanswered", Trouble.STORAGE)
                )
        present = {c.patched for c in found}
        self._inflight = {w: t for w, t in self._inflight.items() if w in present and not t.done()}
        self._precheck(found, steps)
        self.report.polled(found, steps)
        self.report.health(started)
        self._urgent = {c.patched for c in found if c.state in _URGENT} | {
            s.workload for s in steps if s.action in (Action.STOPPING, Action.HELD)
        }
        return steps

    def _precheck(self, found: list[Copy], steps: list[Step]) -> None:
        """The running jobs whose precheck is due (``prechecks.due``) are checked in the background; a
        job gone from the listing leaves no time behind."""
        beating = {s.workload for s in steps if s.action is Action.HEARTBEAT}
        running = [c for c in found if c.patched in beating]
        self.prechecker.run_due(running, (c.patched for c in found), self.policy)

    async def _list(self) -> tuple[list[Copy], frozenset[str]] | None:
        """Each kind on its own, all at once: the copies and the kinds listed; None when no kind could
        be listed."""
        listings = await asyncio.gather(*(self.api.list_kind(kind) for kind in KINDS))
        objects: list[Mapping[str, Any]] = []
        kinds: dict[str, str] = {}
        for kind, listed in zip(KINDS, listings, strict=True):
            if isinstance(listed, ApiFailure):
                metrics.API_ERRORS.labels("list").inc()
                kinds[kind] = list_problem(kind, listed)
                continue
            kinds[kind] = "ok"
            objects += listed
        if not self.report.listed(kinds):
            return None
        self._sessions = _session_clusters(objects)
        found = [copies.read_copy(obj, self.policy, self._sessions) for obj in objects]
        answered = frozenset(kind for kind, state in kinds.items() if state == "ok")
        return copies.with_children(found), answered

    def _remember(self, copy: Copy, now: float) -> None:
        self.report.seen(copy, now)
        if copy.state is not CopyState.HELD:
            self.holds.not_held(copy.patched)
        if copy.state is not CopyState.RUNNING:  # started again: it is prechecked at once
            self.prechecker.not_running(copy.patched)

    async def _step(self, copy: Copy, started: float, shared: bool = False) -> Step:
        """``shared``: read the records from the poll's one listing of the copy's storage (a recheck,
        between polls, lists the copy's own folder: a poll's listing would be older than the recheck)."""
        if copy.folder is None or copy.clock is None or copy.state is CopyState.IDLE:
            detail = "no checkpoint directory" if copy.folder is None else ""
            return Step(copy.patched, Action.SKIPPED, detail)
        read = await self.reads.records(copy, shared)
        effects = self._decide(copy, read.records, started, read.storage_now)
        return await self._execute(copy, effects, read.listed_at)

    def _decide(
        self, copy: Copy, records: Ownership | Unreadable, started: float, storage_now: datetime | None = None
    ) -> Effects:
        hold_written, release_waited = self.holds.of(copy.patched)
        times = Times(
            mono=self._mono(),
            renewed=self.renewer.renewed(copy.patched, started),
            storage_now=storage_now,
            hold_written=hold_written,
            release_waited=release_waited,
            keeper=self.renewer.kept(copy.patched),
        )
        return decide(self.cluster, copy, records, times, self.policy.fencing)

    # --- executing effects --------------------------------------------------------------------------
    async def _execute(self, copy: Copy, effects: Effects, listed_at: float) -> Step:
        problems: list[str] = []
        trouble = effects.trouble
        for chain in effects.chains:
            for effect in chain:
                problem = await self._apply(copy, effect, listed_at)
                if problem is not None:
                    problems.append(problem)
                    side = Trouble.STORAGE if isinstance(problem, StorageProblem) else trouble_of(effect)
                    trouble = trouble if trouble is not Trouble.NONE else side
                    break  # the rest of this chain depends on it; other chains do not
        if problems:
            return Step(copy.patched, Action.ERROR, f"{effects.action}: {'; '.join(problems)}", trouble)
        return Step(copy.patched, effects.action, effects.detail, effects.trouble)

    async def _apply(self, copy: Copy, effect: Effect, listed_at: float) -> str | None:
        """Carry out one effect: the one place that says which call executes which effect
        (``executors.py``, the heartbeat loop's ``renewer.py``); None on success, else what went wrong."""
        run = self.executors
        try:
            match effect:
                case KeepRenewing():  # the heartbeat loop's own effects
                    self.renewer.keep(copy, effect, listed_at)
                    return None
                case LookForKeeper():
                    self.renewer.look_for_keeper(copy.patched, effect.epoch)
                    return None
                case Beat():
                    await self.renewer.beat_now(copy)
                    return None
                case WriteFence():
                    return await run.write_fence(copy, effect)
                case MarkStopping():
                    return await run.mark_stopping(copy, effect)
                case Acknowledge():
                    return await run.acknowledge(copy, effect)
                case Stop():
                    return await run.stop(copy, effect)
                case Supersede():
                    return await run.supersede(copy, effect)
                case RewriteHold():
                    return await run.rewrite_hold(copy, effect)
                case StorageHold():
                    return await run.storage_hold(copy, effect)
                case Release():
                    return await run.release(copy, effect.cause)
                case Resume():
                    return await run.resume(copy)
        except StorageError as exc:
            metrics.STORAGE_ERRORS.labels("agent").inc()
            return f"storage: {exc}"
        raise TypeError(f"unknown effect {effect!r}")  # pragma: no cover - decide() asks only the above

    @staticmethod
    def _mono() -> float:
        return asyncio.get_running_loop().time()

    async def settle(self) -> None:
        """Wait for the renewals, step-downs and heartbeat removals already started (tests that drive
        one pass at a time)."""
        await self.renewer.settle()
        await self.executors.settle()
        await self.prechecker.settle()

    def close(self) -> None:
        self.executors.cancel()
        self.prechecker.cancel()
        self.lanes.close()


def _session_clusters(objects: list[Mapping[str, Any]]) -> copies.SessionClusters:
    """The listed FlinkDeployments without a job (session clusters), by namespace and name."""
    found: dict[tuple[str, str], FlinkResource] = {}
    for obj in objects:
        if obj.get("kind") != "FlinkDeployment":
            continue
        resource = FlinkResource.from_object(obj)
        if resource.job is None:
            found[(resource.namespace, resource.name)] = resource
    return found


def _running(task: asyncio.Task[Step] | None) -> bool:
    return task is not None and not task.done()


_URGENT = (CopyState.STOPPING, CopyState.HELD)
