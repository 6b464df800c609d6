"""``flink-failover keeper`` run for real against real storage (local files, S3 on moto, through a TCP
proxy that can be cut), beside a stand-in JobManager process restarted as the kubelet restarts a
container (tests/support/keeper.py). Each test asserts the order of events (the stand-in's deaths, the
keeper's log, the storage's own times, what another cluster's fencing decides), never a duration;
every wait is bounded.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support.backends import Running
from tests.support.keeper import FAST, new_marker, policy_text, running_keeper, standin, wait_for
from tests.support.tcpproxy import TcpProxy
from webhook.common.paths import StoragePath
from webhook.fencing.lanes import Lanes
from webhook.fencing.layout import Workload, heartbeat_name
from webhook.fencing.protocol import HoldOutcome, ReleaseCause, judge_hold
from webhook.fencing.records import FOLDER, FencingStore, fence_body
from webhook.restore.storage.backends import modified_time
from webhook.restore.storage.search import CheckpointStorage

pytestmark = [pytest.mark.slow]

WORKLOAD = Workload("FlinkDeployment", "analytics", "orders")
LEASE = float(FAST["leaseSeconds"])


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    """What a test starts in its middle (a JobManager once the startup probe passes), stopped at its end."""
    with ExitStack() as started:
        yield started


def _folder(checkpoint_dir: str) -> StoragePath:
    return WORKLOAD.folder(StoragePath.parse(checkpoint_dir))


def _heartbeat(running: Running, checkpoint_dir: str) -> tuple[datetime, dict[str, object]]:
    """This cluster's heartbeat as the storage has it: its time (the end of its second on S3, as every
    reader counts it) and its body, read by the test's own client (not through the proxy)."""
    path = _folder(checkpoint_dir).child(heartbeat_name("member1")).fs_path
    entry = running.fs.info(path)
    modified = modified_time(entry)
    assert modified is not None
    if running.backend.scheme == "s3" and modified.microsecond == 0:
        modified = modified.replace() + (datetime.fromtimestamp(1, UTC) - datetime.fromtimestamp(0, UTC))
    return modified, json.loads(running.fs.cat_file(path))


def _other_cluster(running: Running) -> FencingStore:
    """member2's view of the same storage: its own client, as its member webhook and agent have."""
    return FencingStore(CheckpointStorage(running.storage_options()), "member2", Lanes(5.0))


def _release_time(store: FencingStore, checkpoint_dir: str, timeout: float) -> datetime:
    """Fence epoch 1 on member2 (a failover there), then judge the hold as member2's agent does, from its
    clock object's storage time, until it may release; the storage time of that first release."""
    folder = _folder(checkpoint_dir)
    store.fence(folder, 1, fence_body(WORKLOAD, "member2", 1, "test"))
    root = StoragePath.parse(checkpoint_dir).child(FOLDER)

    def released() -> datetime | None:
        now = store.clock(root)
        verdict = judge_hold("member2", 1, store.list(folder).ownership, now, LEASE)
        if verdict.outcome is HoldOutcome.RELEASE:
            assert verdict.cause is ReleaseCause.LEASE_EXPIRY
            return now
        return None

    found: datetime = wait_for(released, timeout, "member2's release")
    return found


@pytest.mark.parametrize("storage_backend", ["file", "s3"], indirect=True)
def test_ready_only_once_it_holds_the_lease_and_a_jobmanager_runs_on(
    storage_backend: Running, tmp_path: Path
) -> None:
    """The startup probe's answer: 503 until the keeper has listed the records and renewed this cluster's
    heartbeat (the agent's record, its body saying the keeper wrote it), then 200; a JobManager started
    then is not touched while the renewals go through."""
    ckpt = storage_backend.bucket() + "/checkpoints"
    marker = new_marker()
    policy = policy_text(storage_backend.storage_options())
    with running_keeper(tmp_path, policy, ckpt, marker) as keeper:
        held = keeper.wait_event("held", 20)
        assert keeper.ready() == 200 and keeper.healthy() == 200
        modified, body = _heartbeat(storage_backend, ckpt)
        assert body["writer"] == "keeper" and body["cluster"] == "member1" and body["epoch"] == 0
        assert not keeper.events("stopped")
        with standin(marker) as jm:
            wait_for(
                lambda: keeper.metric("flink_failover_keeper_jobmanager_running") == 1, 10, "the JM seen"
            )
            ok = keeper.metric("flink_failover_keeper_renewals_total", 'result="ok"')
            wait_for(
                lambda: keeper.metric("flink_failover_keeper_renewals_total", 'result="ok"') >= ok + 3,
                15,
                "3 renewals",
            )
            assert jm.alive and not jm.deaths and not keeper.events("stopped")
        later, _ = _heartbeat(storage_backend, ckpt)
        assert later > modified and held
        assert keeper.metric("flink_failover_keeper_storage_requests_total", 'call="list"') >= 1


