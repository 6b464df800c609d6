"""The restore policy: what the member role does when it resolves (or fails to resolve) state.

Loaded once at start-up; an invalid file stops the process with a message naming the field, because
a webhook guarding against data loss must never run on a half-understood policy.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from webhook.common.contract import DEFAULT_JOB_ID_LABELS, DEFAULT_PREFIX, JOB_ID, Contract
from webhook.common.paths import FSSPEC_PROTOCOL, StoragePath, StoragePathError

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

# What each fsspec backend's constructor takes (storageOptions are handed to it): its own parameters at
# the pinned versions, and fsspec's common ones. fsspec accepts and ignores any other name, so a typo
# (endpointUrl) would pass and fail only at the first failover. tests/member/test_storage_options.py
# compares these with the installed backends' signatures.
_FSSPEC_COMMON = ("use_listings_cache", "listings_expiry_time", "max_paths", "skip_instance_cache")
_ASYNC = ("asynchronous", "loop", "batch_size")
STORAGE_OPTIONS: dict[str, tuple[str, ...]] = {
    "s3": (
        "anon", "endpoint_url", "key", "secret", "token", "use_ssl", "client_kwargs", "requester_pays",
        "default_block_size", "default_fill_cache", "default_cache_type", "version_aware", "cache_regions",
        "config_kwargs", "s3_additional_kwargs", "session", "username", "password", "max_concurrency",
        "fixed_upload_size", "local_expiry_check", "profile", *_ASYNC, *_FSSPEC_COMMON,
    ),
    "gs": (
        "project", "access", "token", "block_size", "consistency", "cache_timeout", "secure_serialize",
        "check_connection", "requests_timeout", "requester_pays", "session_kwargs", "timeout",
        "endpoint_url", "default_location", "version_aware", "finalize_on_close", "mrd_pool_cache_size",
        "max_mrd_pool_cache_queue_size", *_ASYNC, *_FSSPEC_COMMON,
    ),
    "abfs": (
        "account_name", "account_key", "connection_string", "credential", "sas_token", "request_session",
        "socket_timeout", "blocksize", "client_id", "client_secret", "tenant_id", "anon", "location_mode",
        "default_fill_cache", "default_cache_type", "version_aware", "assume_container_exists",
        "max_concurrency", "timeout", "connection_timeout", "read_timeout", "account_host",
        *_ASYNC, *_FSSPEC_COMMON,
    ),
    "oss": (
        "endpoint", "key", "secret", "token", "default_cache_type", "default_block_size", "version_aware",
        *_ASYNC, *_FSSPEC_COMMON,
    ),
    "hdfs": ("host", "port", "user", "kerb_ticket", "replication", "extra_conf", *_FSSPEC_COMMON),
    "file": ("auto_mkdir", *_FSSPEC_COMMON),
}  # fmt: skip

# The type of each option whose backends agree on it (None is always accepted: the backend's default).
# A YAML string where a flag is meant is the dangerous case: s3fs takes anon: "false" as true.
# tests/member/test_storage_options.py checks these against the installed backends' defaults.
_FLAG, _INT, _NUMBER, _TEXT, _MAP = (bool,), (int,), (int, float), (str,), (dict,)
OPTION_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(
        ("anon", "use_ssl", "requester_pays", "default_fill_cache", "version_aware", "cache_regions",
         "fixed_upload_size", "local_expiry_check", "asynchronous", "use_listings_cache",
         "skip_instance_cache", "secure_serialize", "check_connection", "assume_container_exists",
         "auto_mkdir", "finalize_on_close"),
        _FLAG,
    ),
    **dict.fromkeys(
        ("max_concurrency", "default_block_size", "block_size", "blocksize", "batch_size", "max_paths",
         "replication", "port", "mrd_pool_cache_size", "max_mrd_pool_cache_queue_size"),
        _INT,
    ),
    **dict.fromkeys(
        ("listings_expiry_time", "cache_timeout", "requests_timeout", "timeout", "socket_timeout",
         "connection_timeout", "read_timeout"),
        _NUMBER,
    ),
    **dict.fromkeys(
        ("endpoint_url", "key", "secret", "username", "password", "profile", "project", "access",
         "default_cache_type", "account_name", "account_key", "connection_string", "sas_token", "client_id",
         "client_secret", "tenant_id", "location_mode", "account_host", "endpoint", "host", "user",
         "kerb_ticket", "default_location", "consistency"),
        _TEXT,
    ),
    **dict.fromkeys(
        ("client_kwargs", "config_kwargs", "s3_additional_kwargs", "session_kwargs", "extra_conf"), _MAP
    ),
}  # fmt: skip
# Where one backend differs: gcsfs takes requester_pays as a flag or the project to bill.
BACKEND_OPTION_TYPES: dict[str, dict[str, tuple[type, ...]]] = {"gs": {"requester_pays": (bool, str)}}
_TYPE_WORDS = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    dict: "a mapping",
}


def option_types(protocol: str, option: str) -> tuple[type, ...]:
    """The types the ``protocol`` backend takes for ``option``; () when not checked."""
    return BACKEND_OPTION_TYPES.get(protocol, {}).get(option) or OPTION_TYPES.get(option, ())


def _typed(value: Any, types: tuple[type, ...]) -> bool:
    if value is None or not types:
        return True
    if isinstance(value, bool):  # YAML true is an int to isinstance, never a number to a backend
        return bool in types
    return isinstance(value, types)


def _kind_of(value: Any) -> str:
    for cls in (bool, int, float, str, dict, list):
        if isinstance(value, cls):
            return {bool: "true/false", list: "a list"}.get(cls) or _TYPE_WORDS[cls]
    return type(value).__name__


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


class Verify(StrEnum):
    """How much of a snapshot is checked before it is chosen (docs/flink.md "What is checked")."""

    FILES = "files"  # the whole _metadata, and every file it names is in the storage the job reads
    METADATA = "metadata"  # the whole _metadata read as Flink reads it
    HEADER = "header"  # the first 16 bytes only: magic, version, checkpoint id


class NewerMetadata(StrEnum):
    """A ``_metadata`` in a format version newer than this release reads (a newer Flink wrote it)."""

    TRUST = "trust"  # take its header (magic, version, checkpoint id) as enough, with a warning
    SKIP = "skip"  # pass it over like an unreadable one


class StatePolicy(StrEnum):
    KEEP = "keep"
    RUNNING = "running"


class FencingStorageError(StrEnum):
    """What a restore does when the ownership records cannot be read or written."""

    HOLD = "hold"  # keep the restored job suspended until they can (nobody may be fenced yet)
    PROCEED = "proceed"  # start it anyway: availability over a possible second copy


class RenewFailure(StrEnum):
    """What a running copy does when its heartbeat cannot be renewed for ``renewDeadlineSeconds``."""

    STOP = "stop"  # step down (suspend without a savepoint) before anyone may take over
    KEEP_RUNNING = "keep-running"  # availability: keep running, a second copy becomes possible


@dataclass(frozen=True)
class FencingPolicy:
    """One running copy (member role with --cluster; docs/failover.md "One running copy").

    ``lease_seconds`` is how long a heartbeat stays fresh unrenewed; it must span at least two polls, so
    a live cluster always renews (or acknowledges) within one lease of a fence. A holder that has not
    renewed for ``renew_deadline_seconds`` steps down (its heartbeat loop sends the suspend by the
    deadline + one poll); that, the operator's stop margin and a poll of slack fit inside the lease, so
    the holder's job has stopped before another cluster may start one (client-go's leader election:
    RenewDeadline < LeaseDuration). ``timing_problems`` says which timings break this.
    """

    enabled: bool = True
    lease_seconds: float = 30.0
    poll_seconds: float = 5.0
    on_storage_error: FencingStorageError = FencingStorageError.HOLD
    renew_deadline_seconds: float = 10.0
    stop_margin_seconds: float = 10.0
    on_renew_failure: RenewFailure = RenewFailure.STOP

    @property
    def call_timeout(self) -> float:
        """The deadline of every storage and API call the agent makes: one poll."""
        return self.poll_seconds

    @property
    def slack_seconds(self) -> float:
        """What the lease leaves beyond the step-down bound and the operator's stop."""
        return self.lease_seconds - (
            self.renew_deadline_seconds + self.poll_seconds + self.stop_margin_seconds
        )


