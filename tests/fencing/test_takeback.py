"""When the agent takes a copy back from its lease keeper (``fencing/takeback.py``, pure): the rule's
table, and the timing its docstring proves, replayed over the rule itself on a simulated timeline (a
keeper renewing once a poll with varying write latencies, the agent looking every retry period and
reading as ``read_due`` says): a live keeper is never taken from; a dead one is taken from in time for
the agent to renew, or to step the copy down, before the lease can expire elsewhere."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from webhook.fencing.renewal import first_seen
from webhook.fencing.takeback import Watch, answered, failed, handed, identity, read_due, silent, taken_back
from webhook.policy.fencing import FENCING
from webhook.policy.restore import FencingPolicy

POLICY = FencingPolicy()  # lease 30 s, renew deadline 10 s, poll 5 s, stop margin 10 s
P, D, L, S = (
    POLICY.poll_seconds,
    POLICY.renew_deadline_seconds,
    POLICY.lease_seconds,
    POLICY.stop_margin_seconds,
)


def test_the_defaults_keep_the_policys_rule() -> None:
    """The proof leans on ``renewDeadlineSeconds + 2 x pollSeconds + stopMarginSeconds <= leaseSeconds``."""
    assert D + 2 * P + S <= L
    assert any(rule.field == "renewDeadlineSeconds" for rule in FENCING.rules)


def test_identity_tells_renewals_apart() -> None:
    assert identity(None) is None
    assert identity({"written": "a", "epoch": 1}) == identity({"epoch": 1, "written": "a"})
    assert identity({"written": "a"}) != identity({"written": "b"})


@pytest.mark.parametrize(
    ("record", "moved"),
    [
        ("X", False),  # the same record: not moved
        (None, False),  # none, or not the keeper's for this epoch: not moved
        ("Y", True),  # a new renewal: landed after the last read that answered began
    ],
)
def test_a_read_that_answers(record: str | None, moved: bool) -> None:
    watch = Watch("X", since=100.0, looked=104.0, read=105.0)
    after = answered(watch, record, 106.0)
    assert after.read == after.looked == 106.0
    assert after.since == (104.0 if moved else 100.0)
    assert after.record == ("Y" if moved else "X")


def test_a_read_that_fails_moves_nothing_and_bounds_nothing() -> None:
    """A failed read says nothing of what landed meanwhile: a record found later counts from the last
    read that answered, not from the failed one."""
    watch = failed(Watch("X", since=100.0, looked=104.0, read=104.0), 105.0)
    assert watch == Watch("X", since=100.0, looked=104.0, read=105.0)
    assert answered(watch, "Y", 106.0).since == 104.0


def test_handed_over_the_record_counts_from_the_agents_own_last_write() -> None:
    assert handed("X", 95.0, 100.0) == Watch("X", since=95.0, looked=100.0, read=100.0)
    assert handed("X", 101.0, 100.0).since == 100.0  # never later than the read that found it


@pytest.mark.parametrize(
    ("since", "read", "now", "due"),
    [
        (100.0, 100.0, 103.9, False),  # the record is younger than a poll less a retry period
        (100.0, 100.0, 104.0, True),  # ... no longer: every retry period
        (100.0, 102.0, 107.0, True),  # a poll since the last read: at least once a poll
        (100.0, 104.5, 105.0, False),  # a poll old, read under a retry period ago
        (100.0, 104.0, 105.0, True),  # a poll old: every retry period
        (102.0, 104.0, 105.0, False),  # not a poll less a retry period old yet
    ],
)
def test_when_the_record_is_read(since: float, read: float, now: float, due: bool) -> None:
    assert read_due(Watch("X", since, read, read), now, POLICY) is due


@pytest.mark.parametrize(("now", "quiet"), [(109.9, None), (110.0, 10.0), (117.5, 17.5)])
def test_silent_once_not_moved_for_the_renew_deadline(now: float, quiet: float | None) -> None:
    assert silent(Watch("X", 100.0, 109.0, 109.0), now, POLICY) == quiet


def test_taken_back_it_counts_as_first_seen_at_the_deadline() -> None:
    """Renewed at once (a poll is due), stepped down a poll later if it cannot be."""
    watch = Watch("X", 100.0, 109.0, 109.0)
    assert taken_back(watch, POLICY) == first_seen(100.0 + D, POLICY) == 100.0 + P
    assert taken_back(watch, POLICY) + D == 100.0 + P + D


# --- the timeline ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Keeper:
    """A keeper renewing once a poll from ``start`` (its renewal started at ``start + k x poll``), its
    writes landing ``latencies`` later in turn (one renewal of them failing first and landing a retry
    period later, where ``retried``), until ``dies`` (no renewal starts after it)."""

    start: float
    latencies: tuple[float, ...]
    dies: float = float("inf")
    retried: int = -1

    def landings(self, until: float) -> list[tuple[float, float]]:
        """(started, landed) of each renewal that lands."""
        found, k = [], 0
        while (started := self.start + k * P) < min(until, self.dies):
            late = P / 5 if k == self.retried else 0.0
            found.append((started, started + late + self.latencies[k % len(self.latencies)]))
            k += 1
        return found


def newest(keeper: Keeper, at: float) -> tuple[str, float] | None:
    """The record a read served at ``at`` finds (its name, its renewal's start)."""
    landed = [(s, t) for s, t in keeper.landings(at + P) if t <= at]
    if not landed:
        return None
    started, _ = landed[-1]
    return f"renewal@{started:.3f}", started


@dataclass(frozen=True)
class TakeBack:
    at: float  # judged silent
    watch: Watch  # as judged
    said: bool  # the agent's renewal a retry period later found no newer record: it wrote (and warned)


def watch_the_keeper(keeper: Keeper, phase: float, read_takes: float, until: float) -> list[TakeBack]:
    """The agent's side as ``renewer.Renewer`` runs it: a look every retry period from ``phase``; a
    read when due (served half-way, answered ``read_takes`` later), the watch judged once it answers, or
    at a look while none is due. Handed over at its first look that finds a record, counted from its
    own last write a poll before. Taken back, its renewal a retry period later reads the record first: a
    newer one hands it over again (counted from the last read that found the old one), else the agent
    renews it (said), and stops watching."""
    t = phase
    while (found := newest(keeper, t)) is None:
        t += P / 5
    watch, taken = handed(found[0], t - P, t), []
    while t < until:
        t += P / 5
        if read_due(watch, t, POLICY):
            seen = newest(keeper, t + read_takes / 2)
            watch = answered(watch, seen[0] if seen else None, t)
            judged_at = t + read_takes
        else:
            judged_at = t
        if silent(watch, judged_at, POLICY) is None:
            continue
        t = judged_at + P / 5
        seen = newest(keeper, t)
        if seen is None or seen[0] == watch.record:
            return [*taken, TakeBack(judged_at, watch, said=True)]
        taken.append(TakeBack(judged_at, watch, said=False))
        watch = handed(seen[0], max(taken_back(watch, POLICY), watch.looked), t)
    return taken


FAST = [(0.05,), (0.05, 0.8, 0.1, 0.5, 0.3), (0.8,)]  # keeper writes landing within a retry period
SLOW = [(1.0,), (0.02, 1.9)]
PHASES = [0.0, 0.3, 0.55, 0.99]


@pytest.mark.parametrize("latencies", FAST + SLOW)
@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("retried", [-1, 7])
def test_a_live_keeper_is_never_taken_from(latencies: tuple[float, ...], phase: float, retried: int) -> None:
    """Over 100 polls, at every phase of the keeper against the agent's looks, with one renewal retried:
    once its record has moved, a live keeper's record never stands still for the renew deadline. Its
    first record counts from the agent's own last write, a poll before it was read: a take-back there
    finds the keeper's next renewal at its renewal's read and hands the copy over again unsaid where
    the keeper's writes land within a retry period; slower ones (1 to 1.9 s) may make the agent renew
    once, and say so, right after the hand-over, and, with one of the keeper's renewals retried on top,
    take the copy back and hand it over again unsaid later on."""
    keeper = Keeper(start=3.7, latencies=latencies, retried=retried)
    taken = watch_the_keeper(keeper, phase, 0.3, 100 * P)
    start = phase + 3.7 + 3 * P + max(latencies)  # the first record's take-back, if any, comes before
    assert not any(t.said for t in taken if t.at >= start), taken
    if latencies in FAST:
        assert all(t.at < start and not t.said for t in taken), taken


@pytest.mark.parametrize("latencies", FAST + SLOW)
@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("read_takes", [0.05, 0.3, 0.9])
def test_a_dead_keeper_is_taken_from_before_the_lease_can_expire_elsewhere(
    latencies: tuple[float, ...], phase: float, read_takes: float
) -> None:
    """The keeper's last renewal lands at ``m``; another cluster may count the lease as expired from
    ``m + lease``. The agent takes the copy back, counts it renewed at ``taken_back`` and renews a
    retry period later; failing that it steps down at that + the renew deadline, the suspend sent within
    a poll, the job stopped within the stop margin: all by ``m + lease``. It is taken back with time
    to renew: the renewal, a retry period after the take-back, comes before its deadline."""
    keeper = Keeper(start=3.7, latencies=latencies, dies=40.0)
    _, last_landed = keeper.landings(40.0)[-1]
    taken = watch_the_keeper(keeper, phase, read_takes, 200.0)
    assert taken and taken[-1].said, taken
    last = taken[-1]
    assert last.watch.since <= last_landed  # counted from no later than the keeper's last write
    renewed = taken_back(last.watch, POLICY)
    assert last.at + P / 5 < renewed + D  # time to renew
    stopped_by = renewed + D + P + S
    assert stopped_by <= last_landed + L, (stopped_by, last_landed)
