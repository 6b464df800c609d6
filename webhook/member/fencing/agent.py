"""The fencing agent: one per member role replica, beside the webhook. It decides nothing itself, and
says in one place which call carries out which effect of a plan (``FencingAgent._apply``; the calls are
``executors.py``'s).

Three loops share one event loop (``run``), so none of them waits for another:

- the **poll**, every ``pollSeconds``: lists each Flink kind of the cluster on its own, reads each copy's
  ownership records on its storage's own lane under a deadline, hands copy, records and times to
  ``decide.decide`` and executes the plan. The poll waits for its copies at most one poll as a whole; a
  copy whose storage has not answered is decided without records at the next one.
- the **recheck**, every fifth of a poll between polls: the copies a failover waits on (stale copies
  whose operator has not reported them stopped, held restores) are looked at again, each on its own, so
  a new job starts within about one poll of the old job's reported stop.
- the **heartbeat loop** (``renewer.Renewer``): renews the running copies' heartbeats and steps a copy
  down the moment its renew deadline passes.

After every poll it reports its health (``Health``) for the webhook's admissions and the metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from webhook.common.events import NORMAL, WARNING, EventSink, NoEvents
from webhook.common.flink import BLUE_GREEN
from webhook.common.kubeclient import ApiFailure
from webhook.common.paths import StoragePath
from webhook.member.fencing import copies, metrics
from webhook.member.fencing.copies import Copy, CopyState
from webhook.member.fencing.decide import (
    WAITING,
    Acknowledge,
    Action,
    Beat,
    Effect,
    KeepRenewing,
    MarkStopping,
    Plan,
    Release,
    Resume,
    RewriteHold,
    Stop,
    StorageHold,
    Supersede,
    Times,
    Trouble,
    Unreadable,
    WriteFence,
    decide,
    retry_seconds,
    trouble_of,
)
from webhook.member.fencing.executors import Executors, StorageProblem
from webhook.member.fencing.flinkapi import OPTIONAL_KINDS, PLURALS, MemberApi
from webhook.member.fencing.lanes import Lanes
from webhook.member.fencing.protocol import Ownership
from webhook.member.fencing.records import FencingStore, Listing, Workload
from webhook.member.fencing.renewer import Renewer, pause
from webhook.member.policy import RestorePolicy
from webhook.member.restore import StorageError
from webhook.member.storage import CheckpointStorage

log = logging.getLogger(__name__)

KINDS = tuple(PLURALS)


@dataclass(frozen=True)
class Step:
    """What the agent did with one object in one poll (the log line, and what tests read)."""

    workload: Workload
    action: Action
    detail: str = ""
    trouble: Trouble = Trouble.NONE


@dataclass(frozen=True)
class Health:
    """The agent's state, for the webhook (may it vouch for a restore?) and the metrics."""

    ready: bool
    reason: str  # why not ready ("" when ready)
    polled_at: float  # wall time of the last poll that listed at least one kind (0: none yet)
    kinds: Mapping[str, str] = field(default_factory=dict)  # kind -> "ok", or why it cannot be listed


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
        self.on_health = on_health
        self.events: EventSink = events or NoEvents()
        # the heartbeat loop steps a copy down and writes the time through the executors (built next)
        self.renewer = Renewer(
            cluster,
            policy.fencing,
            self.store,
            lambda copy, why: self.executors.step_down(copy, why),
            lambda: self.executors.now(),
        )
        self.executors = Executors(self.store, self.renewer, storage, api, policy, self.events, clock)
        self._held_since: dict[Workload, float] = {}
        self._clocks: dict[StoragePath, asyncio.Future[datetime]] = {}  # storage time, once per poll
        # every workload's records on a storage, listed once per poll where it holds several copies
        self._trees: dict[StoragePath, asyncio.Future[tuple[float, dict[str, Listing]]]] = {}
        self._held_roots: set[StoragePath] = set()  # the storages this poll's held copies are on
        self._inflight: dict[Workload, asyncio.Task[Step]] = {}
        self._urgent: set[Workload] = set()  # stopping or held at the last poll: looked at between polls
        self._kinds: dict[str, str] = {}
        self._polled_at = 0.0
        self._next_poll = 0.0

    @property
    def policy(self) -> RestorePolicy:
        """One policy for the loops and the executors (a test swaps it between polls)."""
        return self.executors.policy

    @policy.setter
    def policy(self, policy: RestorePolicy) -> None:
        self.executors.policy = policy

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
            copy = copies.read_copy({**obj, "kind": workload.kind}, self.policy)
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
        self._log([s for s in steps if s.action not in (Action.HELD, Action.WAITING_FOR_OPERATOR)])
        return steps

    # --- one poll ------------------------------------------------------------------------------------
    async def poll(self) -> list[Step]:
        started = self._mono()
        found = await self._list()
        if found is None:
            self._report(started)
            return []
        self._clocks.clear()
        self._trees.clear()
        for workload, folder in self.renewer.observe(found, started):
            self.executors.forget(workload, folder)
        shared = _shared_roots(found)
        self._held_roots = {c.clock for c in found if c.state is CopyState.HELD and c.clock is not None}
        submitted: dict[Workload, asyncio.Task[Step]] = {}
        unanswered: list[Awaitable[Step]] = []
        for copy in found:
            self._remember(copy, started)
            if _running(self._inflight.get(copy.patched)):
                # Its storage has not answered last poll's calls: decide without records, and leave the
                # storage alone (what such a plan does is an API call at most).
                still = Unreadable("storage calls of the last poll still unanswered")
                unanswered.append(self._execute(copy, self._plan(copy, still, started), started))
                continue
            task = asyncio.ensure_future(self._step(copy, started, copy.clock in shared))
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
        self._observe(found, steps)
        self._report(started)
        self._urgent = {c.patched for c in found if c.state in _URGENT} | {
            s.workload for s in steps if s.action in (Action.STOPPING, Action.HELD)
        }
        return steps

    async def _list(self) -> list[Copy] | None:
        """Each kind on its own, all at once; None when no kind could be listed."""
        listings = await asyncio.gather(*(self.api.list_kind(kind) for kind in KINDS))
        objects: list[Mapping[str, Any]] = []
        kinds: dict[str, str] = {}
        for kind, listed in zip(KINDS, listings, strict=True):
            if isinstance(listed, ApiFailure):
                metrics.API_ERRORS.labels("list").inc()
                kinds[kind] = _list_problem(kind, listed)
                continue
            kinds[kind] = "ok"
            objects += listed
        for kind, state in kinds.items():
            if self._kinds.get(kind) != state:  # said once, when it changes
                if state == "ok":
                    log.info("fencing watches %s", kind, extra={"fields": {"cluster": self.cluster}})
                else:
                    level = logging.INFO if kind in OPTIONAL_KINDS and "404" in state else logging.ERROR
                    log.log(
                        level, "fencing cannot watch %s: %s", kind, state, extra={"fields": {"kind": kind}}
                    )
            metrics.KIND_LISTED.labels(kind).set(1 if state == "ok" else 0)
        self._kinds = kinds
        if not any(state == "ok" for state in kinds.values()):
            return None
        found = [copies.read_copy(obj, self.policy) for obj in objects]
        return with_children(found)

    def _remember(self, copy: Copy, now: float) -> None:
        if copy.state is CopyState.HELD:
            self._held_since.setdefault(copy.patched, now)
        else:
            self._held_since.pop(copy.patched, None)
            self.executors.hold_written.pop(copy.patched, None)
            self.executors.release_waited.pop(copy.patched, None)

    async def _step(self, copy: Copy, started: float, shared: bool = False) -> Step:
        """``shared``: read the records from the poll's one listing of the copy's storage (a recheck,
        between polls, lists the copy's own folder: a poll's listing would be older than the recheck)."""
        if copy.folder is None or copy.clock is None or copy.state is CopyState.IDLE:
            detail = "no checkpoint directory" if copy.folder is None else ""
            return Step(copy.patched, Action.SKIPPED, detail)
        records: Ownership | Unreadable
        storage_now = None
        listed_at = self._mono()
        try:
            if copy.state is CopyState.HELD:
                storage_now = await self._storage_now(copy.clock)
            listed_at = self._mono()
            if shared:
                listed_at, tree = await self._tree(copy.clock)
                found = tree.get(copy.folder.fs_path.rstrip("/"))
                records = found.ownership if found is not None else Ownership()
            else:
                records = (await self.lanes.run(self.store.list_call(copy.folder))).ownership
        except StorageError as exc:
            metrics.STORAGE_ERRORS.labels("agent").inc()
            records = Unreadable(str(exc))
        return await self._execute(copy, self._plan(copy, records, started, storage_now), listed_at)

    def _plan(
        self, copy: Copy, records: Ownership | Unreadable, started: float, storage_now: datetime | None = None
    ) -> Plan:
        renewed = self.renewer.renewed(copy.patched, started)
        times = Times(
            self._mono(),
            renewed,
            storage_now,
            self.executors.hold_written.get(copy.patched),
            self.executors.release_waited.get(copy.patched),
        )
        return decide(self.cluster, copy, records, times, self.policy.fencing)

    # --- executing a plan --------------------------------------------------------------------------
    async def _execute(self, copy: Copy, plan: Plan, listed_at: float) -> Step:
        problems: list[str] = []
        trouble = plan.trouble
        for chain in plan.chains:
            for effect in chain:
                problem = await self._apply(copy, effect, listed_at)
                if problem is not None:
                    problems.append(problem)
                    side = Trouble.STORAGE if isinstance(problem, StorageProblem) else trouble_of(effect)
                    trouble = trouble if trouble is not Trouble.NONE else side
                    break  # the rest of this chain depends on it; other chains do not
        if problems:
            return Step(copy.patched, Action.ERROR, f"{plan.action}: {'; '.join(problems)}", trouble)
        return Step(copy.patched, plan.action, plan.detail, plan.trouble)

    async def _apply(self, copy: Copy, effect: Effect, listed_at: float) -> str | None:
        """Carry out one effect: the one place that says which call executes which effect
        (``executors.py``); None on success, else what went wrong."""
        run = self.executors
        try:
            match effect:
                case KeepRenewing():
                    run.keep_renewing(copy, effect, listed_at)
                    return None
                case Beat():
                    await run.beat(copy)
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
        raise TypeError(f"unknown effect {effect!r}")  # pragma: no cover - decide() returns only the above

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
                started = self._mono()
                return started, await self.lanes.run(self.store.tree_call(root))

            known = self._trees[root] = asyncio.ensure_future(listed())
            known.add_done_callback(_retrieved)
        return await asyncio.shield(known)

    async def _storage_now(self, clock: StoragePath) -> datetime:
        """The storage's time, learnt once per poll per storage before any listing of this poll: ages
        measured from it are never longer than they are (a later "now" could only release sooner)."""
        known = self._clocks.get(clock)
        if known is None:
            known = self._clocks[clock] = asyncio.ensure_future(self.lanes.run(self.store.clock_call(clock)))
            known.add_done_callback(_retrieved)  # its failure is each waiter's, even if none is left
        return await asyncio.shield(known)

    # --- what the poll shows -------------------------------------------------------------------------
    def _observe(self, found: list[Copy], steps: list[Step]) -> None:
        now = self._mono()
        oldest = max((now - since for since in self._held_since.values()), default=0.0)
        metrics.HELD.set(sum(1 for s in steps if s.action is Action.HELD))
        metrics.OLDEST_HOLD.set(oldest)
        metrics.WAITING_FOR_OPERATOR.set(sum(1 for c in found if c.state is CopyState.STOPPING))
        self._tell(found, steps)
        self._log(steps)

    def _tell(self, found: list[Copy], steps: list[Step]) -> None:
        """Events for the states a poll finds rather than causes (aggregated into one series each)."""
        by_workload = {c.patched: c for c in found}
        for step in steps:
            copy = by_workload.get(step.workload)
            if copy is None:
                continue
            if step.action is Action.WAITING_FOR_OPERATOR:
                self.executors.event(copy, NORMAL, "WaitingForOperator", "Fence", step.detail)
            elif step.trouble is Trouble.STORAGE:
                self.executors.event(copy, WARNING, "StorageTrouble", "Heartbeat", step.detail[:300])

    def _log(self, steps: list[Step]) -> None:
        for step in steps:
            if step.action not in (Action.HEARTBEAT, Action.SKIPPED, Action.FENCED):
                loud = step.action in (Action.ERROR, Action.PENDING, Action.STEPPED_DOWN)
                log.log(
                    logging.WARNING if loud else logging.INFO,
                    "fencing %s",
                    step.action.value,
                    extra={"fields": {"object": str(step.workload), "detail": step.detail}},
                )

    def _report(self, started: float) -> None:
        listed = any(state == "ok" for state in self._kinds.values())
        if listed:
            self._polled_at = self.clock().timestamp()
            metrics.LAST_POLL.set(self._polled_at)
        metrics.POLL_SECONDS.observe(self._mono() - started)
        if listed:
            reason = ""
        else:
            reason = "cannot list any Flink kind: " + "; ".join(f"{k}: {v}" for k, v in self._kinds.items())
        metrics.AGENT_READY.set(0 if reason else 1)
        if self.on_health is not None:
            self.on_health(Health(not reason, reason, self._polled_at, dict(self._kinds)))

    @staticmethod
    def _mono() -> float:
        return asyncio.get_running_loop().time()

    async def settle(self) -> None:
        """Wait for the renewals, step-downs and heartbeat removals already started (tests that drive
        one pass at a time)."""
        await self.renewer.settle()
        await self.executors.settle()

    def close(self) -> None:
        self.lanes.close()


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


def _running(task: asyncio.Task[Step] | None) -> bool:
    return task is not None and not task.done()


def with_children(found: list[Copy]) -> list[Copy]:
    """A held FlinkBlueGreenDeployment knows the children the operator created for it (its release
    starts them)."""
    children: dict[Workload, list[str]] = {}
    for copy in found:
        if copy.target is not None:
            children.setdefault(copy.workload, []).append(copy.target.name)
    return [
        replace(c, children=tuple(sorted(children.get(c.workload, ()))))
        if c.workload.kind == BLUE_GREEN and c.target is None
        else c
        for c in found
    ]


_URGENT = (CopyState.STOPPING, CopyState.HELD)


def _list_problem(kind: str, failure: ApiFailure) -> str:
    if failure.status == 404:
        return f"{kind} is not served here (404: is its CRD installed?); its jobs are not fenced"
    if failure.status in (401, 403):
        return f"not allowed to list {PLURALS[kind]} ({failure.status}: RBAC?); its jobs are not fenced"
    return f"listing {PLURALS[kind]} failed: {failure.message}"
