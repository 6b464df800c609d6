"""Leader election: of several control-plane replicas exactly one captures, every replica serves the Work
webhook, and when the leader dies the next one takes over and captures every change made meanwhile.

The election's decision (``claim``) is tested pure; the elector loop against the fake API server's Lease
(real HTTP, the ``kubernetes`` client) with hand-driven clocks; the hand-over with two real ``flink-failover
serve --leader-elect`` processes, the leader killed (SIGKILL, and SIGTERM) under a stream of binding changes.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import fakeapi
from tests.controlplane.handover import LEASE, NS, run_hand_over
from webhook.common.kubeclient import ApiFailure, ClientConfig
from webhook.common.kubeobjects import micro_time
from webhook.controlplane.karmada import KarmadaApi
from webhook.controlplane.leader import (
    ElectionConfig,
    KubeLeases,
    LeaderElector,
    LeaseRecord,
    claim,
)
from webhook.policy.load import DEFAULT_POLICY_FILE

T0 = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)


# --- claim: the pure decision ----------------------------------------------------------------------------


def held_by(holder: str, duration: int = 15) -> LeaseRecord:
    return LeaseRecord(holder, duration, micro_time(T0), micro_time(T0), 3, "42")


def test_no_lease_is_created_for_us() -> None:
    record = claim(None, 0.0, "a", 15.0, T0)
    assert record == LeaseRecord("a", 15, "2026-12-01T09:00:00.000000Z", "2026-12-01T09:00:00.000000Z", 0)


def test_our_own_lease_is_renewed_keeping_acquire_time_and_version() -> None:
    later = T0 + timedelta(seconds=2)
    record = claim(held_by("a"), 100.0, "a", 15.0, later)
    assert record is not None
    assert (
        record.holder == "a"
        and record.renew_time == micro_time(later)
        and record.acquire_time == micro_time(T0)
    )
    assert record.transitions == 3 and record.resource_version == "42"  # the write is conditional


def test_another_holders_valid_lease_is_left_alone() -> None:
    assert claim(held_by("b"), 14.9, "a", 15.0, T0) is None


def test_an_expired_lease_is_taken_over_with_a_transition() -> None:
    later = T0 + timedelta(seconds=20)
    record = claim(held_by("b"), 15.0, "a", 15.0, later)
    assert record is not None
    assert (record.holder, record.transitions, record.acquire_time) == ("a", 4, micro_time(later))
    assert record.resource_version == "42"


def test_a_released_lease_is_taken_at_once() -> None:
    record = claim(held_by(""), 0.0, "a", 15.0, T0)
    assert record is not None and record.holder == "a"


def test_expiry_uses_the_holders_duration_not_ours() -> None:
    assert claim(held_by("b", duration=60), 30.0, "a", 15.0, T0) is None


@pytest.mark.parametrize(
    ("duration", "deadline", "retry"), [(10, 10, 2), (15, 10, 10), (15, 10, 0), (5, 10, 2)]
)
def test_timings_that_cannot_keep_one_leader_are_refused(
    duration: float, deadline: float, retry: float
) -> None:
    config = ElectionConfig(NS, LEASE, "a", duration, deadline, retry)
    assert config.problem() is not None
    assert ElectionConfig(NS, LEASE, "a").problem() is None


def test_lease_record_round_trips_through_the_api_shape() -> None:
    record = held_by("a")
    assert LeaseRecord.from_object(record.to_object(NS, LEASE)) == record
    assert LeaseRecord.from_object({"spec": {"leaseDurationSeconds": "x"}}).duration_seconds == 1


# --- the elector against the fake API server's Lease -----------------------------------------------------


@pytest.fixture
def karmada(tmp_path: Path) -> Iterator[tuple[fakeapi.RunningFake, Path]]:
    server = fakeapi.start()
    yield server, server.kubeconfig(tmp_path / "kubeconfig")
    server.stop()


def leases(kubeconfig: Path) -> KubeLeases:
    api = KarmadaApi.connect(ClientConfig(kubeconfig=str(kubeconfig)))
    assert not isinstance(api, ApiFailure), api
    return KubeLeases(api.objects)


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


class Candidate:
    def __init__(self, kubeconfig: Path, identity: str, clock: Clock, store: Any = None) -> None:
        self.events: list[str] = []
        self.elector = LeaderElector(
            store or leases(kubeconfig),
            ElectionConfig(NS, LEASE, identity, lease_duration=15, renew_deadline=10, retry_period=2),
            on_start=lambda: self.events.append("start"),
            on_stop=lambda: self.events.append("stop"),
            monotonic=clock,
            wall=lambda: T0 + timedelta(seconds=clock.now),
        )


def test_one_candidate_leads_the_other_waits_then_takes_over_an_expired_lease(
    karmada: tuple[fakeapi.RunningFake, Path],
) -> None:
    server, kubeconfig = karmada
    clock_a, clock_b = Clock(), Clock()
    a, b = Candidate(kubeconfig, "a", clock_a), Candidate(kubeconfig, "b", clock_b)
    a.elector.step()
    b.elector.step()
    assert a.events == ["start"] and b.events == [] and server.fake.lease_holder(NS, LEASE) == "a"
    for _ in range(7):  # a renews every retry period; b sees the record change, so never takes over
        clock_a.now += 2
        clock_b.now += 2
        a.elector.step()
        b.elector.step()
    assert b.events == [] and server.fake.lease_holder(NS, LEASE) == "a"
    clock_b.now += 14.9  # a stopped renewing, but not for a whole lease duration yet
    b.elector.step()
    assert b.events == []
    clock_b.now += 0.2
    b.elector.step()
    assert b.events == ["start"] and server.fake.lease_holder(NS, LEASE) == "b"
    lease = server.fake.leases[(NS, LEASE)]["spec"]
    assert lease["leaseTransitions"] == 1 and lease["leaseDurationSeconds"] == 15
    # a comes back (a long pause): it sees b holding the Lease and stops capturing at once
    clock_a.now += 1
    a.elector.step()
    assert a.events == ["start", "stop"] and a.elector.leading is False
    a.elector.step()
    assert a.events == ["start", "stop"] and server.fake.lease_holder(NS, LEASE) == "b"
    assert [holder for _, holder in server.fake.holders] == ["a", "b"]


def test_two_candidates_racing_for_an_expired_lease_cannot_both_win(
    karmada: tuple[fakeapi.RunningFake, Path],
) -> None:
    """b reads the expired Lease, a takes it over in between, b's write carries the stale resourceVersion."""
    server, kubeconfig = karmada
    server.fake.write_lease(NS, LEASE, held_by("gone", 15).to_object(NS, LEASE), create=True)
    clock = Clock()
    a = Candidate(kubeconfig, "a", clock)

    class Interleaved:
        def __init__(self) -> None:
            self.inner = leases(kubeconfig)
            self.conflicts = 0

        def get(self, namespace: str, name: str) -> Any:
            return self.inner.get(namespace, name)

        def create(self, namespace: str, name: str, record: LeaseRecord) -> Any:
            return self.inner.create(namespace, name, record)

        def update(self, namespace: str, name: str, record: LeaseRecord) -> Any:
            a.elector.step()  # a wins the race between b's read and b's write
            answer = self.inner.update(namespace, name, record)
            self.conflicts += isinstance(answer, ApiFailure) and answer.status == 409
            return answer

    store = Interleaved()
    b = Candidate(kubeconfig, "b", clock, store=store)
    a.elector.step()  # both observe the record now ...
    b.elector.step()
    clock.now += 16  # ... and see it unchanged for longer than its duration
    b.elector.step()
    assert a.events == ["start"] and b.events == [] and store.conflicts == 1
    assert server.fake.lease_holder(NS, LEASE) == "a"


