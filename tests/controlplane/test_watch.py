"""The capture loop against a local server speaking the Kubernetes list/watch protocol."""

from __future__ import annotations

import contextlib
import copy
import json
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import fakeapi
from tests.controlplane import support as s
from tests.controlplane.loop import Loop
from tests.support.production import wait_for
from webhook.common.admission import review
from webhook.common.kubeclient import ClientConfig
from webhook.controlplane.audit import WorkAudit
from webhook.controlplane.handler import WorkHandler, internal_error
from webhook.controlplane.karmada import KarmadaApi
from webhook.controlplane.lookup import BindingCache, Found, FreshLookup, LookupFailed, NotFound
from webhook.controlplane.record import BindingRecord
from webhook.policy.restore import RestorePolicy

pytestmark = pytest.mark.shared

KEY = "flink-failover.io/last-known-state"
NS, NAME = "analytics", "orders-flinkdeployment"
BINDING_PATH = f"/apis/work.karmada.io/v1alpha2/namespaces/{NS}/resourcebindings/{NAME}"


@pytest.fixture
def running(tmp_path: Path) -> Iterator[fakeapi.RunningFake]:
    server = fakeapi.start()
    yield server
    server.stop()


def _lists(server: fakeapi.RunningFake) -> int:
    return sum(
        1
        for r in server.fake.requests
        if r.startswith("GET") and "resourcebindings?" in r and "watch=" not in r
    )


def _persisted(server: fakeapi.RunningFake, predicate: Any) -> bool:
    def check() -> bool:
        obj = server.fake.objects.get((NS, NAME))
        raw = obj and obj["metadata"].get("annotations", {}).get(KEY)
        parsed = BindingRecord.loads(raw) if raw else None
        return isinstance(parsed, BindingRecord) and bool(predicate(parsed))

    return server.fake.wait_for(check)


def test_capture_persists_the_record_only_when_it_changes(
    running: fakeapi.RunningFake, tmp_path: Path, shared_data: Path
) -> None:
    before = s.binding(shared_data, "scenA/rb-before-failure.json")
    running.fake.upsert(before)
    with Loop(running, tmp_path) as loop:
        assert _persisted(running, lambda r: r.cluster("member1").job_id == s.JOB_A)
        assert loop.caught_up()
        assert len(running.fake.patches) == 1
        patch = running.fake.patches[0][2]
        assert list(patch) == ["metadata"] and list(patch["metadata"]) == ["annotations"]

        # Karmada refreshes the binding without any change we care about: no patch.
        refreshed = copy.deepcopy(before)
        refreshed["status"]["conditions"][1]["lastTransitionTime"] = "2026-11-29T14:01:50Z"
        running.fake.upsert(refreshed)
        assert loop.caught_up()
        assert len(running.fake.patches) == 1

        # The failover: eviction task, new placement. One more patch, with the history.
        running.fake.upsert(s.binding(shared_data, "scenA/rb-after-failover.json"))
        assert _persisted(running, lambda r: r.placement == ("member2",))
        assert loop.caught_up()
        record = loop.record()
        assert [(e.type.value, e.from_clusters, e.reason) for e in record.history] == [
            ("Eviction", ("member1",), "TaintUntolerated"),
            ("Placement", ("member1",), "TaintUntolerated"),
        ]
        assert record.failover_count == 1
        assert record.cluster("member1").job_id == s.JOB_A
        assert len(running.fake.patches) == 2
        # The record survived Karmada's update of the binding (annotations merged).
        assert (
            running.fake.get(NS, NAME)["metadata"]["annotations"]["propagationpolicy.karmada.io/name"]
            == "orders-pp"
        )


def test_410_gone_relists(running: fakeapi.RunningFake, tmp_path: Path, shared_data: Path) -> None:
    running.fake.upsert(s.binding(shared_data, "scenA/rb-before-failure.json"))
    with Loop(running, tmp_path) as loop:
        assert loop.caught_up()
        lists_before = _lists(running)
        # The failover happens and etcd compacts before any watch delivered it: only a relist sees it.
        running.fake.upsert_unseen(s.binding(shared_data, "scenA/rb-after-failover.json"))
        assert _persisted(running, lambda r: r.failover_count == 1)
        assert loop.watcher.restarts.get("gone", 0) >= 1
        assert _lists(running) > lists_before
        assert loop.caught_up()