def timing_problems(lease: float, poll: float, renew: float, margin: float) -> list[tuple[str, str]]:
    """(field, why) for every fencing timing rule these break (the chart's template checks the same):

    - ``pollSeconds <= leaseSeconds / 2``: a live cluster renews at least twice per lease;
    - ``renewDeadlineSeconds >= 2 x pollSeconds``: one renewal that fails (one poll's storage blip) never
      stops a healthy job; the deadline is counted from the start of the last one that succeeded;
    - ``renewDeadlineSeconds + pollSeconds + stopMarginSeconds + pollSeconds <= leaseSeconds``: the holder
      asks for the stop by deadline + one poll and its operator stops within the margin, and one poll of
      slack is left for what delays a step-down from outside the agent (a stalled or CPU-throttled
      process, an API call answered at its deadline, clocks that run at slightly different rates).
    """
    problems = []
    if poll * 2 > lease:
        problems.append(
            (
                "fencing.pollSeconds",
                f"{poll:g}s is more than half of leaseSeconds ({lease:g}s): a live cluster must renew its "
                "heartbeat at least twice per lease",
            )
        )
    if renew < 2 * poll:
        problems.append(
            (
                "fencing.renewDeadlineSeconds",
                f"{renew:g}s is less than two pollSeconds ({2 * poll:g}s): a single renewal that fails would "
                "step a healthy job down",
            )
        )
    slack = lease - (renew + poll + margin)
    if slack < poll:
        problems.append(
            (
                "fencing.renewDeadlineSeconds",
                "renewDeadlineSeconds + pollSeconds + stopMarginSeconds "
                f"({renew:g}s + {poll:g}s + {margin:g}s) leaves {slack:g}s of leaseSeconds ({lease:g}s), "
                "less than one pollSeconds of slack: a cluster that cannot renew must have stopped its "
                "copies before its lease runs out, with room to spare",
            )
        )
    return problems


