"""When the agent takes a copy back from its lease keeper, pure (``renewer.Renewer`` keeps the state and
does the reads; docs/keeper.md "What the agent leaves to the keeper").

A copy handed over (``renewal.keeper_renews``) is renewed by the keeper in its pod alone. A keeper that
dies for good (crash-loops, OOM-killed, its image not pulled on a restart) beside a JobManager that runs
on renews nothing: the lease would expire and another cluster start the job while this one runs. So the
agent watches the record it left (``Watch``): it reads it while the copy is handed over, and takes the
copy back once the record has not moved for ``renewDeadlineSeconds`` on its own monotonic clock
(``silent``). "Moved": the keeper's body changed (each renewal writes its own time, to the millisecond);
a failed read, a missing record or one that is not the keeper's for this epoch moves nothing. A live
keeper that has not renewed for its deadline has killed its JobManager; a dead one renews no more:
either way the copy is the agent's again, renewed at once, and stepped down if that fails.

**Counted from no later than the keeper's write.** ``since`` is the start of the last read that did
not find the record it shows now (the record landed after that read began), or at the hand-over the
start of the agent's own last renewal that succeeded (the keeper's record landed over it). Another
cluster counts the lease from the record's storage time ``m``, and ``since <= m``.

**Read often enough to see a live keeper.** At least once a poll, and every retry period (a fifth of a
poll) from a retry period before the record is a poll old, when a keeper renewing once a poll writes
again (``read_due``); judged once each read answers, and at every look while one is in flight (a read
that hangs until its deadline delays nothing). A live keeper's record is then seen within a retry
period of landing, ``since`` trails each renewal by about a retry period and a read, and ``now -
since`` stays about ``pollSeconds + 2 x pollSeconds / 5`` (7 s at the defaults; 8 s with one of its
renewals retried) under the 10 s deadline: no take-back. About two GETs a poll per handed-over copy.
Right after a hand-over the first record counts from the agent's own last write, up to a poll before it
landed: a take-back there is undone by the keeper's next record at the renewal's read (below).

**Taken back before the lease can end elsewhere.** With the defaults (lease 30 s, renew deadline 10 s,
poll 5 s, stop margin 10 s), on the agent's clock: taken back at ``since + 10 s`` (plus a look), the copy
counts as renewed at ``since + 5 s`` (``taken_back``: one poll before its deadline, as a copy first
seen). The agent renews it a retry period later, reading the record first (a keeper renewal that landed
just late hands the copy over again, unsaid and unwritten), and has until ``since + 15 s``; failing that
it steps the copy down then, the suspend sent by ``since + 20 s`` (one poll, the call's deadline), the
job stopped within the stop margin, by ``since + 30 s <= m + 30 s``, the earliest another cluster may
count the lease as expired. In general ``since + renewDeadlineSeconds + 2 x pollSeconds +
stopMarginSeconds <= since + leaseSeconds`` is the policy's rule (``policy/fencing.py``): the poll
of slack it keeps for the agent's own copies is here the poll the agent gets to renew a copy taken back.
A renewal that succeeds in that poll is stamped by ``since + 15 s`` plus its call: the lease moves on
before it ends. The agent cannot tell a dead keeper from its own storage path lost (its reads fail): it
takes the copy back all the same, and steps it down if it cannot renew (safe; an availability cost
where the keeper still renews). ``tests/fencing/test_takeback.py`` replays this on a timeline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from webhook.fencing.renewal import first_seen, retry_seconds
from webhook.policy.restore import FencingPolicy


@dataclass(frozen=True)
class Watch:
    """A handed-over copy's record as the agent last read it (times on the agent's monotonic clock)."""

    record: str | None  # the keeper's body last read (``identity``); None: none read yet
    since: float  # no later than that record landed: the start of the last read that did not find it
    looked: float  # the start of the last read the storage answered
    read: float  # the start of the last read tried (answered or not)


def identity(body: Mapping[str, Any] | None) -> str | None:
    """What tells one keeper renewal from the next: its whole body (its ``written`` time changes)."""
    return None if body is None else json.dumps(dict(body), sort_keys=True, default=str)


def handed(record: str | None, after: float, now: float) -> Watch:
    """The watch of a copy handed over on seeing ``record`` in a read started at ``now``. The record
    landed after ``after``: the start of the agent's own last renewal that succeeded (the record is
    over it), or, handed over again, of the last read that found the record it was taken back from."""
    return Watch(record, since=min(after, now), looked=now, read=now)


def answered(watch: Watch, record: str | None, started: float) -> Watch:
    """A read started at ``started`` found ``record`` (None: no record, or not the keeper's for this
    epoch: nothing moved). A record it finds anew landed after the last read answered began."""
    looked, read = max(watch.looked, started), max(watch.read, started)
    if record is None or record == watch.record:
        return replace(watch, looked=looked, read=read)
    return Watch(record, since=watch.looked, looked=looked, read=read)


def failed(watch: Watch, started: float) -> Watch:
    """A read started at ``started`` failed (or passed its deadline): it says nothing, nothing moved."""
    return replace(watch, read=max(watch.read, started))


def read_due(watch: Watch, now: float, policy: FencingPolicy) -> bool:
    """At least once a poll; every retry period from a retry period before the record is a poll old (a
    live keeper renews about then; the looks themselves come a retry period apart, give or take)."""
    retry = retry_seconds(policy)
    if now - watch.read >= policy.poll_seconds - retry / 10:
        return True
    return now - watch.since >= policy.poll_seconds - retry and now - watch.read >= retry * 0.9


def silent(watch: Watch, now: float, policy: FencingPolicy) -> float | None:
    """How long the record has not moved, once that reaches the renew deadline: the keeper renews no
    more, and the copy is taken back. None while it may still be renewing."""
    quiet = now - watch.since
    return quiet if quiet >= policy.renew_deadline_seconds else None


def taken_back(watch: Watch, policy: FencingPolicy) -> float:
    """The renewal a copy taken back counts as: one poll before the deadline counted from ``since`` (as
    a copy first seen at ``since + renewDeadlineSeconds``): renewed at once, stepped down if it cannot be
    within that poll."""
    return first_seen(watch.since + policy.renew_deadline_seconds, policy)
