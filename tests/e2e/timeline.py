"""What both members' API servers said about each Flink job, and when: the tier's only judge.

A :class:`Timeline` watches FlinkDeployments and FlinkSessionJobs on every member and keeps each object's
status changes as seen (monotonic time, cluster, jobId, job state); a job is known by its namespace and
name (the tier never gives a session job the name of a FlinkDeployment of its namespace). Seconds of two
RUNNING copies are computed from those samples alone, never from the spec, the product's logs or the
operator doubles' own records.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tests.e2e.informer import Informer, Key, key_of
from tests.e2e.rest import Rest


@dataclass(frozen=True)
class Sample:
    at: float
    cluster: str
    key: Key
    job_id: str
    state: str  # status.jobStatus.state, "" without one, "DELETED" once gone
    restored_from: str  # spec.job.initialSavepointPath at that time
    annotations: dict[str, str]


@dataclass
class Timeline:
    members: dict[str, Rest]
    samples: list[Sample] = field(default_factory=list)
    # the same samples by job: a fleet of thousands asks per job, and a scan of all samples each time
    # grew with the square of the fleet
    by_key: dict[Key, list[Sample]] = field(default_factory=dict)
    informers: dict[str, Informer] = field(default_factory=dict)  # FlinkDeployments, by member
    sessions: dict[str, Informer] = field(default_factory=dict)  # FlinkSessionJobs, by member
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Timeline:
        for cluster, api in self.members.items():
            for plural, kept in (("flinkdeployments", self.informers), ("flinksessionjobs", self.sessions)):
                path = f"/apis/flink.apache.org/v1beta1/{plural}"
                informer = Informer(api, path, f"timeline-{cluster}-{plural}")
                informer.handlers.append(self._recorder(cluster))
                kept[cluster] = informer.start()
        return self

    def stop(self) -> None:
        informers = [*self.informers.values(), *self.sessions.values()]
        for informer in informers:  # every watch ended at once, then each thread joined
            informer.halt()
        for informer in informers:
            informer.stop()

    def get(self, cluster: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The member's FlinkDeployment or FlinkSessionJob ``namespace/name`` as last seen."""
        found = self.informers[cluster].get(namespace, name)
        return found if found is not None else self.sessions[cluster].get(namespace, name)

    def _recorder(self, cluster: str) -> Any:
        def record(kind: str, obj: dict[str, Any], at: float) -> None:
            job = ((obj.get("status") or {}).get("jobStatus")) or {}
            spec_job = (obj.get("spec") or {}).get("job") or {}
            sample = Sample(
                at,
                cluster,
                key_of(obj),
                str(job.get("jobId") or ""),
                "DELETED" if kind == "DELETED" else str(job.get("state") or ""),
                str(spec_job.get("initialSavepointPath") or ""),
                dict((obj.get("metadata") or {}).get("annotations") or {}),
            )
            with self._lock:
                self.samples.append(sample)
                self.by_key.setdefault(sample.key, []).append(sample)

        return record

    def of(self, key: Key, cluster: str | None = None) -> list[Sample]:
        with self._lock:
            return [s for s in self.by_key.get(key, ()) if cluster is None or s.cluster == cluster]

    def running_intervals(
        self, key: Key, cluster: str, until: float | None = None
    ) -> list[tuple[float, float]]:
        end = time.monotonic() if until is None else until
        intervals: list[tuple[float, float]] = []
        started: float | None = None
        for sample in self.of(key, cluster):
            if sample.state == "RUNNING" and started is None:
                started = sample.at
            elif sample.state != "RUNNING" and started is not None:
                intervals.append((started, sample.at))
                started = None
        if started is not None:
            intervals.append((started, end))
        return intervals

    def two_running_seconds(self, key: Key, until: float | None = None) -> float:
        """Seconds during which the job was RUNNING on two members at once, by their status."""
        clusters = sorted(self.members)
        total = 0.0
        for i, first in enumerate(clusters):
            for second in clusters[i + 1 :]:
                for a0, a1 in self.running_intervals(key, first, until):
                    for b0, b1 in self.running_intervals(key, second, until):
                        total += max(0.0, min(a1, b1) - max(a0, b0))
        return total

    def running_on(self, key: Key) -> list[str]:
        """The members whose object for ``key`` says RUNNING now (the informers' caches)."""
        out = []
        for cluster in self.informers:
            obj = self.get(cluster, *key)
            state = (((obj or {}).get("status") or {}).get("jobStatus") or {}).get("state")
            if state == "RUNNING":
                out.append(cluster)
        return out

    def first_running(self, key: Key, cluster: str, after: float) -> Sample | None:
        for sample in self.of(key, cluster):
            if sample.at >= after and sample.state == "RUNNING":
                return sample
        return None
