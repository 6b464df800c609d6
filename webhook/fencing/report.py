"""What the agent's polls show: a ``Step`` for each copy (its log line, and what tests read), the
agent's ``Health`` (may the webhook vouch for a restore?), each Flink kind's listing (said once, when it
changes), the poll's metrics, and the Events of the states a poll finds rather than causes (waiting for
the operator, storage trouble; the Events of what the agent does are its executors').
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from webhook.common.events import NORMAL, WARNING
from webhook.common.kubeclient import ApiFailure
from webhook.fencing import metrics
from webhook.fencing.copies import Copy, CopyState
from webhook.fencing.effects import Action, Trouble
from webhook.fencing.flinkapi import OPTIONAL_KINDS, PLURALS
from webhook.fencing.layout import Workload

log = logging.getLogger(__name__)

# An Event on a copy: its kind (Normal, Warning), reason, action and note.
Event = Callable[[Copy, str, str, str, str], None]


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


class Report:
    def __init__(
        self,
        cluster: str,
        event: Event,
        clock: Callable[[], datetime],
        on_health: Callable[[Health], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.event = event
        self.clock = clock
        self.on_health = on_health
        self.kinds: dict[str, str] = {}  # kind -> "ok", or why the last poll could not list it
        self.polled_at = 0.0
        self.held_since: dict[Workload, float] = {}

    def listed(self, kinds: dict[str, str]) -> bool:
        """What each kind's listing said this poll (logged when it changes); True when one was listed."""
        for kind, state in kinds.items():
            if self.kinds.get(kind) != state:  # said once, when it changes
                if state == "ok":
                    log.info("fencing watches %s", kind, extra={"fields": {"cluster": self.cluster}})
                else:
                    level = logging.INFO if kind in OPTIONAL_KINDS and "404" in state else logging.ERROR
                    log.log(
                        level, "fencing cannot watch %s: %s", kind, state, extra={"fields": {"kind": kind}}
                    )
            metrics.KIND_LISTED.labels(kind).set(1 if state == "ok" else 0)
        self.kinds = kinds
        return any(state == "ok" for state in kinds.values())

    def seen(self, copy: Copy, now: float) -> None:
        """A copy a poll or a recheck looked at: how long it has been held."""
        if copy.state is CopyState.HELD:
            self.held_since.setdefault(copy.patched, now)
        else:
            self.held_since.pop(copy.patched, None)

    def polled(self, found: list[Copy], steps: list[Step]) -> None:
        now = _mono()
        oldest = max((now - since for since in self.held_since.values()), default=0.0)
        metrics.HELD.set(sum(1 for s in steps if s.action is Action.HELD))
        metrics.OLDEST_HOLD.set(oldest)
        metrics.WAITING_FOR_OPERATOR.set(sum(1 for c in found if c.state is CopyState.STOPPING))
        self._tell(found, steps)
        self.log(steps)

    def _tell(self, found: list[Copy], steps: list[Step]) -> None:
        """Events for the states a poll finds rather than causes (aggregated into one series each)."""
        by_workload = {c.patched: c for c in found}
        for step in steps:
            copy = by_workload.get(step.workload)
            if copy is None:
                continue
            if step.action is Action.WAITING_FOR_OPERATOR:
                self.event(copy, NORMAL, "WaitingForOperator", "Fence", step.detail)
            elif step.trouble is Trouble.STORAGE:
                self.event(copy, WARNING, "StorageTrouble", "Heartbeat", step.detail[:300])

    def log(self, steps: list[Step]) -> None:
        for step in steps:
            if step.action not in (Action.HEARTBEAT, Action.SKIPPED, Action.FENCED):
                loud = step.action in (Action.ERROR, Action.PENDING, Action.STEPPED_DOWN)
                log.log(
                    logging.WARNING if loud else logging.INFO,
                    "fencing %s",
                    step.action.value,
                    extra={"fields": {"object": str(step.workload), "detail": step.detail}},
                )

    def health(self, started: float) -> None:
        """After every poll (``started``: its monotonic start): the agent's health and its metrics."""
        listed = any(state == "ok" for state in self.kinds.values())
        if listed:
            self.polled_at = self.clock().timestamp()
            metrics.LAST_POLL.set(self.polled_at)
        metrics.POLL_SECONDS.observe(_mono() - started)
        if listed:
            reason = ""
        else:
            reason = "cannot list any Flink kind: " + "; ".join(f"{k}: {v}" for k, v in self.kinds.items())
        metrics.AGENT_READY.set(0 if reason else 1)
        if self.on_health is not None:
            self.on_health(Health(not reason, reason, self.polled_at, dict(self.kinds)))


def list_problem(kind: str, failure: ApiFailure) -> str:
    """Why a kind could not be listed, as ``Health.kinds`` says it."""
    if failure.status == 404:
        return f"{kind} is not served here (404: is its CRD installed?); its jobs are not fenced"
    if failure.status in (401, 403):
        return f"not allowed to list {PLURALS[kind]} ({failure.status}: RBAC?); its jobs are not fenced"
    return f"listing {PLURALS[kind]} failed: {failure.message}"


def _mono() -> float:
    return asyncio.get_running_loop().time()
