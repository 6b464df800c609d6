"""Kubernetes Events: recorded without blocking; rate-limited, combined and aggregated into series as
client-go's recorder does (the decisions themselves: tests/common/test_correlator.py)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from prometheus_client import REGISTRY

from webhook.common.correlator import COMBINED, MAX_SIMILAR, SPAM_BURST
from webhook.common.events import (
    MAX_NOTE,
    NORMAL,
    QUEUE_SIZE,
    SERIES_WINDOW,
    WARNING,
    EventRecorder,
    Occurrence,
    Regarding,
)
from webhook.common.kubeclient import ApiFailure

ORDERS = Regarding("flink.apache.org/v1beta1", "FlinkDeployment", "analytics", "orders", "uid-1")


class Api:
    """The two calls the recorder makes, kept for the assertions (what a fake API server would store)."""

    def __init__(self) -> None:
        self.created: list[Mapping[str, Any]] = []
        self.patched: list[tuple[str, Mapping[str, Any]]] = []
        self.refuse_patches = False
        self.gate = threading.Event()
        self.gate.set()

    def create(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any] | ApiFailure:
        self.gate.wait(10)
        self.created.append(body)
        return body

    def patch(self, namespace: str, name: str, body: Mapping[str, Any]) -> Mapping[str, Any] | ApiFailure:
        if self.refuse_patches:
            return ApiFailure(404, "not found")
        self.patched.append((name, body))
        return body


def held(note: str = "held until member1 stops") -> Occurrence:
    return Occurrence(ORDERS, WARNING, "Held", "Hold", note)


def test_a_repeated_decision_is_one_event_whose_series_grows() -> None:
    api, now = Api(), [0.0]
    recorder = EventRecorder(api.create, api.patch, "flink-failover.io/member", "member2/pod", lambda: now[0])
    for _ in range(3):
        recorder.record(held())
    recorder.record(held("held until member3 stops"))  # another note: another event
    recorder.close()
    assert len(api.created) == 2
    event = api.created[0]
    assert event["regarding"] == {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkDeployment",
        "namespace": "analytics",
        "name": "orders",
        "uid": "uid-1",
    }
    assert event["type"] == "Warning" and event["reason"] == "Held" and event["action"] == "Hold"
    assert event["reportingController"] == "flink-failover.io/member"
    assert event["metadata"]["name"].startswith("orders.") and event["eventTime"].endswith("Z")
    assert [body["series"]["count"] for _, body in api.patched] == [2, 3]
    assert {name for name, _ in api.patched} == {event["metadata"]["name"]}


def test_a_repeat_after_the_window_or_a_vanished_event_starts_a_new_one() -> None:
    api, now = Api(), [0.0]
    recorder = EventRecorder(api.create, api.patch, "c", "i", lambda: now[0])
    recorder.record(held())
    recorder.close()
    recorder = EventRecorder(api.create, api.patch, "c", "i", lambda: now[0])
    recorder.record(held())
    now[0] = SERIES_WINDOW + 1
    recorder.record(held())  # the window has passed: a new event
    api.refuse_patches = True
    recorder.record(held())  # the event is gone (expired): a new one, not a lost one
    recorder.close()
    assert len(api.created) == 4


def test_recording_never_waits_for_the_api_server() -> None:
    api = Api()
    api.gate.clear()  # the API server does not answer
    recorder = EventRecorder(api.create, api.patch, "c", "i")
    for i in range(QUEUE_SIZE + 50):  # returns at once; past the queue's size they are dropped
        job = Regarding("flink.apache.org/v1beta1", "FlinkDeployment", "analytics", f"job-{i}")
        recorder.record(Occurrence(job, WARNING, "Held", "Hold", "held"))  # one each: under every limit
    api.gate.set()
    recorder.close(wait=30)
    assert QUEUE_SIZE <= len(api.created) <= QUEUE_SIZE + 1


def test_a_long_note_is_cut_to_what_the_api_accepts() -> None:
    api = Api()
    recorder = EventRecorder(api.create, api.patch, "c", "i")
    recorder.record(held("x" * 5000))
    recorder.close()
    assert len(api.created[0]["note"]) == MAX_NOTE


def test_notes_of_one_hold_are_combined_and_past_the_objects_burst_nothing_is_written() -> None:
    """A job held poll after poll with a changing note (its heartbeat's age): ten notes become one
    combined Event that counts on, and past the object's burst nothing is written at all."""
    api, now = Api(), [0.0]
    recorder = EventRecorder(api.create, api.patch, "c", "i", lambda: now[0])
    limited = REGISTRY.get_sample_value("flink_failover_events_rate_limited_total") or 0.0
    for age in range(SPAM_BURST + 5):
        recorder.record(held(f"held until member1 stops; heartbeat age {age}s"))
    recorder.close(wait=30)
    notes = [e["note"] for e in api.created]
    assert len(notes) == MAX_SIMILAR and notes[-1].startswith(COMBINED)
    assert [body["series"]["count"] for _, body in api.patched] == list(
        range(2, SPAM_BURST - MAX_SIMILAR + 2)
    )
    assert REGISTRY.get_sample_value("flink_failover_events_rate_limited_total") == limited + 5
    recorder = EventRecorder(api.create, api.patch, "c", "i", lambda: now[0])
    recorder.record(Occurrence(ORDERS, NORMAL, "Released", "Release", "released"))
    recorder.close()
    assert api.created[-1]["reason"] == "Released"  # a new recorder, a new budget (per process)
