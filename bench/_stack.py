"""The stack under test: certificates, a checkpoint tree, moto S3, a policy file and the real server."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.objects import FLINK_METADATA, make_checkpoints
from tests.support.s3 import moto_server, s3_options
from tests.support.server import RunningServer, generate_certs, serve

JOB_10 = "10" * 16
JOB_1000 = "1000" * 8
JOB_EMPTY = "e0" * 16
BUCKET = "bench-state"


@dataclass
class Stack:
    work: Path
    cert_dir: Path
    policy: Path
    checkpoint_root: Path
    s3_endpoint: str | None


@contextlib.contextmanager
def stack(work: Path, with_s3: bool = True) -> Iterator[Stack]:
    """Certificates, a checkpoint tree (10 / 1,000 retained checkpoints), moto S3 and a policy file."""
    cert_dir = generate_certs(work / "certs")
    root = work / "checkpoints"
    make_checkpoints(root / JOB_10, list(range(1, 11)))
    make_checkpoints(root / JOB_1000, list(range(1, 1001)))
    (root / JOB_EMPTY).mkdir(parents=True)
    with contextlib.ExitStack() as stack_:
        endpoint = None
        if with_s3:
            endpoint = stack_.enter_context(moto_server(work / "moto.log"))
            _seed_s3(endpoint)
        policy = work / "policy.yaml"
        storage = f"storageOptions: {{s3: {json.dumps(s3_options(endpoint))}}}\n" if endpoint else ""
        policy.write_text(
            "apiVersion: flink-failover.io/v1alpha1\nkind: RestorePolicy\n"
            f"defaultCheckpointDir: {root}\ndeadlineSeconds: 5\n{storage}"
        )
        yield Stack(work, cert_dir, policy, root, endpoint)


def _seed_s3(endpoint: str) -> None:
    import s3fs  # the bench process only; clients never touch S3

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(endpoint))  # type: ignore[arg-type]
    fs.mkdir(BUCKET)
    fs.pipe(
        {
            f"{BUCKET}/ckpt/{JOB_10}/chk-{n}/{name}": FLINK_METADATA if name == "_metadata" else b"x"
            for n in range(1, 11)
            for name in ("_metadata", "state")
        }
    )


@contextlib.contextmanager
def server(st: Stack, workers: int, threads: int, log_name: str = "server.log") -> Iterator[RunningServer]:
    with serve(
        st.cert_dir,
        st.policy,
        st.work / log_name,
        extra=["--workers", str(workers), "--threads", str(threads), "--log-level", "info"],
    ) as running:
        yield running