def test_release_hands_the_lease_over_without_waiting(karmada: tuple[fakeapi.RunningFake, Path]) -> None:
    server, kubeconfig = karmada
    clock = Clock()
    a, b = Candidate(kubeconfig, "a", clock), Candidate(kubeconfig, "b", clock)
    a.elector.step()
    b.elector.step()
    a.elector.release()
    assert a.events == ["start", "stop"] and server.fake.lease_holder(NS, LEASE) == ""
    b.elector.step()  # no time has passed
    assert b.events == ["start"] and server.fake.lease_holder(NS, LEASE) == "b"
    a.elector.step()  # a released: it no longer campaigns
    assert server.fake.lease_holder(NS, LEASE) == "b"


def test_leader_that_cannot_reach_the_api_steps_down_before_the_lease_expires(
    karmada: tuple[fakeapi.RunningFake, Path],
) -> None:
    _server, kubeconfig = karmada

    class Partitioned:
        """The real Lease API until the network goes; then every call fails as a dead connection does."""

        def __init__(self) -> None:
            self.inner = leases(kubeconfig)
            self.down = False

        def get(self, namespace: str, name: str) -> Any:
            return ApiFailure(0, "connection refused") if self.down else self.inner.get(namespace, name)

        def create(self, namespace: str, name: str, record: LeaseRecord) -> Any:
            return (
                ApiFailure(0, "connection refused")
                if self.down
                else self.inner.create(namespace, name, record)
            )

        def update(self, namespace: str, name: str, record: LeaseRecord) -> Any:
            return (
                ApiFailure(0, "connection refused")
                if self.down
                else self.inner.update(namespace, name, record)
            )

    clock = Clock()
    store = Partitioned()
    a = Candidate(kubeconfig, "a", clock, store=store)
    a.elector.step()
    store.down = True
    clock.now += 9.9
    a.elector.step()
    assert a.events == ["start"]
    clock.now += 0.1  # renew deadline (10) < lease duration (15): nobody else can lead yet
    a.elector.step()
    assert a.events == ["start", "stop"]