class PolicyError(ValueError):
    """A policy that cannot be used; ``field`` names the offending key."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"invalid restore policy: {field_name}: {message}")
        self.field = field_name
        self.detail = message
        self.errors: tuple[PolicyError, ...] = (self,)  # every bad field, when combined

    @classmethod
    def combined(cls, errors: list[PolicyError]) -> PolicyError:
        """One error naming every bad field (``field`` is the first); combined errors are flattened."""
        flat = [one for error in errors for one in error.errors]
        if len(flat) == 1:
            return flat[0]
        exc = cls(flat[0].field, flat[0].detail)
        exc.args = ("invalid restore policy: " + "; ".join(f"{e.field}: {e.detail}" for e in flat),)
        exc.errors = tuple(flat)
        return exc


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
    fencing: FencingPolicy = field(default_factory=FencingPolicy)
    verify: Verify = Verify.FILES
    on_newer_metadata: NewerMetadata = NewerMetadata.TRUST
    # Storage requests one admission may spend checking snapshots; past it the job is held suspended,
    # never restored unchecked (a listing page of 1,000 entries is one request).
    verify_budget: int = 100

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
    "fencing": "fencing",
    "verify": "verify",
    "onNewerMetadata": "on_newer_metadata",
    "verifyBudget": "verify_budget",
}
_FENCING_FIELDS = (
    "enabled", "leaseSeconds", "pollSeconds", "onStorageError",
    "renewDeadlineSeconds", "stopMarginSeconds", "onRenewFailure",
)  # fmt: skip
MAX_LEASE_SECONDS = 3600

_OPERATOR_VERSION_RE = re.compile(r"^v?([0-9]{1,3})\.([0-9]{1,3})(\.[0-9]{1,5})?$")
MIN_OPERATOR_VERSION = (1, 7)  # suspended first deployments (onMissingState: suspend) need 1.7+


def _closest(name: str, accepted: tuple[str, ...]) -> str:
    """The accepted option a typo most likely meant (endpointUrl -> endpoint_url, endpoint_ur ->
    endpoint_url): the first that is the same but for case, ``_`` and ``-``, else the nearest by edit
    distance within ``max(2, len(name) // 3)`` (the first of equals). The chart's install check
    (templates/_helpers.tpl ``ff.closestOption``) follows the same rule, so both name the same option."""
    fold = name.replace("_", "").replace("-", "").lower()
    for option in accepted:
        if option.replace("_", "").lower() == fold:
            return option
    best, limit = "", max(2, len(name) // 3)
    for option in accepted:
        distance = edit_distance(name, option)
        if distance <= limit:
            best, limit = option, distance - 1
    return best


def edit_distance(first: str, second: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions, one each."""
    previous = list(range(len(second) + 1))
    for i, a in enumerate(first):
        current = [i + 1]
        for j, b in enumerate(second):
            current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (a != b)))
        previous = current
    return previous[-1]


