"""Answers computed once per (snapshot, request): single flight, per snapshot, bounded, errors not kept."""

from __future__ import annotations

import threading

import pytest

from webhook.estimator.memo import Answers


class Counting:
    """A computation that counts its runs and answers with the run's number."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self) -> int:
        self.runs += 1
        return self.runs


def test_one_computation_per_snapshot_and_key() -> None:
    answers: Answers[int] = Answers()
    compute = Counting()
    snap_a, snap_b = object(), object()
    first = answers.get(snap_a, "q", compute)
    again = answers.get(snap_a, "q", compute)
    assert (first.value, first.computed) == (1, True)
    assert (again.value, again.computed) == (1, False)
    assert answers.get(snap_a, "other", compute).value == 2  # another request is its own computation
    assert answers.get(snap_b, "q", compute).value == 3  # a new snapshot never reuses an older answer
    assert answers.get(snap_b, "q", compute).value == 3
    assert (answers.computed, answers.shared) == (3, 2)


def test_a_caller_with_an_older_snapshot_gets_that_snapshots_answer() -> None:
    answers: Answers[str] = Answers()
    old, new = object(), object()
    assert answers.get(new, "q", lambda: "new").value == "new"
    assert answers.get(old, "q", lambda: "old").value == "old"  # computed on its own snapshot
    assert answers.get(new, "q", lambda: "new again").value == "new again"  # not the old one's


def test_concurrent_callers_wait_for_one_computation() -> None:
    answers: Answers[int] = Answers()
    started, release = threading.Event(), threading.Event()
    runs: list[int] = []
    snap = object()

    def slow() -> int:
        runs.append(1)
        started.set()
        release.wait(30)
        return 42

    got: list[tuple[int, bool]] = []

    def caller() -> None:
        found = answers.get(snap, "q", slow)
        got.append((found.value, found.computed))

    owner = threading.Thread(target=caller)
    owner.start()
    assert started.wait(30)  # the owner's flight is registered before it computes
    others = [threading.Thread(target=caller) for _ in range(7)]
    for t in others:
        t.start()
    release.set()
    for t in [owner, *others]:
        t.join(30)
    assert len(runs) == 1
    assert sorted(got) == [(42, False)] * 7 + [(42, True)]


def test_an_error_reaches_the_waiting_callers_and_is_not_kept() -> None:
    answers: Answers[int] = Answers()
    snap = object()
    started, release = threading.Event(), threading.Event()

    def failing() -> int:
        started.set()
        release.wait(30)
        raise ValueError("boom")

    errors: list[str] = []

    def caller() -> None:
        try:
            answers.get(snap, "q", failing)
        except ValueError as exc:
            errors.append(str(exc))

    owner = threading.Thread(target=caller)
    owner.start()
    assert started.wait(30)
    waiter = threading.Thread(target=caller)
    waiter.start()
    release.set()
    owner.join(30)
    waiter.join(30)
    assert errors == ["boom", "boom"]
    assert answers.get(snap, "q", lambda: 7).value == 7  # the failure was not remembered


def test_bounded_least_recently_used_out() -> None:
    answers: Answers[int] = Answers(entries=2)
    compute = Counting()
    snap = object()
    answers.get(snap, "a", compute)  # 1
    answers.get(snap, "b", compute)  # 2
    answers.get(snap, "a", compute)  # used again: b is now the oldest
    answers.get(snap, "c", compute)  # 3, b out
    assert answers.get(snap, "a", compute).value == 1
    assert answers.get(snap, "b", compute).value == 4


@pytest.mark.parametrize("entries", [0, -1])
def test_no_entries_computes_every_call(entries: int) -> None:
    answers: Answers[int] = Answers(entries)
    compute = Counting()
    snap = object()
    assert [answers.get(snap, "q", compute).value for _ in range(3)] == [1, 2, 3]
