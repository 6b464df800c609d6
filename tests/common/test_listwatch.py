"""``common.listwatch``: the one list-watch loop, driven by a scripted API (no server, no threads).

The capture loop and the estimator's feeds run it against the fake API server in their own tests; here
each path of the loop is walked once, in order, and the script stops the loop when it runs out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pytest

from webhook.common.kubeclient import ApiFailure, Backoff, Page, WatchEnded, WatchEvent
from webhook.common.listwatch import ListWatch


def obj(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv}}


class Script:
    """Lists and watches answered from a script, in order; the loop is stopped when the script ends."""

    def __init__(self, lists: list[list[Page | ApiFailure]], watches: list[list[Any]]) -> None:
        self.lists, self.watches = lists, watches
        self.stop = threading.Event()
        self.calls: list[str] = []
        self.replaced: list[list[str]] = []
        self.applied: list[tuple[str, str]] = []
        self.restarts: list[str] = []

    def pages(self) -> Iterator[Page | ApiFailure]:
        self.calls.append("list")
        if not self.lists:
            self.stop.set()
            return
        yield from self.lists.pop(0)

    def watch(self, version: str) -> Iterator[WatchEvent | WatchEnded | ApiFailure]:
        self.calls.append(f"watch@{version}")
        if not self.watches:
            self.stop.set()
            return
        yield from self.watches.pop(0)

    def replace(self, items: Iterable[Mapping[str, Any]]) -> None:
        self.replaced.append([i["metadata"]["name"] for i in list(items)])  # swaps only after the last page

    def apply(self, kind: str, item: Mapping[str, Any]) -> None:
        self.applied.append((kind, item["metadata"]["name"]))

    def loop(self) -> ListWatch:
        return ListWatch(
            "things",
            self.pages,
            self.watch,
            self.replace,
            self.apply,
            stop=self.stop,
            backoff=Backoff(initial=0.0, maximum=0.0),
            restarted=self.restarts.append,
        )


def test_every_path_of_the_loop_in_order() -> None:
    script = Script(
        lists=[
            [Page([obj("a", "1")], "5"), ApiFailure(503, "etcd")],  # fails half way: nothing replaced
            [Page([obj("a", "1")], ""), Page([obj("b", "2")], "6")],
            [Page([obj("c", "9")], "9")],
        ],
        watches=[
            [WatchEvent("ADDED", obj("c", "7")), WatchEvent("BOOKMARK", obj("", "8")), WatchEnded()],
            [ApiFailure(0, "connection reset")],
            [WatchEvent("ERROR", {"code": 500, "message": "boom"})],
            [WatchEvent("DELETED", obj("a", "8")), WatchEvent("ERROR", {"code": 410})],
        ],
    )
    script.loop().run()
    assert script.calls == ["list", "list", "watch@6", "watch@8", "watch@8", "watch@8", "list", "watch@9"]
    assert script.replaced == [["a", "b"], ["c"]]
    assert script.applied == [("ADDED", "c"), ("DELETED", "a")]  # a bookmark only moves the version
    assert script.restarts == ["list-failed", "disconnected", "error-event", "gone"]


def test_410_as_an_answer_relists_at_once_and_a_stop_ends_the_watch() -> None:
    script = Script(
        lists=[[Page([], "1")], [Page([], "2")]],
        watches=[[ApiFailure(410, "Gone")], [WatchEvent("ADDED", obj("x", "3"))]],
    )
    loop = script.loop()
    original = script.apply

    def apply_then_stop(kind: str, item: Mapping[str, Any]) -> None:
        original(kind, item)
        script.stop.set()

    loop.apply = apply_then_stop
    loop.run()
    assert script.calls == ["list", "watch@1", "list", "watch@2"]
    assert script.restarts == ["gone"] and loop.resource_version == "3"


def test_backoff_doubles_to_its_cap_and_each_pause_is_jittered_below_its_base() -> None:
    draws = iter([0.0, 0.999, 0.5, 0.25, 0.0, 0.999])
    backoff = Backoff(initial=1.0, maximum=4.0, jitter=0.5, draw=lambda: next(draws))
    pauses = [backoff.next() for _ in range(5)]
    assert pauses == [1.0, 2.0 * (1 - 0.4995), 4.0 * 0.75, 4.0 * 0.875, 4.0]  # base 1, 2, 4, 4 (the cap), 4
    backoff.reset()
    assert backoff.next() == 1.0 * (1 - 0.4995)  # from the start again


def test_replicas_that_fail_together_do_not_retry_in_step() -> None:
    """The default random source: ten loops that lost the API server at once pause for ten different
    times, each in [base / 2, base]."""
    pauses = [Backoff(initial=1.0).next() for _ in range(10)]
    assert all(0.5 <= p <= 1.0 for p in pauses)
    assert len(set(pauses)) == 10


@pytest.mark.parametrize("jitter", [-0.1, 1.5])
def test_backoff_refuses_a_jitter_outside_zero_to_one(jitter: float) -> None:
    with pytest.raises(ValueError, match="jitter must be in"):
        Backoff(jitter=jitter)
