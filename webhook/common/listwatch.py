"""One list-watch loop for every role: list, watch from the list's version, relist on 410 Gone, back off.

What a long watch meets, handled once: the stream ending normally (watch again from the last
resourceVersion), 410 Gone as an answer or as an ERROR event (relist at once), a dropped connection, an
ERROR event or a failed list (capped exponential backoff, reset by the next success). The caller
brings what to read and what to do with it::

    loop = ListWatch("nodes", pages=lambda: api.pages("nodes"), watch=lambda rv: api.watch("nodes", rv),
                     replace=state.replace_nodes, apply=state.node_event)
    threading.Thread(target=loop.run, daemon=True).start()   # until loop.stop is set

``replace`` gets the whole list as an iterable, read page by page as it is consumed; when a page fails
the iteration raises (and the loop lists again after a pause), so a ``replace`` that swaps its state only
after the last item never holds half a list. ``apply`` gets every ADDED, MODIFIED and DELETED event in
order. Errors come as values from ``common.kubeclient``; the loop itself never raises.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.common.kubeclient import ApiFailure, Backoff, Page, WatchEnded, WatchEvent

log = logging.getLogger(__name__)

APPLIED = ("ADDED", "MODIFIED", "DELETED")  # BOOKMARK only moves the resourceVersion; ERROR ends a watch
# Why a loop started over: the causes ``restarted`` is called with.
LIST_FAILED, DISCONNECTED, ERROR_EVENT, GONE = "list-failed", "disconnected", "error-event", "gone"

Pages = Callable[[], Iterable[Page | ApiFailure]]
Watch = Callable[[str], Iterable[WatchEvent | WatchEnded | ApiFailure]]


def _nothing(*_: Any) -> None:
    return None


class _ListFailed(Exception):
    def __init__(self, failure: ApiFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


@dataclass
class ListWatch:
    """Keeps one resource current through ``replace`` and ``apply`` until ``stop`` is set."""

    name: str  # what is listed, for the log ("ResourceBindings", "nodes")
    pages: Pages  # one full list, page by page, ending after the last page or the first failure
    watch: Watch  # one watch from a resourceVersion, ending with WatchEnded or a failure
    replace: Callable[[Iterable[Mapping[str, Any]]], None]
    apply: Callable[[str, Mapping[str, Any]], None]
    stop: threading.Event = field(default_factory=threading.Event)
    backoff: Backoff = field(default_factory=Backoff)
    restarted: Callable[[str], None] = _nothing  # the cause, each time the loop starts over (metrics)
    seen: Callable[[str], None] = _nothing  # every event's type as it arrives, ERROR included (metrics)
    before_watch: Callable[[], None] = _nothing  # before each watch (capture retries failed writes here)
    resource_version: str = ""  # "" until listed, and again after 410 Gone

    def run(self) -> None:
        while not self.stop.is_set():
            if not self.resource_version and not self.relist():
                self._pause(LIST_FAILED)
                continue
            self.before_watch()
            self.watch_once()

    def relist(self) -> bool:
        """One full list handed to ``replace``; False (and the version unchanged) when a page failed."""
        version = ""

        def items() -> Iterator[Mapping[str, Any]]:
            nonlocal version
            for page in self.pages():
                if isinstance(page, ApiFailure):
                    raise _ListFailed(page)
                version = page.resource_version or version
                yield from page.items

        try:
            self.replace(items())
        except _ListFailed as exc:
            log.warning("listing %s failed: %s", self.name, exc.failure.message)
            return False
        self.resource_version = version
        self.backoff.reset()
        log.info("%s listed", self.name, extra={"fields": {"rv": version}})
        return True

    def watch_once(self) -> None:
        """Events until the stream ends, breaks or reports an error; the version follows every event."""
        for item in self.watch(self.resource_version):
            if self.stop.is_set():
                return
            if isinstance(item, WatchEnded):
                return  # the server's timeout: watch again from where we are
            if isinstance(item, ApiFailure):
                if item.gone:
                    self._gone()
                else:
                    log.warning("%s watch broke: %s", self.name, item.message)
                    self._pause(DISCONNECTED)
                return
            self.seen(item.type or "unknown")
            if item.type == "ERROR":
                if item.object.get("code") == 410:
                    self._gone()
                else:
                    log.warning("%s watch error event: %s", self.name, item.object.get("message"))
                    self._pause(ERROR_EVENT)
                return
            if item.type in APPLIED:
                self.apply(item.type, item.object)
            meta = item.object.get("metadata")
            if isinstance(meta, Mapping) and meta.get("resourceVersion"):
                self.resource_version = str(meta["resourceVersion"])
            self.backoff.reset()

    def _pause(self, cause: str) -> None:
        self.restarted(cause)
        self.stop.wait(self.backoff.next())

    def _gone(self) -> None:
        log.info("%s watch expired (410 Gone): relisting", self.name)
        self.restarted(GONE)
        self.resource_version = ""
