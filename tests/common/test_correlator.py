"""``common/correlator.py``: which Events are written, as client-go's ``EventCorrelator`` decides it
(a rate limit per object, similar notes combined, repeats counted), driven with a clock by hand."""

from __future__ import annotations

from webhook.common.correlator import (
    COMBINED,
    MAX_SIMILAR,
    SPAM_BURST,
    SPAM_REFILL_SECONDS,
    WINDOW,
    Correlator,
    Dropped,
    New,
    Repeat,
)

ORDERS = ("FlinkDeployment", "analytics", "orders")
HELD = (ORDERS, "Warning", "Held")


def written(correlator: Correlator, step: object, now: float, name: str = "ev") -> object:
    """What the recorder does with a step: a new Event is created under ``name``."""
    if isinstance(step, New):
        correlator.created(step.series, name, now)
    return step


def test_an_object_gets_a_burst_then_one_event_per_refill() -> None:
    correlator = Correlator()
    steps = [
        correlator.correlate(ORDERS, (ORDERS, "Normal", f"R{i}"), "n", 0.0) for i in range(SPAM_BURST + 3)
    ]
    assert [isinstance(s, Dropped) for s in steps] == [False] * SPAM_BURST + [True] * 3
    assert isinstance(correlator.correlate(ORDERS, HELD, "n", SPAM_REFILL_SECONDS - 1), Dropped)
    assert not isinstance(correlator.correlate(ORDERS, HELD, "n", SPAM_REFILL_SECONDS), Dropped)
    assert isinstance(correlator.correlate(ORDERS, HELD, "n", SPAM_REFILL_SECONDS), Dropped)
    other = ("FlinkDeployment", "analytics", "payments")  # another object has a bucket of its own
    assert not isinstance(correlator.correlate(other, (other, "Warning", "Held"), "n", 0.0), Dropped)


def test_a_repeat_grows_the_series_until_the_window_has_passed() -> None:
    correlator = Correlator()
    first = written(correlator, correlator.correlate(ORDERS, HELD, "held until member1 stops", 0.0), 0.0)
    assert first == New("held until member1 stops", (HELD, "held until member1 stops"))
    again = [correlator.correlate(ORDERS, HELD, "held until member1 stops", t) for t in (5.0, 10.0)]
    assert [(s.name, s.count) for s in again if isinstance(s, Repeat)] == [("ev", 2), ("ev", 3)]
    later = correlator.correlate(ORDERS, HELD, "held until member1 stops", WINDOW + 1)
    assert isinstance(later, New)


def test_a_vanished_event_is_written_anew() -> None:
    correlator = Correlator()
    written(correlator, correlator.correlate(ORDERS, HELD, "n", 0.0), 0.0)
    repeat = correlator.correlate(ORDERS, HELD, "n", 1.0)
    assert isinstance(repeat, Repeat)
    correlator.vanished(repeat.series)
    assert correlator.correlate(ORDERS, HELD, "n", 2.0) == repeat.fallback == New("n", (HELD, "n"))


def test_notes_that_differ_only_in_detail_are_combined_into_one_series() -> None:
    correlator = Correlator()
    steps = []
    for i in range(MAX_SIMILAR + 2):
        step = correlator.correlate(ORDERS, HELD, f"held: heartbeat age {i}s", float(i))
        steps.append(written(correlator, step, float(i), name=f"ev{i}"))
    own = steps[: MAX_SIMILAR - 1]
    assert all(isinstance(s, New) and not s.note.startswith(COMBINED) for s in own)
    combined = steps[MAX_SIMILAR - 1]
    assert combined == New(f"{COMBINED}held: heartbeat age {MAX_SIMILAR - 1}s", (HELD, COMBINED))
    series = (HELD, COMBINED)
    assert steps[MAX_SIMILAR:] == [
        Repeat(f"ev{MAX_SIMILAR - 1}", n + 2, series, New(f"{COMBINED}held: heartbeat age {i}s", series))
        for n, i in enumerate(range(MAX_SIMILAR, MAX_SIMILAR + 2))
    ]
    other_reason = correlator.correlate(ORDERS, (ORDERS, "Normal", "Released"), "released", 20.0)
    assert other_reason == New("released", ((ORDERS, "Normal", "Released"), "released"))


def test_similar_notes_further_apart_than_the_window_are_not_combined() -> None:
    correlator = Correlator(burst=1000)
    steps = [
        correlator.correlate(ORDERS, HELD, f"note {i}", i * (WINDOW + 1)) for i in range(MAX_SIMILAR * 2)
    ]
    assert all(isinstance(s, New) and not s.note.startswith(COMBINED) for s in steps)


def test_every_table_is_bounded_and_forgets_the_least_recently_used() -> None:
    correlator = Correlator(burst=1, size=2)
    a, b, c = ("k", "ns", "a"), ("k", "ns", "b"), ("k", "ns", "c")
    for obj in (a, b):
        assert not isinstance(correlator.correlate(obj, (obj, "Normal", "R"), "n", 0.0), Dropped)
    assert isinstance(correlator.correlate(a, (a, "Normal", "R"), "n", 0.0), Dropped)  # a: used up, and used
    assert not isinstance(correlator.correlate(c, (c, "Normal", "R"), "n", 0.0), Dropped)  # b forgotten
    assert not isinstance(correlator.correlate(b, (b, "Normal", "R"), "n", 0.0), Dropped)  # a fresh bucket
