"""Where a Flink object's fencing records and snapshots live: its checkpoint and savepoint directories
as the policy allows them, the workload its records are kept for. Pure.
"""

from __future__ import annotations

from webhook.common.flink import BLUE_GREEN, FlinkResource
from webhook.common.paths import StoragePath, StoragePathError
from webhook.fencing.layout import FOLDER, Workload
from webhook.policy.restore import RestorePolicy


def ownership_folder(resource: FlinkResource, policy: RestorePolicy) -> StoragePath | None:
    """``<checkpoint-dir>/flink-failover/...`` in the job's own scheme; None when it has no usable one."""
    root = checkpoint_dir_of(resource, policy)
    if root is None or not resource.name:
        return None
    try:
        return workload_of(resource).folder(root)
    except StoragePathError:
        return None


def clock_folder(resource: FlinkResource, policy: RestorePolicy) -> StoragePath | None:
    """``<checkpoint-dir>/flink-failover``: where an agent learns the storage's time once per poll."""
    root = checkpoint_dir_of(resource, policy)
    return None if root is None else root.child(FOLDER)


def checkpoint_dir_of(resource: FlinkResource, policy: RestorePolicy) -> StoragePath | None:
    return _usable_dir(resource.checkpoint_dir or policy.default_checkpoint_dir, policy)


def savepoint_dir_of(resource: FlinkResource, policy: RestorePolicy) -> StoragePath | None:
    """The job's savepoint directory (its own configuration, else the policy's), when usable."""
    return _usable_dir(resource.savepoint_dir or policy.default_savepoint_dir, policy)


def _usable_dir(raw: str, policy: RestorePolicy) -> StoragePath | None:
    if not raw:
        return None
    try:
        path = StoragePath.parse(raw)
    except StoragePathError:
        return None
    return path if path.scheme in policy.allowed_schemes else None


def workload_of(resource: FlinkResource) -> Workload:
    """What the records are kept for: the object itself, or a blue/green child's parent."""
    if resource.blue_green_parent:
        return Workload(BLUE_GREEN, resource.namespace, resource.blue_green_parent)
    return Workload(resource.kind, resource.namespace, resource.name)
