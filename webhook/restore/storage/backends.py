"""The fsspec client of each backend, built once per process from the network defaults and the policy's
options (listing caches always off); which allowed backends this installation cannot read; the deadline and
the error every storage call shares.
"""

from __future__ import annotations

import copy
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import fsspec

from webhook.common.paths import FSSPEC_PROTOCOL, StoragePath, StoragePathError
from webhook.restore.snapshots import StorageError

# Conservative network defaults so one slow endpoint cannot eat the admission deadline by itself.
_S3_DEFAULTS: dict[str, Any] = {
    "use_listings_cache": False,
    "config_kwargs": {
        "connect_timeout": 2,
        "read_timeout": 3,
        "retries": {"max_attempts": 2, "mode": "standard"},
        # as many connections as lookup requests run side by side (botocore's default is 10: 200 HEADs
        # of a verdict's new files queued in 20 rounds)
        "max_pool_connections": 64,
    },
}


_S3FS_RETRIES = 1  # s3fs-level tries; botocore's own max_attempts above still applies

# The same for the other object stores, where their clients have the knobs: gcsfs's per-request timeout
# (it retries 6 times itself), the Azure SDK's connect and read timeouts.
_NETWORK_DEFAULTS: dict[str, dict[str, Any]] = {
    "s3": _S3_DEFAULTS,
    "gs": {"requests_timeout": 3},
    "abfs": {"connection_timeout": 2, "read_timeout": 3},
}
# Object stores whose fsspec client caches listings unless told not to (s3fs, gcsfs, adlfs and ossfs
# cache them without expiry): a heartbeat, fence or chk-N another cluster wrote after the first listing
# would never be seen. Forced off whatever the policy says: no cached listing decides anything.
_LISTING_CACHES = frozenset({"s3", "gs", "abfs", "oss"})


# Per fsspec protocol: the extra of this package that installs its backend, and a module the backend
# needs at run time (fsspec resolves "hdfs" to a class that imports pyarrow only when used).
BACKENDS: dict[str, tuple[str, str]] = {
    "s3": ("", "s3fs"),
    "gs": ("gcs", "gcsfs"),
    "abfs": ("azure", "adlfs"),
    "oss": ("oss", "ossfs"),
    "hdfs": ("hdfs", "pyarrow.fs"),
    "file": ("", ""),
}


@dataclass(frozen=True)
class MissingBackend:
    scheme: str
    extra: str
    error: str
    native: bool = False  # the Python package imports, but the native client it loads is missing

    def message(self) -> str:
        if self.native:
            return (
                f"allowed scheme {self.scheme}:// cannot be read: {self.error}; use an image with a JVM and "
                f"the Hadoop client, or remove {self.scheme} from the policy's allowedSchemes; until then "
                "a restore from it is a storage error"
            )
        install = f"install flink-failover[{self.extra}]" if self.extra else "reinstall flink-failover"
        return (
            f"allowed scheme {self.scheme}:// has no fsspec backend ({self.error}): {install}, or remove "
            f"{self.scheme} from the policy's allowedSchemes; until then a restore from it is a storage error"
        )


def missing_backends(schemes: Iterable[str]) -> tuple[MissingBackend, ...]:
    """The allowed schemes this installation cannot read (imports each backend once: start-up cost only)."""
    import importlib

    missing = []
    for scheme in schemes:
        protocol = FSSPEC_PROTOCOL[scheme]
        extra, module = BACKENDS.get(protocol, ("", ""))
        try:
            fsspec.get_filesystem_class(protocol)
            if module:
                importlib.import_module(module)
        except (ImportError, ValueError) as exc:
            missing.append(MissingBackend(scheme, extra, str(exc).strip().splitlines()[0][:160]))
            continue
        if protocol == "hdfs" and (problem := hadoop_client_problem(os.environ)):
            missing.append(MissingBackend(scheme, extra, problem, native=True))
    return tuple(missing)


def hadoop_client_problem(environ: Mapping[str, str]) -> str:
    """Why pyarrow's HadoopFileSystem cannot work here ("" when it can): it loads a JVM (libjvm) and
    libhdfs at the first connection, and the JVM needs the Hadoop jars on its classpath. Without them
    pyarrow still imports, and every restore failed with ``OSError: Unable to load libjvm``.

    Looks where Arrow looks: libjvm under ``JAVA_HOME``, libhdfs in ``ARROW_LIBHDFS_DIR``, then
    ``HADOOP_HOME/lib/native``, then the loader's search path; each is loaded once to be sure.
    """
    import ctypes

    home = environ.get("JAVA_HOME", "")
    jvms = (
        [
            os.path.join(home, sub, "libjvm.so")
            for sub in (
                "lib/server",
                "jre/lib/server",
                "lib/amd64/server",
                "jre/lib/amd64/server",
                "lib/aarch64/server",
            )
        ]
        if home
        else []
    )
    if not _load_first(jvms + ([] if home else ["libjvm.so"]), ctypes.RTLD_GLOBAL):
        where = f"under JAVA_HOME={home}" if home else "(JAVA_HOME is not set)"
        return f"no loadable JVM (libjvm.so) {where}"
    hadoop_home = environ.get("HADOOP_HOME", "")
    hdfs_dirs = [
        environ.get("ARROW_LIBHDFS_DIR", ""),
        os.path.join(hadoop_home, "lib", "native") if hadoop_home else "",
    ]
    libhdfs = [os.path.join(d, "libhdfs.so") for d in hdfs_dirs if d]
    if not _load_first([*libhdfs, "libhdfs.so"], ctypes.RTLD_GLOBAL):
        return "no loadable libhdfs.so (set ARROW_LIBHDFS_DIR or HADOOP_HOME)"
    hadoop = os.path.join(environ.get("HADOOP_HOME", ""), "bin", "hadoop")
    if "hadoop" not in environ.get("CLASSPATH", "") and not (
        environ.get("HADOOP_HOME") and os.path.isfile(hadoop)
    ):
        return "no Hadoop jars for the JVM (set CLASSPATH to `hadoop classpath --glob`, or HADOOP_HOME)"
    return ""


