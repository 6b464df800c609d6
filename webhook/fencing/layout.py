"""Where the ownership records live and what they are called. Pure: no I/O.

``records.py`` reads and writes them; the webhook's gate, the agent and the pure decisions name them
through here, so a record is never spelled twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from webhook.common.paths import StoragePath

FOLDER = "flink-failover"
NAME_RE = re.compile(r"^(heartbeat|clock)-([a-z0-9]([-a-z0-9.]*[a-z0-9])?)\.json$")
EPOCH_RE = re.compile(r"^(fence|ack|stopping)-(\d{1,12})-([a-z0-9]([-a-z0-9.]*[a-z0-9])?)\.json$")
_CLUSTER_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class ClusterNameError(ValueError):
    pass


def check_cluster_name(name: str) -> str:
    """Karmada cluster names are DNS labels or subdomains; they become object names here."""
    if not _CLUSTER_RE.match(name) or len(name) > 253:
        raise ClusterNameError(f"cluster name {name!r} is not a DNS subdomain (as Karmada requires)")
    return name


@dataclass(frozen=True)
class Workload:
    kind: str
    namespace: str
    name: str

    def folder(self, checkpoint_dir: StoragePath) -> StoragePath:
        return checkpoint_dir.child(FOLDER, self.namespace or "_", self.kind.lower(), self.name)

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


def heartbeat_name(cluster: str) -> str:
    return f"heartbeat-{cluster}.json"


def clock_name(cluster: str) -> str:
    return f"clock-{cluster}.json"


def fence_name(epoch: int, cluster: str) -> str:
    return f"fence-{epoch:012d}-{cluster}.json"


def ack_name(epoch: int, cluster: str) -> str:
    return f"ack-{epoch:012d}-{cluster}.json"


def stopping_name(epoch: int, cluster: str) -> str:
    return f"stopping-{epoch:012d}-{cluster}.json"


# The ``writer`` the lease keeper's heartbeat bodies carry (``keeper/``; the agent's name none), by which the
# agent knows a copy's keeper renews it.
KEEPER_WRITER = "keeper"

# The heartbeat body's field naming a FlinkSessionJob copy's session cluster (the agent's and the session
# keeper's bodies): by it the session cluster's keeper finds the jobs it guards.
SESSION_FIELD = "session"


def format_time(moment: datetime) -> str:
    """A time as the records, the patches and the hold texts write it (UTC, whole seconds)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
