"""The JobManager pods of FlinkDeployments that carry the lease keeper, run as a kubelet runs them.

Nothing here runs containers (there is no kubelet in the tier). A pod of a guarded FlinkDeployment is two
processes: the keeper sidecar, run from the pod template as the webhook injected it (its command, its
environment; its probe port on loopback), and a stand-in JobManager (``tests/support/keeper.py``: a
process whose command line carries a JobManager's main class). As a kubelet does with a native sidecar:
the keeper starts first; the JobManager only once the keeper's startup probe (``/readyz``) has answered
200, tried every ``periodSeconds`` for up to ``failureThreshold`` tries (then the keeper is restarted);
the keeper is restarted whenever it exits, the JobManager whenever it dies (after a back-off); a pod
template that changes replaces the pod. The pod's process namespace is its own: each pod's JobManager
carries a marker that only its keeper looks for (``--jobmanager-marker``), so a keeper kills its own
JobManager and no other on this shared machine. The pod's storage identity (the role an IRSA or workload
identity would give it) is ``identity``: environment variables beside the template's.

The operator double (``tests/e2e/operator.py``) asks for a pod while the job is to run and counts the job
RUNNING only while its JobManager is alive: a keeper that kills its JobManager stops the job.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.informer import Key
from tests.e2e.pods import COMMAND
from tests.e2e.procs import Process, Processes
from tests.support.keeper import Supervised
from tests.support.server import free_port
from webhook.keeper.inject import CONTAINER

_PODS = itertools.count(1)
BACK_OFF = 1.0  # seconds before a dead container is started again (a kubelet's first back-off is 10 s)


def keeper_container(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The keeper sidecar in a FlinkDeployment's JobManager pod template, else None."""
    spec = obj.get("spec") or {}
    template = ((spec.get("jobManager") or {}).get("podTemplate") or {}).get("spec") or {}
    for container in template.get("initContainers") or []:
        if isinstance(container, dict) and container.get("name") == CONTAINER:
            return container
    return None


@dataclass
class JobManagerPod:
    """One JobManager pod: its keeper process and, once the keeper is ready, its JobManager."""

    name: str
    container: dict[str, Any]
    procs: Processes
    identity: dict[str, str]
    marker: str = ""
    port: int = 0
    keeper: Process | None = None
    jobmanager: Supervised | None = None
    ready_at: float | None = None  # monotonic time the startup probe first passed
    keeper_starts: int = 0
    _halt: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> JobManagerPod:
        self.marker = f"e2e-pod-{os.getpid()}-{next(_PODS)}-{self.name}"
        self.port = free_port()
        self._thread = threading.Thread(target=self._run, name=f"kubelet-{self.name}", daemon=True)
        self._thread.start()
        return self

    @property
    def jobmanager_alive(self) -> bool:
        jobmanager = self.jobmanager
        return jobmanager is not None and jobmanager.alive

    @property
    def kills(self) -> list[float]:
        """Monotonic times the JobManager died (each death the kubelet saw)."""
        jobmanager = self.jobmanager
        return [d.monotonic for d in jobmanager.deaths] if jobmanager is not None else []

    def stop(self) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join(15)
        if self.jobmanager is not None:
            self.jobmanager.stop()
        if self.keeper is not None:
            self.procs.stop(self.keeper, grace=5)

    def _env(self) -> dict[str, str]:
        env = {str(e["name"]): str(e.get("value", "")) for e in self.container.get("env") or []}
        env["FLINK_FAILOVER_KEEPER_BIND"] = f"127.0.0.1:{self.port}"
        env["FLINK_FAILOVER_KEEPER_JOBMANAGER_MARKER"] = self.marker
        return {**env, **self.identity}

    def _argv(self) -> list[str]:
        command = [str(c) for c in self.container.get("command") or []] + [
            str(a) for a in self.container.get("args") or []
        ]
        if not command or Path(command[0]).name != "flink-failover":
            raise AssertionError(f"the keeper sidecar runs {command!r}, not the product's command")
        return [COMMAND, *command[1:]]

    def _start_keeper(self) -> None:
        self.keeper_starts += 1
        self.keeper = self.procs.start(f"{self.name}-keeper-{self.keeper_starts}", self._argv(), self._env())

    def _probe(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _run(self) -> None:
        probe = self.container.get("startupProbe") or {}
        period = float(probe.get("periodSeconds", 1))
        tries = int(probe.get("failureThreshold", 3))
        self._start_keeper()
        failures = 0
        while not self._halt.wait(period if self.ready_at is None else 0.2):
            keeper = self.keeper
            if keeper is not None and not keeper.alive():  # a native sidecar is restarted whatever its exit
                self._halt.wait(BACK_OFF)
                if self._halt.is_set():
                    return
                self._start_keeper()
                continue
            if self.ready_at is not None:
                continue
            if self._probe():
                self.ready_at = time.monotonic()
                self.jobmanager = Supervised(self.marker, restart_after=BACK_OFF)
                self.jobmanager.start()
                continue
            failures += 1
            if failures >= tries:  # the startup probe failed: the kubelet restarts the keeper
                failures = 0
                if keeper is not None:
                    self.procs.stop(keeper, grace=2)
                self._start_keeper()


@dataclass
class Kubelet:
    """The JobManager pods of one member cluster's guarded FlinkDeployments."""

    cluster: str
    procs: Processes
    identity: dict[str, str]
    pods: dict[Key, JobManagerPod] = field(default_factory=dict)
    gone: list[JobManagerPod] = field(default_factory=list)  # pods removed, for what happened in them
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def ensure(self, key: Key, container: dict[str, Any]) -> JobManagerPod:
        """The pod for ``key`` as its template says now: started if missing, replaced if its keeper
        sidecar changed (a new template rolls the pod)."""
        with self._lock:
            pod = self.pods.get(key)
            if pod is not None and _same(pod.container, container):
                return pod
            if pod is not None:
                self._remove(key)
            name = f"{self.cluster}-{key[0]}-{key[1]}"
            pod = JobManagerPod(name, copy.deepcopy(container), self.procs, self.identity).start()
            self.pods[key] = pod
            return pod

    def remove(self, key: Key) -> None:
        """No pod for ``key`` (the job suspended or deleted: the operator deletes its JobManager)."""
        with self._lock:
            self._remove(key)

    def _remove(self, key: Key) -> None:
        pod = self.pods.pop(key, None)
        if pod is not None:
            pod.stop()
            self.gone.append(pod)

    def pod(self, key: Key) -> JobManagerPod | None:
        return self.pods.get(key)

    def history(self, key: Key) -> list[JobManagerPod]:
        """Every pod ``key`` had on this cluster, the current one last."""
        name = f"{self.cluster}-{key[0]}-{key[1]}"
        now = [self.pods[key]] if key in self.pods else []
        return [p for p in self.gone if p.name == name] + now

    def stop(self) -> None:
        with self._lock:
            for key in list(self.pods):
                self._remove(key)


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