def test_cut_from_its_storage_it_stops_the_jobmanager_before_another_cluster_may_start(
    proxied_s3: tuple[Running, TcpProxy], tmp_path: Path, stack: ExitStack
) -> None:
    """S3 cut between the keeper and its bucket while the JobManager runs: the JobManager is killed
    before member2 (a failover there) may count member1's lease as expired, every restart of it is
    killed while the lease is not held (not ready), and once the storage answers again the keeper sees
    member2's newer fence: it never renews again and never lets a JobManager run."""
    running, proxy = proxied_s3
    ckpt = running.bucket() + "/checkpoints"
    marker = new_marker()
    policy = policy_text(running.storage_options(running.via(proxy.port)))
    with running_keeper(tmp_path, policy, ckpt, marker) as keeper:
        keeper.wait_event("held", 20)  # the startup probe passes: the JobManager starts
        jm = stack.enter_context(standin(marker, restart=False))
        wait_for(lambda: keeper.metric("flink_failover_keeper_jobmanager_running") == 1, 10, "the JM seen")
        proxy.cut()
        cut_at = time.time()
        other = _other_cluster(running)
        released_at = _release_time(other, ckpt, 30)  # storage time, this machine's clock
        last_beat, _ = _heartbeat(running, ckpt)
        death = wait_for(lambda: jm.deaths[:1], 1, "the JM's death")[0]
        # the order: cut, the JM killed, the lease expiring on member2 (storage time: moto on this machine)
        assert cut_at < death.wall < released_at.timestamp()
        assert death.wall < last_beat.timestamp() + LEASE
        stopped = keeper.wait_event("stopped", 5)  # its log line follows the kill
        assert stopped["why"] == "renew-deadline" and stopped["pids"] == [death.pid]
        assert keeper.ready() == 503
        # a JobManager that restarts meanwhile (the kubelet restarts its container) is killed again
        jm.supervise()
        wait_for(lambda: len(jm.deaths) >= 3, 15, "the restarted JMs killed")
        assert keeper.ready() == 503
        proxy.heal()
        keeper.wait_event("superseded", 15)
        renewed = keeper.metric("flink_failover_keeper_renewals_total", 'result="ok"')
        deaths = len(jm.deaths)
        wait_for(lambda: len(jm.deaths) >= deaths + 2, 15, "JMs killed after the heal")
        assert keeper.ready() == 503
        assert keeper.metric("flink_failover_keeper_renewals_total", 'result="ok"') == renewed
        assert _heartbeat(running, ckpt)[0] == last_beat  # never renewed again
        kills = keeper.events("stopped")
        assert kills[-1]["why"] == "superseded"


