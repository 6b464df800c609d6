"""Gone means gone, for the heartbeat the member webhook writes at an admission (issue 45): a failover
CREATE admitted running heartbeats from its admission; once the CREATE has been persisted or refused the
served webhook looks at it again, and removes it when the object is not on its cluster and the record
is still the one it wrote. Without that, an object evicted (or refused) before the agent's first poll
left its heartbeat to its lease, and the job's next failover back waited that lease (``lease-expiry``).
Served for real (gunicorn, TLS, ``--cluster``) over a fake member API, on local files and moto's S3."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fsspec
import pytest
import yaml

from tests.controlplane import fakeapi
from tests.fencing.test_agent import Site
from tests.fencing.test_agent import local_site as local_site
from tests.fencing.test_agent import moto as moto
from tests.fencing.test_agent import site as site
from tests.support.objects import JOB_ID as JOB
from tests.support.objects import apply, decode_patch, flink_deployment, review
from tests.support.production import agent_polled, wait_for
from tests.support.server import RunningServer, generate_certs, serve
from webhook.common.paths import StoragePath
from webhook.fencing.admitted import MAX_LOOKS, Admitted, Outcome, Seen, again, delay, judge
from webhook.fencing.layout import Workload
from webhook.fencing.records import heartbeat_body

P = "flink-failover.io"
RECORDS = "flink-failover/analytics/flinkdeployment/orders"
COUNTER = "flink_failover_fencing_admission_heartbeats_total"

# --- the decision (pure) ---------------------------------------------------------------------------------

WORKLOAD = Workload("FlinkDeployment", "analytics", "orders")
WRITTEN = heartbeat_body(WORKLOAD, "member1", 3, "", "2026-12-07T19:00:00Z")
ADMITTED = Admitted("FlinkDeployment", "analytics", "orders", StoragePath.parse("/c/" + RECORDS), WRITTEN)


@pytest.mark.parametrize(
    ("seen", "outcome"),
    [
        (Seen(False, dict(WRITTEN)), Outcome.REMOVED),
        (Seen(True, dict(WRITTEN)), Outcome.PRESENT),  # the agent heartbeats it from its next poll
        # the agent renewed it (its jobId, a later time), or a later admission wrote its own
        (Seen(False, heartbeat_body(WORKLOAD, "member1", 3, JOB, "2026-12-07T19:00:05Z")), Outcome.REWRITTEN),
        (Seen(False, heartbeat_body(WORKLOAD, "member1", 4, "", "2026-12-07T19:00:00Z")), Outcome.REWRITTEN),
        (Seen(False, None), Outcome.GONE),
        (Seen(None, error="member cluster: connection refused"), Outcome.ERROR),
        (Seen(False, error="listing: timed out"), Outcome.ERROR),  # the record unread: never removed
    ],
)
def test_only_the_admissions_own_record_of_an_absent_object_goes(seen: Seen, outcome: Outcome) -> None:
    assert judge(ADMITTED, seen) is outcome


def test_the_look_waits_out_the_admission_and_one_poll_within_half_a_lease() -> None:
    assert delay(5.0, 5.0, 30.0) == 10.0  # the defaults: the chart's default webhook timeout (5 + 5 s)
    assert delay(10.0, 5.0, 300.0) == 15.0
    assert delay(30.0, 5.0, 30.0) == 15.0  # half a lease at most: a failover back waits at most that


def test_a_look_that_could_not_tell_is_made_again_until_the_lease_is_out() -> None:
    assert again(1, 10.0, 5.0, 30.0) == 5.0  # one poll after the first look
    assert again(2, 15.0, 5.0, 30.0) == 10.0  # then doubling
    assert again(3, 25.0, 5.0, 30.0) is None  # 25 + 20 s is past the lease: the agent's rules hold
    assert [again(n, 0.0, 0.5, 300.0) for n in range(1, MAX_LOOKS + 1)] == [0.5, 1.0, 2.0, 4.0, 8.0, None]


# --- served -----------------------------------------------------------------------------------------------


def _policy(tmp_path: Path, site: Site) -> Path:
    path = tmp_path / "policy.yaml"
    doc: dict[str, Any] = {
        "defaultCheckpointDir": site.root,
        "deadlineSeconds": 5,
        "fencing": {"leaseSeconds": 300, "pollSeconds": 0.5},
    }
    if site.options:
        doc["storageOptions"] = site.options
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _heartbeat(site: Site) -> tuple[Any, str]:
    """The filesystem and path of member1's heartbeat, read as the test's own client (no cache)."""
    path = StoragePath.parse(f"{site.root}/{RECORDS}/heartbeat-member1.json")
    options = dict(site.options.get(path.protocol, {}))
    return fsspec.filesystem(path.protocol, skip_instance_cache=True, **options), path.fs_path


def _exists(site: Site) -> bool:
    fs, path = _heartbeat(site)
    return bool(fs.exists(path))


def _looked(server: RunningServer, outcome: str) -> bool:
    metrics = server.client().request("GET", "/metrics")[1].decode()
    return f'{COUNTER}{{outcome="{outcome}"}} 1.0' in metrics


class Served:
    def __init__(self, server: RunningServer, member: fakeapi.RunningFake, log: Path) -> None:
        self.server, self.member, self.log = server, member, log

    def admit_running(self) -> dict[str, Any]:
        """A failover CREATE with no other copy heartbeating: admitted running, its heartbeat written."""
        obj = flink_deployment(
            labels={f"{P}/failover": "true", f"{P}/job-id": JOB},
            annotations={f"{P}/failover-count": "1", f"{P}/source-cluster": "member2"},
        )
        obj["spec"]["job"]["state"] = "running"
        answer = self.server.client().admit(review(obj))["response"]
        assert answer["allowed"], answer
        admitted = apply(obj, decode_patch(answer))
        assert admitted["spec"]["job"]["state"] == "running", admitted["metadata"].get("annotations")
        return admitted


@pytest.fixture
def served(tmp_path: Path, site: Site) -> Any:
    site.checkpoints([1, 2])
    member = fakeapi.start_member_cluster()
    try:
        kubeconfig = member.kubeconfig(tmp_path / "member1.kubeconfig")
        extra = ["--cluster", "member1", "--kubeconfig", str(kubeconfig), "--workers", "1"]
        certs = generate_certs(tmp_path / "certs")
        log = tmp_path / "server.log"
        with serve(certs, _policy(tmp_path, site), log, extra=extra) as server:
            assert wait_for(lambda: agent_polled(server))  # before that, restores are held for the agent
            yield Served(server, member, log)
    finally:
        member.stop()


def test_the_heartbeat_of_an_object_that_never_appears_is_removed(site: Site, served: Served) -> None:
    # The CREATE admitted running, then refused later in admission (or evicted at once): the member API
    # never has the object, so the agent never lists it.
    served.admit_running()
    assert _exists(site)  # written at the admission: a failover that follows now waits for it
    # before: it stayed until its lease (300 s here) ran out
    assert wait_for(lambda: not _exists(site), 60), "the admission's heartbeat is still there"
    assert wait_for(lambda: _looked(served.server, "removed"), 60)
    said = [json.loads(line) for line in served.log.read_text().splitlines() if "looked at again" in line]
    # a look that could not tell (a member API or storage past the look's deadline on a loaded
    # machine) says "error" and is made again: only the last removes, and nothing else is said
    assert {s["object"] for s in said} == {"FlinkDeployment/analytics/orders"}, said
    assert [s["outcome"] for s in said][-1] == "removed", said
    assert {s["outcome"] for s in said[:-1]} <= {"error"}, said


def _count(server: RunningServer, outcome: str) -> float:
    metrics = server.client().request("GET", "/metrics")[1].decode()
    prefix = f'{COUNTER}{{outcome="{outcome}"}} '
    return sum(float(line.removeprefix(prefix)) for line in metrics.splitlines() if line.startswith(prefix))


@pytest.mark.parametrize("site", ["file"], indirect=True)
def test_a_member_api_slower_than_the_deadline_is_asked_again_and_the_heartbeat_then_goes(
    site: Site, served: Served
) -> None:
    # a busy member API: each GET answers after the look's deadline (one poll, 0.5 s here)
    served.member.fake.latency["GET"] = (2.0, 0.0)
    served.admit_running()
    assert wait_for(lambda: _count(served.server, "error") >= 1, 60)
    assert _exists(site)  # could not tell: nothing removed
    served.member.fake.latency.pop("GET")
    assert wait_for(lambda: not _exists(site), 60), "the admission's heartbeat is still there"
    assert wait_for(lambda: _looked(served.server, "removed"), 60)


@pytest.mark.parametrize("site", ["file"], indirect=True)
def test_the_heartbeat_of_an_object_on_the_cluster_is_kept(site: Site, served: Served) -> None:
    served.member.fake.upsert(served.admit_running())  # persisted: the agent owns it from its next poll
    assert wait_for(lambda: _looked(served.server, "present"), 60)
    assert _exists(site)


@pytest.mark.parametrize("site", ["file"], indirect=True)
def test_a_heartbeat_rewritten_since_the_admission_is_kept(site: Site, served: Served) -> None:
    served.admit_running()
    renewed = heartbeat_body(WORKLOAD, "member1", 1, JOB, "2099-01-01T00:00:00Z")  # as a renewal writes
    fs, path = _heartbeat(site)
    fs.pipe_file(path, json.dumps(renewed).encode())
    assert wait_for(lambda: _looked(served.server, "rewritten"), 60)
    assert _exists(site) and json.loads(fs.cat_file(path)) == renewed


# --- the edge, called directly ----------------------------------------------------------------------------


def test_a_member_api_that_does_not_answer_leaves_the_heartbeat_to_its_lease(tmp_path: Path) -> None:
    from webhook.common.kubeclient import ClientConfig
    from webhook.fencing.records import FencingStore
    from webhook.member.followup import AdmittedHeartbeats
    from webhook.policy.restore import FencingPolicy, RestorePolicy
    from webhook.restore.storage.search import CheckpointStorage

    gone = fakeapi.start_member_cluster()
    kubeconfig = gone.kubeconfig(tmp_path / "member1.kubeconfig")
    gone.stop()  # nothing answers there any more
    folder = StoragePath.parse(str(tmp_path / "checkpoints" / RECORDS))
    store = FencingStore(CheckpointStorage(), "member1")
    store.beat(folder, WRITTEN, 5.0)
    policy = RestorePolicy(fencing=FencingPolicy(lease_seconds=300, poll_seconds=0.5))
    looks = AdmittedHeartbeats(ClientConfig(str(kubeconfig)), policy)
    admitted = Admitted("FlinkDeployment", "analytics", "orders", folder, WRITTEN)
    assert looks.look(store, admitted) is Outcome.ERROR
    assert (tmp_path / "checkpoints" / RECORDS / "heartbeat-member1.json").exists()
