"""The calls that carry out a decision's effects on the object and the storage: one small executor an
effect (``effects.Stop`` is ``Executors.stop``, ...), each a patch of the object (through
``patcher.CopyPatcher``) or a storage call on its lane, under the deadline its client or lane holds to.
Also the call the loops make that no decision names: the removal of a gone copy's heartbeat
(``forget``). The heartbeat loop's effects are the loop's own (``renewer.Renewer``).

Which executor runs for which effect is said in one place, ``agent.FencingAgent._apply``; what to do is
``decide``'s (pure) answer, and these only do it: the patches' bodies and texts come from ``patches`` and
``holdtexts``, a release's and a resume's starting point from ``starts``. Each returns None on success,
else what went wrong (a ``StorageProblem`` when the storage was the cause of a failed patch); a storage
call that fails raises ``StorageError``, which the agent counts and reports as the storage's trouble.
Every success that changes the object or ends a wait leaves a Kubernetes Event on it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

from webhook.common.events import NORMAL, WARNING
from webhook.common.flink import BLUE_GREEN
from webhook.common.paths import StoragePath
from webhook.fencing import copies, holdtexts, metrics, patches
from webhook.fencing.background import Background
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
from webhook.fencing.lanes import Call
from webhook.fencing.layout import Workload
from webhook.fencing.patcher import CopyPatcher, annotation
from webhook.fencing.protocol import ReleaseCause
from webhook.fencing.records import FencingStore, fence_body
from webhook.fencing.starts import (
    ResumeHeld,
    Unresolved,
    newest_known,
    release_start,
    resume_query,
    resume_skipped,
    resume_start,
)
from webhook.policy.restore import RestorePolicy
from webhook.restore.decide import Parent, ParentLookup, decide_restore
from webhook.restore.snapshots import SnapshotQuery, Snapshots, StorageError
from webhook.restore.storage.backends import Deadline
from webhook.restore.storage.search import CheckpointStorage

log = logging.getLogger(__name__)

NO_FOLDER = "no checkpoint directory"


class StorageProblem(str):
    """What went wrong with an effect that patches the object, when the storage was the cause (a
    release or a resume that could not check the newest checkpoint): its trouble is the storage's."""


class HoldMarks:
    """What the executors leave a held copy's next decisions (``decide.Times``): when its hold text was
    last written, and when a release began that could not check the newest checkpoint (monotonic). Kept
    only while the copy is held."""

    def __init__(self) -> None:
        self._written: dict[Workload, float] = {}
        self._waited: dict[Workload, float] = {}

    def hold_written(self, workload: Workload, at: float) -> None:
        self._written[workload] = at

    def release_waited(self, workload: Workload, at: float) -> None:
        self._waited[workload] = at

    def of(self, workload: Workload) -> tuple[float | None, float | None]:
        """(hold text written, release waited) for the copy, None where never."""
        return self._written.get(workload), self._waited.get(workload)

    def not_held(self, workload: Workload) -> None:
        self._written.pop(workload, None)
        self._waited.pop(workload, None)


class Heartbeats(Protocol):
    """What the executors ask of the heartbeat loop (``renewer.Renewer``): a copy's renewal in flight,
    and to renew a copy no more."""

    def renewing(self, workload: Workload) -> asyncio.Task[None] | None: ...

    def drop(self, workload: Workload) -> None: ...