def _unknown(name: str, key: Any, accepted: tuple[str, ...] | list[str]) -> PolicyError:
    """An unknown field, with the accepted one it most likely meant (onMissingStat -> onMissingState)."""
    import difflib

    close = difflib.get_close_matches(str(key), list(accepted), n=1, cutoff=0.6)
    return PolicyError(name, "unknown field" + (f" (did you mean {close[0]}?)" if close else ""))


def _one_of(allowed: tuple[str, ...]) -> Callable[[str, Any], str]:
    def check(name: str, value: Any) -> str:
        if value not in allowed:
            raise PolicyError(name, f"{value!r} is not one of {', '.join(allowed)}")
        return str(value)

    return check


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


def _job_id_labels(name: str, value: Any) -> tuple[str, ...]:
    labels = _str_list(name, value)
    for label in labels:
        if not _LABEL_KEY_RE.match(label) or len(label) > 316:
            raise PolicyError(name, f"{label!r} is not a valid label key")
    return labels


def _allowed_schemes(name: str, value: Any) -> tuple[str, ...]:
    schemes = _str_list(name, value)
    for scheme in schemes:
        if scheme not in KNOWN_SCHEMES:
            raise PolicyError(name, f"{scheme!r} is not one of {', '.join(KNOWN_SCHEMES)}")
    return schemes


