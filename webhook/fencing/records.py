"""Ownership records in the job's checkpoint storage, through the member role's fsspec layer.

Laid out beside Flink's ``<jobId>/`` folders, never inside them::

    <checkpoint-dir>/flink-failover/
        clock-<cluster>.json               rewritten by <cluster> every poll to learn the storage's time
    <checkpoint-dir>/flink-failover/<namespace>/<kind>/<name>/
        heartbeat-<cluster>.json           renewed by <cluster> while its copy runs
        fence-<epoch>-<cluster>.json       written once by the restore on <cluster>
        stopping-<epoch>-<cluster>.json    <cluster> asked its operator to stop its copy for <epoch>
        ack-<epoch>-<cluster>.json         <cluster>'s operator reported its copy stopped (fences <= <epoch>)

``<kind>`` is the kind in lower case (``flinkdeployment``), ``<namespace>`` is ``_`` for none, and
epochs are zero-padded to 12 digits so a listing sorts them. Every decision reads one listing (names
and modification times); the JSON bodies are for people. ``FencingStore`` is the only writer and
reader: its methods say what they mean (beat, fence, stopping, ack, forget, list, clock), and each call
runs on its storage's lane under a deadline (``lanes.Lanes``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fsspec.asyn import AsyncFileSystem

from webhook.common.paths import StoragePath, StoragePathError
from webhook.fencing.lanes import HEARTBEAT_THREADS, HEARTBEATS, Call, Lanes
from webhook.fencing.layout import (
    EPOCH_RE,
    FOLDER,
    NAME_RE,
    SESSION_FIELD,
    ClusterNameError,
    Workload,
    ack_name,
    check_cluster_name,
    clock_name,
    fence_name,
    heartbeat_name,
    stopping_name,
)
from webhook.fencing.protocol import Ack, Fence, Heartbeat, Ownership, Stopping
from webhook.restore.snapshots import StorageError
from webhook.restore.storage.backends import DeadlineExceeded, modified_time
from webhook.restore.storage.search import CheckpointStorage

__all__ = [
    "FOLDER",
    "ClusterNameError",
    "FencingStore",
    "Listing",
    "Workload",
    "ack_name",
    "check_cluster_name",
    "clock_name",
    "fence_body",
    "fence_name",
    "heartbeat_body",
    "heartbeat_name",
    "parse_listing",
    "stopping_name",
]


@dataclass(frozen=True)
class Listing:
    ownership: Ownership
    clocks: Mapping[str, datetime]  # cluster -> storage time of its last clock write


class FencingStore:
    """One cluster's reads and writes of ownership records; errors come back as ``StorageError``.

    Every call runs on its storage's lane under a deadline (``lanes.Lanes``): the blocking methods wait
    at most ``timeout`` (the webhook, ``status``), the ``*_call`` builders are what the agent awaits on
    its event loop (``Lanes.run``).
    """

    def __init__(self, storage: CheckpointStorage, cluster: str = "", lanes: Lanes | None = None) -> None:
        self._storage = storage
        self.cluster = cluster
        self.lanes = lanes or Lanes(5.0)

    # --- the calls, as values ------------------------------------------------------------------------
    def list_call(self, folder: StoragePath) -> Call[Listing]:
        return Call(folder, f"listing {folder}", lambda left: self._read(folder, left))

    def tree_call(self, root: StoragePath) -> Call[dict[str, Listing]]:
        """Every workload's records below ``root`` (``<checkpoint-dir>/flink-failover``) in one listing,
        keyed by folder (its ``fs_path``): a poll's read of a fleet on one storage, a few pages where a
        listing per workload would be a request per workload per poll."""
        return Call(root, f"listing {root}", lambda left: self._read_tree(root, left))

    def beat_call(self, folder: StoragePath, body: Mapping[str, Any]) -> Call[None]:
        """Renew this cluster's heartbeat: its copy runs (or has not stopped yet). On the storage's
        heartbeat lane, through its own filesystem instance (``lanes``)."""
        name = heartbeat_name(self.cluster)
        return Call(
            folder,
            f"writing {folder}/{name}",
            lambda left: self._write(folder, name, body, left, HEARTBEATS),
            heartbeat=True,
        )

    def heartbeat_call(self, folder: StoragePath) -> Call[dict[str, Any] | None]:
        """This cluster's heartbeat body as the storage has it (None: none, or not a JSON object): whether
        the lease keeper wrote it (``renewal.keeper_renews``). Bodies are read for nothing else."""
        target = folder.child(heartbeat_name(self.cluster))
        return Call(folder, f"reading {target}", lambda left: self._body(target, left))

    def fence_call(self, folder: StoragePath, epoch: int, body: Mapping[str, Any]) -> Call[None]:
        return self._put(folder, fence_name(epoch, self.cluster), body)

    def stopping_call(self, folder: StoragePath, epoch: int, detail: str) -> Call[None]:
        """This cluster asked its operator to stop its copy for ``epoch``; it has not stopped yet."""
        body = {"cluster": self.cluster, "epoch": epoch, "detail": detail}
        return self._put(folder, stopping_name(epoch, self.cluster), body)

    def ack_call(self, folder: StoragePath, epoch: int, detail: str) -> Call[None]:
        """The operator reported this cluster's copy stopped: write the ack, then drop the heartbeat."""
        name = ack_name(epoch, self.cluster)
        body = {"cluster": self.cluster, "epoch": epoch, "detail": detail}
        target = folder.child(heartbeat_name(self.cluster))

        def ack(left: float) -> None:
            started = time.monotonic()
            self._write(folder, name, body, left)
            self._remove(target, max(left - (time.monotonic() - started), 0.001))

        return Call(folder, f"writing {folder}/{name}", ack)

    def forget_call(self, folder: StoragePath) -> Call[None]:
        """This cluster runs no copy of the workload any more: its heartbeat goes."""
        target = folder.child(heartbeat_name(self.cluster))
        return Call(
            folder, f"removing {target}", lambda left: self._remove(target, left, HEARTBEATS), heartbeat=True
        )

    def clock_call(self, folder: StoragePath) -> Call[datetime]:
        """Write this cluster's clock object in ``folder`` and read back the time the storage gave it."""
        target = folder.child(clock_name(self.cluster))

        def stamp(left: float) -> datetime:
            started = time.monotonic()
            self._write(folder, clock_name(self.cluster), {"cluster": self.cluster}, left)
            fs = self._storage.filesystem(folder)
            rest = max(left - (time.monotonic() - started), 0.001)
            try:
                found = modified_time(fs.info(target.fs_path, **_timed(fs, rest)))
            except Exception as exc:
                raise _error("reading", target, exc) from None
            if found is None:
                raise StorageError(f"{target}: the storage reports no modification time")
            return found

        return Call(folder, f"writing {target}", stamp)

    def warm(self, root: str) -> None:
        """Build the heartbeat lane's client of ``root``'s storage now (the policy's default checkpoint
        directory), not on the first fenced admission's path: an s3fs client took 0.2-0.3 s to build."""
        try:
            path = StoragePath.parse(root)
            connect = getattr(self._fs(path, HEARTBEATS), "connect", None)
            if path.protocol == "s3" and callable(connect):
                connect()
        except Exception:  # best effort: the first heartbeat builds it, and says what fails
            return

    # --- blocking, for the webhook and the commands ---------------------------------------------------
    def list(self, folder: StoragePath, timeout: float | None = None) -> Listing:
        return self.lanes.call(self.list_call(folder), timeout)

    def beat(self, folder: StoragePath, body: Mapping[str, Any], timeout: float | None = None) -> None:
        self.lanes.call(self.beat_call(folder, body), timeout)

    def fence(
        self, folder: StoragePath, epoch: int, body: Mapping[str, Any], timeout: float | None = None
    ) -> None:
        self.lanes.call(self.fence_call(folder, epoch, body), timeout)

    def stopping(self, folder: StoragePath, epoch: int, detail: str, timeout: float | None = None) -> None:
        self.lanes.call(self.stopping_call(folder, epoch, detail), timeout)

    def ack(self, folder: StoragePath, epoch: int, detail: str, timeout: float | None = None) -> None:
        self.lanes.call(self.ack_call(folder, epoch, detail), timeout)

    def forget(self, folder: StoragePath, timeout: float | None = None) -> None:
        self.lanes.call(self.forget_call(folder), timeout)

    def clock(self, folder: StoragePath, timeout: float | None = None) -> datetime:
        return self.lanes.call(self.clock_call(folder), timeout)

    # --- the storage -------------------------------------------------------------------------------
    def _put(self, folder: StoragePath, name: str, body: Mapping[str, Any]) -> Call[None]:
        return Call(folder, f"writing {folder}/{name}", lambda left: self._write(folder, name, body, left))

    def _read(self, folder: StoragePath, left: float) -> Listing:
        fs = self._storage.filesystem(folder)
        try:
            entries = fs.ls(folder.fs_path, detail=True, **_timed(fs, left))
        except FileNotFoundError:
            return Listing(Ownership(), {})
        except Exception as exc:
            raise _error("listing", folder, exc) from None
        return parse_listing(entries, folder.protocol in WHOLE_SECOND_TIMES)

    def _read_tree(self, root: StoragePath, left: float) -> dict[str, Listing]:
        fs = self._storage.filesystem(root)
        try:
            found = fs.find(root.fs_path, detail=True, **_timed(fs, left))
        except FileNotFoundError:
            return {}
        except Exception as exc:
            raise _error("listing", root, exc) from None
        by_folder: dict[str, list[Any]] = {}
        for path, entry in found.items() if isinstance(found, Mapping) else ():
            by_folder.setdefault(str(path).rstrip("/").rsplit("/", 1)[0], []).append(entry)
        coarse = root.protocol in WHOLE_SECOND_TIMES
        return {folder: parse_listing(entries, coarse) for folder, entries in by_folder.items()}

    def _body(self, target: StoragePath, left: float) -> dict[str, Any] | None:
        fs = self._storage.filesystem(target)
        try:
            data = fs.cat_file(target.fs_path, **_timed(fs, left))
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise _error("reading", target, exc) from None
        try:
            body = json.loads(data)
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    def _fs(self, path: StoragePath, lane: str) -> Any:
        """The heartbeat lane's own filesystem instance, sized to its threads; else the shared one."""
        if lane:
            return self._storage.filesystem(path, lane, HEARTBEAT_THREADS)
        return self._storage.filesystem(path)

    def _write(
        self, folder: StoragePath, name: str, body: Mapping[str, Any], left: float, lane: str = ""
    ) -> None:
        fs = self._fs(folder, lane)
        try:
            target = folder.child(name)
        except StoragePathError as exc:
            raise StorageError(str(exc)) from None
        data = (json.dumps(dict(body), sort_keys=True) + "\n").encode()
        try:
            if folder.protocol == "file":
                fs.makedirs(folder.fs_path, exist_ok=True)  # object stores have no folders to make
            fs.pipe_file(target.fs_path, data, **_timed(fs, left))
        except Exception as exc:
            raise _error("writing", target, exc) from None

    def _remove(self, target: StoragePath, left: float, lane: str = "") -> None:
        fs = self._fs(target, lane)
        try:
            fs.rm_file(target.fs_path, **_timed(fs, left))
        except FileNotFoundError:
            return
        except Exception as exc:
            raise _error("removing", target, exc) from None


