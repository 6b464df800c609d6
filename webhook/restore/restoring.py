"""The restoring Flink: which Flink loads a failed-over job's snapshot and in which claim mode
(``restoring_flink``); and no silent rewind: which of the job's own snapshots, newer than the one a
restore would take, were passed over only because that Flink cannot load them (its version, its claim
mode, 1.x state into Flink 2), and how much newer state restoring the older one leaves behind, in the
words of the hold (policy ``onUnloadable: hold``) and of the warning (``older``). docs/flink.md "Claim
mode as the restoring Flink reads it" and "No silent rewind".

Pure: the lookup's answer (``restore/snapshots.py``) and the reasons ``common/flink_reads.py`` gives, read
back by ``compat.unloadable``; ``restore/decide.py`` decides with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.common.flink import FlinkResource
from webhook.common.flink_reads import (
    Layer,
    Target,
    Unloadable,
    is_target_problem,
    target_of,
    unloadable,
    what_loads,
)
from webhook.common.paths import StoragePath
from webhook.policy.restore import OnUnloadable, Prefer, RestorePolicy
from webhook.restore.snapshots import Candidate, Snapshots


def restoring_flink(own: FlinkResource, cluster: FlinkResource | None, policy: RestorePolicy) -> Target:
    """The Flink that will load the snapshot: the object's own ``spec.flinkVersion`` and image, or for a
    FlinkSessionJob its session cluster's (when it was read); its claim mode from its configuration, its
    session cluster's and the operator's defaults (policy ``flinkDefaults``), in that precedence."""
    defaults, unread = _operator_defaults(policy)
    if own.kind == "FlinkSessionJob":
        if cluster is None:
            return Target(
                unknown="a FlinkSessionJob runs the Flink of its session cluster, which was not read"
            )
        where = f"session cluster FlinkDeployment {cluster.namespace}/{cluster.name} "
        # The job's own settings over its cluster's, as the operator submits it.
        layers = (
            ("flinkConfiguration", own.configuration),
            (f"{where}flinkConfiguration", cluster.configuration),
            *defaults,
        )
        return target_of(cluster.flink_version, cluster.image, policy.flink_versions, where, layers, unread)
    layers = (("flinkConfiguration", own.configuration), *defaults)
    return target_of(own.flink_version, own.image, policy.flink_versions, configuration=layers, unread=unread)


def _operator_defaults(policy: RestorePolicy) -> tuple[tuple[Layer, ...], str]:
    """The operator's defaultConfiguration as the policy mirrors it (a layer under the job's own), or
    why it is not known."""
    if policy.flink_defaults is None:
        return (), "the operator's defaultConfiguration is not known (policy flinkDefaults not set)"
    return (("policy flinkDefaults (the operator's defaultConfiguration)", dict(policy.flink_defaults)),), ""


def id_note(candidate: Candidate) -> str:
    return f" (checkpoint id {candidate.checkpoint_id})" if candidate.checkpoint_id is not None else ""


def unloadable_newer(result: Snapshots, chosen: Candidate, floor: bool, prefer: Prefer) -> list[Unloadable]:
    """The job's own snapshots, newer than ``chosen``, passed over only because the restoring Flink
    cannot load them (newest first): each would have been restored in its stead. Every one is newer
    than the floor; a checkpoint passed over in the scan is newer than the checkpoint it found; an
    id not told (a savepoint checked by its header) counts as newer: no rewind is assumed away."""
    found: list[Unloadable] = []
    for reason in result.rejected:
        each = unloadable(reason)
        if each is None:
            continue
        if not floor and prefer is not Prefer.NEWEST and chosen.kind == prefer.value != each.kind:
            continue  # the kind the policy prefers was found: the other kind was never to be taken
        if (
            floor
            or each.checkpoint_id is None
            or chosen.checkpoint_id is None
            or each.checkpoint_id > chosen.checkpoint_id
        ):
            found.append(each)
    return sorted(found, key=lambda u: -1 if u.checkpoint_id is None else -u.checkpoint_id)


@dataclass(frozen=True)
class LeftBehind:
    held: str  # why the job is held (onUnloadable: hold)
    rewound: str  # the warning of a restore of the older state (onUnloadable: older)


def left_behind(
    passed: list[Unloadable],
    chosen: Candidate,
    floor: bool,
    job_dir: StoragePath | None,
    resource: FlinkResource,
    policy: RestorePolicy,
) -> LeftBehind:
    """What restoring ``chosen`` would leave behind, in the words of the hold and of the warning: the
    short names first (kubectl shows 240 characters), the paths and the reason after."""
    newest = passed[0]
    fix = what_loads(newest.why) or "run a Flink that loads it"
    shown = [_unloadable_name(u) for u in passed[:3]]
    more = f" and {len(passed) - 3} more" if len(passed) > 3 else ""
    count = f"{len(passed)} newer snapshot{'s' if len(passed) != 1 else ''}"
    how_much = f"{count} behind ({', '.join(shown)}{more}{_age(passed, chosen, resource, policy)})"
    older = f"{'the snapshot it started from, ' if floor else ''}{chosen.path.name}{id_note(chosen)}"
    newest_path = newest.name if newest.kind == "savepoint" or job_dir is None else job_dir.child(newest.name)
    why = f"{_unloadable_name(newest)}: {newest.why}"
    held = (
        f"held rather than rewound: the newest snapshot, {_unloadable_name(newest)}, loads if you {fix}; "
        f"restoring the older {older} would leave {how_much} (policy onUnloadable: hold). To restore the "
        f"newest: {fix}, then spec.job.initialSavepointPath {newest_path}; to restore the older: "
        f"spec.job.initialSavepointPath {chosen.path}. {why}"
    )
    rewound = (
        f"rewound: restored the older {older}, leaving {how_much} that the restoring Flink cannot load "
        f"(the newest loads if you {fix}; policy onUnloadable: older). {why}"
    )
    return LeftBehind(held, rewound)


@dataclass(frozen=True)
class Rewind:
    """The no-silent-rewind rule's answer for restoring ``chosen`` (both "" when nothing newer was
    passed over for what the restoring Flink cannot load)."""

    held: str = ""  # hold with this (policy onUnloadable: hold)
    rewound: str = ""  # restore, with this warning in the Event (policy onUnloadable: older)


def judge_rewind(
    result: Snapshots,
    chosen: Candidate,
    floor: bool,
    job_dir: StoragePath | None,
    resource: FlinkResource,
    policy: RestorePolicy,
) -> Rewind:
    """No silent rewind, one rule for every start from state (the webhook's restore, the agent's
    resume): restoring ``chosen`` while newer snapshots were passed over only because the restoring
    Flink cannot load them (not for damage) holds, unless the policy allows the older state."""
    passed = unloadable_newer(result, chosen, floor, policy.prefer)
    if not passed:
        return Rewind()
    left = left_behind(passed, chosen, floor, job_dir, resource, policy)
    if policy.on_unloadable is OnUnloadable.HOLD:
        return Rewind(held=left.held)
    return Rewind(rewound=left.rewound)


def cannot_load_any(result: Snapshots) -> str:
    """The first snapshot passed over because the restoring Flink cannot load it, when nothing else is
    left to restore ("" when none was): such state holds, never starts empty nor from older state."""
    return next((r for r in result.rejected if is_target_problem(r)), "")


def _unloadable_name(each: Unloadable) -> str:
    if each.kind == "checkpoint":
        return each.name
    told = f" (checkpoint id {each.checkpoint_id})" if each.checkpoint_id is not None else ""
    return f"{each.name.rpartition('/')[2]}{told}"


def _age(passed: list[Unloadable], chosen: Candidate, resource: FlinkResource, policy: RestorePolicy) -> str:
    """ "; up to 4 checkpoint ids newer, about 8 s at execution.checkpointing.interval 2 s": how much
    newer the newest passed over is ("" when the ids do not tell)."""
    ids = [u.checkpoint_id for u in passed if u.checkpoint_id is not None]
    if not ids or chosen.checkpoint_id is None or max(ids) <= chosen.checkpoint_id:
        return ""
    gap = max(ids) - chosen.checkpoint_id
    said = f"; {gap} checkpoint id{'s' if gap != 1 else ''} newer"
    defaults = dict(policy.flink_defaults or ())
    raw = resource.configuration.get(INTERVAL_KEY, "") or defaults.get(INTERVAL_KEY, "")
    seconds = _duration_seconds(raw)
    if seconds:
        said += f", about {_seconds_text(gap * seconds)} at {INTERVAL_KEY} {raw.strip()}"
    return said


INTERVAL_KEY = "execution.checkpointing.interval"
_DURATION_UNITS = {
    "": 0.001,
    "ms": 0.001, "milli": 0.001, "millis": 0.001, "millisecond": 0.001, "milliseconds": 0.001,
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
}  # fmt: skip


def _duration_seconds(raw: str) -> float:
    """A Flink duration ("2 s", "1min", "500": milliseconds) in seconds; 0 when it is not one."""
    text = raw.strip().lower()
    digits = text.rstrip("abcdefghijklmnopqrstuvwxyz ").strip()
    unit = text[len(digits) :].strip()
    if not digits.isdigit() or unit not in _DURATION_UNITS:
        return 0
    return int(digits) * _DURATION_UNITS[unit]


def _seconds_text(seconds: float) -> str:
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"
