"""The lease keeper of a copy no failover admission made: above all a job's first copy on its first cluster
(issue 47, docs/keeper.md "When the webhook adds it"); and a session cluster's (``session_cluster_part``).
Pure.

The trigger, held and fenced entries of the member webhook see only what a failover touched; the chart's
``first-copy`` entry sends the rest of the FlinkDeployments and FlinkBlueGreenDeployments that run a job,
at CREATE and UPDATE, and the restore decision for them is SKIP. Such a copy keeps the lease the fencing
agent keeps for it: the agent's own reading of the stored object (``fencing/copies.py``: ``as_restored``,
``epoch_of``; ``fencing/directories.py``: ``checkpoint_dir_of``), so keeper and agent renew the same
heartbeat. For a first copy that is its spec's checkpoint directory (else the policy's default) and epoch
0, with no fence: the keeper's own newest fence in its listing wins, and any newer fence of another
cluster stops the JobManager. An UPDATE that moves the directory moves the keeper's with it (the pod
template changes and the JobManager's pod rolls), as the agent follows the spec. A restored copy whose
trigger labels are gone keeps its restore's epoch and directory the same way. Nothing else of the object
changes (no labels, no decision annotations): it is no restore. No storage call: every write of every job
passes here.
"""

from __future__ import annotations

from webhook.common.contract import FENCED
from webhook.common.flink import JOBMANAGER_KINDS, FlinkResource, runs_keeper
from webhook.fencing.copies import as_restored, epoch_of
from webhook.fencing.directories import checkpoint_dir_of
from webhook.member.keeper import Admission, Keeping, KeptLease, Saying, keeping
from webhook.policy.restore import RestorePolicy
from webhook.restore.outcome import RestoreOutcome, triggered
from webhook.restore.updates import held_before


def first_copy_part(admission: Admission) -> Keeping | None:
    """The keeper's part of admitting a copy no failover made (None: not such a copy, or no lease to keep:
    no usable checkpoint directory). Events where it is created, and where an UPDATE adds or drops the
    keeper; a pod template that keeps the keeper out refuses a CREATE, and an UPDATE only of a copy
    that runs it (refusing every write of a job that ran without it would wedge its operator)."""
    resource, old, policy = admission.resource, admission.old, admission.policy
    if admission.decision.outcome is not RestoreOutcome.SKIP or not unlabelled(resource, old, policy):
        return None
    view, _ = as_restored(resource, policy)  # a record's directory where a restore left one
    checkpoint_dir = checkpoint_dir_of(view, policy)
    if checkpoint_dir is None:
        return None  # nothing to keep: the agent keeps nothing for it either
    running = admission.old_obj is not None and runs_keeper(admission.old_obj)
    created = admission.operation == "CREATE"
    lease = KeptLease(epoch_of(resource, policy), checkpoint_dir, "from its spec")
    saying = Saying(created or running, created or not running)
    kept = keeping(admission.obj, resource, policy, admission.setup, lease, saying, running)
    if kept.refused and not (created or running):
        return Keeping(kept.kept, warnings=(kept.refused,))
    return kept


def unlabelled(resource: FlinkResource, old: FlinkResource | None, policy: RestorePolicy) -> bool:
    """A job's FlinkDeployment or FlinkBlueGreenDeployment that is no failover, no stale copy the agent
    stopped, not held and no blue/green child (its parent's template carries the keeper): what the
    chart's first-copy entry sends (its matchConditions ask no trigger label on either version, to keep
    the entries disjoint), and an UPDATE that drops the trigger labels, which the trigger entries send
    by its old labels: the copy it becomes keeps its keeper (the restore's, read from its record)."""
    if resource.kind not in JOBMANAGER_KINDS or resource.job is None or resource.deleting:
        return False
    if triggered(resource, policy):
        return False
    for version in (resource, old):
        if version is not None and (version.blue_green_parent or version.labels.get(policy.key(FENCED))):
            return False
    return not held_before(old, policy)


def no_failover_part(admission: Admission) -> Keeping | None:
    """What the chart's first-copy entry sends: a job's first copy, or a session cluster."""
    return first_copy_part(admission) or session_cluster_part(admission)


def session_cluster_part(admission: Admission) -> Keeping | None:
    """The keeper's part of admitting a session cluster (a FlinkDeployment without a job, which the
    chart's first-copy entry sends too): its keeper, in session mode, keeps the leases of the fenced
    FlinkSessionJobs it runs, whose records lie below its checkpoint directory (its own, else the
    policy's default; docs/keeper.md "FlinkSessionJobs"). None: not a session cluster, or no directory.
    Events and refusals as for a first copy."""
    resource, policy = admission.resource, admission.policy
    if admission.decision.outcome is not RestoreOutcome.SKIP or not is_session_cluster(resource, policy):
        return None
    checkpoint_dir = checkpoint_dir_of(resource, policy)
    if checkpoint_dir is None:
        return None
    running = admission.old_obj is not None and runs_keeper(admission.old_obj)
    created = admission.operation == "CREATE"
    lease = KeptLease(0, checkpoint_dir, "from the session cluster's spec", session=True)
    saying = Saying(created or running, created or not running)
    kept = keeping(admission.obj, resource, policy, admission.setup, lease, saying, running)
    if kept.refused and not (created or running):
        return Keeping(kept.kept, warnings=(kept.refused,))
    return kept


def is_session_cluster(resource: FlinkResource, policy: RestorePolicy) -> bool:
    """A session cluster no failover moves here: a FlinkDeployment without a job, not being deleted,
    without a trigger label."""
    if resource.kind != "FlinkDeployment" or resource.job is not None or resource.deleting:
        return False
    return not triggered(resource, policy)
