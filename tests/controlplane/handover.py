"""The leader hand-over scenario, shared by tests/controlplane/test_leader.py and bench/handover.py: two
real ``flink-failover serve --role control-plane --leader-elect`` processes against the fake API server,
a stream of binding changes, the leader stopped by a signal; what the API server saw is returned.
"""

from __future__ import annotations

import copy
import os
import re
import signal
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO
from tests.controlplane import fakeapi
from tests.support.server import RunningServer, generate_certs, serve
from webhook.commands.review_requests import wrap
from webhook.controlplane.record import BindingRecord
from webhook.policy.load import DEFAULT_POLICY_FILE

NS = "karmada-system"
LEASE = "flink-failover-control-plane"
KEY = "flink-failover.io/last-known-state"
# Short timings so the test waits seconds, not the defaults' 15 s.
FAST = ("4", "2.5", "0.25")


def binding_template() -> dict[str, Any]:
    docs = [
        d for d in yaml.safe_load_all((REPO / "tests/samples/controlplane/bindings.yaml").read_text()) if d
    ]
    rb: dict[str, Any] = docs[0]
    rb["spec"].pop("gracefulEvictionTasks", None)
    rb["status"]["aggregatedStatus"] = rb["status"]["aggregatedStatus"][:1]  # eu-west, RUNNING
    return rb


def make_binding(template: dict[str, Any], index: int, job_id: str) -> dict[str, Any]:
    rb = copy.deepcopy(template)
    rb["metadata"]["name"] = f"job-{index:03d}-flinkdeployment"
    rb["metadata"]["uid"] = f"00000000-0000-4000-8000-{index:012d}"
    rb["metadata"].pop("resourceVersion", None)
    rb["metadata"]["annotations"] = {}
    rb["spec"]["resource"]["name"] = f"job-{index:03d}"
    rb["status"]["aggregatedStatus"][0]["status"]["jobStatus"]["jobId"] = job_id
    return rb


def job_id(index: int, generation: int) -> str:
    return f"{generation:08x}{index:024x}"


def captured_job(fake: fakeapi.FakeKarmada, name: str) -> str:
    with fake.cond:
        obj = fake.objects.get((NS_BINDINGS, name))
        raw = obj and obj["metadata"].get("annotations", {}).get(KEY)
    record = BindingRecord.loads(raw) if raw else None
    return record.cluster("eu-west").job_id if isinstance(record, BindingRecord) else ""


NS_BINDINGS = "payments"
IDENTITY = re.compile(r"\((?P<identity>[^)]*)\)")


def election_args(timings: tuple[str, str, str]) -> list[str]:
    duration, deadline, retry = timings
    return [
        "--leader-elect",
        "--lease-namespace",
        NS,
        "--lease-duration",
        duration,
        "--renew-deadline",
        deadline,
        "--retry-period",
        retry,
        "--threads",
        "2",
    ]


@dataclass
class Replica:
    name: str
    running: RunningServer

    def owns(self, identity: str) -> bool:
        return identity.startswith(self.name + "_")


def start_replica(
    stack: ExitStack, tmp: Path, certs: Path, kubeconfig: Path, name: str, timings: tuple[str, str, str]
) -> Replica:
    env = {"POD_NAME": name, "PROMETHEUS_MULTIPROC_DIR": str(tmp / f"metrics-{name}")}
    running = stack.enter_context(
        serve(
            certs,
            DEFAULT_POLICY_FILE,
            tmp / f"{name}.log",
            role="control-plane",
            extra=["--kubeconfig", str(kubeconfig), *election_args(timings)],
            env=env,
        )
    )
    return Replica(name, running)


def admit_work(replica: Replica) -> dict[str, Any]:
    """Every replica, leader or not, answers the Work webhook."""
    work = {
        "apiVersion": "work.karmada.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": "w", "namespace": "karmada-es-eu-central"},
        "spec": {"workload": {"manifests": []}},
    }
    review = wrap(work, "CREATE", None, 1)  # as kube-apiserver would send it
    client = replica.running.client(timeout=10)
    try:
        return client.admit(review, "/mutate-work")
    finally:
        client.close()


