"""One real member server (gunicorn, TLS) whose storage misbehaves in every way the faults need.

Policy: deadline 2 s, local default checkpoint dir, and one S3 endpoint per scheme: ``s3://`` through a
failure-injecting proxy in front of moto, ``s3a://`` a closed port, ``s3p://`` a server that accepts
and never answers. Only 127.0.0.1.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import s3fs

from tests.faults.loopback import S3Proxy, blackhole, closed_port, s3_proxy
from tests.support.s3 import moto_server, s3_options
from tests.support.server import RunningServer, generate_certs, serve

DEADLINE = 2.0


@dataclass
class FaultStack:
    server: RunningServer
    checkpoint_root: Path
    proxy: S3Proxy
    s3: s3fs.S3FileSystem  # straight to moto, for setting up objects

    def new_bucket(self) -> str:
        """A bucket of one test's own. A lookup an earlier test abandoned at its deadline stalls only
        its own bucket (the member handler answers "still waiting" for it), never this one."""
        name = f"fault-{secrets.token_hex(6)}"
        self.s3.mkdir(name)
        return name


@pytest.fixture(scope="session")
def faults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultStack]:
    work = tmp_path_factory.mktemp("faults")
    certs = generate_certs(work / "certs")
    root = work / "checkpoints"
    root.mkdir()
    with moto_server(work / "moto.log") as moto, s3_proxy(moto) as proxy, blackhole() as hole:
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(moto))  # type: ignore[arg-type]
        storage = {
            "s3": s3_options(proxy.endpoint),
            "s3a": s3_options(f"http://127.0.0.1:{closed_port()}"),
            "s3p": s3_options(f"http://127.0.0.1:{hole}"),
        }
        policy = work / "policy.yaml"
        policy.write_text(
            "apiVersion: flink-failover.io/v1alpha1\nkind: RestorePolicy\n"
            f"defaultCheckpointDir: {root}\ndeadlineSeconds: {DEADLINE:g}\n"
            f"storageOptions: {json.dumps(storage)}\n"
        )
        with serve(certs, policy, work / "server.log") as server:
            yield FaultStack(server, root, proxy, fs)
