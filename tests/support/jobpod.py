"""A JobManager's pod as the kubelet runs it, with no kubelet: the lease keeper first (``flink-failover
keeper``, a process of its own), the JobManager only once the keeper's startup probe passes (``/readyz``
answers 200), and the JobManager started again whenever it dies (a container's restart asks no probe);
or, without the keeper, the JobManager alone. The JobManager is ``tests/support/jobmanager.py``'s
stand-in: it recovers the job from its newest checkpoint and completes checkpoints into the job's real
storage while it lives.

What the old copy did is read from the processes themselves (``lives``): it counts as RUNNING only
from its JobManager's ``running`` line to that process's death, and its checkpoints are the ones that
process wrote. The fencing tests compare these with the new copy's jobs (``tests/support/operator.py``).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.keeper import APPLICATION, KeeperProcess, Supervised, new_marker
from tests.support.operator import Job
from tests.support.repo import REPO


@dataclass
class JobPod:
    workdir: Path
    root: str  # the job's checkpoint directory
    job_id: str
    options: dict[str, Any]  # fsspec options of the root's scheme (the job's own storage identity)
    keeper_policy: str | None  # the keeper's restore policy (tests/support/keeper.py policy_text); None: none
    cluster: str = "member1"
    workload: str = "FlinkDeployment/analytics/orders"
    every: float = 0.5  # a checkpoint every half second
    startup: float = 2.0  # the JobManager's start before it runs the job
    marker: str = field(default_factory=new_marker)
    keepers: list[KeeperProcess] = field(default_factory=list)
    jobmanagers: list[Supervised] = field(default_factory=list)
    _halt: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def log(self) -> Path:
        return self.workdir / f"jobmanager-{self.marker}.log"

    @property
    def keeper(self) -> KeeperProcess | None:
        return self.keepers[-1] if self.keepers else None

    def start(self) -> None:
        """The pod starts (again): its keeper, then, once the keeper is ready, its JobManager."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._halt = halt = threading.Event()
            if self.keeper_policy is None:
                self._jobmanager(halt)
                return
            keeper = KeeperProcess(
                self.workdir / f"keeper-{len(self.keepers)}",
                self.keeper_policy,
                self.root,
                self.marker,
                cluster=self.cluster,
                workload=self.workload,
            )
            self.keepers.append(keeper)
        keeper.start()
        threading.Thread(target=self._probe, args=(keeper, halt), name="startup-probe", daemon=True).start()

    def _probe(self, keeper: KeeperProcess, halt: threading.Event) -> None:
        """The startup probe: the JobManager's container starts once ``/readyz`` answers 200."""
        while not halt.wait(0.1):
            try:
                ready = keeper.ready() == 200
            except OSError:
                continue  # not answering (yet, or any more)
            if ready:
                with self._lock:
                    if not halt.is_set():
                        self._jobmanager(halt)
                return

    def _jobmanager(self, halt: threading.Event) -> None:
        argv = [
            sys.executable, "-m", "tests.support.jobmanager", APPLICATION, f"--marker={self.marker}",
            "--root", self.root, "--job-id", self.job_id, "--log", str(self.log),
            "--options", json.dumps(self.options), "--every", str(self.every), "--startup", str(self.startup),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        jm = Supervised(self.marker, argv=argv, env=env)
        self.jobmanagers.append(jm)
        jm.start()

    def stop(self) -> None:
        """The pod is deleted (its operator stopped the job) or its node is lost: nothing restarts."""
        with self._lock:
            self._halt.set()
            jobmanagers, keepers = list(self.jobmanagers), list(self.keepers)
        for jm in jobmanagers:
            jm.stop()
        for keeper in keepers:
            keeper.kill()

    def lives(self) -> list[Job]:
        """Each JobManager process that ran the job, as a ``Job``: RUNNING from its ``running`` line to its
        death (None while it lives), with the checkpoints it completed. One killed before it ran the job
        (a restart the keeper stopped) is none."""
        deaths = {d.pid: d.monotonic for jm in list(self.jobmanagers) for d in list(jm.deaths)}
        lives: dict[int, Job] = {}
        text = self.log.read_text(encoding="utf-8") if self.log.exists() else ""
        for raw in text.splitlines():
            try:
                entry = json.loads(raw)
            except ValueError:
                continue  # a line cut by a SIGKILL mid-write: nothing it did is in it
            pid = int(entry["pid"])
            if "running" in entry:
                lives[pid] = Job(f"{self.job_id}@{pid}", float(entry["running"]), deaths.get(pid))
            elif "chk" in entry and pid in lives:
                lives[pid].checkpoints.append((int(entry["chk"]), float(entry["at"])))
        return list(lives.values())

    def running(self) -> bool:
        """A JobManager runs the job now."""
        return any(job.ended is None for job in self.lives())
