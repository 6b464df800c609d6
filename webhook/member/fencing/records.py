"""Ownership records in the job's checkpoint storage, through the member role's fsspec layer.

Laid out beside Flink's ``<jobId>/`` folders, never inside them::

    <checkpoint-dir>/flink-failover/
        clock-<cluster>.json               rewritten by <cluster> every poll to learn the storage's time
    <checkpoint-dir>/flink-failover/<namespace>/<kind>/<name>/
        heartbeat-<cluster>.json           renewed by <cluster> while its copy runs
        fence-<epoch>-<cluster>.json       written once by the restore on <cluster>
        ack-<epoch>-<cluster>.json         <cluster> stopped its copy for fences up to <epoch>

Epochs are zero-padded so a listing sorts them. Every decision reads one listing (names and
modification times); the JSON bodies are for people.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from webhook.common.paths import StoragePath, StoragePathError
from webhook.member.fencing.protocol import Ack, Fence, Heartbeat, Ownership
from webhook.member.restore import StorageError
from webhook.member.storage import CheckpointStorage, modified_time

FOLDER = "flink-failover"
_NAME_RE = re.compile(r"^(heartbeat|clock)-([a-z0-9]([-a-z0-9.]*[a-z0-9])?)\.json$")
_EPOCH_RE = re.compile(r"^(fence|ack)-(\d{1,12})-([a-z0-9]([-a-z0-9.]*[a-z0-9])?)\.json$")
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


@dataclass(frozen=True)
class Listing:
    ownership: Ownership
    clocks: Mapping[str, datetime]  # cluster -> storage time of its last clock write


class FencingStore:
    """Reads and writes one workload's records; errors come back as ``StorageError``."""

    def __init__(self, storage: CheckpointStorage) -> None:
        self._storage = storage

    def read(self, folder: StoragePath) -> Listing:
        fs = self._storage.filesystem(folder)
        try:
            entries = fs.ls(folder.fs_path, detail=True)
        except FileNotFoundError:
            return Listing(Ownership(), {})
        except Exception as exc:
            raise _error("listing", folder, exc) from None
        return parse_listing(entries)

    def write(self, folder: StoragePath, name: str, body: Mapping[str, Any]) -> None:
        fs = self._storage.filesystem(folder)
        try:
            target = folder.child(name)
        except StoragePathError as exc:
            raise StorageError(str(exc)) from None
        data = (json.dumps(dict(body), sort_keys=True) + "\n").encode()
        try:
            if folder.protocol == "file":
                fs.makedirs(folder.fs_path, exist_ok=True)  # object stores have no folders to make
            fs.pipe_file(target.fs_path, data)
        except Exception as exc:
            raise _error("writing", target, exc) from None

    def remove(self, folder: StoragePath, name: str) -> None:
        fs = self._storage.filesystem(folder)
        target = folder.child(name)
        try:
            fs.rm_file(target.fs_path)
        except FileNotFoundError:
            return
        except Exception as exc:
            raise _error("removing", target, exc) from None

    def clock(self, folder: StoragePath, cluster: str) -> datetime:
        """Write this cluster's clock object in ``folder`` and read back the time the storage gave it."""
        self.write(folder, clock_name(cluster), {"cluster": cluster})
        target = folder.child(clock_name(cluster))
        try:
            stamp = modified_time(self._storage.filesystem(folder).info(target.fs_path))
        except Exception as exc:
            raise _error("reading", target, exc) from None
        if stamp is None:
            raise StorageError(f"{target}: the storage reports no modification time")
        return stamp


def fence_body(workload: Workload, cluster: str, epoch: int, written: str) -> dict[str, Any]:
    """``written`` is the writer's own clock: for people reading the bucket, never compared."""
    return {"owner": cluster, "epoch": epoch, "workload": str(workload), "written": written}


def heartbeat_name(cluster: str) -> str:
    return f"heartbeat-{cluster}.json"


def clock_name(cluster: str) -> str:
    return f"clock-{cluster}.json"


def fence_name(epoch: int, cluster: str) -> str:
    return f"fence-{epoch:012d}-{cluster}.json"


def ack_name(epoch: int, cluster: str) -> str:
    return f"ack-{epoch:012d}-{cluster}.json"


def parse_listing(entries: Any) -> Listing:
    """Records from a detailed fsspec listing; names that are not ours are ignored."""
    beats: list[Heartbeat] = []
    fences: list[Fence] = []
    acks: list[Ack] = []
    clocks: dict[str, datetime] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping) or entry.get("type") not in (None, "file"):
            continue
        name = str(entry.get("name", "")).rstrip("/").rsplit("/", 1)[-1]
        modified = modified_time(entry)
        if modified is None:
            continue
        plain = _NAME_RE.match(name)
        if plain is not None:
            if plain.group(1) == "heartbeat":
                beats.append(Heartbeat(plain.group(2), modified))
            else:
                clocks[plain.group(2)] = modified
            continue
        numbered = _EPOCH_RE.match(name)
        if numbered is not None:
            epoch, cluster = int(numbered.group(2)), numbered.group(3)
            if numbered.group(1) == "fence":
                fences.append(Fence(cluster, epoch, modified))
            else:
                acks.append(Ack(cluster, epoch, modified))
    return Listing(Ownership(tuple(beats), tuple(fences), tuple(acks)), clocks)


def _error(action: str, path: StoragePath, exc: BaseException) -> StorageError:
    if isinstance(exc, StorageError):
        return exc
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    return StorageError(f"{action} {path}: {text}")
