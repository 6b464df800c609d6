"""The fencing agent: one per member role replica, beside the webhook. It decides nothing itself.

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

from webhook.common.events import NORMAL, WARNING, EventSink, NoEvents, Occurrence, Regarding
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
    Unresolved,
    WriteFence,
    decide,
    newest_known,
    release_start,
    resume_query,
    resume_skipped,
    resume_start,
    retry_seconds,
    trouble_of,
)
from webhook.member.fencing.flinkapi import OPTIONAL_KINDS, PLURALS, MemberApi
from webhook.member.fencing.lanes import Call, Lanes
from webhook.member.fencing.protocol import Ownership, ReleaseCause
from webhook.member.fencing.records import FencingStore, Listing, Workload, fence_body
from webhook.member.fencing.renewer import Renewer, pause
from webhook.member.policy import RestorePolicy
from webhook.member.restore import SnapshotQuery, Snapshots, StorageError, decide_restore
from webhook.member.storage import CheckpointStorage, Deadline

log = logging.getLogger(__name__)

KINDS = tuple(PLURALS)


class StorageProblem(str):
    """What went wrong with an effect that patches the object, when the storage was the cause (a
    release or a resume that could not check the newest checkpoint): its trouble is the storage's."""


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
        self.policy = policy
        self.api = api
        self.storage = storage
        self.lanes = lanes or Lanes(policy.fencing.call_timeout)
        self.store = FencingStore(storage, cluster, self.lanes)
        self.clock = clock
        self.on_health = on_health
        self.events: EventSink = events or NoEvents()
        self.renewer = Renewer(cluster, policy.fencing, self.store, self._step_down, self._now)
        self._hold_written: dict[Workload, float] = {}
        self._release_waited: dict[Workload, float] = {}  # a release that could not check: when it began
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
        self._background: set[asyncio.Task[None]] = set()

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
            for task in [*loops, *self._inflight.values(), *self._background]:
                task.cancel()
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
            self._forget(workload, folder)
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
            self._hold_written.pop(copy.patched, None)
            self._release_waited.pop(copy.patched, None)

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
            self._hold_written.get(copy.patched),
            self._release_waited.get(copy.patched),
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
        """Carry out one effect; None on success, else what went wrong."""
        folder = copy.folder
        try:
            if isinstance(effect, KeepRenewing):
                self.renewer.keep(copy, effect, listed_at)
                return None
            if isinstance(effect, Beat):
                await self.renewer.beat_now(copy)
                return None
            if isinstance(effect, Stop):
                fence = effect.fence
                patch = copies.stop_patch(copy, fence, self.policy, self._now())
                problem = await self._patched(copy, patch, _stop_done, stops=True)
                note = (
                    f"stale copy: the workload was restored on {fence.owner} at epoch {fence.epoch}; asked "
                    "the operator to stop it without a savepoint; acknowledged once it reports it stopped"
                )
                return self._told(problem, copy, WARNING, "Stopping", "Fence", note)
            if isinstance(effect, Supersede):
                fence = effect.fence
                patch = copies.superseded_patch(fence, self.policy, self._now())
                problem = await self._patched(copy, patch, _superseded_done)
                note = f"superseded by the restore on {fence.owner} at epoch {fence.epoch}: stays suspended"
                return self._told(problem, copy, WARNING, "Superseded", "Fence", note)
            if isinstance(effect, RewriteHold):
                text = copies.hold_text(effect.verdict, copy.epoch, self.clock())
                problem = await self._patched(copy, copies.hold_patch(text, self.policy))
                if problem is None:
                    self._hold_written[copy.patched] = self._mono()
                return self._told(
                    problem, copy, WARNING, "Held", "Hold", f"held until the old copy stops: {text}"
                )
            if isinstance(effect, StorageHold):
                held_by = copies.unchecked_text if effect.checkpoint else copies.storage_text
                text = held_by(copy.epoch, effect.problem)
                if text == copy.hold:
                    return None
                problem = await self._patched(copy, copies.hold_patch(text, self.policy))
                return self._told(problem, copy, WARNING, "StorageTrouble", "Hold", f"held: {text}")
            if isinstance(effect, Release):
                return await self._release(copy, effect.cause)
            if isinstance(effect, Resume):
                return await self._resume(copy)
            if folder is None:
                return "no checkpoint directory"
            if isinstance(effect, WriteFence):
                body = fence_body(copy.workload, self.cluster, effect.epoch, self._now())
                await self.lanes.run(self.store.fence_call(folder, effect.epoch, body))
                metrics.FENCES.inc()
                return None
            if isinstance(effect, MarkStopping):
                await self.lanes.run(self.store.stopping_call(folder, effect.epoch, copy.operator.detail))
                return None
            if isinstance(effect, Acknowledge):
                pending = self.renewer.renewing(copy.patched)
                self.renewer.drop(copy.patched)
                if pending is not None:  # the ack drops the heartbeat: not before a renewal lands
                    await asyncio.wait([pending])
                await self.lanes.run(self.store.ack_call(folder, effect.epoch, copy.operator.detail))
                metrics.ACKS.inc()
                status = copy.operator.detail
                note = (
                    f"the operator reports the job stopped ({status}); acknowledged for epoch {effect.epoch}"
                )
                self._event(copy, NORMAL, "Stopped", "Fence", note)
                log.warning(
                    "stale copy stopped by its operator; acknowledged",
                    extra={"fields": {"object": str(copy.workload), "epoch": effect.epoch, "status": status}},
                )
                return None
        except StorageError as exc:
            metrics.STORAGE_ERRORS.labels("agent").inc()
            return f"storage: {exc}"
        raise TypeError(f"unknown effect {effect!r}")  # pragma: no cover - decide() returns only the above

    async def _step_down(self, copy: Copy, reason: str) -> bool:
        """Suspend our own copy without a savepoint (the heartbeat loop calls this at its deadline); the
        patch has what is left of a poll to go through (``decide``'s bound: deadline + one poll)."""
        patch = copies.step_down_patch(copy, reason, self.policy, self._now())
        note = (
            f"{reason}: suspended without a savepoint; resumed from its newest checkpoint "
            "if nobody takes over meanwhile"
        )
        timeout = self.policy.fencing.poll_seconds - retry_seconds(self.policy.fencing)
        problem = await self._patched(copy, patch, _step_down_done, timeout, stops=True)
        if problem is not None:
            log.error("step-down failed", extra={"fields": {"object": str(copy.workload), "error": problem}})
        return self._told(problem, copy, WARNING, "SteppedDown", "StepDown", note) is None

    def _forget(self, workload: Workload, folder: StoragePath) -> None:
        """A copy that no longer runs here (deleted, suspended by hand) stops heartbeating at once."""
        pending = self.renewer.renewing(workload)

        async def forget() -> None:
            if pending is not None:  # a renewal landing after the removal would leave a heartbeat behind
                await asyncio.wait([pending])
            try:
                await self.lanes.run(self.store.forget_call(folder))
            except StorageError as exc:
                log.warning(
                    "cannot remove heartbeat", extra={"fields": {"object": str(workload), "error": str(exc)}}
                )

        task = asyncio.ensure_future(forget())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

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

    async def _release(self, copy: Copy, cause: ReleaseCause) -> str | None:
        began = self._mono()
        start = release_start(cause, await self._newest_path(copy))
        if isinstance(start, StorageHold):
            self._release_waited[copy.patched] = began
            metrics.STORAGE_ERRORS.labels("agent").inc()
            held = await self._apply(copy, start, 0.0)
            why = f"release waits: the newest checkpoint could not be checked: {start.problem}"
            return StorageProblem(why + (f"; {held}" if held else ""))
        path = start.path
        asked_by = copies.release_asked_by(copy, self.policy) if cause is ReleaseCause.MANUAL else ""
        patch = copies.release_patch(path, cause, self.policy, self._now(), asked_by)
        if copy.workload.kind == BLUE_GREEN:
            for child in copy.children:  # the job runs in them; the template stays as it is
                target = replace(copy, target=Workload("FlinkDeployment", copy.workload.namespace, child))
                problem = await self._patched(target, copies.child_release_patch(path))
                if problem is not None:
                    return problem
            patch = {"metadata": patch["metadata"]}
        problem = await self._patched(copy, patch, kept=_kept_held)
        if problem is None:
            metrics.RELEASES.labels(cause.value).inc()
            by = f", asked by {asked_by or 'unknown'}" if cause is ReleaseCause.MANUAL else ""
            note = f"released ({cause.value}{by}): starts from {path or 'the path it was admitted with'}"
            self._event(copy, NORMAL, "Released", "Release", note)
            fields = {"object": str(copy.workload), "cause": cause.value, "path": path}
            if cause is ReleaseCause.MANUAL:
                fields["asked-by"] = asked_by or "unknown"
            log.warning("held restore released", extra={"fields": fields})
        return problem

    async def _newest_path(self, copy: Copy) -> str | Unresolved:
        """Resolve again: the stale copy may have completed newer checkpoints while it ran. "" keeps
        the path the webhook chose only when the lookup ran and found nothing restorable
        (``decide.newest_known``)."""
        where = copy.folder
        if where is None:
            return ""
        admitted = str((copy.resource.job or {}).get("initialSavepointPath") or "")

        def resolve(left: float) -> str | Unresolved:
            deadline = Deadline(left)
            answered: list[Snapshots] = []

            def lookup(query: SnapshotQuery) -> Snapshots:
                found = self.storage.snapshots(query, deadline)
                answered.append(found)
                return found

            decision = decide_restore("CREATE", copy.resource, None, self.policy, lookup)
            return newest_known(decision, answered[-1] if answered else None, admitted)

        try:
            return await self.lanes.run(Call(where, f"resolving the restore of {copy.workload}", resolve))
        except StorageError as exc:
            return Unresolved(str(exc))

    async def _resume(self, copy: Copy) -> str | None:
        """A stepped-down copy starts again from its own job's newest restorable snapshot; it stays
        stopped, and is tried again at the next poll, while that cannot be checked."""
        query = resume_query(copy, self.policy)
        found = await self._snapshots(query) if query is not None else None
        start = resume_start(copy, query, found, self.policy.prefer)
        if isinstance(start, Unresolved):
            metrics.STORAGE_ERRORS.labels("agent").inc()
            return StorageProblem(
                f"resume waits: the newest checkpoint could not be checked: {start.problem}"
            )
        path, skipped = start.path, resume_skipped(found) if found is not None else ""
        problem = await self._patched(copy, copies.resume_patch(copy, path, self.policy, self._now()))
        if problem is None:
            metrics.RESUMES.inc()
            source = path or "its own HA data or last savepoint"
            note = f"the storage answers again and nobody took over: resumed from {source}{skipped}"
            self._event(copy, NORMAL, "Resumed", "Resume", note)
            log.warning(
                "stepped-down copy resumed",
                extra={
                    "fields": {
                        "object": str(copy.workload),
                        "path": path or "(operator's own state)",
                        "skipped": skipped.removeprefix("; skipped "),
                    }
                },
            )
        return problem

    async def _snapshots(self, query: SnapshotQuery) -> Snapshots:
        where = query.job_dir or query.checkpoint_dir
        if where is None:  # resume_query always names the job's directory
            return Snapshots(None, None)
        return await self.lanes.run(
            Call(where, f"resolving {where}", lambda left: self.storage.snapshots(query, Deadline(left)))
        )

    def _event(self, copy: Copy, kind: str, reason: str, action: str, note: str) -> None:
        w = copy.patched
        regarding = Regarding(copy.api_version, w.kind, w.namespace, w.name, copy.uid)
        self.events.record(Occurrence(regarding, kind, reason, action, note))

    def _told(
        self, problem: str | None, copy: Copy, kind: str, reason: str, action: str, note: str
    ) -> str | None:
        """An effect's outcome; when it succeeded, also an Event on the object."""
        if problem is None:
            self._event(copy, kind, reason, action, note)
        return problem

    async def _patched(
        self,
        copy: Copy,
        body: Mapping[str, Any],
        done: Callable[[Copy, Mapping[str, Any]], None] | None = None,
        timeout: float | None = None,
        kept: Callable[[Mapping[str, Any]], str] | None = None,
        stops: bool = False,
    ) -> str | None:
        """None on success, else the error (counted); ``kept`` says why an answer shows the patch
        undone by the member webhook ("" when it went through); ``stops``: it stops a running job (its
        own threads: ``ThreadedApi``)."""
        w = copy.patched
        if stops:
            answer = await self.api.patch(w.kind, w.namespace, w.name, body, timeout, stops=True)
        else:
            answer = await self.api.patch(w.kind, w.namespace, w.name, body, timeout)
        if isinstance(answer, ApiFailure):
            metrics.API_ERRORS.labels("patch").inc()
            return answer.message
        undone = kept(answer) if kept is not None else ""
        if undone:
            metrics.API_ERRORS.labels("patch").inc()
            return undone
        if done is not None:
            done(copy, body)
        return None

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
                self._event(copy, NORMAL, "WaitingForOperator", "Fence", step.detail)
            elif step.trouble is Trouble.STORAGE:
                self._event(copy, WARNING, "StorageTrouble", "Heartbeat", step.detail[:300])

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

    def _now(self) -> str:
        return copies.format_time(self.clock())

    @staticmethod
    def _mono() -> float:
        return asyncio.get_running_loop().time()

    async def settle(self) -> None:
        """Wait for the renewals, step-downs and heartbeat removals already started (tests that drive
        one pass at a time)."""
        await self.renewer.settle()
        if self._background:
            await asyncio.wait(list(self._background))

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


