"""What a poll's decision asks for one copy (``decide.decide``'s answer, pure): the ``Action`` it logs
and counts, and the chains of typed effects the agent carries out (``agent.FencingAgent._apply``). The
heartbeat loop's own effects (``Beat``, ``KeepRenewing``, ``LookForKeeper``) are ``renewal``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from webhook.fencing.protocol import Fence, HoldJudgement, ReleaseCause
from webhook.fencing.renewal import Beat, KeepRenewing, LookForKeeper


class Action(StrEnum):
    """What happened to a copy in one poll: the log's verb, the metrics', and what tests read."""

    HEARTBEAT = "heartbeat"
    ENDING = "ending"  # deleted or suspended by someone else: heartbeats until its operator reports the stop
    STOPPING = "stopping"
    WAITING_FOR_OPERATOR = "waiting-for-operator"
    ACKED = "acked"
    FENCED = "fenced"
    STEPPED_DOWN = "stepped-down"
    RESUMED = "resumed"
    HELD = "held"
    RELEASED = "released"
    SUPERSEDED = "superseded"
    SKIPPED = "skipped"
    ERROR = "error"  # the records were unreadable, or an effect failed (``Trouble`` says which side)
    PENDING = "pending"  # the storage had not answered when the poll ended


# A poll leaves these copies to the next one; a recheck between polls looks at them again.
WAITING = frozenset({Action.STOPPING, Action.HELD, Action.WAITING_FOR_OPERATOR, Action.ERROR, Action.PENDING})


class Trouble(StrEnum):
    """Why an action is ERROR or PENDING: the cause the Event and the metrics are chosen from."""

    NONE = ""
    STORAGE = "storage"  # the ownership records (or the checkpoints) could not be read or written
    API = "api"  # the member cluster's API server refused or did not answer a patch


@dataclass(frozen=True)
class WriteFence:
    epoch: int  # the fence of this copy's own restore, missing (storage was down at admission)


@dataclass(frozen=True)
class Stop:
    fence: Fence  # suspend the copy without a savepoint, labelled fenced by this fence


@dataclass(frozen=True)
class MarkStopping:
    epoch: int  # record that the operator was asked to stop the copy for this fence


@dataclass(frozen=True)
class Acknowledge:
    epoch: int  # the operator reported the copy stopped: write the ack, drop the heartbeat


@dataclass(frozen=True)
class Resume:
    """Start a stepped-down copy again from its own newest restorable checkpoint."""


@dataclass(frozen=True)
class RewriteHold:
    judgement: HoldJudgement  # rewrite the hold annotation from this judgement


@dataclass(frozen=True)
class StorageHold:
    """Hold with "waiting for the ownership records to be readable" (``checkpoint``: "waiting until the
    newest checkpoint can be checked", a release that could not check it)."""

    problem: str
    checkpoint: bool = False


@dataclass(frozen=True)
class Release:
    cause: ReleaseCause  # start a held copy from the newest restorable state, resolved now


@dataclass(frozen=True)
class Supersede:
    fence: Fence  # a held copy a newer restore elsewhere owns: keep it suspended for good


Effect = (
    Beat
    | KeepRenewing
    | LookForKeeper
    | WriteFence
    | Stop
    | MarkStopping
    | Acknowledge
    | Resume
    | RewriteHold
    | StorageHold
    | Release
    | Supersede
)

# Effects that touch only the storage; the others patch the object (a release and a resume read the
# storage first): a failed effect's trouble is its side.
STORAGE_EFFECTS = (Beat, KeepRenewing, LookForKeeper, WriteFence, MarkStopping, Acknowledge)


def trouble_of(effect: Effect) -> Trouble:
    return Trouble.STORAGE if isinstance(effect, STORAGE_EFFECTS) else Trouble.API


Chain = tuple[Effect, ...]


@dataclass(frozen=True, kw_only=True)
class Effects:
    """What to do with one copy this poll (``decide.decide``'s answer): chains of effects. The chains
    are independent (a stale copy is stopped even when its heartbeat cannot be written, and renewed even
    when the stop fails); inside a chain each effect runs only if the one before it succeeded (a resume
    only after a renewal)."""

    action: Action
    detail: str = ""
    chains: tuple[Chain, ...] = ()
    trouble: Trouble = Trouble.NONE


def effects(action: Action, detail: str = "", *chains: Chain, trouble: Trouble = Trouble.NONE) -> Effects:
    """``action`` with its ``detail`` and the chains that are not empty."""
    return Effects(action=action, detail=detail, chains=tuple(c for c in chains if c), trouble=trouble)
