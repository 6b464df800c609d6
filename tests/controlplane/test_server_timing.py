"""The recorded failovers through the real server (gunicorn, TLS) against a fake Karmada API whose watch
is late: GET serves a write at once, its watch event comes hundreds of ms later (or not before the test
releases it), as in tests/fixtures/karmada-observed/. No assertion depends on how fast the machine is:
where an order matters, the watch is held until the answer is in.
"""

from __future__ import annotations

import base64
import itertools
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from tests.controlplane import fakeapi
from tests.controlplane import recorded as r
from tests.controlplane import support as s
from tests.controlplane.server import NS, Server, ours, review_offline, stored_record, wait_record

pytestmark = [pytest.mark.slow]

J_RACE = "7b53faafa334fcbcb8092450d29784f6"
J_HOME = "19d073578ceb25b2cdfc76aba64510ab"


def _rv(step: r.Step) -> int:
    return int(step.obj["metadata"]["resourceVersion"])


def _patched(work: dict[str, Any], review: dict[str, Any]) -> dict[str, Any]:
    response = review["response"]
    if "patch" not in response:
        return work
    patched: dict[str, Any] = jsonpatch.apply_patch(work, json.loads(base64.b64decode(response["patch"])))
    return patched


def test_gracefully_race_with_a_late_watch_injects_and_counts_once(
    karmada: fakeapi.RunningFake, certs: Path, tmp_path: Path
) -> None:
    fake = karmada.fake
    fake.watch_lag = 0.3  # every watch event arrives 300 ms after its write; GET sees it at once
    name = "orders-c-flinkdeployment"
    start, steps = r.replay_now(
        "gracefully-race", r.binding("gracefully-race/rb-0-before-eviction.json"), "07:14:44.980"
    )
    work = r.work_create("gracefully-race/work-create-member2.audit.json")
    fake.upsert(r.running_before(start, "member1"))
    server = Server(karmada.kubeconfig(tmp_path / "kubeconfig"), certs, tmp_path)
    try:
        server.wait_ready()
        wait_record(fake, name, lambda rec: rec.cluster("member1").job_id == J_RACE)
        # The eviction (spec.clusters emptied, task without creationTimestamp) reaches capture...
        for step in steps:
            if _rv(step) <= 2350:
                fake.upsert(step.obj)
        wait_record(fake, name, lambda rec: rec.open_evictions == (("member1", ""),))
        # ...the scheduler's move does not, before the Work CREATE arrives.
        fake.hold_watch()
        moved = next(step for step in steps if _rv(step) == 2352)
        fake.upsert(moved.obj)
        answered = server.admit(work)
        labels, annotations = ours(answered, work)
        assert labels == {"failover": "true", "job-id": J_RACE}
        assert annotations["source-cluster"] == "member1" and annotations["reason"] == "ApplicationFailure"
        assert annotations["failover-count"] == "1"
        before_move = stored_record(fake, name)
        assert before_move is not None and before_move.placement == ("member1",)  # capture had not seen it
        # The rest of the failover, the task's stamp included, then Karmada's re-apply of the template.
        fake.release_watch()
        for step in steps:
            if _rv(step) > 2352:
                fake.upsert(step.obj)
        wait_record(
            fake,
            name,
            lambda rec: (
                rec.placement == ("member2",)
                and len(rec.open_evictions) == 1
                and rec.open_evictions[0][1] != ""
            ),
        )
        again = server.admit(work, "UPDATE", old=_patched(work, answered))
        assert ours(again, work) == (labels, annotations)
        final = stored_record(fake, name)
        assert final is not None and final.failover_count == 1
        # Quiet capture: one patch per change of the record, never the same record twice in a row.
        bodies = [
            body["metadata"]["annotations"]["flink-failover.io/last-known-state"] for *_, body in fake.patches
        ]
        assert all(a != b for a, b in itertools.pairwise(bodies))
        assert len(bodies) <= 6, bodies
    finally:
        server.stop()
    # The offline tool answers the same Work the same way from the binding as stored now.
    offline = review_offline(tmp_path, [fake.get(NS, name)], s.admission_review(work))
    assert ours(offline, work) == (labels, annotations)


def test_return_to_previous_cluster_through_the_server_andreview_offline(
    karmada: fakeapi.RunningFake, certs: Path, tmp_path: Path
) -> None:
    fake = karmada.fake
    fake.watch_lag = 0.2
    name = "orders-d-flinkdeployment"
    start, steps = r.replay_now(
        "return-to-previous", r.binding("return-to-previous/rb-1-before-first-failover.json"), "07:17:11.034"
    )
    work = r.work_create("return-to-previous/work-create-member1-return.audit.json")
    fake.upsert(start)
    server = Server(karmada.kubeconfig(tmp_path / "kubeconfig"), certs, tmp_path)
    try:
        server.wait_ready()
        wait_record(fake, name, lambda rec: rec.cluster("member1").job_id == J_HOME)
        for step in steps:
            if _rv(step) == 2836:
                # Capture saw everything before the move back (as in the recording), then the move is
                # served by GET only: the Work arrives before any watch has it.
                wait_record(fake, name, lambda rec: [c for c, _ in rec.open_evictions] == ["member2"])
                fake.hold_watch()
            fake.upsert(step.obj)
            if _rv(step) == 2836:
                answered = server.admit(work)
                fake.release_watch()
        labels, annotations = ours(answered, work)
        assert labels == {"failover": "true", "job-id": J_HOME}
        assert annotations["source-cluster"] == "member1"
        assert annotations["failover-count"] == "2"
        wait_record(fake, name, lambda rec: rec.placement == ("member1",) and rec.failover_count == 2)
    finally:
        server.stop()
    offline = review_offline(tmp_path, [fake.get(NS, name)], s.admission_review(work))
    assert ours(offline, work) == (labels, annotations)
