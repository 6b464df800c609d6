"""Storage URIs as Flink writes them, kept apart from how fsspec wants them.

The restore path we write back must use the job's own scheme spelling (``s3p://`` stays ``s3p://``),
while the listing goes through the fsspec protocol that serves it (``s3``). Paths are normalised and
``..`` is refused so that a crafted label or annotation can never point the restore outside the
checkpoint directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

# Flink scheme -> fsspec protocol that lists it.
FSSPEC_PROTOCOL = {
    "s3": "s3",
    "s3a": "s3",
    "s3p": "s3",
    "gs": "gs",
    "hdfs": "hdfs",
    "abfs": "abfs",
    "abfss": "abfs",
    "wasb": "abfs",
    "wasbs": "abfs",
    "oss": "oss",
    "file": "file",
}

_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(.*)$", re.DOTALL)
_MAX_LEN = 4096
# C0 controls and DEL: never part of a path Flink writes (a regex: 10,000 names a _metadata, each checked)
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f]")


class StoragePathError(ValueError):
    pass


@dataclass(frozen=True)
class StoragePath:
    scheme: str  # lower-case Flink scheme; "file" for a bare path
    authority: str  # bucket, namenode or container@account; "" for local files
    path: str  # absolute, normalised, no trailing slash ("/" for the root)
    explicit_scheme: bool = True

    @classmethod
    def parse(cls, uri: str) -> StoragePath:
        if not isinstance(uri, str) or not uri.strip():
            raise StoragePathError("empty storage path")
        uri = uri.strip()
        if len(uri) > _MAX_LEN:
            raise StoragePathError("storage path longer than 4096 characters")
        if CONTROL_CHARACTERS.search(uri):
            raise StoragePathError("storage path contains control characters")
        m = _SCHEME_RE.match(uri)
        if m and not uri.startswith("/"):
            scheme, rest = m.group(1).lower(), m.group(2)
            if scheme not in FSSPEC_PROTOCOL:
                raise StoragePathError(f"unsupported scheme {scheme!r}")
            if rest.startswith("//"):
                authority, _, path = rest[2:].partition("/")
                path = "/" + path
            else:  # file:/tmp/x, as Flink sometimes prints local paths
                authority, path = "", rest
            if scheme == "file" and authority not in ("", "localhost"):
                raise StoragePathError("file:// paths must not name a host")
            if scheme == "file":
                authority = ""
            elif not authority:
                raise StoragePathError(f"{scheme}:// path has no bucket or host")
            return cls(scheme, authority, _normalise(path), True)
        if uri.startswith("/"):
            return cls("file", "", _normalise(uri), False)
        raise StoragePathError(f"{uri!r} is neither a URI with a scheme nor an absolute path")

    def child(self, *names: str) -> StoragePath:
        for name in names:
            if not name or name in (".", "..") or "/" in name:
                raise StoragePathError(f"invalid path segment {name!r}")
        base = self.path.rstrip("/")
        child = StoragePath(self.scheme, self.authority, base + "/" + "/".join(names), self.explicit_scheme)
        if len(names) == 1 and self.path in (base, "/"):
            child.__dict__["parent"] = self  # the one folder object for all its files (``parent``)
        return child

    def is_within(self, other: StoragePath) -> bool:
        """True when self is other or lies below it (same storage)."""
        if (FSSPEC_PROTOCOL[self.scheme], self.authority) != (FSSPEC_PROTOCOL[other.scheme], other.authority):
            return False
        base = other.path.rstrip("/")
        return self.path == other.path or self.path.startswith(base + "/")

    @property
    def protocol(self) -> str:
        return FSSPEC_PROTOCOL[self.scheme]

    @property
    def fs_path(self) -> str:
        """The path as the fsspec filesystem for :attr:`protocol` names it."""
        if self.protocol == "file":
            return self.path
        return self.authority + self.path

    @cached_property
    def parent(self) -> StoragePath:
        """The folder holding this path (the root's parent is the root); kept, as ``name`` is: a
        verification asks both of each of 10,000 files several times."""
        base = self.path.rstrip("/").rsplit("/", 1)[0] or "/"
        return StoragePath(self.scheme, self.authority, base, self.explicit_scheme)

    @property
    def canonical(self) -> StoragePath:
        """The same place spelled one way (``s3a://b/x`` and ``s3://b/x``, ``/x`` and ``file:/x``)."""
        if self.explicit_scheme and self.scheme == FSSPEC_PROTOCOL[self.scheme]:
            return self
        return StoragePath(self.protocol, self.authority, self.path, True)

    @cached_property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def __str__(self) -> str:
        if self.scheme == "file" and not self.explicit_scheme:
            return self.path
        return f"{self.scheme}://{self.authority}{self.path}"


def _normalise(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            raise StoragePathError("storage path must not contain '..'")
        parts.append(part)
    return "/" + "/".join(parts)
