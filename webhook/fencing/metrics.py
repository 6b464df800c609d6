"""The fencing metrics, shared by the webhook's gate and the agent (summed across gunicorn workers)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

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
    "Ownership records that could not be read or written, by where (admission, agent, heartbeat)",
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
ACKS = Counter(
    "flink_failover_fencing_acks_total", "Stale copies acknowledged once their operator reported them stopped"
)
RENEWALS = Counter(
    "flink_failover_fencing_renewals_total",
    "Heartbeat renewals by the heartbeat loop, by result (ok, failed: error or past its deadline)",
    ["result"],
)
STEP_DOWNS = Counter(
    "flink_failover_fencing_step_downs_total",
    "Running copies suspended by their own agent: the heartbeat could not be renewed within the deadline",
)
RESUMES = Counter(
    "flink_failover_fencing_resumes_total", "Stepped-down copies resumed when nobody took over meanwhile"
)
VERDICTS = Counter(
    "flink_failover_fencing_verdict_checks_total",
    "Running jobs' newest checkpoints checked to keep their verdict, by result (restorable: verdict kept; "
    "passed-over: a checkpoint was not restorable; unchecked: budget or deadline; error)",
    ["result"],
)
WAITING_FOR_OPERATOR = Gauge(
    "flink_failover_fencing_waiting_for_operator",
    "Stale copies asked to stop that their operator has not reported stopped yet (at the last poll)",
    multiprocess_mode="max",
)
OLDEST_HOLD = Gauge(
    "flink_failover_fencing_oldest_hold_seconds",
    "How long the oldest copy held on this cluster has been held, as the agent saw it (seconds)",
    multiprocess_mode="max",
)
AGENT_READY = Gauge(
    "flink_failover_fencing_agent_ready",
    "1 when the agent lists at least one Flink kind and polls; 0 otherwise",
    multiprocess_mode="max",
)
KIND_LISTED = Gauge(
    "flink_failover_fencing_kind_listed",
    "1 when the agent could list this Flink kind at its last poll (0: its jobs are not fenced)",
    ["kind"],
    multiprocess_mode="max",
)
POLL_SECONDS = Histogram(
    "flink_failover_fencing_poll_seconds",
    "How long one poll of the fencing agent took",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
KEEPER_HANDOVERS = Counter(
    "flink_failover_fencing_keeper_handovers_total",
    "Running copies whose heartbeat the agent left to the lease keeper in their pod (seen writing it)",
)
KEEPER_TAKEBACKS = Counter(
    "flink_failover_fencing_keeper_takebacks_total",
    "Handed-over copies the agent took back: their keeper's record did not move for the renew deadline",
)
ADMITTED_HEARTBEATS = Counter(
    "flink_failover_fencing_admission_heartbeats_total",
    "Heartbeats written at an admission, looked at again once the CREATE was persisted or refused, by "
    "outcome (removed: the object is not there; present, rewritten, gone: kept; error: could not tell, "
    "looked at again; left, dropped: left to the lease)",
    ["outcome"],
)