def test_dropped_connection_mid_stream_reconnects_without_relisting(
    running: fakeapi.RunningFake, tmp_path: Path, shared_data: Path
) -> None:
    before = s.binding(shared_data, "scenA/rb-before-failure.json")
    running.fake.upsert(before)
    running.fake.drop_watch_after = 1  # the first watch delivers one event, then the connection breaks
    with Loop(running, tmp_path) as loop:
        assert running.fake.wait_for(lambda: running.fake.watches_started >= 1)
        assert loop.caught_up()  # the record patch (one event) went through the first watch
        running.fake.upsert(s.binding(shared_data, "scenA/rb-after-failover.json"))
        assert _persisted(running, lambda r: r.failover_count == 1)
        assert loop.caught_up()
        assert loop.watcher.restarts.get("disconnected", 0) >= 1
        assert running.fake.watches_started >= 2
    assert _lists(running) == 1


def test_api_unavailable_at_start_is_retried(
    running: fakeapi.RunningFake, tmp_path: Path, shared_data: Path
) -> None:
    running.fake.upsert(s.binding(shared_data, "scenA/rb-before-failure.json"))
    running.fake.fail_next_lists = 2
    with Loop(running, tmp_path) as loop:
        assert loop.watcher.restarts["list-failed"] == 2
        assert _persisted(running, lambda r: r.cluster("member1").job_id == s.JOB_A)


def test_restart_rebuilds_from_the_annotation(
    running: fakeapi.RunningFake, tmp_path: Path, shared_data: Path
) -> None:
    """Capture sees the job run on member1, then stops; the failover happens while it is away and the
    old Work is gone first (no member1 status, task expired): the restarted loop still knows the job."""
    running.fake.upsert(s.binding(shared_data, "scenA/rb-before-failure.json"))
    with Loop(running, tmp_path) as first:
        assert _persisted(running, lambda r: r.cluster("member1").job_id == s.JOB_A)
        assert first.caught_up()
    final = s.binding(shared_data, "scenA/rb-final.json")
    running.fake.upsert(final)
    assert running.fake.annotation(NS, NAME, KEY) is not None

    with Loop(running, tmp_path) as second:
        assert second.cache.get(NS, NAME) is not None
        assert _persisted(running, lambda r: r.placement == ("member2",))
        record = second.record()
        assert record.cluster("member1").job_id == s.JOB_A
        assert record.history[-1].from_clusters == ("member1",) and record.history[-1].to_clusters == (
            "member2",
        )
        # And the webhook of the restarted component answers from its cache: a relocation that labels
        # the workload is what no staleness can turn into an empty start (handler.FROM_CACHE).
        policy = RestorePolicy()
        handler = WorkHandler(FreshLookup(second.cache, second.api, policy.contract), policy.contract)
        work = s.flink_work(shared_data, "scenA/works-member2-final.json", NAME)
        requests_before = len(running.fake.requests)
        _, response = review(s.admission_review(work), handler, internal_error)
        assert response.decision == "injected"
        assert isinstance(response.audit, WorkAudit) and response.audit.manifests[0].job_id == s.JOB_A
        assert response.audit.manifests[0].binding_from == "cache"
        _, again = review(s.admission_review(work), handler, internal_error)
        assert again.patch == response.patch
        # No GET for either admission. (The capture loop's own watch requests, re-opened every second
        # here, interleave on a busy machine: not the webhook's.)
        made = [r for r in running.fake.requests[requests_before:] if "watch=" not in r and "PATCH" not in r]
        assert made == []


def test_deleted_binding_leaves_the_cache(
    running: fakeapi.RunningFake, tmp_path: Path, shared_data: Path
) -> None:
    running.fake.upsert(s.binding(shared_data, "scenA/rb-before-failure.json"))
    with Loop(running, tmp_path) as loop:
        assert loop.cache.get(NS, NAME) is not None
        running.fake.delete(NS, NAME)
        assert loop.caught_up()
        assert loop.cache.get(NS, NAME) is None


def test_pagination_and_non_flink_bindings(
    running: fakeapi.RunningFake, tmp_path: Path, shared_data: Path
) -> None:
    base = s.binding(shared_data, "scenA/rb-before-failure.json")
    for i in range(5):
        obj = copy.deepcopy(base)
        obj["metadata"]["name"] = f"orders{i}-flinkdeployment"
        running.fake.upsert(obj)
    deployment = copy.deepcopy(base)
    deployment["metadata"]["name"] = "web-deployment"
    deployment["spec"]["resource"] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "web",
        "namespace": NS,
    }
    running.fake.upsert(deployment)
    with Loop(running, tmp_path, list_page=2) as loop:
        assert len(loop.cache) == 5
        assert running.fake.wait_for(lambda: len(running.fake.patches) == 5)
        assert loop.caught_up()
        assert all(name != "web-deployment" for _, name, _ in running.fake.patches)
        assert KEY not in running.fake.get(NS, "web-deployment")["metadata"].get("annotations", {})


