"""Two member clusters the way production runs them, for the fencing tests and ``bench/fencing_faults.py``.

Each cluster is a fake API server with the product's member role served for real (gunicorn, TLS,
``--cluster``) and a Flink operator double that keeps a suspended job RUNNING for its stop delay
(``tests/support/operator.py``). One storage, a real server of any backend of tests/support/backends.py
(S3 on moto, GCS on gcp-storage-emulator, Azure Blob on Azurite, or a local directory), holds
checkpoints and ownership records; member1's role reaches a networked one only through a TCP proxy
that can be cut or slowed, while the jobs write their checkpoints straight to it with their own client
(a job's storage path is its own; only the role loses it). Local files have no proxy: nothing to cut.

With ``pods``, member1's job runs in a pod of processes (``tests/support/jobpod.py``): its JobManager is a
process that completes the job's checkpoints itself, under the lease keeper when ``keeper`` (its spec then
carries the keeper's sidecar, as the webhook injects it), and the old copy counts as RUNNING only while
that process runs the job. member1's role then reaches its API server through a TCP proxy too, so the
API server can be cut from it while the pod runs on.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.controlplane import fakeapi
from tests.support.backends import Running
from tests.support.jobpod import JobPod
from tests.support.keeper import policy_text
from tests.support.kube import write_kubeconfig
from tests.support.objects import (
    JOB_ID,
    apply,
    decode_patch,
    flink_deployment,
    flink_metadata,
    review,
)
from tests.support.operator import Job, OperatorDouble, lost_checkpoints, overlap, running_status
from tests.support.server import RunningServer, generate_certs, serve
from tests.support.tcpproxy import TcpProxy
from webhook.common.paths import StoragePath
from webhook.fencing.layout import Workload
from webhook.keeper.inject import KeeperPod, with_keeper

P = "flink-failover.io"


@dataclass(frozen=True)
class Timings:
    """The fencing policy's timings and the operator's stop delay, in seconds."""

    lease: float
    poll: float
    deadline: float
    margin: float
    stop: float

    def policy_yaml(self) -> str:
        return (
            f"fencing: {{leaseSeconds: {self.lease:g}, pollSeconds: {self.poll:g}, "
            f"renewDeadlineSeconds: {self.deadline:g}, stopMarginSeconds: {self.margin:g}}}\n"
        )


def agent_polled(server: RunningServer) -> bool:
    """The served member role's fencing agent has completed a poll: it vouches for restores now (before,
    the webhook admits every restore held, waiting for it)."""
    status, body, _ = server.client().request("GET", "/metrics")
    return status == 200 and "flink_failover_fencing_agent_ready 1.0" in body.decode()


def wait_for(predicate: Callable[[], bool], timeout: float = 90.0) -> bool:
    """Until ``predicate`` holds: a bound on waiting for an event, never a threshold on its timing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@dataclass