def _kept_held(answer: Mapping[str, Any]) -> str:
    """The member webhook keeps a release from anyone but the agent held: when it does not know the
    agent's identity, the agent's own release too (fail closed; it logs why at start-up)."""
    job = ((answer.get("spec") or {}).get("job") or {}) if answer.get("kind") != BLUE_GREEN else {}
    if job.get("state") == "suspended":
        return (
            "the member webhook kept the job held: it does not take this agent for the agent (its "
            "identity is unknown to it, or --agent-user names another user)"
        )
    return ""


def _stop_done(copy: Copy, body: Mapping[str, Any]) -> None:
    metrics.STOPPED.inc()
    log.warning(
        "stale copy asked to stop; it is acknowledged once its operator reports it stopped",
        extra={"fields": {"object": str(copy.workload), "fenced-by": _annotation(body, "fenced-by")}},
    )


def _step_down_done(copy: Copy, body: Mapping[str, Any]) -> None:
    metrics.STEP_DOWNS.inc()
    log.error(
        "copy stepped down: its heartbeat could not be renewed in time",
        extra={"fields": {"object": str(copy.workload), "reason": _annotation(body, "stepped-down")}},
    )


def _superseded_done(copy: Copy, body: Mapping[str, Any]) -> None:
    metrics.SUPERSEDED.inc()


def _annotation(body: Mapping[str, Any], suffix: str) -> str:
    annotations = body.get("metadata", {}).get("annotations", {})
    return next((str(v) for k, v in annotations.items() if k.endswith("/" + suffix)), "")
