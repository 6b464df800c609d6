"""How long a probe takes while every admission waits on hung storage: webhook port vs probe port.

The real member server (2 workers x 8 threads, TLS) and 24 failover CREATEs at once against an S3
endpoint that accepts and never answers; 0.5 s later one ``/readyz`` on the webhook port and one on the
probe port (``--probe-bind``), each on a new connection as kubelet opens them. Per deadline, the median
of ``--rounds`` rounds (each a fresh server).

``python -m bench probes [--rounds N]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from tests.faults.probes import hung_stack

DEADLINES = (3.0, 8.0)


def _round(deadline: float) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp, hung_stack(Path(tmp), deadline) as stack:
        threads = stack.flood()
        stack.hole.wait_for_connections(1, timeout=60)  # admissions wait on the hung storage
        took: dict[str, float] = {}

        def probe(name: str, port: int) -> None:
            started = time.monotonic()
            _, done = stack.probe(port)
            took[name] = done - started

        probes = [
            threading.Thread(target=probe, args=("webhook", stack.server.port)),
            threading.Thread(target=probe, args=("probe", stack.probe_port)),
        ]
        for t in probes:
            t.start()
        for t in probes + threads:
            t.join(120)
        return took["webhook"], took["probe"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench probes")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv or [])
    print("deadline s | /readyz on the webhook port, median s | on the probe port, median ms")
    for deadline in DEADLINES:
        rounds = [_round(deadline) for _ in range(args.rounds)]
        webhook = statistics.median(r[0] for r in rounds)
        probe = statistics.median(r[1] for r in rounds)
        print(
            f"{deadline:g} | {webhook:.2f} (max {max(r[0] for r in rounds):.2f}) | {probe * 1000:.1f}",
            flush=True,
        )
    return 0