# --- two real server processes: the hand-over under a stream of binding changes --------------------------


@pytest.mark.slow
def test_leader_killed_under_a_stream_of_changes_loses_none(tmp_path: Path) -> None:
    result = run_hand_over(tmp_path, signal.SIGKILL)
    holders = result.holders
    assert len(holders) == 2 and "" not in holders  # nobody released: the successor waited the Lease out
    assert result.acquired_at > result.kill_at and result.first_capture_at >= result.acquired_at
    assert result.changes_during_gap > 0  # changes really arrived while nobody captured
    print(
        f"\nSIGKILL hand-over: Lease taken {result.acquired_at - result.kill_at:.2f} s after the kill, "
        f"first record {result.first_capture_at - result.kill_at:.2f} s after, "
        f"{result.changes_during_gap} changes arrived meanwhile; none lost"
    )


@pytest.mark.slow
def test_leader_stopped_cleanly_releases_the_lease(tmp_path: Path) -> None:
    result = run_hand_over(tmp_path, signal.SIGTERM, bindings=20)
    holders = result.holders
    assert len(holders) == 3 and holders[1] == ""  # released, then taken
    print(
        f"\nSIGTERM hand-over: Lease taken {result.acquired_at - result.kill_at:.2f} s after the signal, "
        f"first record {result.first_capture_at - result.kill_at:.2f} s after"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--no-capture"], "cannot be combined with --no-capture"),
        (["--renew-deadline", "20"], "renew deadline < lease duration"),
    ],
)
def test_bad_election_settings_are_usage_errors(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from webhook.cli import main

    policy = str(DEFAULT_POLICY_FILE)
    code = main(["serve", "--role", "control-plane", "--policy", policy, "--leader-elect", *extra])
    assert code == 2
    assert message in capsys.readouterr().err
