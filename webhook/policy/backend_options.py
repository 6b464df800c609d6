"""What each fsspec backend takes as ``storageOptions``: the names of its constructor's parameters and the
types of the ones whose backends agree on it, and the problems of a policy's options told with a "did you
mean". Pure data and checks (``tests/policy/test_backend_options.py`` compares them with the installed
backends).
"""

from __future__ import annotations

from typing import Any

from webhook.common.paths import FSSPEC_PROTOCOL

# What each fsspec backend's constructor takes (storageOptions are handed to it): its own parameters at
# the pinned versions, and fsspec's common ones. fsspec accepts and ignores any other name, so a typo
# (endpointUrl) would pass and fail only at the first failover. tests/policy/test_backend_options.py
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
# tests/policy/test_backend_options.py checks these against the installed backends' defaults.
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


def closest(name: str, accepted: tuple[str, ...]) -> str:
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


def problems(options: dict[str, dict[str, Any]], schemes: tuple[str, ...]) -> list[str]:
    """What is wrong with ``options`` (scheme -> options), each problem a phrase naming the option."""
    out = []
    for scheme, given in options.items():
        if scheme not in schemes:
            out.append(f"{scheme!r} is not a known scheme")
            continue
        protocol = FSSPEC_PROTOCOL[scheme]
        accepted = STORAGE_OPTIONS[protocol]
        for option, value in given.items():
            if option not in accepted:
                hint = closest(str(option), accepted)
                out.append(
                    f"{scheme}.{option} is not an option of the {protocol} backend"
                    + (f" (did you mean {hint}?)" if hint else "")
                )
            elif not _typed(value, types := option_types(protocol, option)):
                wanted = " or ".join(_TYPE_WORDS[t] for t in types)
                out.append(
                    f"{scheme}.{option}: {value!r} is {_kind_of(value)}; "
                    f"the {protocol} backend takes {wanted}"
                )
    return out


def type_schemas(protocol: str) -> dict[str, Any]:
    """The JSON Schema type of each typed option of ``protocol`` (null always allowed: its default)."""
    json_type = {bool: "boolean", int: "integer", float: "number", str: "string", dict: "object"}
    out = {}
    for option in STORAGE_OPTIONS[protocol]:
        types = option_types(protocol, option)
        if types:
            names = sorted({json_type[t] for t in types} - ({"integer"} if float in types else set()))
            out[option] = {"type": [*names, "null"]}
    return out
