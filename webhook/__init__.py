"""flink-failover: stateful Flink failover across Kubernetes clusters with Karmada."""

__version__ = "0.1.0"
