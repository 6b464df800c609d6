"""The lease keeper: a small process beside a job's JobManager (a native sidecar in its pod) that renews
the job's heartbeat in its checkpoint storage and stops the JobManager when it cannot (issue 47;
docs/keeper.md). ``decide`` is its pure core; ``jobmanager`` finds and stops the JobManager; ``keeper``
runs the loops; ``http`` serves the probes and metrics; ``command`` is ``flink-failover keeper``."""