def test_healed_without_a_failover_it_holds_again_and_only_then_lets_a_jobmanager_run(
    proxied_s3: tuple[Running, TcpProxy], tmp_path: Path
) -> None:
    """A storage blip past the renew deadline: the JobManager is killed, its restarts too while the cut
    lasts; when the storage answers and nobody fenced meanwhile, the keeper renews, answers ready, and the
    next JobManager runs on."""
    running, proxy = proxied_s3
    ckpt = running.bucket() + "/checkpoints"
    marker = new_marker()
    policy = policy_text(running.storage_options(running.via(proxy.port)))
    with running_keeper(tmp_path, policy, ckpt, marker) as keeper:
        keeper.wait_event("held", 20)
        with standin(marker, restart_after=0.3) as jm:
            wait_for(
                lambda: keeper.metric("flink_failover_keeper_jobmanager_running") == 1, 10, "the JM seen"
            )
            proxy.cut()
            wait_for(lambda: len(jm.deaths) >= 2, 20, "the JM and a restart killed")
            assert keeper.ready() == 503
            proxy.heal()
            held = keeper.wait_event("held", 20, after=1)
            assert keeper.ready() == 200
            deaths = len(jm.deaths)
            ok = keeper.metric("flink_failover_keeper_renewals_total", 'result="ok"')
            wait_for(
                lambda: keeper.metric("flink_failover_keeper_renewals_total", 'result="ok"') >= ok + 3,
                15,
                "renewals",
            )
            assert jm.alive and len(jm.deaths) == deaths
            # every kill came before the lease was held again
            lost = keeper.events("lost")
            assert lost and all(e["time"] <= held["time"] for e in keeper.events("stopped"))


@pytest.mark.parametrize("storage_backend", ["file"], indirect=True)
def test_a_newer_fence_of_another_cluster_stops_the_jobmanager_at_the_next_listing(
    storage_backend: Running, tmp_path: Path, stack: ExitStack
) -> None:
    """The keeper reaches its storage; member2 restores the job (fence epoch 1): the keeper kills the
    JobManager before member2's lease count from the last heartbeat could end, and renews no more."""
    ckpt = storage_backend.bucket() + "/checkpoints"
    marker = new_marker()
    policy = policy_text(storage_backend.storage_options())
    with running_keeper(tmp_path, policy, ckpt, marker) as keeper:
        keeper.wait_event("held", 20)
        jm = stack.enter_context(standin(marker))
        wait_for(lambda: keeper.metric("flink_failover_keeper_jobmanager_running") == 1, 10, "the JM seen")
        other = _other_cluster(storage_backend)
        other.fence(_folder(ckpt), 1, fence_body(WORKLOAD, "member2", 1, "test"))
        superseded = keeper.wait_event("superseded", 10)
        assert superseded["fencedBy"] == "member2" and superseded["fenceEpoch"] == 1
        death = wait_for(lambda: jm.deaths[:1], 10, "the JM's death")[0]
        last_beat, _ = _heartbeat(storage_backend, ckpt)
        assert death.wall < last_beat.timestamp() + LEASE
        wait_for(lambda: len(jm.deaths) >= 3, 15, "the restarted JMs killed")
        assert _heartbeat(storage_backend, ckpt)[0] == last_beat
        assert keeper.ready() == 503


@pytest.mark.parametrize("storage_backend", ["file"], indirect=True)
def test_a_keeper_restarted_beside_a_running_jobmanager_keeps_it(
    storage_backend: Running, tmp_path: Path, stack: ExitStack
) -> None:
    """The keeper's container restarts (SIGKILL) while the JobManager runs: the new keeper counts the lease
    as renewed a poll before its deadline (or earlier, by the heartbeat's age in storage time), renews
    within it, and the JobManager runs on. The renew deadline spans a restart on a loaded machine: with
    FAST's 3 s, the new process's start alone took past it at a load average of 8 (nobody renewed for
    that long, so the keeper rightly killed the JobManager); the other side of the deadline is
    ``test_a_keeper_back_after_its_deadline_stops_the_jobmanager_before_it_renews``."""
    ckpt = storage_backend.bucket() + "/checkpoints"
    marker = new_marker()
    policy = policy_text(storage_backend.storage_options(), renewDeadlineSeconds=30, leaseSeconds=40)
    with running_keeper(tmp_path, policy, ckpt, marker) as first:
        first.wait_event("held", 20)
        jm = stack.enter_context(standin(marker))
        wait_for(lambda: first.metric("flink_failover_keeper_jobmanager_running") == 1, 10, "the JM seen")
    # the first keeper is SIGKILLed (running_keeper's exit); the JobManager runs on without it
    with running_keeper(tmp_path, policy, ckpt, marker) as second:
        inherited = second.wait_event("inherited", 30)
        second.wait_event("held", 30)
        ok = second.metric("flink_failover_keeper_renewals_total", 'result="ok"')
        wait_for(
            lambda: second.metric("flink_failover_keeper_renewals_total", 'result="ok"') >= ok + 2,
            30,
            "renewals",
        )
    assert inherited["jobmanagers"] == 1 and jm.alive and not jm.deaths


