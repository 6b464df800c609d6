"""The heartbeat a restore admitted running was given at its admission, looked at once more afterwards.

The member webhook writes this cluster's heartbeat when it admits a failover CREATE that starts at once
(``gate.FencingGate.admit``): a failover that follows before the agent's first poll waits for this copy
too. The agent does not know that heartbeat until its poll lists the object; an object deleted before
then (Karmada evicting it at once) or whose CREATE was refused after this webhook answered (another
webhook, validation) would leave it until its lease ran out, and the next failover of the job back would
wait that lease (``lease-expiry``) instead of being released at once (``no-heartbeat``). So, once the
CREATE has been persisted or refused (``delay``), the object is read from its member API and the record
from storage: ``judge`` says whether the heartbeat goes. Pure: the reads and the removal are the edge's
(``member/followup.py``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.common.paths import StoragePath


@dataclass(frozen=True)
class Admitted:
    """One heartbeat written at an admission: for which object, where, and exactly what was written."""

    kind: str
    namespace: str
    name: str
    folder: StoragePath  # the workload's ownership folder
    body: Mapping[str, Any]  # the heartbeat as written (``records.heartbeat_body``)

    @property
    def shown(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Seen:
    """What the follow-up read. ``present`` None: the member API gave no answer (``error`` says why)."""

    present: bool | None
    record: Mapping[str, Any] | None = None  # the heartbeat as storage has it now (None: none)
    error: str = ""  # the member API or the storage failed: nothing is removed


class Outcome(enum.StrEnum):
    REMOVED = "removed"  # the object is absent and the record is still the admission's: it goes
    PRESENT = "present"  # the object exists: the agent owns its heartbeat from its next poll
    REWRITTEN = "rewritten"  # someone renewed the record since (the agent, a later admission): kept
    GONE = "gone"  # no record any more (the agent removed it already)
    ERROR = "error"  # could not tell: looked at again (``again``), then left to its lease
    DROPPED = "dropped"  # the queue was full: never looked at
    LEFT = "left"  # every look could not tell (``again``): left to its lease


def judge(admitted: Admitted, seen: Seen) -> Outcome:
    """Remove only what this admission wrote, for an object that is not there: an object present is the
    agent's to heartbeat, and a record rewritten since is a renewal (or a newer admission's) that a
    running copy may depend on."""
    if seen.error or seen.present is None:
        return Outcome.ERROR
    if seen.present:
        return Outcome.PRESENT
    if seen.record is None:
        return Outcome.GONE
    if dict(seen.record) != dict(admitted.body):
        return Outcome.REWRITTEN
    return Outcome.REMOVED


def delay(deadline_seconds: float, poll_seconds: float, lease_seconds: float) -> float:
    """Seconds from the heartbeat's write to the look: the admission deadline (this webhook has answered
    by then) plus one poll for the rest of the admission chain to persist or refuse the CREATE (the
    chart's default webhook timeout, ``ceil(deadline) + 5``, is 10 s: so is this, with the default 5 s
    deadline and 5 s polls); at most half a lease, so a failover back is released within half the wait
    it had before. A lease spans at least two polls, so the cap leaves at least one."""
    return min(deadline_seconds + poll_seconds, lease_seconds / 2)


MAX_LOOKS = 6


def again(looks: int, written_ago: float, poll_seconds: float, lease_seconds: float) -> float | None:
    """Seconds to the next look after ``looks`` looks that could not tell (a member API or a storage
    read past its deadline on a busy cluster), or None: left to its lease. The wait doubles from one
    poll; no look is due once the heartbeat's lease has run out (the agent's own rules hold from then)."""
    if looks >= MAX_LOOKS:
        return None
    wait = poll_seconds * 2 ** (looks - 1)
    return wait if written_ago + wait < lease_seconds else None
