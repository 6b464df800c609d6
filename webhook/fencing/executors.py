"""The calls that carry out a decision's effects: one small executor an effect (``effects.Stop`` is
``Executors.stop``, ...), each a patch of the object, a storage call on its lane or a hand-over to the
heartbeat loop, under the deadline its client or lane holds to. Also the two calls the loops make that no
decision names: a step-down at the renew deadline (``step_down``) and the removal of a gone copy's heartbeat
(``forget``).

Which executor runs for which effect is said in one place, ``agent.FencingAgent._apply``; what to do is
``decide``'s (pure) answer, and these only do it: the patches' bodies and texts come from ``patches`` and
``holdtexts``, a release's and a resume's starting point from ``decide``. Each returns None on success,
else what went wrong (a ``StorageProblem`` when the storage was the cause of a failed patch); a storage
call that fails raises ``StorageError``, which the agent counts and reports as the storage's trouble.
Every success that changes the object or ends a wait leaves a Kubernetes Event on it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from webhook.common.events import NORMAL, WARNING, EventSink, Occurrence, Regarding
from webhook.common.flink import BLUE_GREEN
from webhook.common.kubeclient import ApiFailure
from webhook.common.paths import StoragePath
from webhook.fencing import copies, holdtexts, metrics, patches
from webhook.fencing.copies import Copy
from webhook.fencing.effects import (
    Acknowledge,
    MarkStopping,
    RewriteHold,
    Stop,
    StorageHold,
    Supersede,
    WriteFence,
)
from webhook.fencing.flinkapi import MemberApi
from webhook.fencing.lanes import Call
from webhook.fencing.layout import Workload, format_time
from webhook.fencing.prechecks import VERDICT_BUDGET_FACTOR, VERDICT_DEADLINE_SECONDS, VERDICTS_AT_ONCE
from webhook.fencing.protocol import ReleaseCause
from webhook.fencing.records import FencingStore, fence_body
from webhook.fencing.renewal import KeepRenewing, LookForKeeper, retry_seconds
from webhook.fencing.renewer import Renewer
from webhook.fencing.starts import (
    ResumeHeld,
    Unresolved,
    newest_known,
    release_start,
    resume_query,
    resume_skipped,
    resume_start,
)
from webhook.restore.decide import SessionCluster, SessionClusterLookup, decide_restore
from webhook.restore.policy import RestorePolicy
from webhook.restore.snapshots import SnapshotQuery, Snapshots, StorageError
from webhook.restore.storage.backends import Deadline
from webhook.restore.storage.search import CheckpointStorage

log = logging.getLogger(__name__)

NO_FOLDER = "no checkpoint directory"


class StorageProblem(str):
    """What went wrong with an effect that patches the object, when the storage was the cause (a
    release or a resume that could not check the newest checkpoint): its trouble is the storage's."""