def _deadline(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_DEADLINE_SECONDS:
        raise PolicyError(name, "must be a number in (0, 30] (kube-apiserver caps webhooks at 30 s)")
    return float(value)


def _storage_options(name: str, value: Any) -> dict[str, dict[str, Any]]:
    opts = {} if value is None else value
    if not isinstance(opts, dict) or not all(isinstance(v, dict) for v in opts.values()):
        raise PolicyError(name, "must map a scheme to a mapping of fsspec options")
    problems = []
    for scheme, options in opts.items():
        if scheme not in KNOWN_SCHEMES:
            problems.append(f"{scheme!r} is not a known scheme")
            continue
        protocol = FSSPEC_PROTOCOL[scheme]
        accepted = STORAGE_OPTIONS[protocol]
        for option, value in options.items():
            if option not in accepted:
                hint = _closest(str(option), accepted)
                problems.append(
                    f"{scheme}.{option} is not an option of the {protocol} backend"
                    + (f" (did you mean {hint}?)" if hint else "")
                )
            elif not _typed(value, types := option_types(protocol, option)):
                wanted = " or ".join(_TYPE_WORDS[t] for t in types)
                problems.append(
                    f"{scheme}.{option}: {value!r} is {_kind_of(value)}; "
                    f"the {protocol} backend takes {wanted}"
                )
    if problems:
        raise PolicyError(name, "; ".join(problems))
    return {k: dict(v) for k, v in opts.items()}


MAX_VERIFY_BUDGET = 100_000


def _budget(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_VERIFY_BUDGET:
        raise PolicyError(name, f"must be a number of storage requests in [1, {MAX_VERIFY_BUDGET:,}]")
    return value


def _prefix(name: str, value: Any) -> str:
    if not isinstance(value, str) or not _PREFIX_RE.match(value) or len(value) > 253:
        raise PolicyError(name, "must be a DNS subdomain such as flink-failover.io")
    return value


def _enum_of(cls: type[StrEnum]) -> Callable[[str, Any], Any]:
    return lambda name, value: _enum(cls, name, value)


def _seconds(name: str, value: Any, maximum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= maximum:
        raise PolicyError(name, f"must be a number of seconds in (0, {maximum:g}]")
    return float(value)


def _fencing(_name: str, doc: Any) -> FencingPolicy:
    """The fencing block; every bad field is named at once (as for the top level)."""
    if doc is None:
        return FencingPolicy()
    if not isinstance(doc, dict):
        raise PolicyError("fencing", "must be a mapping")
    errors = [_unknown(f"fencing.{k}", k, _FENCING_FIELDS) for k in sorted(set(doc) - set(_FENCING_FIELDS))]
    base = FencingPolicy()

    def field_(key: str, check: Callable[[str, Any], Any], default: Any) -> Any:
        try:
            return check(f"fencing.{key}", doc.get(key, default))
        except PolicyError as exc:
            errors.append(exc)
            return None

    def seconds(key: str, default: float) -> Any:
        return field_(key, lambda n, v: _seconds(n, v, MAX_LEASE_SECONDS), default)

    def flag(name: str, value: Any) -> bool:
        if not isinstance(value, bool):
            raise PolicyError(name, "must be true or false")
        return value

    enabled = field_("enabled", flag, base.enabled)
    lease = seconds("leaseSeconds", base.lease_seconds)
    poll = seconds("pollSeconds", base.poll_seconds)
    renew = seconds("renewDeadlineSeconds", base.renew_deadline_seconds)
    margin = seconds("stopMarginSeconds", base.stop_margin_seconds)
    choice = field_("onStorageError", _enum_of(FencingStorageError), "hold")
    renew_failure = field_("onRenewFailure", _enum_of(RenewFailure), "stop")
    if None not in (lease, poll, renew, margin):
        errors += [PolicyError(name, why) for name, why in timing_problems(lease, poll, renew, margin)]
    if errors:
        raise PolicyError.combined(errors)
    return FencingPolicy(enabled, lease, poll, choice, renew, margin, renew_failure)


_VALIDATORS: dict[str, Callable[[str, Any], Any]] = {
    "jobIdLabels": _job_id_labels,
    "defaultCheckpointDir": _dir,
    "defaultSavepointDir": _dir,
    "allowedSchemes": _allowed_schemes,
    "prefer": _enum_of(Prefer),
    "onMissingState": _enum_of(Fallback),
    "onStorageError": _enum_of(Fallback),
    "upgradeMode": _enum_of(UpgradeModePolicy),
    "state": _enum_of(StatePolicy),
    "deadlineSeconds": _deadline,
    "storageOptions": _storage_options,
    "prefix": _prefix,
    "operatorVersion": lambda _name, value: _operator_version(value),
    "fencing": _fencing,
    "verify": _enum_of(Verify),
    "onNewerMetadata": _enum_of(NewerMetadata),
    "verifyBudget": lambda name, value: _budget(name, value),
}


def policy_from_dict(doc: Any) -> RestorePolicy:
    """Validate a parsed policy document; unknown keys are errors (a typo must not silently mean default).

    Every bad field is reported at once, not only the first, so one edit fixes the file.
    """
    if not isinstance(doc, dict):
        raise PolicyError("<document>", "must be a mapping")
    # Optional (a file may hold just the fields it changes), but never another document type.
    if doc.get("apiVersion", API_VERSION) != API_VERSION:
        raise PolicyError("apiVersion", f"must be {API_VERSION!r}, got {doc.get('apiVersion')!r}")
    if doc.get("kind", KIND) != KIND:
        raise PolicyError("kind", f"must be {KIND!r}, got {doc.get('kind')!r}")
    errors = [
        _unknown(str(k), k, list(_FIELDS))
        for k in sorted(set(doc) - set(_FIELDS) - {"apiVersion", "kind", "metadata"}, key=str)
    ]
    kw: dict[str, Any] = {}
    for key, validate in _VALIDATORS.items():
        if key in doc:
            try:
                kw[_FIELDS[key]] = validate(key, doc[key])
            except PolicyError as exc:
                errors.append(exc)
    for key in ("defaultCheckpointDir", "defaultSavepointDir"):
        value = kw.get(_FIELDS[key], "")
        if value:
            try:
                scheme = StoragePath.parse(value).scheme
            except StoragePathError as exc:
                errors.append(PolicyError(key, str(exc)))
                continue
            if "allowedSchemes" in doc and "allowed_schemes" not in kw:
                continue  # allowedSchemes is itself wrong, reported above
            if scheme not in kw.get("allowed_schemes", DEFAULT_ALLOWED_SCHEMES):
                errors.append(PolicyError(key, f"scheme {scheme!r} is not in allowedSchemes"))
    if errors:
        raise PolicyError.combined(errors)
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
                "additionalProperties": False,
                "properties": {
                    scheme: {
                        "type": "object",
                        "propertyNames": {"enum": list(STORAGE_OPTIONS[FSSPEC_PROTOCOL[scheme]])},
                        "properties": _option_type_schemas(FSSPEC_PROTOCOL[scheme]),
                    }
                    for scheme in schemes
                },
            },
            "prefix": {"type": "string", "pattern": _PREFIX_RE.pattern, "maxLength": 253},
            "operatorVersion": {"type": "string", "pattern": _OPERATOR_VERSION_RE.pattern},
            "fencing": _fencing_schema(),
            "verify": enum(Verify),
            "onNewerMetadata": enum(NewerMetadata),
            "verifyBudget": {"type": "integer", "minimum": 1, "maximum": MAX_VERIFY_BUDGET},
        },
    }