def _load_first(paths: list[str], mode: int) -> bool:
    import ctypes

    for path in paths:
        if os.sep in path and not os.path.isfile(path):
            continue
        try:
            ctypes.CDLL(path, mode=mode)
        except OSError:
            continue
        return True
    return False


class DeadlineExceeded(StorageError):
    pass


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.expires = time.monotonic() + seconds

    def remaining(self) -> float:
        return self.expires - time.monotonic()

    def check(self) -> None:
        if self.remaining() <= 0:
            raise DeadlineExceeded("storage lookup passed the admission deadline")


class Filesystems:
    """The fsspec filesystems of a process, by storage: one shared per scheme (fsspec caches it), and one
    of a lane's own where a caller asks (the fencing heartbeats')."""

    def __init__(self, storage_options: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self._options = {k: dict(v) for k, v in (storage_options or {}).items()}
        self._lock = threading.Lock()
        self._own: dict[tuple[str, str, str, int], fsspec.AbstractFileSystem] = {}  # per lane and storage

    def options(self, path: StoragePath) -> dict[str, Any]:
        """The options ``path``'s filesystem is built from: the network defaults, then the policy's."""
        # A deep copy: botocore rewrites the nested retries mapping in place when it connects.
        options: dict[str, Any] = copy.deepcopy(_NETWORK_DEFAULTS.get(path.protocol, {}))
        options.update(self._options.get(path.protocol, {}))
        options.update(self._options.get(path.scheme, {}))
        if path.protocol in _LISTING_CACHES:
            options["use_listings_cache"] = False
        return options

    def filesystem(
        self, path: StoragePath, lane: str = "", connections: int = 0
    ) -> fsspec.AbstractFileSystem:
        """``lane``: an instance of that lane's own for ``path``'s storage (bucket), with ``connections``
        connections on S3, not the one everything else on the scheme shares (the fencing heartbeats')."""
        options = self.options(path)
        # keyed by process too: an instance made before a fork is not used after it (as fsspec's cache)
        own = (lane, path.scheme, path.authority, os.getpid()) if lane else None
        if own is not None:
            options["skip_instance_cache"] = True
            if path.protocol == "s3" and connections:
                config = {**options.get("config_kwargs", {}), "max_pool_connections": connections}
                options["config_kwargs"] = config
        try:
            with self._lock:
                if own is not None and own in self._own:
                    return self._own[own]
                cls = _gcs_json_only(options) if path.protocol == "gs" else None
                fs = cls(**options) if cls is not None else fsspec.filesystem(path.protocol, **options)
                if own is not None:
                    self._own[own] = fs
                if path.protocol == "s3" and getattr(fs, "retries", 1) > _S3FS_RETRIES:
                    # s3fs retries 5 times with backoff on top of botocore's attempts: an endpoint that
                    # accepts and never answers held a lookup thread for ~55 s (tests/faults), long after
                    # the admission gave up, filling the lookup pool and delaying worker shutdown.
                    fs.retries = _S3FS_RETRIES
                return fs
        except ImportError as exc:
            raise StorageError(
                f"no fsspec implementation installed for {path.scheme}:// ({exc}); "
                "install the matching extra of flink-failover"
            ) from None
        except (ValueError, TypeError) as exc:
            raise StorageError(f"invalid storageOptions for {path.scheme}: {exc}") from None


def _gcs_json_only(options: Mapping[str, Any]) -> Any:
    """The gcsfs class for a ``gs`` endpoint other than Google's: its JSON API only.

    gcsfs (2025.x on, with GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT at its default) first asks every bucket's
    type over gRPC (Storage Control, TLS to the endpoint), waits 60 s for an endpoint that does not
    speak it, and does not remember the failure: every admission against an emulator or a
    GCS-compatible store missed its deadline. Such an endpoint has no zonal or hierarchical buckets to
    find, so the plain class serves it; Google's own endpoint keeps fsspec's choice (None).
    """
    if not (options.get("endpoint_url") or os.environ.get("STORAGE_EMULATOR_HOST")):
        return None
    from gcsfs.core import GCSFileSystem

    return GCSFileSystem


# An object store's listing of a folder that does not exist: s3fs then lists its parent to tell "no


def modified_time(info: Mapping[str, Any]) -> datetime | None:
    """An fsspec info entry's modification time, whichever key the backend uses (storage time)."""
    for key in ("mtime", "LastModified", "updated", "last_modified", "modification_time"):
        value = info.get(key)
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        if isinstance(value, int | float):
            # hdfs reports milliseconds
            return datetime.fromtimestamp(value / 1000 if value > 1e11 else value, UTC)
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                continue
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def storage_error(action: str, path: StoragePath, exc: BaseException) -> StorageError:
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, PermissionError):
        return StorageError(f"permission denied {action} {path}")
    if isinstance(exc, StoragePathError):
        return StorageError(str(exc))
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    return StorageError(f"{action} {path}: {text}")  # the decision says "storage error: " once