class Executors:
    """The agent's hands: its member API, its storage lanes and the heartbeat loop. ``hold_written`` and
    ``release_waited`` are what the executors leave for the next plans (``decide.Times``): when a copy's
    hold text was last written, and when a release began that could not check the newest checkpoint."""

    def __init__(
        self,
        store: FencingStore,
        renewer: Renewer,
        storage: CheckpointStorage,
        api: MemberApi,
        policy: RestorePolicy,
        events: EventSink,
        clock: Callable[[], datetime],
    ) -> None:
        self.store = store
        self.cluster = store.cluster
        self.lanes = store.lanes
        self.renewer = renewer
        self.storage = storage
        self.api = api
        self.policy = policy
        self.events = events
        self.clock = clock
        self.hold_written: dict[Workload, float] = {}
        self.release_waited: dict[Workload, float] = {}
        self._background: set[asyncio.Task[None]] = set()
        # running jobs' verdicts (verdicts.py): when each was last started (monotonic), which are under way
        self.verdict_kept: dict[Workload, float] = {}
        self.verdicts_busy: set[Workload] = set()
        self._verdict_threads = concurrent.futures.ThreadPoolExecutor(VERDICTS_AT_ONCE, "fencing-verdict")

    # --- the storage's side ------------------------------------------------------------------------
    def keep_renewing(self, copy: Copy, effect: KeepRenewing, listed_at: float) -> None:
        self.renewer.keep(copy, effect, listed_at)

    def look_for_keeper(self, copy: Copy, effect: LookForKeeper) -> None:
        self.renewer.look_for_keeper(copy.patched, effect.epoch)

    async def beat(self, copy: Copy) -> None:
        await self.renewer.beat_now(copy)

    async def write_fence(self, copy: Copy, effect: WriteFence) -> str | None:
        if copy.folder is None:
            return NO_FOLDER
        body = fence_body(copy.workload, self.cluster, effect.epoch, self.now())
        await self.lanes.run(self.store.fence_call(copy.folder, effect.epoch, body))
        metrics.FENCES.inc()
        return None

    async def mark_stopping(self, copy: Copy, effect: MarkStopping) -> str | None:
        if copy.folder is None:
            return NO_FOLDER
        await self.lanes.run(self.store.stopping_call(copy.folder, effect.epoch, copy.operator.detail))
        return None

    async def acknowledge(self, copy: Copy, effect: Acknowledge) -> str | None:
        if copy.folder is None:
            return NO_FOLDER
        pending = self.renewer.renewing(copy.patched)
        self.renewer.drop(copy.patched)
        if pending is not None:  # the ack drops the heartbeat: not before a renewal lands
            await asyncio.wait([pending])
        await self.lanes.run(self.store.ack_call(copy.folder, effect.epoch, copy.operator.detail))
        metrics.ACKS.inc()
        status = copy.operator.detail
        note = f"the operator reports the job stopped ({status}); acknowledged for epoch {effect.epoch}"
        self.event(copy, NORMAL, "Stopped", "Fence", note)
        log.warning(
            "stale copy stopped by its operator; acknowledged",
            extra={"fields": {"object": str(copy.workload), "epoch": effect.epoch, "status": status}},
        )
        return None

    def forget(self, workload: Workload, folder: StoragePath) -> None:
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

    def keep_verdict(self, copy: Copy) -> None:
        """Check a running job's newest checkpoint as a failover would, in the background: the storage
        (``write_verdicts``) leaves the verdict. Its failures are logged, never the copy's trouble."""
        query = resume_query(copy, self.policy)
        if query is None:
            return
        query = replace(query, budget=query.budget * VERDICT_BUDGET_FACTOR)
        workload = copy.patched
        self.verdict_kept[workload] = _mono()
        self.verdicts_busy.add(workload)

        def check() -> Snapshots:
            deadline = Deadline(VERDICT_DEADLINE_SECONDS)
            found = self.storage.snapshots(query, deadline)
            self.storage.settle(max(deadline.remaining(), 0.0))  # its verdict written: what "kept" counts
            return found

        async def keep() -> None:
            loop = asyncio.get_running_loop()
            try:
                found = await loop.run_in_executor(self._verdict_threads, check)
            except Exception as exc:  # a storage error, the threads shut down (stopping), any fault of it
                metrics.VERDICTS.labels("error").inc()
                log.info("verdict not kept", extra={"fields": {"object": str(workload), "error": str(exc)}})
                return
            finally:
                self.verdicts_busy.discard(workload)
            result = "unchecked" if found.unchecked else "passed-over" if found.rejected else "restorable"
            metrics.VERDICTS.labels(result).inc()
            if found.unchecked or found.rejected:  # a failover now would pass over or hold as well
                log.warning(
                    "verdict check of a running job",
                    extra={
                        "fields": {"object": str(workload), "result": result, "why": resume_skipped(found)}
                    },
                )

        task = asyncio.ensure_future(keep())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --- the object's side -------------------------------------------------------------------------
    async def stop(self, copy: Copy, effect: Stop) -> str | None:
        fence = effect.fence
        patch = patches.stop_patch(copy, fence, self.policy, self.now())
        problem = await self._patched(copy, patch, _stop_done, stops=True)
        note = (
            f"stale copy: the workload was restored on {fence.owner} at epoch {fence.epoch}; asked "
            "the operator to stop it without a savepoint; acknowledged once it reports it stopped"
        )
        return self._told(problem, copy, WARNING, "Stopping", "Fence", note)

    async def supersede(self, copy: Copy, effect: Supersede) -> str | None:
        fence = effect.fence
        patch = patches.superseded_patch(fence, self.policy, self.now())
        problem = await self._patched(copy, patch, _superseded_done)
        note = f"superseded by the restore on {fence.owner} at epoch {fence.epoch}: stays suspended"
        return self._told(problem, copy, WARNING, "Superseded", "Fence", note)

    async def rewrite_hold(self, copy: Copy, effect: RewriteHold) -> str | None:
        text = holdtexts.hold_text(effect.judgement, copy.epoch, self.clock())
        problem = await self._patched(copy, patches.hold_patch(text, self.policy))
        if problem is None:
            self.hold_written[copy.patched] = _mono()
        return self._told(problem, copy, WARNING, "Held", "Hold", f"held until the old copy stops: {text}")

    async def storage_hold(self, copy: Copy, effect: StorageHold) -> str | None:
        held_by = holdtexts.unchecked_text if effect.checkpoint else holdtexts.storage_text
        text = held_by(copy.epoch, effect.problem)
        if text == copy.hold:
            return None
        problem = await self._patched(copy, patches.hold_patch(text, self.policy))
        return self._told(problem, copy, WARNING, "StorageTrouble", "Hold", f"held: {text}")

    async def step_down(self, copy: Copy, reason: str) -> bool:
        """Suspend our own copy without a savepoint (the heartbeat loop calls this at its deadline); the
        patch has what is left of a poll to go through (``decide``'s bound: deadline + one poll)."""
        patch = patches.step_down_patch(copy, reason, self.policy, self.now())
        note = (
            f"{reason}: suspended without a savepoint; resumed from its newest checkpoint "
            "if nobody takes over meanwhile"
        )
        timeout = self.policy.fencing.poll_seconds - retry_seconds(self.policy.fencing)
        problem = await self._patched(copy, patch, _step_down_done, timeout, stops=True)
        if problem is not None:
            log.error("step-down failed", extra={"fields": {"object": str(copy.workload), "error": problem}})
        return self._told(problem, copy, WARNING, "SteppedDown", "StepDown", note) is None

    # --- a release and a resume: the storage looked at, then the object patched --------------------
    async def release(self, copy: Copy, cause: ReleaseCause) -> str | None:
        began = _mono()
        start = release_start(cause, await self._newest_path(copy))
        if isinstance(start, StorageHold):
            self.release_waited[copy.patched] = began
            metrics.STORAGE_ERRORS.labels("agent").inc()
            held = await self.storage_hold(copy, start)
            why = f"release waits: the newest checkpoint could not be checked: {start.problem}"
            return StorageProblem(why + (f"; {held}" if held else ""))
        path = start.path
        asked_by = copies.release_asked_by(copy, self.policy) if cause is ReleaseCause.MANUAL else ""
        patch = patches.release_patch(path, cause, self.policy, self.now(), asked_by)
        if copy.workload.kind == BLUE_GREEN:
            for child in copy.children:  # the job runs in them; the template stays as it is
                target = replace(copy, target=Workload("FlinkDeployment", copy.workload.namespace, child))
                problem = await self._patched(target, patches.child_release_patch(path))
                if problem is not None:
                    return problem
            patch = {"metadata": patch["metadata"]}
        problem = await self._patched(copy, patch, kept=_kept_held)
        if problem is None:
            metrics.RELEASES.labels(cause.value).inc()
            by = f", asked by {asked_by or 'unknown'}" if cause is ReleaseCause.MANUAL else ""
            note = f"released ({cause.value}{by}): starts from {path or 'the path it was admitted with'}"
            self.event(copy, NORMAL, "Released", "Release", note)
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

            # As the restore recorded it (copies.as_restored): its jobId, directories and Flink, and a
            # session job's cluster, never what the object says now.
            decision = decide_restore(
                "CREATE", copy.resource, None, self.policy, lookup, _session_of(copy), from_agent=True
            )
            return newest_known(decision, answered[-1] if answered else None, admitted)

        try:
            return await self.lanes.run(Call(where, f"resolving the restore of {copy.workload}", resolve))
        except StorageError as exc:
            return Unresolved(str(exc))

    async def resume(self, copy: Copy) -> str | None:
        """A stepped-down copy starts again from its own job's newest restorable snapshot; it stays
        stopped, and is tried again at the next poll, while that cannot be checked."""
        query = resume_query(copy, self.policy)
        found = await self._snapshots(query) if query is not None else None
        start = resume_start(copy, query, found, self.policy)
        if isinstance(start, Unresolved):
            metrics.STORAGE_ERRORS.labels("agent").inc()
            return StorageProblem(
                f"resume waits: the newest checkpoint could not be checked: {start.problem}"
            )
        skipped = resume_skipped(found) if found is not None else ""
        if isinstance(start, ResumeHeld):  # looked up again at the next poll: a fix lets it resume
            why = f"resume waits, {start.why}{skipped}"
            self.event(copy, WARNING, "ResumeHeld", "Resume", why)
            return why
        path = start.path
        problem = await self._patched(copy, patches.resume_patch(copy, path, self.policy, self.now()))
        if problem is None:
            metrics.RESUMES.inc()
            source = path or "its own HA data or last savepoint"
            rewound = f"; {start.rewound}" if start.rewound else ""
            note = f"the storage answers again and nobody took over: resumed from {source}{rewound}{skipped}"
            self.event(copy, WARNING if rewound else NORMAL, "Resumed", "Resume", note)
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

    # --- shared by the executors -------------------------------------------------------------------
    def event(self, copy: Copy, kind: str, reason: str, action: str, note: str) -> None:
        w = copy.patched
        regarding = Regarding(copy.api_version, w.kind, w.namespace, w.name, copy.uid)
        self.events.record(Occurrence(regarding, kind, reason, action, note))

    def _told(
        self, problem: str | None, copy: Copy, kind: str, reason: str, action: str, note: str
    ) -> str | None:
        """An effect's outcome; when it succeeded, also an Event on the object."""
        if problem is None:
            self.event(copy, kind, reason, action, note)
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

    def now(self) -> str:
        """The time written into patches and records (the agent's wall clock)."""
        return format_time(self.clock())

    async def settle(self) -> None:
        """Wait for the heartbeat removals and verdict checks already started (tests that drive one pass
        at a time)."""
        if self._background:
            await asyncio.wait(list(self._background))

    def cancel(self) -> None:
        for task in list(self._background):
            task.cancel()
        self._verdict_threads.shutdown(wait=False, cancel_futures=True)


def _session_of(copy: Copy) -> SessionClusterLookup | None:
    """A session job's cluster as the copy knows it (recorded or listed); None for other kinds."""
    if copy.resource.kind != "FlinkSessionJob":
        return None
    session = copy.session
    return lambda _namespace, _name: SessionCluster(session)


def _mono() -> float:
    return asyncio.get_running_loop().time()


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
