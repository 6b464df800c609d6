"""The fencing metrics, shared by the webhook's gate and the agent (summed across gunicorn workers)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

HOLDS = Counter("flink_failover_fencing_holds_total", "Restores admitted held until the old copy stops")
RELEASES = Counter(
    "flink_failover_fencing_releases_total",
    "Held restores released, by cause (ack, lease-expiry, no-heartbeat, manual, storage-error)",
    ["cause"],
)
FENCES = Counter("flink_failover_fencing_fences_written_total", "Fences written for a restore")
STOPPED = Counter("flink_failover_fencing_stale_copies_stopped_total", "Stale copies suspended by a fence")
SUPERSEDED = Counter(
    "flink_failover_fencing_superseded_total", "Held copies left suspended because a newer restore owns them"
)
STORAGE_ERRORS = Counter(
    "flink_failover_fencing_storage_errors_total",
    "Ownership records that could not be read or written, by where (admission, agent)",
    ["where"],
)
API_ERRORS = Counter(
    "flink_failover_fencing_api_errors_total", "Member API calls of the fencing agent that failed", ["call"]
)
HELD = Gauge(
    "flink_failover_fencing_held",
    "Copies held suspended on this cluster at the last poll",
    multiprocess_mode="max",
)
LAST_POLL = Gauge(
    "flink_failover_fencing_last_poll_timestamp_seconds",
    "When the agent last completed a poll (Unix time)",
    multiprocess_mode="max",
)