class Production:
    tmp: Path
    storage: Running  # the storage's server, reached directly (member2's role, the jobs, the test)
    proxy: TcpProxy | None  # member1's role reaches a networked storage only through it; None for files
    root: str  # the policy's defaultCheckpointDir, as a Flink path names it
    certs: Path
    member1: fakeapi.RunningFake
    member2: fakeapi.RunningFake
    operator1: OperatorDouble
    operator2: OperatorDouble
    stack: ExitStack
    timings: Timings
    pod: JobPod | None = None  # member1's job as processes (``pods``)
    api1: TcpProxy | None = None  # member1's role reaches its API server through it (``pods``)

    def old_jobs(self) -> list[Job]:
        """member1's jobs: its JobManager processes' lives where it runs in a pod, else the operator's."""
        return self.pod.lives() if self.pod is not None else self.operator1.jobs

    @property
    def endpoint(self) -> str:
        """The storage's endpoint, direct (for files: its root directory)."""
        return self.storage.endpoint

    @property
    def through(self) -> str:
        """The storage's endpoint as member1's role reaches it (through the proxy, when there is one)."""
        return self.endpoint if self.proxy is None else self.storage.via(self.proxy.port)

    def _proxy(self) -> TcpProxy:
        if self.proxy is None:
            raise ValueError(f"{self.storage.backend.name} storage has no proxy to cut or slow")
        return self.proxy

    def cut(self) -> None:
        """member1's role loses its storage (the jobs keep theirs)."""
        self._proxy().cut()

    def slow(self, seconds: float) -> None:
        """Every answer member1's role gets from storage ``seconds`` late."""
        self._proxy().slow(seconds)

    def heal(self) -> None:
        self._proxy().heal()

    def records(self) -> str:
        return StoragePath.parse(f"{self.root}/flink-failover/analytics/flinkdeployment/orders").fs_path

    def record_names(self) -> list[str]:
        try:
            found = self.storage.fs.ls(self.records(), detail=False, refresh=True)
        except FileNotFoundError:
            return []
        return sorted(str(p).rstrip("/").rsplit("/", 1)[-1] for p in found)

    def policy(self, name: str, endpoint: str) -> Path:
        path = self.tmp / f"{name}-policy.yaml"
        policy = {
            "defaultCheckpointDir": self.root,
            "storageOptions": self.storage.storage_options(endpoint),
        }
        path.write_text(yaml.safe_dump(policy) + self.timings.policy_yaml(), encoding="utf-8")
        return path

    @contextmanager
    def role(self, name: str, fake: fakeapi.RunningFake, endpoint: str) -> Iterator[RunningServer]:
        kubeconfig = fake.kubeconfig(self.tmp / f"{name}.kubeconfig")
        if name == "member1" and self.api1 is not None:
            server = f"http://127.0.0.1:{self.api1.port}"
            kubeconfig = write_kubeconfig(self.tmp / f"{name}.kubeconfig", server, name="karmada")
        extra = ["--cluster", name, "--kubeconfig", str(kubeconfig), "--workers", "1", "--threads", "4"]
        log_file = self.tmp / f"{name}-{time.monotonic_ns()}.log"
        with serve(self.certs, self.policy(name, endpoint), log_file, extra=extra) as server:
            assert wait_for(lambda: agent_polled(server)), server.logs()[-2000:]
            yield server

    def obj(self, fake: fakeapi.RunningFake) -> dict[str, Any]:
        return fake.fake.get("analytics", "orders")

    def fail_over(self, server: RunningServer) -> dict[str, Any]:
        """What Karmada creates on member2, admitted by member2's served webhook and stored: labelled with
        the jobId of member1's last job, as the control plane captures it. On a machine loaded past
        what its storage answers in time, member1's agent steps its copy down and resumes it, and the
        operator runs each resume as a new job with a jobId of its own (the double, as Flink, continues
        the checkpoint ids); the test's first JOB_ID then names a job directory no longer written to."""
        # The last job member1 ran (its object may be gone already: the control plane keeps what it saw).
        job_id = self.operator1.jobs[-1].job_id if self.operator1.jobs else JOB_ID
        obj = flink_deployment(
            labels={f"{P}/failover": "true", f"{P}/job-id": job_id},
            annotations={f"{P}/failover-count": "1", f"{P}/source-cluster": "member1"},
        )
        obj["spec"]["job"]["state"] = "running"
        answer = server.client().admit(review(obj))["response"]
        assert answer["allowed"], answer
        admitted = apply(obj, decode_patch(answer))
        self.member2.fake.upsert(admitted)
        return admitted

    def check_one_running_copy(self) -> None:
        """The new job RUNNING, never at the same time as the old one, and nothing the old one
        checkpointed is lost."""
        assert wait_for(lambda: bool(self.operator2.jobs)), "the new job never started"
        new = self.operator2.jobs[0]
        assert overlap(self.old_jobs(), self.operator2.jobs) == 0.0, (self.old_jobs(), new)
        assert wait_for(lambda: all(job.ended is not None for job in self.old_jobs())), "the old job runs"
        assert lost_checkpoints(self.old_jobs(), new) == [], new.started_from

    def released_cause(self) -> str:
        return str(self.obj(self.member2)["metadata"]["annotations"].get(f"{P}/released", ""))


