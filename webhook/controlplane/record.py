"""The ``<prefix>/last-known-state`` annotation: what the control plane knows about one Flink workload.

Kept on the ResourceBinding as JSON so that it survives our own restarts (Karmada merges unknown
ResourceBinding annotations, so its controllers do not drop it). Schema (version 1)::

    {
      "version": 1,
      "clusters": {                       # per member cluster, only what was seen there
        "member1": {
          "jobId": "<32 hex>",            # last jobId seen with jobStatus.state == RUNNING ("" if none)
          "jobSeen": "<RFC 3339>",        # when that jobId was first seen RUNNING there
          "savepoint": "s3://...",        # last savepoint location reported there ("" if none)
          "savepointSeen": "<RFC 3339>",
          "startedFrom": "s3://...",      # the snapshot that jobId was started from, when its status
                                          # told (upgradeSavepointPath of an upgrade, else the
                                          # initialSavepointPath of its first deployment)
          "upgradeSavepoint": "s3://...", # the last jobStatus.upgradeSavepointPath seen there
          "observedJobId": "<32 hex>",    # a jobId shown there that never ran there (else absent)
          "observedState": "RECONCILING"  # and its state
        }
      },
      "placement": ["member2"],           # the last non-empty spec.clusters seen
      "history": [                        # newest last, at most MAX_HISTORY entries
        {"type": "Eviction", "from": ["member1"], "to": [], "reason": "TaintUntolerated",
         "time": "<task creationTimestamp>", "purgeMode": "Directly"},
        {"type": "Placement", "from": ["member1"], "to": ["member2"], "reason": "TaintUntolerated",
         "time": "<when the move was first seen>", "purgeMode": ""}
      ],
      "failoverCount": 1,                 # evictions plus moves no eviction explains; never trimmed
      "openEvictions": {"member1": ""}    # eviction tasks in the binding now: fromCluster -> their
                                          # creationTimestamp as last seen ("" while Karmada has not
                                          # stamped it): the same task is never counted twice
    }

Everything here is pure: parsing returns a value or a :class:`RecordError`, never raises.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from webhook.common.contract import LAST_KNOWN_STATE, Contract

VERSION = 1
RESCHEDULED = "Rescheduled"  # the reason of a move no eviction task explains
MAX_HISTORY = 24  # the annotation must stay small; the count is kept apart so trimming loses no total
MAX_ANNOTATION_BYTES = 64 * 1024


def annotation_key(contract: Contract) -> str:
    """The annotation the record is kept in, under the contract's prefix."""
    return contract.key(LAST_KNOWN_STATE)


def format_record_time(moment: datetime) -> str:
    """RFC 3339, UTC; whole seconds as Kubernetes writes them, milliseconds when there are any.

    What we observe is dated to the millisecond: a failover and the job that ran before it can fall
    in the same second, and the order of the two decides between "running on target" and "returning".
    Compare parsed times (:func:`parse_time`), never these strings.
    """
    moment = moment.astimezone(UTC)
    millis = moment.microsecond // 1000
    whole = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{whole}.{millis:03d}Z" if millis else f"{whole}Z"


def parse_time(text: str) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class HistoryType(StrEnum):
    EVICTION = "Eviction"
    PLACEMENT = "Placement"


@dataclass(frozen=True)
class ClusterRecord:
    job_id: str = ""
    job_seen: str = ""
    savepoint: str = ""
    savepoint_seen: str = ""
    observed_job_id: str = ""
    observed_state: str = ""
    started_from: str = ""  # the snapshot job_id was started from ("" when unknown)
    upgrade_savepoint: str = ""

    @property
    def good(self) -> bool:
        return bool(self.job_id)

    def to_json(self) -> dict[str, str]:
        out = {
            "jobId": self.job_id,
            "jobSeen": self.job_seen,
            "savepoint": self.savepoint,
            "savepointSeen": self.savepoint_seen,
            "observedJobId": self.observed_job_id,
            "observedState": self.observed_state,
            "startedFrom": self.started_from,
            "upgradeSavepoint": self.upgrade_savepoint,
        }
        return {k: v for k, v in out.items() if v}

    @classmethod
    def from_json(cls, doc: Any) -> ClusterRecord | RecordError:
        if not isinstance(doc, dict):
            return RecordError("cluster entry is not an object")
        values: dict[str, str] = {}
        for key, attr in _CLUSTER_FIELDS.items():
            value = doc.get(key, "")
            if not isinstance(value, str):
                return RecordError(f"cluster entry field {key} is not a string")
            values[attr] = value
        return cls(**values)


_CLUSTER_FIELDS = {
    "jobId": "job_id",
    "jobSeen": "job_seen",
    "savepoint": "savepoint",
    "savepointSeen": "savepoint_seen",
    "observedJobId": "observed_job_id",
    "observedState": "observed_state",
    "startedFrom": "started_from",
    "upgradeSavepoint": "upgrade_savepoint",
}