def test_cache_miss_falls_back_to_get(
    running: fakeapi.RunningFake, tmp_path: Path, shared_data: Path
) -> None:
    running.fake.upsert(s.binding(shared_data, "scenA/rb-after-failover.json"))
    api = KarmadaApi.connect(
        ClientConfig(kubeconfig=str(running.kubeconfig(tmp_path / "kc")), request_timeout=5.0)
    )
    assert isinstance(api, KarmadaApi)
    lookup = FreshLookup(BindingCache(), api, RestorePolicy().contract)
    found = lookup.lookup(NS, NAME)
    assert isinstance(found, Found) and found.source == "api" and found.binding.clusters == ("member2",)
    assert isinstance(lookup.lookup(NS, "missing-flinkdeployment"), NotFound)
    running.fake.fail_next_gets = 1
    failed = lookup.lookup(NS, NAME)
    assert isinstance(failed, LookupFailed) and "503" in failed.message
    # The webhook refuses the Flink Work retriably when the binding cannot be read fresh.
    policy = RestorePolicy()
    work = s.flink_work(shared_data, "scenA/works-member2-final.json", NAME)
    running.fake.fail_next_gets = 1
    _, response = review(s.admission_review(work), WorkHandler(lookup, policy.contract), internal_error)
    assert not response.allowed and response.code == 503 and not response.patch
    assert response.decision == "binding-unavailable" and "etcd is not ready" in response.message
    # Nothing listening at all.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dead = tmp_path / "dead"
    dead.write_text(
        running.kubeconfig(tmp_path / "kc2").read_text().replace(running.url, f"http://127.0.0.1:{port}")
    )
    dead_api = KarmadaApi.connect(ClientConfig(kubeconfig=str(dead), request_timeout=2.0))
    assert isinstance(dead_api, KarmadaApi)
    refused = FreshLookup(BindingCache(), dead_api, policy.contract).lookup(NS, NAME)
    assert isinstance(refused, LookupFailed)


def test_failed_patch_is_retried(running: fakeapi.RunningFake, tmp_path: Path, shared_data: Path) -> None:
    running.fake.upsert(s.binding(shared_data, "scenA/rb-before-failure.json"))
    running.fake.fail_next_patches = 2
    with Loop(running, tmp_path):
        assert _persisted(running, lambda r: r.cluster("member1").job_id == s.JOB_A)
    assert running.fake.fail_next_patches == 0
    patches = [r for r in running.fake.requests if r.startswith("PATCH")]
    assert len(patches) >= 3  # two refused, then the retry that landed


def test_bookmarks_and_error_events(running: fakeapi.RunningFake, tmp_path: Path, shared_data: Path) -> None:
    running.fake.upsert(s.binding(shared_data, "scenA/rb-before-failure.json"))
    with Loop(running, tmp_path) as loop:
        assert loop.caught_up()
        running.fake.bookmark()
        assert loop.caught_up()  # the bookmark's version is where the next watch resumes
        running.fake.error_event(500, "internal error")
        running.fake.upsert(s.binding(shared_data, "scenA/rb-after-failover.json"))
        assert _persisted(running, lambda r: r.failover_count == 1)
        assert loop.watcher.restarts.get("error-event", 0) >= 1
        assert "gone" not in loop.watcher.restarts


def test_events_are_handled_while_the_stream_is_open(
    running: fakeapi.RunningFake, tmp_path: Path, shared_data: Path
) -> None:
    """A watch lasts minutes in production: events must be acted on as they arrive, not at its end."""
    running.fake.upsert(s.binding(shared_data, "scenA/rb-before-failure.json"))
    with Loop(running, tmp_path, watch_timeout=30) as loop:
        assert loop.caught_up()
        assert running.fake.wait_for(lambda: running.fake.open_watches == 1)
        running.fake.upsert(s.binding(shared_data, "scenA/rb-after-failover.json"))
        assert _persisted(running, lambda r: r.failover_count == 1)
        assert running.fake.watches_started == 1  # still the first watch
        assert running.fake.patched_while_watching[-1] is True


