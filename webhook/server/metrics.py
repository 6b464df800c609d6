"""Prometheus metrics every role shares (a role's own live with that role), summed across gunicorn
workers through the multiprocess directory."""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

ADMISSIONS = Counter(
    "flink_failover_admissions_total",
    "Admission requests answered, by role and decision",
    ["role", "decision"],
)
LATENCY = Histogram(
    "flink_failover_admission_duration_seconds",
    "Time to answer one admission request",
    ["role"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
BAD_REQUESTS = Counter("flink_failover_bad_requests_total", "Bodies rejected before admission", ["code"])
INTERNAL_ERRORS = Counter(
    "flink_failover_internal_errors_total", "Unexpected failures turned into answers", ["role"]
)


def exposition() -> tuple[bytes, str]:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST
