"""The keeper's metrics, in a registry of its own (the keeper is a process of its own in the job's pod)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

REGISTRY = CollectorRegistry(auto_describe=True)

HOLDS = Gauge(
    "flink_failover_keeper_holds_lease", "1 while the keeper holds the job's lease", registry=REGISTRY
)
SUPERSEDED = Gauge(
    "flink_failover_keeper_superseded",
    "1 once a newer fence of another cluster ended the lease",
    registry=REGISTRY,
)
JOBMANAGER = Gauge(
    "flink_failover_keeper_jobmanager_running",
    "JobManager processes found at the last look",
    registry=REGISTRY,
)
RENEWALS = Counter(
    "flink_failover_keeper_renewals_total",
    "Heartbeat renewals, by result (ok, failed)",
    ["result"],
    registry=REGISTRY,
)
LISTINGS = Counter(
    "flink_failover_keeper_listings_total",
    "Listings of the job's records, by result (ok, failed)",
    ["result"],
    registry=REGISTRY,
)
REQUESTS = Counter(
    "flink_failover_keeper_storage_requests_total",
    "Storage calls the keeper made (list, beat, clock)",
    ["call"],
    registry=REGISTRY,
)
KILLS = Counter(
    "flink_failover_keeper_jobmanager_kills_total",
    "JobManager processes killed, by why (renew-deadline, superseded, not-held)",
    ["reason"],
    registry=REGISTRY,
)
KILL_FAILURES = Counter(
    "flink_failover_keeper_jobmanager_kill_failures_total",
    "JobManager processes still alive at the kill's deadline",
    registry=REGISTRY,
)
LAST_RENEWAL = Gauge(
    "flink_failover_keeper_last_renewal_timestamp_seconds",
    "When the last renewal that went through started (Unix time)",
    registry=REGISTRY,
)
SESSION_JOBS = Gauge(
    "flink_failover_keeper_session_jobs",
    "Session jobs whose leases a session cluster's keeper keeps (adopted), superseded ones included",
    registry=REGISTRY,
)
CANCELS = Counter(
    "flink_failover_keeper_job_cancels_total",
    "Session jobs cancelled through the JobManager's REST endpoint, by why (superseded, renew-failed) and "
    "result (ok, failed)",
    ["reason", "result"],
    registry=REGISTRY,
)
