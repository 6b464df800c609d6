"""The fencing part of the restore policy (``fencing:``): one running copy's timings and what it does on
trouble, declared field by field as ``policy/restore.py`` declares the rest (``POLICY`` takes it as its
``fencing`` block), with the rules between its timings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from webhook.policy.schema import AtMost, Block, Choice, Field, Flag, Names, Number, Pattern

MAX_LEASE_SECONDS = 3600


class FencingStorageError(StrEnum):
    """What a restore does when the ownership records cannot be read or written."""

    HOLD = "hold"  # keep the restored job suspended until they can (nobody may be fenced yet)
    PROCEED = "proceed"  # start it anyway: availability over a possible second copy


class RenewFailure(StrEnum):
    """What a running copy does when its heartbeat cannot be renewed for ``renewDeadlineSeconds``."""

    STOP = "stop"  # step down (suspend without a savepoint) before anyone may take over
    KEEP_RUNNING = "keep-running"  # availability: keep running, a second copy becomes possible


@dataclass(frozen=True)
class KeeperPolicy:
    """The lease keeper in each fenced FlinkDeployment's JobManager pod (docs/keeper.md): on wherever
    fencing is on; the platform team turns it off here for a namespace or a job (never a label on the
    job: whoever may edit a job may not take it out of its guard)."""

    enabled: bool = True
    off_namespaces: tuple[str, ...] = ()
    off_jobs: tuple[str, ...] = ()  # namespace/name of a FlinkDeployment

    def off_for(self, namespace: str, name: str) -> str:
        """Why the keeper is off for this job ("" when it is on), naming the policy field that says so."""
        if not self.enabled:
            return "fencing.keeper.enabled is false"
        if namespace in self.off_namespaces:
            return f"fencing.keeper.offNamespaces names {namespace}"
        if f"{namespace}/{name}" in self.off_jobs:
            return f"fencing.keeper.offJobs names {namespace}/{name}"
        return ""


@dataclass(frozen=True)
class FencingPolicy:
    """One running copy (member role with --cluster; docs/failover.md "One running copy").

    ``lease_seconds`` is how long a heartbeat stays fresh unrenewed; it must span at least two polls, so
    a live cluster always renews (or acknowledges) within one lease of a fence. A holder that has not
    renewed for ``renew_deadline_seconds`` steps down (its heartbeat loop sends the suspend by the
    deadline + one poll); that, the operator's stop margin and a poll of slack fit inside the lease, so
    the holder's job has stopped before another cluster may start one (client-go's leader election:
    RenewDeadline < LeaseDuration). ``FENCING.rules`` states the timings this needs.
    """

    enabled: bool = True
    lease_seconds: float = 30.0
    poll_seconds: float = 5.0
    on_storage_error: FencingStorageError = FencingStorageError.HOLD
    renew_deadline_seconds: float = 10.0
    stop_margin_seconds: float = 10.0
    on_renew_failure: RenewFailure = RenewFailure.STOP
    # How often the agent confirms a running job's newest checkpoint and keeps its verdict
    # (restore/verdict.py), so a failover checks only what changed since; 0: never.
    verdict_seconds: int = 60
    keeper: KeeperPolicy = field(default_factory=KeeperPolicy)

    @property
    def call_timeout(self) -> float:
        """The deadline of every storage and API call the agent makes: one poll."""
        return self.poll_seconds


# The longest fencing.verdictSeconds: the agent lists every file again once its verdict is this much
# younger than a reader's limit (restore/verdict.py WRITER_MAX_AGE), so readers never find it expired.
MAX_VERDICT_SECONDS = 600


def _seconds(maximum: float) -> Number:
    return Number(0, maximum, f"must be a number of seconds in (0, {maximum:g}]")


_LEASE = _seconds(MAX_LEASE_SECONDS)
_NAMESPACE = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"

KEEPER = Block(
    KeeperPolicy,
    (
        Field(
            "enabled",
            "enabled",
            Flag(),
            "add the lease keeper to every fenced FlinkDeployment's JobManager pod (Kubernetes 1.29+); "
            "`false`: nowhere",
        ),
        Field(
            "offNamespaces",
            "off_namespaces",
            Names(
                Pattern(re.compile(f"^{_NAMESPACE}$"), 63, "{value!r} is not a namespace name"),
                "namespaces",
                True,
            ),
            "namespaces whose jobs get no keeper",
        ),
        Field(
            "offJobs",
            "off_jobs",
            Names(
                Pattern(
                    re.compile(f"^{_NAMESPACE}/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"),
                    317,
                    "{value!r} is not NAMESPACE/NAME of a FlinkDeployment",
                ),
                "NAMESPACE/NAME of FlinkDeployments",
                True,
            ),
            "FlinkDeployments or FlinkBlueGreenDeployments (`namespace/name`) that get no keeper",
        ),
    ),
)

FENCING = Block(
    FencingPolicy,
    (
        Field(
            "enabled",
            "enabled",
            Flag(),
            "fence when the member role runs with `--cluster` (without it, fencing is off whatever this "
            "says)",
        ),
        Field(
            "leaseSeconds",
            "lease_seconds",
            _LEASE,
            "a heartbeat not renewed for this long (storage time) is a dead copy",
        ),
        Field(
            "pollSeconds",
            "poll_seconds",
            _LEASE,
            "how often the agent lists and decides and its heartbeat loop renews each running copy (the "
            "loop looks every fifth of it, and retries a failed renewal then); also the deadline of every "
            "storage and API call the agent makes",
        ),
        Field(
            "onStorageError",
            "on_storage_error",
            Choice(FencingStorageError),
            "the records cannot be read or written: `hold` the restored job (the agent retries every poll) "
            "or `proceed` (start it: availability over a possible second copy)",
        ),
        Field(
            "renewDeadlineSeconds",
            "renew_deadline_seconds",
            _LEASE,
            "a running copy whose heartbeat could not be renewed for this long steps down (counted from "
            "the start of its last renewal that succeeded)",
        ),
        Field(
            "stopMarginSeconds",
            "stop_margin_seconds",
            _LEASE,
            "how long the Flink operator may take to stop a job",
        ),
        Field(
            "onRenewFailure",
            "on_renew_failure",
            Choice(RenewFailure),
            "`stop`: step down (one running copy); `keep-running`: availability over a possible second copy",
        ),
        Field(
            "verdictSeconds",
            "verdict_seconds",
            Number(
                0, MAX_VERDICT_SECONDS, f"must be whole seconds in [0, {MAX_VERDICT_SECONDS}]", integer=True
            ),
            "with `verify: files`, how often the agent checks each running job's newest checkpoint and keeps "
            "its verdict, so a failover checks only the files new since; `0`: never (a failover then checks "
            "what the last release or resume confirmed, or everything)",
        ),
        Field(
            "keeper",
            "keeper",
            KEEPER,
            "the lease keeper beside each fenced job's JobManager, which stops it when its lease cannot be "
            "renewed whatever else is down ([docs/keeper.md](docs/keeper.md)); off for a namespace or a job "
            "only here, each admission of such a job saying in an Event what that costs",
            shown_default="`{enabled: true, offNamespaces: [], offJobs: []}`",
        ),
    ),
    rules=(
        AtMost(
            "pollSeconds",
            ((2, "pollSeconds"),),
            ((1, "leaseSeconds"),),
            "a live cluster must renew its heartbeat at least twice per lease",
        ),
        AtMost(
            "renewDeadlineSeconds",
            ((2, "pollSeconds"),),
            ((1, "renewDeadlineSeconds"),),
            "a single renewal that fails (one poll's storage blip) would step a healthy job down",
        ),
        # deadline + one poll (when the heartbeat loop sends the suspend) + the operator's stop + one poll
        # of slack for what delays a step-down from outside the agent (a stalled or CPU-throttled process,
        # an API call answered at its deadline, clocks running at slightly different rates)
        AtMost(
            "renewDeadlineSeconds",
            ((1, "renewDeadlineSeconds"), (2, "pollSeconds"), (1, "stopMarginSeconds")),
            ((1, "leaseSeconds"),),
            "a cluster that cannot renew must have stopped its copies before its lease runs out, with one "
            "poll of slack",
        ),
    ),
)
