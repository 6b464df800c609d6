"""The control-plane role: records each Flink job's last good state on its Karmada ResourceBinding and
labels the workload inside a Work bound for the cluster it fails over to (docs/failover.md)."""
