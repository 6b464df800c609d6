"""The restore policy: what the member role does when it resolves (or fails to resolve) state.

Loaded once at start-up; an invalid file stops the process with a message naming the field, because
a webhook guarding against data loss must never run on a half-understood policy.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from webhook.common.contract import DEFAULT_JOB_ID_LABELS, DEFAULT_PREFIX, Contract
from webhook.common.paths import StoragePath, StoragePathError

API_VERSION = "flink-failover.io/v1alpha1"
KIND = "RestorePolicy"
# The default policy, shipped in the package: what `serve` and `review` use without --policy or
# FLINK_FAILOVER_POLICY, wherever they are run from.
# Anchored to the package, not to this module, so the module may move within it.
DEFAULT_POLICY_FILE = Path(str(files("webhook").joinpath("restore-policy.yaml")))
POLICY_ENV = "FLINK_FAILOVER_POLICY"

KNOWN_SCHEMES = ("s3", "s3a", "s3p", "gs", "hdfs", "abfs", "abfss", "oss", "wasb", "wasbs", "file")
# hdfs is known but not allowed by default: it needs a JVM and the Hadoop client in the image (README).
DEFAULT_ALLOWED_SCHEMES: tuple[str, ...] = ("s3", "s3a", "s3p", "gs", "abfs", "abfss", "oss", "file")

MAX_DEADLINE_SECONDS = 30  # kube-apiserver caps a webhook's timeoutSeconds at 30
_PREFIX_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_LABEL_KEY_RE = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class Prefer(StrEnum):
    NEWEST = "newest"
    CHECKPOINT = "checkpoint"
    SAVEPOINT = "savepoint"


class Fallback(StrEnum):
    """What to do when no state can be restored: hold the job, refuse it, or let it start empty."""

    SUSPEND = "suspend"
    DENY = "deny"
    ALLOW = "allow"


class UpgradeModePolicy(StrEnum):
    AUTO = "auto"
    KEEP = "keep"
    SAVEPOINT = "savepoint"
    LAST_STATE = "last-state"


class StatePolicy(StrEnum):
    KEEP = "keep"
    RUNNING = "running"


class PolicyError(ValueError):
    """A policy that cannot be used; ``field`` names the offending key."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"invalid restore policy: {field_name}: {message}")
        self.field = field_name


@dataclass(frozen=True)
class RestorePolicy:
    job_id_labels: tuple[str, ...] = DEFAULT_JOB_ID_LABELS
    default_checkpoint_dir: str = ""
    default_savepoint_dir: str = ""
    allowed_schemes: tuple[str, ...] = DEFAULT_ALLOWED_SCHEMES
    prefer: Prefer = Prefer.NEWEST
    on_missing_state: Fallback = Fallback.SUSPEND
    on_storage_error: Fallback = Fallback.DENY
    upgrade_mode: UpgradeModePolicy = UpgradeModePolicy.AUTO
    state: StatePolicy = StatePolicy.KEEP
    deadline_seconds: float = 5.0
    storage_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    prefix: str = DEFAULT_PREFIX
    # The Flink operator version on the member clusters, (major, minor); None: not stated, so only
    # what every supported operator (1.7+) accepts is chosen (docs/flink.md "Operator versions").
    operator_version: tuple[int, int] | None = None

    @functools.cached_property
    def contract(self) -> Contract:
        """The label and annotation keys under this policy's prefix."""
        return Contract(self.prefix, self.job_id_labels)

    def key(self, name: str) -> str:
        return self.contract.key(name)

    @property
    def failover_label(self) -> str:
        return self.contract.failover_label


_FIELDS: dict[str, str] = {
    "jobIdLabels": "job_id_labels",
    "defaultCheckpointDir": "default_checkpoint_dir",
    "defaultSavepointDir": "default_savepoint_dir",
    "allowedSchemes": "allowed_schemes",
    "prefer": "prefer",
    "onMissingState": "on_missing_state",
    "onStorageError": "on_storage_error",
    "upgradeMode": "upgrade_mode",
    "state": "state",
    "deadlineSeconds": "deadline_seconds",
    "storageOptions": "storage_options",
    "prefix": "prefix",
    "operatorVersion": "operator_version",
}