def _option_type_schemas(protocol: str) -> dict[str, Any]:
    json_type = {bool: "boolean", int: "integer", float: "number", str: "string", dict: "object"}
    out = {}
    for option in STORAGE_OPTIONS[protocol]:
        types = option_types(protocol, option)
        if types:
            names = sorted({json_type[t] for t in types} - ({"integer"} if float in types else set()))
            out[option] = {"type": [*names, "null"]}
    return out


def policy_notes(policy: RestorePolicy) -> tuple[str, ...]:
    """What a valid policy probably gets wrong, told at start-up and by ``review`` (not refused: a
    policy may rely on Karmada's own state preservation alone)."""
    own = policy.key(JOB_ID)
    if own in policy.job_id_labels:
        return ()
    return (
        f"jobIdLabels does not include {own}, the label flink-failover's control plane writes: every "
        f"failover it relocates will find no jobId (searched: {', '.join(policy.job_id_labels)}); add it "
        "unless Karmada's own state preservation writes one of these labels",
    )


def _fencing_schema() -> dict[str, Any]:
    seconds = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_LEASE_SECONDS}
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "enabled": {"type": "boolean"},
            "leaseSeconds": seconds,
            "pollSeconds": seconds,
            "onStorageError": {"type": "string", "enum": [m.value for m in FencingStorageError]},
            # The rules across fields (timing_problems) are checked by the chart's template
            # (configmap-policy.yaml) and by _fencing.
            "renewDeadlineSeconds": seconds,
            "stopMarginSeconds": seconds,
            "onRenewFailure": {"type": "string", "enum": [m.value for m in RenewFailure]},
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
    # An empty file (or one of comments only) sets no field: every field is optional, so it is the
    # defaults, as an empty ``policy:`` block of the chart is.
    return policy_from_dict({} if doc is None else doc)