def _timed(fs: Any, left: float) -> dict[str, float]:
    """fsspec's own timeout for an async backend (it cancels the request: the lane's thread is free at
    the deadline); a blocking one (local files, HDFS) cannot be interrupted and gets none."""
    return {"timeout": max(left, 0.001)} if isinstance(fs, AsyncFileSystem) else {}


def heartbeat_body(
    workload: Workload, cluster: str, epoch: int, job_id: str, written: str, session: str = ""
) -> dict[str, Any]:
    """The one heartbeat body, whoever writes it (the webhook at admission, the agent every poll); for
    people reading the bucket: decisions read names and storage times only. ``session``: a
    FlinkSessionJob's session cluster, by which that cluster's keeper finds the jobs it guards (and, with
    ``jobId``, the only body fields a keeper reads: docs/keeper.md)."""
    body: dict[str, Any] = {
        "cluster": cluster,
        "epoch": epoch,
        "jobId": job_id,
        "workload": str(workload),
        "written": written,
    }
    if session:
        body[SESSION_FIELD] = session
    return body


def fence_body(workload: Workload, cluster: str, epoch: int, written: str) -> dict[str, Any]:
    """``written`` is the writer's own clock: for people reading the bucket, never compared."""
    return {"owner": cluster, "epoch": epoch, "workload": str(workload), "written": written}


