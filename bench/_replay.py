"""The store's floor of one admission: the requests the product sent, as the proxy recorded them
(``tests/support/tcpproxy.py`` ``Sent``), sent again by a bare HTTP client (urllib3, no product code)
with their own headers and signatures, in the fewest rounds their dependencies allow.

What a request needs before it can be sent (and nothing else waits): a checkpoint's folder listing
or ``_metadata`` read needs the job directory's listing (which names the ``chk-N``); a request about
the files a ``_metadata`` names (a HEAD, a listing below ``shared/`` or ``taskowned/``) needs every
``_metadata`` read and the job's verdict; a listing's next page needs its previous page. The job
directory's listing, the verdict, the savepoint directory's listing and the checkpoint directory's
listing need nothing: all of them go out at once. Within those bounds as many requests are in flight
as the product had at its busiest (``peak``). A request the product made after another it did not
need is therefore in the floor's first possible round: time the product spends waiting in sequence
where it could ask side by side counts as its own.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import parse_qs

import urllib3

from tests.support.tcpproxy import Sent

_CHK = re.compile(r"/chk-\d+(/|$)")
_DROPPED = {"host", "connection", "content-length"}


@dataclass(frozen=True)
class Shape:
    """How the requests of one admission went out: ``rounds`` (requests per round, a request in the
    round after the last one answered before it started) and ``peak`` (the most in flight at once)."""

    rounds: tuple[int, ...]
    peak: int

    def __str__(self) -> str:
        return f"{len(self.rounds)} rounds ({' + '.join(map(str, self.rounds))}), at most {self.peak} at once"


def kind(sent: Sent, job: str) -> str:
    """``jobdir``, ``verdict``, ``snapshot`` (a chk-N's listing or _metadata), ``files`` (what a
    _metadata names) or ``other`` (needs nothing)."""
    path, _, query = sent.target.partition("?")
    params = parse_qs(query)
    if path.endswith("flink-failover-verdict.json"):
        return "verdict"
    prefix = params.get("prefix", [""])[0]
    if "list-type" in params or "prefix" in params:
        if "/shared/" in f"/{prefix}" or "/taskowned/" in f"/{prefix}":
            return "files"
        if _CHK.search(f"/{prefix}"):
            return "snapshot"
        if prefix.rstrip("/").endswith(job):
            return "jobdir"
        return "other"
    if _CHK.search(path):
        return "snapshot"
    return "files" if sent.method == "HEAD" else "other"


def _needs(sent: Sequence[Sent], job: str) -> list[list[int]]:
    kinds = [kind(s, job) for s in sent]
    needs: list[list[int]] = []
    for i, s in enumerate(sent):
        wanted = {"snapshot": {"jobdir"}, "files": {"snapshot", "verdict"}}.get(kinds[i], set())
        mine = [j for j in range(i) if kinds[j] in wanted]
        if "continuation-token" in s.target:  # the page before it (same path and prefix)
            base = _without_token(s.target)
            before = [j for j in range(i) if _without_token(sent[j].target) == base]
            mine += before[-1:]
        needs.append(mine)
    return needs


def _without_token(target: str) -> str:
    path, _, query = target.partition("?")
    params = parse_qs(query)
    return path + repr(
        sorted((k, v) for k, v in params.items() if not k.startswith(("continuation", "X-Amz")))
    )


def shape(sent: Sequence[Sent]) -> Shape:
    """The product's own rounds and peak, from the recording."""
    rounds: list[int] = []
    for s in sent:
        before = [rounds[j] for j, q in enumerate(sent[: len(rounds)]) if q.answered <= s.started]
        rounds.append(1 + max(before, default=0))
    counts = [rounds.count(r) for r in range(1, max(rounds, default=0) + 1)]
    peak = max((sum(1 for q in sent if q.started <= s.started < q.answered) for s in sent), default=0)
    return Shape(tuple(counts), peak)


def floor_shape(sent: Sequence[Sent], job: str) -> Shape:
    """The rounds the floor's dependencies allow (``peak``: the product's)."""
    needs = _needs(sent, job)
    rounds: list[int] = []
    for mine in needs:
        rounds.append(1 + max((rounds[j] for j in mine), default=0))
    counts = [rounds.count(r) for r in range(1, max(rounds, default=0) + 1)]
    return Shape(tuple(counts), shape(sent).peak)


class Replay:
    """``sent`` sent again to ``endpoint`` (scheme://host:port) by a bare client, ``lanes`` at once."""

    def __init__(self, sent: Sequence[Sent], job: str, endpoint: str, lanes: int) -> None:
        self.sent = list(sent)
        self.needs = _needs(self.sent, job)
        self.endpoint = endpoint.rstrip("/")
        self.lanes = max(1, lanes)
        self.pool = urllib3.PoolManager(maxsize=self.lanes, block=False)
        self.threads = ThreadPoolExecutor(self.lanes)

    def close(self) -> None:
        self.threads.shutdown()
        self.pool.clear()

    def once(self) -> float:
        """Seconds from the first request sent to the last answer read; every answer as recorded
        (a status below 500)."""
        done: list[threading.Event] = [threading.Event() for _ in self.sent]
        statuses: list[int] = [0] * len(self.sent)

        def send(i: int) -> None:
            try:
                for j in self.needs[i]:
                    done[j].wait()
                s = self.sent[i]
                headers = {k: v for k, v in s.headers if k.lower() not in _DROPPED}
                answer = self.pool.request(
                    s.method, self.endpoint + s.target, headers=headers, retries=False, timeout=60
                )
                statuses[i] = answer.status
            finally:
                done[i].set()

        started = time.perf_counter()
        futures: list[Future[None]] = [self.threads.submit(send, i) for i in range(len(self.sent))]
        for future in futures:
            future.result()
        seconds = time.perf_counter() - started
        failed = [s for s in statuses if s >= 500 or s == 0]
        assert not failed, f"the replay failed: {failed[:5]}"
        return seconds
