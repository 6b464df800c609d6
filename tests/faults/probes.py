"""A member server whose every worker thread waits on hung S3, and the probes asked meanwhile.

Shared by ``tests/faults/test_probes.py`` (the probe port answers while every admission still waits)
and ``bench/probes.py`` (how long the first probe takes on each port).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.faults.loopback import Blackhole, counting_blackhole
from tests.support.objects import flink_deployment, review
from tests.support.server import ApiServerClient, RunningServer, free_port, generate_certs, serve

ADMISSIONS = 24  # more than the server's 2 x 8 worker threads


@dataclass
class HungStack:
    server: RunningServer
    probe_port: int
    ca: Path
    hole: Blackhole
    answered: list[float] = field(default_factory=list)  # monotonic times admissions were answered

    def probe(self, port: int, path: str = "/readyz") -> tuple[int, float]:
        """(status, monotonic time answered) of one probe on ``port``, on a new connection as kubelet."""
        client = ApiServerClient(port, self.ca, timeout=30)
        try:
            status, _, _ = client.request("GET", path)
        finally:
            client.close()
        return status, time.monotonic()

    def flood(self) -> list[threading.Thread]:
        """ADMISSIONS failover CREATEs at once, each waiting on the hung endpoint until the deadline."""

        def one() -> None:
            job = secrets.token_hex(16)
            labels = {"flink-failover.io/failover": "true", "flink-failover.io/job-id": job}
            obj = flink_deployment(checkpoint_dir=f"s3p://hung-{job[:8]}/ckpt", labels=labels)
            client = self.server.client(timeout=60)
            try:
                client.admit(review(obj))
            finally:
                client.close()
                self.answered.append(time.monotonic())

        threads = [threading.Thread(target=one, daemon=True) for _ in range(ADMISSIONS)]
        for t in threads:
            t.start()
        return threads


@contextmanager
def hung_stack(work: Path, deadline: float) -> Iterator[HungStack]:
    certs = generate_certs(work / "certs")
    probe_port = free_port()
    with counting_blackhole() as hole:
        policy = work / "policy.yaml"
        s3p = {"endpoint_url": f"http://127.0.0.1:{hole.port}", "key": "k", "secret": "s"}
        policy.write_text(f"deadlineSeconds: {deadline:g}\nstorageOptions: {json.dumps({'s3p': s3p})}\n")
        extra = ["--probe-bind", f"127.0.0.1:{probe_port}"]
        with serve(certs, policy, work / "server.log", extra=extra) as server:
            yield HungStack(server, probe_port, certs / "ca.crt", hole)