class Executors:
    """The agent's hands on the object (``CopyPatcher``) and on its storage lanes."""

    def __init__(
        self,
        store: FencingStore,
        heartbeats: Heartbeats,
        storage: CheckpointStorage,
        patcher: CopyPatcher,
        holds: HoldMarks,
    ) -> None:
        self.store = store
        self.cluster = store.cluster
        self.lanes = store.lanes
        self.heartbeats = heartbeats
        self.storage = storage
        self.patcher = patcher
        self.holds = holds
        self._background = Background()  # heartbeat removals

    @property
    def policy(self) -> RestorePolicy:
        return self.patcher.policy

    # --- the storage's side ------------------------------------------------------------------------
    async def write_fence(self, copy: Copy, effect: WriteFence) -> str | None:
        if copy.folder is None:
            return NO_FOLDER
        body = fence_body(copy.workload, self.cluster, effect.epoch, self.patcher.now())
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
        pending = self.heartbeats.renewing(copy.patched)
        self.heartbeats.drop(copy.patched)
        if pending is not None:  # the ack drops the heartbeat: not before a renewal lands
            await asyncio.wait([pending])
        await self.lanes.run(self.store.ack_call(copy.folder, effect.epoch, copy.operator.detail))
        metrics.ACKS.inc()
        status = copy.operator.detail
        note = f"the operator reports the job stopped ({status}); acknowledged for epoch {effect.epoch}"
        self.patcher.event(copy, NORMAL, "Stopped", "Fence", note)
        log.warning(
            "stale copy stopped by its operator; acknowledged",
            extra={"fields": {"object": str(copy.workload), "epoch": effect.epoch, "status": status}},
        )
        return None

    def forget(self, workload: Workload, folder: StoragePath) -> None:
        """A copy that no longer runs here (deleted, suspended by hand) stops heartbeating at once."""
        pending = self.heartbeats.renewing(workload)

        async def forget() -> None:
            if pending is not None:  # a renewal landing after the removal would leave a heartbeat behind
                await asyncio.wait([pending])
            try:
                await self.lanes.run(self.store.forget_call(folder))
            except StorageError as exc:
                log.warning(
                    "cannot remove heartbeat", extra={"fields": {"object": str(workload), "error": str(exc)}}
                )

        self._background.spawn(forget())

    # --- the object's side -------------------------------------------------------------------------
    async def stop(self, copy: Copy, effect: Stop) -> str | None:
        fence = effect.fence
        patch = patches.stop_patch(copy, fence, self.policy, self.patcher.now())
        problem = await self.patcher.patched(copy, patch, _stop_done, stops=True)
        note = (
            f"stale copy: the workload was restored on {fence.owner} at epoch {fence.epoch}; asked "
            "the operator to stop it without a savepoint; acknowledged once it reports it stopped"
        )
        return self.patcher.told(problem, copy, WARNING, "Stopping", "Fence", note)

    async def supersede(self, copy: Copy, effect: Supersede) -> str | None:
        fence = effect.fence
        patch = patches.superseded_patch(fence, self.policy, self.patcher.now())
        problem = await self.patcher.patched(copy, patch, _superseded_done)
        note = f"superseded by the restore on {fence.owner} at epoch {fence.epoch}: stays suspended"
        return self.patcher.told(problem, copy, WARNING, "Superseded", "Fence", note)

    async def rewrite_hold(self, copy: Copy, effect: RewriteHold) -> str | None:
        text = holdtexts.hold_text(effect.judgement, copy.epoch, self.patcher.clock())
        problem = await self.patcher.patched(copy, patches.hold_patch(text, self.policy))
        if problem is None:
            self.holds.hold_written(copy.patched, _mono())
        return self.patcher.told(
            problem, copy, WARNING, "Held", "Hold", f"held until the old copy stops: {text}"
        )

    async def storage_hold(self, copy: Copy, effect: StorageHold) -> str | None:
        held_by = holdtexts.unchecked_text if effect.checkpoint else holdtexts.storage_text
        text = held_by(copy.epoch, effect.problem)
        if text == copy.hold:
            return None
        problem = await self.patcher.patched(copy, patches.hold_patch(text, self.policy))
        return self.patcher.told(problem, copy, WARNING, "StorageTrouble", "Hold", f"held: {text}")

    # --- a release and a resume: the storage looked at, then the object patched --------------------
    async def release(self, copy: Copy, cause: ReleaseCause) -> str | None:
        began = _mono()
        start = release_start(cause, await self._newest_path(copy))
        if isinstance(start, StorageHold):
            self.holds.release_waited(copy.patched, began)
            metrics.STORAGE_ERRORS.labels("agent").inc()
            held = await self.storage_hold(copy, start)
            why = f"release waits: the newest checkpoint could not be checked: {start.problem}"
            return StorageProblem(why + (f"; {held}" if held else ""))
        path = start.path
        asked_by = copies.release_asked_by(copy, self.policy) if cause is ReleaseCause.MANUAL else ""
        patch = patches.release_patch(path, cause, self.policy, self.patcher.now(), asked_by)
        if copy.workload.kind == BLUE_GREEN:
            for child in copy.children:  # the job runs in them; the template stays as it is
                target = replace(copy, target=Workload("FlinkDeployment", copy.workload.namespace, child))
                problem = await self.patcher.patched(target, patches.child_release_patch(path))
                if problem is not None:
                    return problem
            patch = {"metadata": patch["metadata"]}
        problem = await self.patcher.patched(copy, patch, kept=_kept_held)
        if problem is None:
            metrics.RELEASES.labels(cause.value).inc()
            by = f", asked by {asked_by or 'unknown'}" if cause is ReleaseCause.MANUAL else ""
            note = f"released ({cause.value}{by}): starts from {path or 'the path it was admitted with'}"
            self.patcher.event(copy, NORMAL, "Released", "Release", note)
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
            self.patcher.event(copy, WARNING, "ResumeHeld", "Resume", why)
            return why
        path = start.path
        problem = await self.patcher.patched(
            copy, patches.resume_patch(copy, path, self.policy, self.patcher.now())
        )
        if problem is None:
            metrics.RESUMES.inc()
            source = path or "its own HA data or last savepoint"
            rewound = f"; {start.rewound}" if start.rewound else ""
            note = f"the storage answers again and nobody took over: resumed from {source}{rewound}{skipped}"
            self.patcher.event(copy, WARNING if rewound else NORMAL, "Resumed", "Resume", note)
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

    async def settle(self) -> None:
        """Wait for the heartbeat removals already started (tests that drive one pass at a time)."""
        await self._background.settle()

    def cancel(self) -> None:
        self._background.cancel()


def _session_of(copy: Copy) -> ParentLookup | None:
    """A session job's cluster as the copy knows it (recorded or listed); None for other kinds."""
    if copy.resource.kind != "FlinkSessionJob":
        return None
    session = copy.session
    return lambda _namespace, _name: Parent(session)


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
        extra={"fields": {"object": str(copy.workload), "fenced-by": annotation(body, "fenced-by")}},
    )


def _superseded_done(copy: Copy, body: Mapping[str, Any]) -> None:
    metrics.SUPERSEDED.inc()
