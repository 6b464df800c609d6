"""One running copy the way production fails, with production's timing (issue 21's six cases).

Two member clusters, each a fake API server with the product's member role served for real (gunicorn,
TLS, ``--cluster``), one storage holding checkpoints and ownership records, member1's role reaching it
through a TCP proxy that can be cut or slowed, and each cluster's Flink operator played faithfully
(``tests/support/operator.py``): a job asked to stop stays RUNNING by its status, reading, writing and
checkpointing, until the stop completes. The jobs' own checkpoints go straight to the storage (a job's
storage path is its own; only the role loses it).

The storage is each backend the policy accepts, on a real server of it (tests/support/backends.py): S3
on moto, Google Cloud Storage on gcp-storage-emulator, Azure Blob on Azurite, and local files where the
case has no cut storage in it (a local directory cannot be cut). S3 runs every case; to keep the unit
tier within its budget, GCS and Azure run the two a failover's safety rests on (both reach storage; the
holder loses its storage and steps down), and local files run both-reach.

Counted exactly, not timed: the seconds both jobs are RUNNING by their status (from the operator
doubles' own transitions) and the old job's checkpoints newer than the one the new job started from.
Both must be zero whatever the machine's load: the new job starts only after the old job's operator
reported it stopped (an ack) or after a lease its holder provably stepped down within.

Times are scaled down from the defaults (lease 30 s, deadline 10 s, poll 5 s, stop margin 10 s) so the
suite stays short; ``bench/fencing_faults.py`` runs the same cases at production scale.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.backends import Running
from tests.support.production import (
    Production,
    Timings,
    kill,
    start_pair,
    start_replicas,
    stop_asked,
    wait_for,
)
from tests.support.production import production as production_pair

P = "flink-failover.io"
LEASE, POLL, DEADLINE, MARGIN = 16, 1, 4, 10  # deadline + poll + margin + one poll of slack = lease


@pytest.fixture
def stop_seconds() -> float:
    return 3.0


@pytest.fixture
def production(storage_backend: Running, tmp_path: Path, stop_seconds: float) -> Iterator[Production]:
    timings = Timings(LEASE, POLL, DEADLINE, MARGIN, stop_seconds)
    with production_pair(storage_backend, tmp_path, timings) as world:
        yield world


def backends(*names: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("storage_backend", names, indirect=True)


@pytest.mark.parametrize(
    ("storage_backend", "stop_seconds"),
    [
        pytest.param("s3", 3.0, id="s3-stop-3s"),
        pytest.param("s3", 6.0, id="s3-stop-6s"),
        pytest.param("gcs", 3.0, id="gcs-stop-3s"),
        pytest.param("azure", 3.0, id="azure-stop-3s"),
        pytest.param("file", 3.0, id="file-stop-3s"),
    ],
    indirect=["storage_backend"],
)
def test_both_sides_reach_storage_the_new_job_starts_after_the_old_one_stopped(
    production: Production,
) -> None:
    p = production
    _, two = start_pair(p)
    admitted = p.fail_over(two)
    assert admitted["spec"]["job"]["state"] == "suspended"
    p.check_one_running_copy()
    assert p.released_cause().startswith("ack at "), p.released_cause()
    assert "ack-000000000001-member1.json" in p.record_names()


# Slowed on S3 only: gcp-storage-emulator serves one request at a time (http.server's HTTPServer), so a
# connection slowed by the proxy stalls every client of it, member2's too, as no real GCS would.
@pytest.mark.parametrize(
    ("storage_backend", "fault"),
    [("s3", "cut"), ("s3", "slow"), ("gcs", "cut"), ("azure", "cut")],
    indirect=["storage_backend"],
)
def test_a_holder_that_loses_its_storage_steps_down_before_the_lease_runs_out(
    production: Production, fault: str
) -> None:
    p = production
    _, two = start_pair(p)
    jobs = len(p.operator1.jobs)  # more than one where a loaded machine made member1 step down before
    if fault == "cut":
        p.cut()
    else:
        p.slow(3 * POLL)  # every answer later than the agent's deadline
    p.fail_over(two)
    assert wait_for(lambda: f"{P}/stepped-down" in p.obj(p.member1)["metadata"].get("annotations", {}))
    stepped = p.obj(p.member1)
    assert stepped["spec"]["job"]["state"] == "suspended"
    assert stepped["spec"]["job"]["upgradeMode"] == "stateless"  # no savepoint on the way down
    p.check_one_running_copy()
    assert p.released_cause().startswith("lease-expiry at "), p.released_cause()
    # The storage answers again: member1 sees it was taken over, stays stopped and acknowledges.
    p.heal()
    assert wait_for(lambda: "ack-000000000001-member1.json" in p.record_names())
    assert p.obj(p.member1)["spec"]["job"]["state"] == "suspended"
    assert len(p.operator1.jobs) == jobs  # never resumed


@backends("s3")
def test_a_holder_whose_storage_comes_back_before_anyone_took_over_resumes_from_its_newest_checkpoint(
    production: Production,
) -> None:
    p = production
    start_pair(p)
    p.cut()
    assert wait_for(lambda: f"{P}/stepped-down" in p.obj(p.member1)["metadata"].get("annotations", {}))
    assert wait_for(lambda: all(job.ended is not None for job in p.operator1.jobs))
    jobs = len(p.operator1.jobs)  # more than one where a loaded machine made member1 step down before
    last = p.operator1.jobs[-1]
    newest = max(n for job in p.operator1.jobs for n, _ in job.checkpoints)
    p.heal()
    assert wait_for(lambda: len(p.operator1.jobs) == jobs + 1)  # resumed: a new job on member1
    resumed = p.obj(p.member1)
    job = resumed["spec"]["job"]
    assert job["state"] == "running" and job["upgradeMode"] == "savepoint"
    assert job["initialSavepointPath"] == f"{p.root}/{last.job_id}/chk-{newest}"
    assert job["savepointRedeployNonce"] == jobs
    assert f"{P}/stepped-down" not in resumed["metadata"].get("annotations", {})


@backends("s3")
def test_a_role_down_during_the_failover_stops_its_copy_when_it_restarts(production: Production) -> None:
    p = production
    with p.role("member1", p.member1, p.through):
        assert wait_for(lambda: "heartbeat-member1.json" in p.record_names())
    # member1's role is down now; its job runs on. Karmada fails the job over to member2.
    two = p.stack.enter_context(p.role("member2", p.member2, p.endpoint))
    assert p.fail_over(two)["spec"]["job"]["state"] == "suspended"
    assert p.operator2.jobs == []
    p.stack.enter_context(p.role("member1", p.member1, p.through))  # back within the lease
    p.check_one_running_copy()
    assert p.released_cause().startswith("ack at "), p.released_cause()


@backends("s3")
def test_a_deleted_old_copy_leaves_no_heartbeat_and_the_new_job_starts_at_once(
    production: Production,
) -> None:
    p = production
    _, two = start_pair(p)
    p.member1.fake.delete("analytics", "orders")
    assert wait_for(lambda: all(job.ended is not None for job in p.operator1.jobs))
    assert wait_for(lambda: "heartbeat-member1.json" not in p.record_names())
    admitted = p.fail_over(two)
    assert admitted["spec"]["job"]["state"] == "running"  # nobody to wait for
    p.check_one_running_copy()


@backends("s3")
def test_losing_one_of_two_replicas_mid_failover_costs_nothing(production: Production) -> None:
    """The chart runs two replicas of the member role, each with its agent: the one that asked the
    operator to stop the stale copy dies while the operator stops it; the other acknowledges the stop."""
    p = production
    (first, second), two = start_replicas(p)
    p.fail_over(two)
    assert wait_for(lambda: stop_asked(p))
    kill(first)  # SIGKILL, mid-failover: the copy is stopping (the operator takes its stop delay)
    p.check_one_running_copy()
    assert p.released_cause().startswith("ack at "), p.released_cause()
    assert second.process.poll() is None
