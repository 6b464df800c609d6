"""The texts a hold annotation carries: whom a held restore waits for, and since when (for people
reading the object; the agent rewrites one when its subject changes). Pure.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from webhook.fencing.layout import format_time
from webhook.fencing.protocol import HoldJudgement, Waiting


def hold_subject(waiting: tuple[Waiting, ...], epoch: int) -> str:
    """The part of a hold text that changes only when whom it waits for, or what they do, changes (the
    ages move every poll): the agent rewrites the annotation when this part differs."""
    parts = [f"{w.cluster} (stopping its job)" if w.stopping_since else w.cluster for w in waiting]
    return f"epoch {epoch}: waiting for {', '.join(parts)} to stop"


def hold_text(judgement: HoldJudgement, epoch: int, local_now: datetime) -> str:
    """Whom a hold waits for, since when they renewed (storage time) and until when the lease runs if
    they stop renewing (``until``: by this machine's clock, for people)."""
    subject = hold_subject(judgement.waiting, epoch)
    beats = "; ".join(_waiting_text(w) for w in judgement.waiting)
    until = format_time(local_now + timedelta(seconds=judgement.remaining))
    return f"{subject}; {beats}; lease runs out {until} unless renewed"


def _waiting_text(waiting: Waiting) -> str:
    text = f"{waiting.cluster} renewed its heartbeat {format_time(waiting.renewed)} (storage time)"
    if waiting.age is not None:
        text += f", {waiting.age:.0f}s old"
    if waiting.stopping_since is not None:
        text += f", asked its operator to stop the job {format_time(waiting.stopping_since)}"
    return text


def unknown_age_text(clusters: tuple[str, ...], epoch: int) -> str:
    return f"epoch {epoch}: waiting for {', '.join(clusters)} (a dry run writes no fence; ages unknown)"


def unvouched_text(epoch: int, problem: str) -> str:
    """A restore the fencing agent cannot vouch for: held until it can (it then judges the hold)."""
    return f"epoch {epoch}: waiting for this cluster's fencing agent ({problem[:300]})"


def storage_text(epoch: int, problem: str) -> str:
    return f"epoch {epoch}: waiting for the ownership records to be readable ({problem[:300]})"


def unchecked_text(epoch: int, problem: str) -> str:
    """A release that could not check the newest checkpoint: it waits, and is tried again every poll."""
    return (
        f"epoch {epoch}: release waits until the newest checkpoint can be checked, tried again every "
        f"poll ({problem[:300]})"
    )
