"""The timing recordings from a real Karmada v1.18.2 (tests/fixtures/karmada-observed/), replayable.

Each folder holds a few full ResourceBindings, a summary of every watch event on that binding with its
receive time (``rb-watch-events.json``) and the audit events of the Work CREATE. ``replay`` rebuilds
the full object of every event Karmada caused from the nearest full object before it and the event's
summary (spec.clusters, eviction tasks, generation, scheduler status, aggregatedStatus), so a test
can feed a fake API server the same sequence of writes in the same order.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "karmada-observed"
DAY = "2026-12-01"
OWN_PATCH = "metadata.annotations[flink-failover.io/last-known-state]"


def load(relative: str) -> Any:
    return json.loads((FIXTURES / relative).read_text(encoding="utf-8"))


def binding(relative: str) -> dict[str, Any]:
    return copy.deepcopy(load(relative))


def work_create(relative: str) -> dict[str, Any]:
    """The Work as karmada-controller-manager sent it: what a Work webhook receives as request.object."""
    return copy.deepcopy(load(relative)["requestObject"])


def at(clock: str) -> datetime:
    """``07:15:00.024`` on the recording day, UTC."""
    return datetime.fromisoformat(f"{DAY}T{clock}+00:00").astimezone(UTC)


@dataclass(frozen=True)
class Step:
    received: str  # when a watch received it (HH:MM:SS.mmm)
    obj: dict[str, Any]
    changed: tuple[str, ...]

    @property
    def moment(self) -> datetime:
        return at(self.received)


def running_before(obj: dict[str, Any], cluster: str) -> dict[str, Any]:
    """The binding as it was while ``cluster`` still reported its job RUNNING (the recordings start when
    the job was already unhealthy; the member audit shows RUNNING a few seconds earlier)."""
    out = copy.deepcopy(obj)
    for entry in out["status"]["aggregatedStatus"]:
        if entry["clusterName"] == cluster:
            entry["health"] = "Healthy"
            entry["status"]["jobStatus"]["state"] = "RUNNING"
            entry["status"]["lifecycleState"] = "STABLE"
            entry["status"]["jobManagerDeploymentStatus"] = "READY"
    return out


def replay(folder: str, start: dict[str, Any]) -> list[Step]:
    """Every watch event Karmada caused, as full objects; our own annotation patches are left out."""
    current = copy.deepcopy(start)
    steps = []
    for event in load(f"{folder}/rb-watch-events.json"):
        changed = tuple(event["changedFromPreviousEvent"])
        if any(c.startswith(OWN_PATCH) for c in changed):
            continue
        current = _apply(current, event)
        steps.append(Step(event["received"], copy.deepcopy(current), changed))
    return steps


def _apply(previous: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(previous)
    obj["metadata"]["resourceVersion"] = event["resourceVersion"]
    obj["metadata"]["generation"] = event["generation"]
    obj["spec"]["clusters"] = copy.deepcopy(event["spec.clusters"] or [])
    tasks = event["spec.gracefulEvictionTasks"]
    if tasks:
        obj["spec"]["gracefulEvictionTasks"] = copy.deepcopy(tasks)
    else:
        obj["spec"].pop("gracefulEvictionTasks", None)
    status = obj.setdefault("status", {})
    status["schedulerObservedGeneration"] = event["status.schedulerObservedGeneration"]
    status["lastScheduledTime"] = event["status.lastScheduledTime"]
    known = {e["clusterName"]: e for e in status.get("aggregatedStatus", [])}
    status["aggregatedStatus"] = [
        _status_entry(known.get(summary["clusterName"]), summary)
        for summary in event["status.aggregatedStatus (summary)"] or []
    ]
    return obj


def _status_entry(previous: dict[str, Any] | None, summary: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"clusterName": summary["clusterName"], "health": summary["health"]}
    if summary["applied"] is not None:
        entry["applied"] = summary["applied"]
    if not summary["jobId"]:
        return entry
    status = copy.deepcopy(previous.get("status", {})) if previous else {}
    job = status.setdefault("jobStatus", {})
    job["jobId"], job["state"] = summary["jobId"], summary["jobState"]
    if summary["lifecycleState"]:
        status["lifecycleState"] = summary["lifecycleState"]
    if summary["error"]:
        status["error"] = summary["error"]
    entry["status"] = status
    return entry


def shifted(obj: dict[str, Any], delta: timedelta) -> dict[str, Any]:
    """The object with Karmada's timestamps moved by ``delta``: a server under test dates what it sees by
    its own clock, and Karmada's stamps must be on that clock too (one clock, as in the recording)."""
    out = copy.deepcopy(obj)

    def move(text: str) -> str:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00")) + delta
        return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    for task in out["spec"].get("gracefulEvictionTasks") or []:
        if task.get("creationTimestamp"):
            task["creationTimestamp"] = move(task["creationTimestamp"])
    status = out.get("status", {})
    if status.get("lastScheduledTime"):
        status["lastScheduledTime"] = move(status["lastScheduledTime"])
    return out


def replay_now(folder: str, start: dict[str, Any], first: str) -> tuple[dict[str, Any], list[Step]]:
    """``start`` and the replay of ``folder`` with Karmada's stamps moved so that ``first`` (a receive
    time) is now: for a server that dates what it sees by its own clock. The replay then runs faster
    than it was recorded, so later stamps lie ahead of that clock, as they did of the first event."""
    delta = datetime.now(UTC) - at(first)
    moved = shifted(start, delta)
    return moved, [Step(s.received, shifted(s.obj, delta), s.changed) for s in replay(folder, moved)]


def folders() -> list[Path]:
    return sorted(p for p in FIXTURES.iterdir() if p.is_dir())
