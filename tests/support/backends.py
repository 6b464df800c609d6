"""Every storage backend the policy accepts, each on a real server of it on loopback, behind one shape so
a test can ``@pytest.mark.parametrize`` over ``BACKENDS``: S3 on moto, Google Cloud Storage on
gcp-storage-emulator (gcsfs), Azure Blob on Azurite (adlfs), and a local directory.

A ``Backend`` says how to start its server and what a policy carries for it; ``Running`` is one started
server: the test's own filesystem (another client than the product's, as another cluster is), fresh
buckets, and the endpoint's port for a ``TcpProxy``. The suite's fixtures (tests/conftest.py) start each
server once per worker; a server whose program is missing skips its tests with one line (fails under
REQUIRE_SHARED_DATA=1).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import fsspec

from tests.support.azure import azure_options, azurite_server
from tests.support.gcs import MissingServer, gcs_options, gcs_server
from tests.support.s3 import moto_server, s3_options

__all__ = ["BACKENDS", "BACKEND_NAMES", "Backend", "MissingServer", "Running", "by_name"]


@contextmanager
def _local(workdir: Path) -> Iterator[str]:
    root = workdir / "local-storage"
    root.mkdir(parents=True, exist_ok=True)
    yield str(root)


def _moto(workdir: Path) -> AbstractContextManager[str]:
    from tests.support.s3 import moto_binary

    try:
        moto_binary()
    except FileNotFoundError as exc:
        raise MissingServer(str(exc)) from None
    return moto_server(workdir / "moto.log")


@dataclass(frozen=True)
class Backend:
    name: str  # what a parametrized test id says: s3, gcs, azure, file
    scheme: str  # the Flink scheme its paths are written with
    server: Callable[[Path], AbstractContextManager[str]]  # workdir -> its endpoint, while running
    options: Callable[[str], dict[str, Any]]  # endpoint -> the policy's storageOptions for the scheme

    @property
    def protocol(self) -> str:
        from webhook.common.paths import FSSPEC_PROTOCOL

        return FSSPEC_PROTOCOL[self.scheme]

    @contextmanager
    def start(self, workdir: Path) -> Iterator[Running]:
        workdir.mkdir(parents=True, exist_ok=True)
        with self.server(workdir) as endpoint:
            yield Running(self, endpoint)


S3 = Backend("s3", "s3", _moto, s3_options)
GCS = Backend("gcs", "gs", lambda workdir: gcs_server(workdir / "gcs.log"), gcs_options)
AZURE = Backend("azure", "abfs", lambda workdir: azurite_server(workdir / "azurite.log"), azure_options)
FILE = Backend("file", "file", _local, lambda endpoint: {})
BACKENDS = (S3, GCS, AZURE, FILE)
BACKEND_NAMES = tuple(b.name for b in BACKENDS)


def by_name(name: str) -> Backend:
    return next(b for b in BACKENDS if b.name == name)


_BUCKETS = itertools.count(1)


@dataclass
class Running:
    """One backend's server while it runs (``endpoint``: its URL; for ``file``, the root directory)."""

    backend: Backend
    endpoint: str
    _fs: Any = field(default=None, repr=False)

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The test's own client: its own connections and no listings cache, never the product's."""
        if self._fs is None:
            self._fs = self.client()
        return self._fs

    def client(self) -> fsspec.AbstractFileSystem:
        """A new client of this server (another cluster's view of the same storage)."""
        options: dict[str, Any] = {"skip_instance_cache": True, "use_listings_cache": False}
        if self.backend.protocol == "gs":
            import gcsfs.core  # the JSON API only: the gRPC bucket-type probe is for Google's own endpoint

            return gcsfs.core.GCSFileSystem(**self.options(), **options)
        return fsspec.filesystem(self.backend.protocol, **self.options(), **options)

    def options(self, endpoint: str | None = None) -> dict[str, Any]:
        """The policy's storageOptions for this backend's scheme (through ``endpoint`` when given)."""
        return self.backend.options(endpoint or self.endpoint)

    def storage_options(self, endpoint: str | None = None) -> dict[str, dict[str, Any]]:
        """The policy's whole ``storageOptions`` (scheme -> options); {} for local storage."""
        found = self.options(endpoint)
        return {self.backend.scheme: found} if found else {}

    @property
    def port(self) -> int:
        """The server's port on 127.0.0.1, for a ``TcpProxy`` in front of it (not for ``file``)."""
        port = urlsplit(self.endpoint).port
        if port is None:
            raise ValueError(f"{self.backend.name} has no network endpoint")
        return port

    def via(self, port: int) -> str:
        """This server's endpoint as reached through a proxy listening on ``port``."""
        parts = urlsplit(self.endpoint)
        return parts._replace(netloc=f"127.0.0.1:{port}").geturl()

    def bucket(self, prefix: str = "bkt") -> str:
        """A new empty bucket (container, directory) and its root URL as a Flink path names it."""
        name = f"{prefix}-{next(_BUCKETS)}"
        if self.backend.name == "file":
            path = Path(self.endpoint) / name
            path.mkdir(parents=True)
            return str(path)
        self.fs.mkdir(name)
        return f"{self.backend.scheme}://{name}"

    def path(self, url: str) -> str:
        """``url`` (a Flink path on this backend) as the test's filesystem names it."""
        from webhook.common.paths import StoragePath

        return StoragePath.parse(url).fs_path

    def write(self, url: str, data: bytes) -> None:
        fs = self.fs
        if self.backend.name == "file":
            fs.makedirs(str(Path(self.path(url)).parent), exist_ok=True)
        fs.pipe_file(self.path(url), data)

    def read(self, url: str) -> bytes:
        return bytes(self.fs.cat_file(self.path(url)))
