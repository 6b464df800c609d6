"""Two member clusters the way production runs them, for the fencing tests and ``bench/fencing_faults.py``.

Each cluster is a fake API server with the product's member role served for real (gunicorn, TLS,
``--cluster``) and a Flink operator double that keeps a suspended job RUNNING for its stop delay
(``tests/support/operator.py``). One S3 (moto's server on loopback) holds checkpoints and ownership
records; member1's role reaches it only through a TCP proxy that can be cut or slowed, while the jobs
write their checkpoints straight to it (a job's storage path is its own; only the role loses it).
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

from tests.controlplane import fakeapi
from tests.support.objects import (
    JOB_ID,
    apply,
    decode_patch,
    flink_deployment,
    flink_metadata,
    review,
)
from tests.support.operator import OperatorDouble, lost_checkpoints, overlap, running_status
from tests.support.s3 import s3_options
from tests.support.server import RunningServer, generate_certs, serve
from tests.support.tcpproxy import TcpProxy

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
    endpoint: str  # S3, direct
    proxy: TcpProxy  # member1's role reaches S3 only through it
    bucket: str
    certs: Path
    member1: fakeapi.RunningFake
    member2: fakeapi.RunningFake
    operator1: OperatorDouble
    operator2: OperatorDouble
    stack: ExitStack
    timings: Timings

    @property
    def root(self) -> str:
        return f"s3://{self.bucket}/checkpoints"

    def fs(self) -> Any:
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(self.endpoint))

    def records(self) -> str:
        return f"{self.bucket}/checkpoints/flink-failover/analytics/flinkdeployment/orders"

    def record_names(self) -> list[str]:
        fs = self.fs()
        try:
            return sorted(p.rsplit("/", 1)[-1] for p in fs.ls(self.records(), refresh=True))
        except FileNotFoundError:
            return []

    def policy(self, name: str, endpoint: str) -> Path:
        path = self.tmp / f"{name}-policy.yaml"
        path.write_text(
            f"defaultCheckpointDir: {self.root}\n"
            f"storageOptions: {{s3: {{endpoint_url: '{endpoint}', key: testing, secret: testing}}}}\n"
            + self.timings.policy_yaml(),
            encoding="utf-8",
        )
        return path

    @contextmanager
    def role(self, name: str, fake: fakeapi.RunningFake, endpoint: str) -> Iterator[RunningServer]:
        kubeconfig = fake.kubeconfig(self.tmp / f"{name}.kubeconfig")
        extra = ["--cluster", name, "--kubeconfig", str(kubeconfig), "--workers", "1", "--threads", "4"]
        log_file = self.tmp / f"{name}-{time.monotonic_ns()}.log"
        with serve(self.certs, self.policy(name, endpoint), log_file, extra=extra) as server:
            assert wait_for(lambda: agent_polled(server)), server.logs()[-2000:]
            yield server

    def obj(self, fake: fakeapi.RunningFake) -> dict[str, Any]:
        return fake.fake.get("analytics", "orders")

    def fail_over(self, server: RunningServer) -> dict[str, Any]:
        """What Karmada creates on member2, admitted by member2's served webhook and stored."""
        obj = flink_deployment(
            labels={f"{P}/failover": "true", f"{P}/job-id": JOB_ID},
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
        assert overlap(self.operator1.jobs, self.operator2.jobs) == 0.0, (self.operator1.jobs, new)
        assert all(job.ended is not None for job in self.operator1.jobs), "the old job still runs"
        assert lost_checkpoints(self.operator1.jobs, new) == [], new.started_from

    def released_cause(self) -> str:
        return str(self.obj(self.member2)["metadata"]["annotations"].get(f"{P}/released", ""))


@contextmanager
def production(endpoint: str, tmp: Path, bucket: str, timings: Timings) -> Iterator[Production]:
    """member1 runs job JOB_ID (checkpoints 1-3 done) and heartbeats once its role is started."""
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(endpoint))
    fs.mkdir(bucket)
    for n in (1, 2, 3):
        fs.pipe(f"{bucket}/checkpoints/{JOB_ID}/chk-{n}/_metadata", flink_metadata(n))

    def writer(job_id: str, n: int) -> None:
        fs.pipe(f"{bucket}/checkpoints/{job_id}/chk-{n}/_metadata", flink_metadata(n))

    with ExitStack() as stack:
        proxy = TcpProxy(int(endpoint.rsplit(":", 1)[1]))
        stack.callback(proxy.close)
        member1, member2 = fakeapi.start_member_cluster(), fakeapi.start_member_cluster()
        stack.callback(member1.stop)
        stack.callback(member2.stop)
        checkpoint_every = max(0.5, timings.poll / 2)
        operator1 = OperatorDouble(
            member1.fake, timings.stop, writer, checkpoint_seconds=checkpoint_every
        ).start()
        operator2 = OperatorDouble(
            member2.fake, timings.stop, writer, checkpoint_seconds=checkpoint_every
        ).start()
        stack.callback(operator1.stop)
        stack.callback(operator2.stop)
        old = flink_deployment()
        old["spec"]["job"]["state"] = "running"
        old["spec"]["job"]["upgradeMode"] = "savepoint"
        old["status"] = running_status(JOB_ID, old["spec"])
        member1.fake.upsert(old)
        operator1.adopt("analytics", "orders", JOB_ID, 3)
        certs = generate_certs(tmp / "certs")
        yield Production(
            tmp, endpoint, proxy, bucket, certs, member1, member2, operator1, operator2, stack, timings
        )


def start_pair(p: Production) -> tuple[RunningServer, RunningServer]:
    """Both member roles served; returns once member1 heartbeats."""
    one = p.stack.enter_context(p.role("member1", p.member1, p.proxy.endpoint))
    two = p.stack.enter_context(p.role("member2", p.member2, p.endpoint))
    assert wait_for(lambda: "heartbeat-member1.json" in p.record_names())
    return one, two


def start_replicas(p: Production) -> tuple[list[RunningServer], RunningServer]:
    """member1's role as the chart runs it, two replicas (each with its agent), and member2's; returns
    once member1 heartbeats."""
    ones = [p.stack.enter_context(p.role("member1", p.member1, p.proxy.endpoint)) for _ in range(2)]
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