def test_a_keeper_restarted_while_its_storage_is_cut_stops_the_jobmanager_before_the_lease_ends(
    proxied_s3: tuple[Running, TcpProxy], tmp_path: Path, stack: ExitStack
) -> None:
    """The keeper restarts while its storage is cut: it cannot know how long nobody renewed, so the
    JobManager it finds is killed within a poll of its start, before the last heartbeat's lease ends."""
    running, proxy = proxied_s3
    ckpt = running.bucket() + "/checkpoints"
    marker = new_marker()
    policy = policy_text(running.storage_options(running.via(proxy.port)))
    with running_keeper(tmp_path, policy, ckpt, marker) as first:
        first.wait_event("held", 20)
        jm = stack.enter_context(standin(marker, restart=False))
        wait_for(lambda: first.metric("flink_failover_keeper_jobmanager_running") == 1, 10, "the JM seen")
        first.kill()
    proxy.cut()
    with running_keeper(tmp_path, policy, ckpt, marker) as second:
        death = wait_for(lambda: jm.deaths[:1], 20, "the JM's death")[0]
        last_beat, _ = _heartbeat(running, ckpt)
        assert death.wall < last_beat.timestamp() + LEASE
        assert second.events("inherit-unknown") and second.ready() == 503


@pytest.mark.parametrize("storage_backend", ["file"], indirect=True)
def test_fencing_off_in_the_policy_holds_nothing_and_stops_nothing(
    storage_backend: Running, tmp_path: Path
) -> None:
    ckpt = storage_backend.bucket() + "/checkpoints"
    marker = new_marker()
    policy = policy_text(storage_backend.storage_options(), enabled=False)
    with running_keeper(tmp_path, policy, ckpt, marker) as keeper, standin(marker) as jm:
        keeper.wait_event("off", 10)
        assert keeper.ready() == 200 and keeper.healthy() == 200
        assert not storage_backend.fs.exists(_folder(ckpt).fs_path) and jm.alive


@pytest.mark.parametrize("storage_backend", ["file"], indirect=True)
def test_a_keeper_back_after_its_deadline_stops_the_jobmanager_before_it_renews(
    storage_backend: Running, tmp_path: Path, stack: ExitStack
) -> None:
    """The keeper was down past the renew deadline (its heartbeat older than that in storage time) while
    the JobManager ran on: the new keeper reads the heartbeat's age, kills the JobManager first (the lease
    may have run out elsewhere), and only then renews and answers ready."""
    ckpt = storage_backend.bucket() + "/checkpoints"
    marker = new_marker()
    policy = policy_text(storage_backend.storage_options())
    with running_keeper(tmp_path, policy, ckpt, marker) as first:
        first.wait_event("held", 20)
        jm = stack.enter_context(standin(marker, restart=False))
        wait_for(lambda: first.metric("flink_failover_keeper_jobmanager_running") == 1, 10, "the JM seen")
    last_beat, _ = _heartbeat(storage_backend, ckpt)
    # local files: the storage's time is this machine's clock; wait until the heartbeat is past the deadline
    past = FAST["renewDeadlineSeconds"] + 1.0
    wait_for(lambda: time.time() > last_beat.timestamp() + past, 10, "the heartbeat aged past the deadline")
    with running_keeper(tmp_path, policy, ckpt, marker) as second:
        stopped = second.wait_event("stopped", 20)
        assert stopped["why"] == "renew-deadline" and stopped["pids"] == [jm.starts[0][0]]
        # held again only after the kill (a "held" before it is the poll a found JobManager is given)
        wait_for(
            lambda: [e for e in second.events("held") if e["time"] >= stopped["time"]],
            20,
            "held again",
            second,
        )
        assert second.events("inherit-refined") and len(jm.deaths) == 1
