"""The agent's hand on a copy's object: a patch through the member API (counted when it fails), and
the Kubernetes Event that says what it did. The executors (``executors.Executors``) and the heartbeat
loop's step-down (``renewer.Renewer``) both patch through it; it knows neither.

It holds the policy the agent runs under (one for the loops and the executors; a test swaps it between
polls through ``agent.FencingAgent.policy``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from webhook.common.events import WARNING, EventSink, Occurrence, Regarding
from webhook.common.kubeclient import ApiFailure
from webhook.fencing import metrics, patches
from webhook.fencing.copies import Copy
from webhook.fencing.flinkapi import MemberApi
from webhook.fencing.layout import format_time
from webhook.fencing.renewal import retry_seconds
from webhook.policy.restore import RestorePolicy

log = logging.getLogger(__name__)


class CopyPatcher:
    def __init__(
        self, api: MemberApi, policy: RestorePolicy, events: EventSink, clock: Callable[[], datetime]
    ) -> None:
        self.api = api
        self.policy = policy
        self.events = events
        self.clock = clock

    def event(self, copy: Copy, kind: str, reason: str, action: str, note: str) -> None:
        w = copy.patched
        regarding = Regarding(copy.api_version, w.kind, w.namespace, w.name, copy.uid)
        self.events.record(Occurrence(regarding, kind, reason, action, note))

    def told(
        self, problem: str | None, copy: Copy, kind: str, reason: str, action: str, note: str
    ) -> str | None:
        """An effect's outcome; when it succeeded, also an Event on the object."""
        if problem is None:
            self.event(copy, kind, reason, action, note)
        return problem

    async def patched(
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

    async def step_down(self, copy: Copy, reason: str) -> bool:
        """Suspend our own copy without a savepoint (the heartbeat loop calls this at its deadline); the
        patch has what is left of a poll to go through (``decide``'s bound: deadline + one poll)."""
        patch = patches.step_down_patch(copy, reason, self.policy, self.now())
        note = (
            f"{reason}: suspended without a savepoint; resumed from its newest checkpoint "
            "if nobody takes over meanwhile"
        )
        timeout = self.policy.fencing.poll_seconds - retry_seconds(self.policy.fencing)
        problem = await self.patched(copy, patch, _step_down_done, timeout, stops=True)
        if problem is not None:
            log.error("step-down failed", extra={"fields": {"object": str(copy.workload), "error": problem}})
        return self.told(problem, copy, WARNING, "SteppedDown", "StepDown", note) is None


def _step_down_done(copy: Copy, body: Mapping[str, Any]) -> None:
    metrics.STEP_DOWNS.inc()
    log.error(
        "copy stepped down: its heartbeat could not be renewed in time",
        extra={"fields": {"object": str(copy.workload), "reason": annotation(body, "stepped-down")}},
    )


def annotation(body: Mapping[str, Any], suffix: str) -> str:
    """The annotation of a patch ``body`` whose key ends in ``/suffix`` ("" when none)."""
    annotations = body.get("metadata", {}).get("annotations", {})
    return next((str(v) for k, v in annotations.items() if k.endswith("/" + suffix)), "")