_OPERATOR_VERSION_RE = re.compile(r"^v?([0-9]{1,3})\.([0-9]{1,3})(\.[0-9]{1,5})?$")
MIN_OPERATOR_VERSION = (1, 7)  # suspended first deployments (onMissingState: suspend) need 1.7+


def _enum(cls: type[StrEnum], name: str, value: Any) -> Any:
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(m.value for m in cls)
        raise PolicyError(name, f"{value!r} is not one of {allowed}") from None


def _str_list(name: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PolicyError(name, "must be a list of non-empty strings")
    return tuple(value)


def _dir(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise PolicyError(name, "must be a string (a storage URI or an empty string)")
    return value.strip()


def _operator_version(value: Any) -> tuple[int, int]:
    m = _OPERATOR_VERSION_RE.match(value) if isinstance(value, str) else None
    if m is None:
        raise PolicyError("operatorVersion", f'{value!r} is not a version such as "1.10" (quote it in YAML)')
    version = (int(m.group(1)), int(m.group(2)))
    if version < MIN_OPERATOR_VERSION:
        raise PolicyError(
            "operatorVersion",
            f"{value} is older than 1.7: the Flink operator ignores state: suspended on a first deployment "
            "before 1.7, so a held job would start empty",
        )
    return version


def policy_from_dict(doc: Any) -> RestorePolicy:
    """Validate a parsed policy document; unknown keys are errors (a typo must not silently mean default)."""
    if not isinstance(doc, dict):
        raise PolicyError("<document>", "must be a mapping")
    # Optional (a file may hold just the fields it changes), but never another document type.
    if doc.get("apiVersion", API_VERSION) != API_VERSION:
        raise PolicyError("apiVersion", f"must be {API_VERSION!r}, got {doc.get('apiVersion')!r}")
    if doc.get("kind", KIND) != KIND:
        raise PolicyError("kind", f"must be {KIND!r}, got {doc.get('kind')!r}")
    unknown = sorted(set(doc) - set(_FIELDS) - {"apiVersion", "kind", "metadata"})
    if unknown:
        raise PolicyError(unknown[0], "unknown field")

    kw: dict[str, Any] = {}
    if "jobIdLabels" in doc:
        labels = _str_list("jobIdLabels", doc["jobIdLabels"])
        for label in labels:
            if not _LABEL_KEY_RE.match(label) or len(label) > 316:
                raise PolicyError("jobIdLabels", f"{label!r} is not a valid label key")
        kw["job_id_labels"] = labels
    for key in ("defaultCheckpointDir", "defaultSavepointDir"):
        if key in doc:
            kw[_FIELDS[key]] = _dir(key, doc[key])
    if "allowedSchemes" in doc:
        schemes = _str_list("allowedSchemes", doc["allowedSchemes"])
        for scheme in schemes:
            if scheme not in KNOWN_SCHEMES:
                raise PolicyError("allowedSchemes", f"{scheme!r} is not one of {', '.join(KNOWN_SCHEMES)}")
        kw["allowed_schemes"] = schemes
    enums: dict[str, type[StrEnum]] = {
        "prefer": Prefer,
        "onMissingState": Fallback,
        "onStorageError": Fallback,
        "upgradeMode": UpgradeModePolicy,
        "state": StatePolicy,
    }
    for key, cls in enums.items():
        if key in doc:
            kw[_FIELDS[key]] = _enum(cls, key, doc[key])
    if "deadlineSeconds" in doc:
        deadline = doc["deadlineSeconds"]
        if (
            isinstance(deadline, bool)
            or not isinstance(deadline, int | float)
            or not 0 < deadline <= MAX_DEADLINE_SECONDS
        ):
            raise PolicyError(
                "deadlineSeconds", "must be a number in (0, 30] (kube-apiserver caps webhooks at 30 s)"
            )
        kw["deadline_seconds"] = float(deadline)
    if "storageOptions" in doc:
        opts = doc["storageOptions"]
        if opts is None:
            opts = {}
        if not isinstance(opts, dict) or not all(isinstance(v, dict) for v in opts.values()):
            raise PolicyError("storageOptions", "must map a scheme to a mapping of fsspec options")
        for scheme in opts:
            if scheme not in KNOWN_SCHEMES:
                raise PolicyError("storageOptions", f"{scheme!r} is not a known scheme")
        kw["storage_options"] = {k: dict(v) for k, v in opts.items()}
    if "operatorVersion" in doc:
        kw["operator_version"] = _operator_version(doc["operatorVersion"])
    if "prefix" in doc:
        prefix = doc["prefix"]
        if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix) or len(prefix) > 253:
            raise PolicyError("prefix", "must be a DNS subdomain such as flink-failover.io")
        kw["prefix"] = prefix
    for key in ("defaultCheckpointDir", "defaultSavepointDir"):
        value = kw.get(_FIELDS[key], "")
        if value:
            try:
                scheme = StoragePath.parse(value).scheme
            except StoragePathError as exc:
                raise PolicyError(key, str(exc)) from None
            if scheme not in kw.get("allowed_schemes", DEFAULT_ALLOWED_SCHEMES):
                raise PolicyError(key, f"scheme {scheme!r} is not in allowedSchemes")
    return RestorePolicy(**kw)


def _storage_uri_pattern() -> str:
    """What ``StoragePath.parse`` accepts, as a regular expression: empty, an absolute path, a
    ``file:`` path, or a known scheme with a bucket or host."""
    remote = "|".join(s for s in KNOWN_SCHEMES if s != "file")
    return rf"^(|/.*|file:(//(localhost)?)?/.*|({remote})://[^/\s]+(/.*)?)$"


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a policy document's fields, derived from the validator's own constants.

    The Helm chart's values schema embeds it (generated, not hand-copied), so a value the server would
    refuse fails ``helm install`` instead of crash-looping the pods. The cross-field rules (a default
    directory's scheme must be allowed) are checked by the chart's template and by ``policy_from_dict``.
    """
    schemes = list(KNOWN_SCHEMES)

    def enum(cls: type[StrEnum]) -> dict[str, Any]:
        return {"type": "string", "enum": [m.value for m in cls]}

    uri = {"type": "string", "maxLength": 4096, "pattern": _storage_uri_pattern()}
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "jobIdLabels": {
                "type": "array",
                "items": {"type": "string", "pattern": _LABEL_KEY_RE.pattern, "maxLength": 316},
                "minItems": 1,
                "uniqueItems": True,
            },
            "defaultCheckpointDir": uri,
            "defaultSavepointDir": uri,
            "allowedSchemes": {
                "type": "array",
                "items": {"type": "string", "enum": schemes},
                "minItems": 1,
                "uniqueItems": True,
            },
            "prefer": enum(Prefer),
            "onMissingState": enum(Fallback),
            "onStorageError": enum(Fallback),
            "upgradeMode": enum(UpgradeModePolicy),
            "state": enum(StatePolicy),
            "deadlineSeconds": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_DEADLINE_SECONDS},
            "storageOptions": {
                "type": "object",
                "propertyNames": {"enum": schemes},
                "additionalProperties": {"type": "object"},
            },
            "prefix": {"type": "string", "pattern": _PREFIX_RE.pattern, "maxLength": 253},
            "operatorVersion": {"type": "string", "pattern": _OPERATOR_VERSION_RE.pattern},
        },
    }


@dataclass(frozen=True)
class PolicySource:
    """Which policy file a command uses, and why (told to the user: a surprise here hides every decision)."""

    path: Path
    origin: str  # "--policy", "$FLINK_FAILOVER_POLICY" or "built-in default"

    def describe(self) -> str:
        return f"{self.path} ({self.origin})"


def policy_source(explicit: str | None, environ: Mapping[str, str]) -> PolicySource:
    """--policy wins, then $FLINK_FAILOVER_POLICY, then the default shipped in the package."""
    if explicit:
        return PolicySource(Path(explicit), "--policy")
    if environ.get(POLICY_ENV):
        return PolicySource(Path(environ[POLICY_ENV]), f"${POLICY_ENV}")
    return PolicySource(DEFAULT_POLICY_FILE, "built-in default")


def load_policy(path: str | Path) -> RestorePolicy:
    from webhook.common.documents import DocumentError, read_text

    try:
        text = read_text(path)  # a policy saved as UTF-16 (PowerShell) or with a BOM reads as well
    except DocumentError as exc:
        raise PolicyError("<file>", str(exc)) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyError("<file>", f"{path} is not valid YAML: {exc}") from None
    return policy_from_dict(doc)
