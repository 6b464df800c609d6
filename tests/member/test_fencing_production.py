"""One running copy the way production fails, with production's timing (issue 21's six cases).

Two member clusters, each a fake API server with the product's member role served for real (gunicorn,
TLS, ``--cluster``), one S3 (moto's server on loopback) holding checkpoints and ownership records,
member1's role reaching it through a TCP proxy that can be cut or slowed, and each cluster's Flink
operator played faithfully (``tests/support/operator.py``): a job asked to stop stays RUNNING by its
status, reading, writing and checkpointing, until the stop completes. The jobs' own checkpoints go
straight to S3 (a job's storage path is its own; only the role loses it).

Counted exactly, not timed: the seconds both jobs are RUNNING by their status (from the operator
doubles' own transitions) and the old job's checkpoints newer than the one the new job started from.
Both must be zero whatever the machine's load: the new job starts only after the old job's operator
reported it stopped (an ack) or after a lease its holder provably stepped down within.

Times are scaled down from the defaults (lease 30 s, deadline 15 s, poll 5 s, stop margin 10 s) so the
suite stays short; ``bench/fencing_faults.py`` runs the same cases at production scale.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import fakeapi
from tests.support.objects import FLINK_METADATA, JOB_ID, apply, decode_patch, flink_deployment, review
from tests.support.operator import OperatorDouble, lost_checkpoints, overlap, running_status
from tests.support.s3 import moto_server, s3_options
from tests.support.server import RunningServer, generate_certs, serve
from tests.support.tcpproxy import TcpProxy

P = "flink-failover.io"
LEASE, POLL, DEADLINE, MARGIN = 16, 1, 4, 11  # deadline + poll + margin = lease
WAIT = 90.0  # a bound on waiting for an event, never a threshold on how long it took


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with moto_server(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        yield endpoint


def _wait(predicate: Callable[[], bool], timeout: float = WAIT) -> bool:
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
            f"fencing: {{leaseSeconds: {LEASE}, pollSeconds: {POLL}, renewDeadlineSeconds: {DEADLINE},"
            f" stopMarginSeconds: {MARGIN}}}\n",
            encoding="utf-8",
        )
        return path

    @contextmanager
    def role(self, name: str, fake: fakeapi.RunningFake, endpoint: str) -> Iterator[RunningServer]:
        kubeconfig = fake.kubeconfig(self.tmp / f"{name}.kubeconfig")
        extra = ["--cluster", name, "--kubeconfig", str(kubeconfig), "--workers", "1", "--threads", "4"]
        log_file = self.tmp / f"{name}-{time.monotonic_ns()}.log"
        with serve(self.certs, self.policy(name, endpoint), log_file, extra=extra) as server:
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
        assert _wait(lambda: bool(self.operator2.jobs)), "the new job never started"
        new = self.operator2.jobs[0]
        assert overlap(self.operator1.jobs, self.operator2.jobs) == 0.0, (self.operator1.jobs, new)
        assert all(job.ended is not None for job in self.operator1.jobs), "the old job still runs"
        assert lost_checkpoints(self.operator1.jobs, new) == [], new.started_from

    def released_cause(self) -> str:
        return str(self.obj(self.member2)["metadata"]["annotations"].get(f"{P}/released", ""))


@pytest.fixture
def production(moto: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Production]:
    import s3fs

    bucket = f"prod-{abs(hash(request.node.name)) % 10**8}"
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(moto))
    fs.mkdir(bucket)
    for n in (1, 2, 3):
        fs.pipe(f"{bucket}/checkpoints/{JOB_ID}/chk-{n}/_metadata", FLINK_METADATA)

    def writer(job_id: str, n: int) -> None:
        fs.pipe(f"{bucket}/checkpoints/{job_id}/chk-{n}/_metadata", FLINK_METADATA)

    stop_seconds = float(getattr(request, "param", 3.0))
    with ExitStack() as stack:
        proxy = TcpProxy(int(moto.rsplit(":", 1)[1]))
        stack.callback(proxy.close)
        member1, member2 = fakeapi.start_member_cluster(), fakeapi.start_member_cluster()
        stack.callback(member1.stop)
        stack.callback(member2.stop)
        operator1 = OperatorDouble(member1.fake, stop_seconds, writer).start()
        operator2 = OperatorDouble(member2.fake, stop_seconds, writer).start()
        stack.callback(operator1.stop)
        stack.callback(operator2.stop)
        old = flink_deployment()
        old["spec"]["job"]["state"] = "running"
        old["spec"]["job"]["upgradeMode"] = "savepoint"
        old["status"] = running_status(JOB_ID, old["spec"])
        member1.fake.upsert(old)
        operator1.adopt("analytics", "orders", JOB_ID, 3)
        world = Production(
            tmp_path,
            moto,
            proxy,
            bucket,
            generate_certs(tmp_path / "certs"),
            member1,
            member2,
            operator1,
            operator2,
            stack,
        )
        yield world


def _start_pair(p: Production) -> tuple[RunningServer, RunningServer]:
    one = p.stack.enter_context(p.role("member1", p.member1, p.proxy.endpoint))
    two = p.stack.enter_context(p.role("member2", p.member2, p.endpoint))
    assert _wait(lambda: "heartbeat-member1.json" in p.record_names())
    return one, two


@pytest.mark.parametrize("production", [3.0, 6.0], indirect=True, ids=["stop-3s", "stop-6s"])
def test_both_sides_reach_storage_the_new_job_starts_after_the_old_one_stopped(
    production: Production,
) -> None:
    p = production
    _, two = _start_pair(p)
    admitted = p.fail_over(two)
    assert admitted["spec"]["job"]["state"] == "suspended"
    p.check_one_running_copy()
    assert p.released_cause().startswith("ack at "), p.released_cause()
    assert "ack-000000000001-member1.json" in p.record_names()


@pytest.mark.parametrize("fault", ["cut", "slow"])
def test_a_holder_that_loses_its_storage_steps_down_before_the_lease_runs_out(
    production: Production, fault: str
) -> None:
    p = production
    _, two = _start_pair(p)
    if fault == "cut":
        p.proxy.cut()
    else:
        p.proxy.slow(3 * POLL)  # every answer later than the agent's deadline
    p.fail_over(two)
    assert _wait(lambda: f"{P}/stepped-down" in p.obj(p.member1)["metadata"].get("annotations", {}))
    stepped = p.obj(p.member1)
    assert stepped["spec"]["job"]["state"] == "suspended"
    assert stepped["spec"]["job"]["upgradeMode"] == "stateless"  # no savepoint on the way down
    p.check_one_running_copy()
    assert p.released_cause().startswith("lease-expiry at "), p.released_cause()
    # The storage answers again: member1 sees it was taken over, stays stopped and acknowledges.
    p.proxy.heal()
    assert _wait(lambda: "ack-000000000001-member1.json" in p.record_names())
    assert p.obj(p.member1)["spec"]["job"]["state"] == "suspended"
    assert len(p.operator1.jobs) == 1  # never resumed


def test_a_holder_whose_storage_comes_back_before_anyone_took_over_resumes_from_its_newest_checkpoint(
    production: Production,
) -> None:
    p = production
    _start_pair(p)
    p.proxy.cut()
    assert _wait(lambda: f"{P}/stepped-down" in p.obj(p.member1)["metadata"].get("annotations", {}))
    assert _wait(lambda: all(job.ended is not None for job in p.operator1.jobs))
    newest = max(n for job in p.operator1.jobs for n, _ in job.checkpoints)
    p.proxy.heal()
    assert _wait(lambda: len(p.operator1.jobs) == 2)  # resumed: a new job on member1
    resumed = p.obj(p.member1)
    job = resumed["spec"]["job"]
    assert job["state"] == "running" and job["upgradeMode"] == "savepoint"
    assert job["initialSavepointPath"] == f"{p.root}/{JOB_ID}/chk-{newest}"
    assert job["savepointRedeployNonce"] == 1
    assert f"{P}/stepped-down" not in resumed["metadata"].get("annotations", {})


def test_a_role_down_during_the_failover_stops_its_copy_when_it_restarts(production: Production) -> None:
    p = production
    with p.role("member1", p.member1, p.proxy.endpoint):
        assert _wait(lambda: "heartbeat-member1.json" in p.record_names())
    # member1's role is down now; its job runs on. Karmada fails the job over to member2.
    two = p.stack.enter_context(p.role("member2", p.member2, p.endpoint))
    assert p.fail_over(two)["spec"]["job"]["state"] == "suspended"
    assert p.operator2.jobs == []
    p.stack.enter_context(p.role("member1", p.member1, p.proxy.endpoint))  # back within the lease
    p.check_one_running_copy()
    assert p.released_cause().startswith("ack at "), p.released_cause()


def test_a_deleted_old_copy_leaves_no_heartbeat_and_the_new_job_starts_at_once(
    production: Production,
) -> None:
    p = production
    _, two = _start_pair(p)
    p.member1.fake.delete("analytics", "orders")
    assert _wait(lambda: all(job.ended is not None for job in p.operator1.jobs))
    assert _wait(lambda: "heartbeat-member1.json" not in p.record_names())
    admitted = p.fail_over(two)
    assert admitted["spec"]["job"]["state"] == "running"  # nobody to wait for
    p.check_one_running_copy()