# S3 and Azure Blob report modification times in whole seconds, cut down (measured on moto and Azurite,
# as the services document): a record listed there may have been written up to a second later. A lease
# counted from the earliest time it could have been written would release up to a second early, so there
# heartbeats and fences count from the latest; "now" (the clock object) stays cut down: an earlier now
# only holds longer.
WHOLE_SECOND_TIMES = frozenset({"s3", "abfs"})
_SECOND = timedelta(seconds=1)


def parse_listing(entries: Any, whole_seconds: bool = False) -> Listing:
    """Records from a detailed fsspec listing; names that are not ours are ignored. ``whole_seconds``:
    the storage cuts its times to the second, so a heartbeat's or fence's whole-second time is taken at
    the end of its second."""

    def latest(modified: datetime) -> datetime:
        return modified + _SECOND if whole_seconds and modified.microsecond == 0 else modified

    beats: list[Heartbeat] = []
    fences: list[Fence] = []
    acks: list[Ack] = []
    stopping: list[Stopping] = []
    clocks: dict[str, datetime] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping) or entry.get("type") not in (None, "file"):
            continue
        name = str(entry.get("name", "")).rstrip("/").rsplit("/", 1)[-1]
        modified = modified_time(entry)
        if modified is None:
            continue
        plain = NAME_RE.match(name)
        if plain is not None:
            if plain.group(1) == "heartbeat":
                beats.append(Heartbeat(plain.group(2), latest(modified)))
            else:
                clocks[plain.group(2)] = modified
            continue
        numbered = EPOCH_RE.match(name)
        if numbered is not None:
            epoch, cluster = int(numbered.group(2)), numbered.group(3)
            if numbered.group(1) == "fence":
                fences.append(Fence(cluster, epoch, latest(modified)))
            elif numbered.group(1) == "ack":
                acks.append(Ack(cluster, epoch, modified))
            else:
                stopping.append(Stopping(cluster, epoch, modified))
    return Listing(Ownership(tuple(beats), tuple(fences), tuple(acks), tuple(stopping)), clocks)


def _error(action: str, path: StoragePath, exc: BaseException) -> StorageError:
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, TimeoutError):  # fsspec's FSTimeoutError: the backend's request was cancelled
        return DeadlineExceeded(f"{action} {path}: no answer before the deadline")
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    return StorageError(f"{action} {path}: {text}")
