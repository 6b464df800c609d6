"""``restore/storage/requests.py`` ``collection_paused``: the cyclic collector is off while a lookup
reads and names a large ``_metadata``, on again as the last lookup that paused it leaves (as it was),
and a pause is not extended past ``MAX_PAUSE_SECONDS`` by lookups that overlap it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from webhook.restore.storage import requests
from webhook.restore.storage.requests import collection_paused


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_off_inside_and_on_again_after() -> None:
    with collection_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_overlapping_pauses_end_with_the_last() -> None:
    with ExitStack() as first:
        first.enter_context(collection_paused())
        second = collection_paused()
        second.__enter__()
        first.close()
        assert not gc.isenabled()  # the second still reads
        second.__exit__(None, None, None)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with collection_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_exception_inside_turns_it_on_again() -> None:
    with pytest.raises(ValueError), collection_paused():
        raise ValueError("a lookup that failed")
    assert gc.isenabled()


def test_a_lookup_late_into_a_long_pause_does_not_extend_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(requests, "MAX_PAUSE_SECONDS", 0.0)
    monkeypatch.setattr(requests.time, "monotonic", iter([100.0, 101.0]).__next__)
    first = collection_paused()
    first.__enter__()  # paused at 100
    with collection_paused():  # comes at 101, past the limit: does not join
        first.__exit__(None, None, None)
        assert gc.isenabled()  # the pause ended with the one that started it
    assert gc.isenabled()