@dataclass(frozen=True)
class HistoryEntry:
    type: HistoryType
    from_clusters: tuple[str, ...]
    to_clusters: tuple[str, ...]
    reason: str
    time: str
    purge_mode: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type.value,
            "from": list(self.from_clusters),
            "to": list(self.to_clusters),
            "reason": self.reason,
            "time": self.time,
        }
        if self.purge_mode:
            out["purgeMode"] = self.purge_mode
        return out

    @classmethod
    def from_json(cls, doc: Any) -> HistoryEntry | RecordError:
        if not isinstance(doc, dict):
            return RecordError("history entry is not an object")
        try:
            kind = HistoryType(str(doc.get("type")))
        except ValueError:
            return RecordError(f"history entry type {doc.get('type')!r} is unknown")
        lists = {}
        for key in ("from", "to"):
            value = doc.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                return RecordError(f"history entry field {key} is not a list of strings")
            lists[key] = tuple(value)
        strings = {}
        for key in ("reason", "time", "purgeMode"):
            value = doc.get(key, "")
            if not isinstance(value, str):
                return RecordError(f"history entry field {key} is not a string")
            strings[key] = value
        return cls(
            kind,
            lists["from"],
            lists["to"],
            strings["reason"],
            strings["time"],
            purge_mode=strings["purgeMode"],
        )


@dataclass(frozen=True)
class BindingRecord:
    clusters: tuple[tuple[str, ClusterRecord], ...] = ()  # sorted by cluster name
    placement: tuple[str, ...] = ()
    history: tuple[HistoryEntry, ...] = ()
    failover_count: int = 0
    open_evictions: tuple[tuple[str, str], ...] = ()  # (fromCluster, creationTimestamp or ""), sorted
    version: int = VERSION

    def cluster(self, name: str) -> ClusterRecord:
        for cluster, state in self.clusters:
            if cluster == name:
                return state
        return ClusterRecord()

    def with_cluster(self, name: str, state: ClusterRecord) -> BindingRecord:
        others = [(c, s) for c, s in self.clusters if c != name]
        return replace(self, clusters=tuple(sorted([*others, (name, state)])))

    def with_history(self, entry: HistoryEntry) -> BindingRecord:
        return replace(self, history=(*self.history, entry)[-MAX_HISTORY:])

    @property
    def empty(self) -> bool:
        return self == BindingRecord()

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "clusters": {name: state.to_json() for name, state in self.clusters},
            "placement": list(self.placement),
            "history": [entry.to_json() for entry in self.history],
            "failoverCount": self.failover_count,
            **({"openEvictions": dict(self.open_evictions)} if self.open_evictions else {}),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, doc: Any) -> BindingRecord | RecordError:
        if not isinstance(doc, dict):
            return RecordError("record is not a JSON object")
        version = doc.get("version")
        if version != VERSION:
            return RecordError(f"record version {version!r} is not {VERSION}")
        raw_clusters = doc.get("clusters", {})
        if not isinstance(raw_clusters, dict):
            return RecordError("clusters is not an object")
        clusters: list[tuple[str, ClusterRecord]] = []
        for name, raw in raw_clusters.items():
            state = ClusterRecord.from_json(raw)
            if isinstance(state, RecordError):
                return RecordError(f"clusters.{name}: {state.message}")
            clusters.append((str(name), state))
        placement = doc.get("placement", [])
        if not isinstance(placement, list) or not all(isinstance(c, str) for c in placement):
            return RecordError("placement is not a list of strings")
        raw_history = doc.get("history", [])
        if not isinstance(raw_history, list):
            return RecordError("history is not a list")
        history: list[HistoryEntry] = []
        for index, raw in enumerate(raw_history):
            entry = HistoryEntry.from_json(raw)
            if isinstance(entry, RecordError):
                return RecordError(f"history[{index}]: {entry.message}")
            history.append(entry)
        count = doc.get("failoverCount", 0)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            return RecordError("failoverCount is not a non-negative integer")
        raw_open = doc.get("openEvictions", {})
        if not isinstance(raw_open, dict) or not all(isinstance(v, str) for v in raw_open.values()):
            return RecordError("openEvictions is not an object of strings")
        return cls(
            clusters=tuple(sorted(clusters)),
            placement=tuple(placement),
            history=tuple(history[-MAX_HISTORY:]),
            failover_count=count,
            open_evictions=tuple(sorted((str(k), v) for k, v in raw_open.items())),
        )

    @classmethod
    def loads(cls, text: str) -> BindingRecord | RecordError:
        if len(text) > MAX_ANNOTATION_BYTES:
            return RecordError("record annotation is larger than 64 KiB")
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            return RecordError("record annotation is not JSON")
        return cls.from_json(doc)


@dataclass(frozen=True)
class RecordError:
    message: str


@dataclass(frozen=True)
class StoredRecord:
    """The record read from an object's annotation: the record (empty when absent) and any parse problem."""

    record: BindingRecord = field(default_factory=BindingRecord)
    present: bool = False
    error: str = ""


def read_annotation(annotations: Any, key: str) -> StoredRecord:
    if not isinstance(annotations, dict) or key not in annotations:
        return StoredRecord()
    raw = annotations[key]
    if not isinstance(raw, str):
        return StoredRecord(present=True, error="record annotation is not a string")
    parsed = BindingRecord.loads(raw)
    if isinstance(parsed, RecordError):
        return StoredRecord(present=True, error=parsed.message)
    return StoredRecord(record=parsed, present=True)