@contextlib.contextmanager
def _two_loops(running: fakeapi.RunningFake, tmp_path: Path) -> Iterator[tuple[Loop, Loop]]:
    """Two capture loops on one API server, b's clock an hour ahead of a's."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        Loop(running, tmp_path / "a") as a,
        Loop(running, tmp_path / "b", clock_offset=timedelta(hours=1)) as b,
    ):
        yield a, b


def test_two_capturing_instances_converge(
    running: fakeapi.RunningFake, tmp_path: Path, shared_data: Path
) -> None:
    """A rollout (or two gunicorn workers) briefly runs two capture loops with different clocks: they
    must settle on one record instead of overwriting each other forever."""
    running.fake.upsert(s.binding(shared_data, "scenA/rb-before-failure.json"))
    with _two_loops(running, tmp_path) as (a, b):
        fake = running.fake

        def converged(done: Callable[[BindingRecord], bool]) -> bool:
            """Both handled every event (the echoes of every patch too) and persisted what they decided,
            both hold the persisted record, and it shows ``done``: what only the change can make true.
            (Both being quiet alone held between an event and the patch it caused.)"""
            if not (a.settled() and b.settled()):
                return False
            raw = fake.annotation(NS, NAME, KEY)
            record = BindingRecord.loads(raw) if raw else None
            entries = (a.cache.get(NS, NAME), b.cache.get(NS, NAME))
            return (
                isinstance(record, BindingRecord)
                and done(record)
                and all(e is not None and e.record == record for e in entries)
            )

        assert fake.wait_for(lambda: converged(lambda r: r.cluster("member1").job_id == s.JOB_A))
        running.fake.upsert(s.binding(shared_data, "scenA/rb-after-failover.json"))
        assert fake.wait_for(lambda: converged(lambda r: r.failover_count == 1)), a.record()
        assert a.record().cluster("member1").job_id == s.JOB_A
        # A new job on member2: each loop dates it by its own clock, and both see it at once.
        running_on_2 = s.set_statuses(
            s.binding(shared_data, "scenA/rb-after-failover.json"),
            {"member1": s.flink_status(s.JOB_A), "member2": s.flink_status(s.JOB_B)},
        )
        fake.upsert(running_on_2)
        assert fake.wait_for(lambda: converged(lambda r: r.cluster("member2").job_id == s.JOB_B)), a.record()


def test_a_patch_answered_after_a_later_writers_event_leaves_the_cache_on_the_annotation(
    running: fakeapi.RunningFake, tmp_path: Path, shared_data: Path
) -> None:
    """Two capture loops record a new job on member2 at once. b's patch lands first and a's right after
    it, and b's watch delivers both events before b's patch is answered (the answer and the watch race
    on a real API server). The annotation is a's record: b must end up holding it, not its own record
    that nobody stored (it did until the writer checked what came in while its patch was out)."""
    running.fake.upsert(s.binding(shared_data, "scenA/rb-after-failover.json"))
    with _two_loops(running, tmp_path) as (a, b):
        fake = running.fake
        assert fake.wait_for(lambda: a.settled() and b.settled())
        b_stored, a_stored = threading.Event(), threading.Event()

        def member2_seen(body: dict[str, Any]) -> str:
            raw = body["metadata"]["annotations"][KEY]
            return str(json.loads(raw).get("clusters", {}).get("member2", {}).get("jobSeen", ""))

        def hook(phase: str, body: dict[str, Any]) -> None:
            seen = member2_seen(body)
            if phase == "before" and seen.startswith("2026-11-29T15:") and not a_stored.is_set():
                assert b_stored.wait(30), "b's patch never came"  # a's lands after b's
            elif phase == "after" and seen.startswith("2026-11-29T15:"):
                a_stored.set()
            elif phase == "after" and seen.startswith("2026-11-29T16:") and not b_stored.is_set():
                b_stored.set()
                # b's answer waits until b's watch has delivered a's patch as well
                assert wait_for(lambda: a_stored.is_set() and b.watcher.resource_version == str(fake.rv), 30)

        fake.patch_hook = hook
        fake.upsert(
            s.set_statuses(
                s.binding(shared_data, "scenA/rb-after-failover.json"),
                {"member1": s.flink_status(s.JOB_A), "member2": s.flink_status(s.JOB_B)},
            )
        )
        assert fake.wait_for(lambda: a_stored.is_set() and a.settled() and b.settled(), 60)
        raw = fake.annotation(NS, NAME, KEY)
        assert raw is not None
        persisted = BindingRecord.loads(raw)
        assert isinstance(persisted, BindingRecord)
        assert persisted.cluster("member2").job_id == s.JOB_B
        assert persisted.cluster("member2").job_seen.startswith("2026-11-29T15:")  # a's, the last patch
        b_entry, a_entry = b.cache.get(NS, NAME), a.cache.get(NS, NAME)
        assert a_entry is not None and a_entry.record == persisted
        assert b_entry is not None and b_entry.record == persisted, b_entry.record