@contextmanager
def production(
    storage: Running,
    tmp: Path,
    timings: Timings,
    prefix: str = "prod",
    pods: bool = False,
    keeper: bool = False,
) -> Iterator[Production]:
    """member1 runs job JOB_ID (checkpoints 1-3 done) and heartbeats once its role is started; a new
    bucket (container, directory) named from ``prefix`` on ``storage`` holds everything. ``pods``: its
    JobManager is a process (under the lease keeper when ``keeper``), running when this returns."""
    root = f"{storage.bucket(prefix)}/checkpoints"

    def writer(job_id: str, n: int) -> None:
        storage.write(f"{root}/{job_id}/chk-{n}/_metadata", flink_metadata(n))

    for n in (1, 2, 3):
        writer(JOB_ID, n)
    with ExitStack() as stack:
        proxy = None
        if storage.backend.name != "file":
            proxy = TcpProxy(storage.port)
            stack.callback(proxy.close)
        member1, member2 = fakeapi.start_member_cluster(), fakeapi.start_member_cluster()
        stack.callback(member1.stop)
        stack.callback(member2.stop)
        checkpoint_every = max(0.5, timings.poll / 2)
        pod = _pod(storage, tmp, root, timings, keeper) if pods else None
        operator1 = OperatorDouble(
            member1.fake,
            timings.stop,
            writer,
            checkpoint_seconds=checkpoint_every,
            on_start=None if pod is None else (lambda job: pod.start()),
            on_end=None if pod is None else (lambda job: pod.stop()),
        ).start()
        if pod is not None:
            stack.callback(pod.stop)
        operator2 = OperatorDouble(
            member2.fake, timings.stop, writer, checkpoint_seconds=checkpoint_every
        ).start()
        stack.callback(operator1.stop)
        stack.callback(operator2.stop)
        old = flink_deployment()
        old["spec"]["job"]["state"] = "running"
        old["spec"]["job"]["upgradeMode"] = "savepoint"
        if pod is not None and keeper:
            fencing = {"leaseSeconds": timings.lease, "pollSeconds": timings.poll}
            sidecar = KeeperPod("flink-failover:test", "member1", root, WORKLOAD, 0, fencing)
            old = with_keeper(old, sidecar)[0]  # as the member webhook injects it
        old["status"] = running_status(JOB_ID, old["spec"])
        member1.fake.upsert(old)
        operator1.adopt("analytics", "orders", JOB_ID, 3)
        api1 = None
        if pod is not None:
            assert wait_for(pod.running), f"member1's JobManager never ran the job ({pod.workdir})"
            api1 = TcpProxy(member1.server.server_address[1])
            stack.callback(api1.close)
        certs = generate_certs(tmp / "certs")
        yield Production(
            tmp,
            storage,
            proxy,
            root,
            certs,
            member1,
            member2,
            operator1,
            operator2,
            stack,
            timings,
            pod,
            api1,
        )


WORKLOAD = Workload("FlinkDeployment", "analytics", "orders")


def _pod(storage: Running, tmp: Path, root: str, timings: Timings, keeper: bool) -> JobPod:
    """member1's JobManager pod: its keeper (the policy's timings, the job's storage reached directly,
    as the job reaches it) when ``keeper``."""
    fencing = {
        "leaseSeconds": timings.lease,
        "pollSeconds": timings.poll,
        "renewDeadlineSeconds": timings.deadline,
        "stopMarginSeconds": timings.margin,
    }
    policy = policy_text(storage.storage_options(), **fencing) if keeper else None
    every = max(0.5, timings.poll / 2)  # as the operator doubles' jobs checkpoint
    return JobPod(tmp / "pod", root, JOB_ID, storage.options(), policy, every=every)


def start_pair(p: Production) -> tuple[RunningServer, RunningServer]:
    """Both member roles served; returns once member1 heartbeats."""
    one = p.stack.enter_context(p.role("member1", p.member1, p.through))
    two = p.stack.enter_context(p.role("member2", p.member2, p.endpoint))
    assert wait_for(lambda: "heartbeat-member1.json" in p.record_names())
    return one, two


def start_replicas(p: Production) -> tuple[list[RunningServer], RunningServer]:
    """member1's role as the chart runs it, two replicas (each with its agent), and member2's; returns
    once member1 heartbeats."""
    ones = [p.stack.enter_context(p.role("member1", p.member1, p.through)) for _ in range(2)]
    two = p.stack.enter_context(p.role("member2", p.member2, p.endpoint))
    assert wait_for(lambda: "heartbeat-member1.json" in p.record_names())
    return ones, two


def kill(server: RunningServer) -> None:
    """SIGKILL the replica's whole process group: a lost pod (its agent ends mid-whatever)."""
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait(10)


def stop_asked(p: Production) -> bool:
    """member1's agents have asked its operator to stop the stale copy (the fenced label is on it)."""
    return f"{P}/fenced" in (p.obj(p.member1)["metadata"].get("labels") or {})