@dataclass(frozen=True)
class HandOver:
    kill_at: float
    acquired_at: float  # the successor's Lease write
    first_capture_at: float  # the successor's first record patch after the signal
    changes_during_gap: int
    holders: tuple[str, ...]  # every Lease holder in order, before the survivors were stopped


def run_hand_over(
    tmp: Path,
    how: signal.Signals,
    bindings: int = 40,
    timings: tuple[str, str, str] = FAST,
    pace: float = 0.05,
) -> HandOver:
    """``bindings`` each change once, one every ``pace`` seconds; the leader gets ``how`` after a quarter."""
    certs = generate_certs(tmp / "certs")
    server = fakeapi.start()
    fake = server.fake
    template = binding_template()
    for i in range(bindings):
        fake.upsert(make_binding(template, i, job_id(i, 1)))
    kubeconfig = server.kubeconfig(tmp / "kubeconfig")
    try:
        with ExitStack() as stack:
            first = start_replica(stack, tmp, certs, kubeconfig, "replica-a", timings)
            assert fake.wait_for(lambda: bool(fake.lease_holder(NS, LEASE)), 30), first.running.logs()
            second = start_replica(stack, tmp, certs, kubeconfig, "replica-b", timings)
            replicas = [first, second]
            leader = next(r for r in replicas if r.owns(fake.lease_holder(NS, LEASE)))
            follower = next(r for r in replicas if r is not leader)
            for r in replicas:
                assert admit_work(r)["response"]["allowed"] is True
            names = [f"job-{i:03d}-flinkdeployment" for i in range(bindings)]
            assert fake.wait_for(
                lambda: all(captured_job(fake, n) == job_id(i, 1) for i, n in enumerate(names))
            )

            # A stream of changes: each binding's job restarts once under a new jobId.
            kill_at = 0.0
            changed_at: dict[int, float] = {}
            for i in range(bindings):
                if i == bindings // 4:
                    kill_at = time.monotonic()
                    os.killpg(leader.running.process.pid, how)
                fake.upsert(make_binding(template, i, job_id(i, 2)))
                changed_at[i] = time.monotonic()
                time.sleep(pace)
            assert fake.wait_for(
                lambda: all(captured_job(fake, n) == job_id(i, 2) for i, n in enumerate(names)), 60
            ), follower.running.logs()
            assert admit_work(follower)["response"]["allowed"] is True  # still serving
            if how == signal.SIGTERM:
                leader.running.process.wait(30)
            acquired = [t for t, holder in fake.holders if follower.owns(holder)]
            after = [p.at for p in fake.patch_log if p.at > kill_at and follower.owns(writer(p))]
            gap = acquired[0] if acquired else 0.0
            result = HandOver(
                kill_at,
                gap,
                min(after) if after else 0.0,
                sum(1 for i, t in changed_at.items() if kill_at <= t <= gap),
                tuple(h for _, h in fake.holders),
            )
            check_single_writer(fake, replicas, kill_at)
            return result
    finally:
        server.stop()


def writer(patch: fakeapi.PatchSeen) -> str:
    """The identity the server put into its User-Agent."""
    match = IDENTITY.search(patch.user_agent)
    return match.group("identity") if match else ""


def check_single_writer(fake: fakeapi.FakeKarmada, replicas: list[Replica], kill_at: float) -> None:
    """Every record patch came from the process that held the Lease when the API server received it."""
    assert fake.patch_log
    for patch in fake.patch_log:
        assert writer(patch), patch.user_agent
        assert patch.holders == (writer(patch),), (patch.user_agent, patch.holders)
    identities = {h for _, h in fake.holders if h}
    assert len(identities) == 2 and {r.name for r in replicas} == {i.split("_")[0] for i in identities}
