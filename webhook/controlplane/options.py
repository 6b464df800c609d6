"""The control-plane role's own ``serve`` options, and the typed settings the composition root builds.

Kept free of the Kubernetes client and of metrics at import (``leader`` is loaded only to build an election):
``serve --help`` and the other roles load it, and the metrics must be set up after the server forks.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from webhook.common.contract import Contract
from webhook.common.envoptions import add_env_option

if TYPE_CHECKING:
    from webhook.controlplane.leader import ElectionConfig

DEFAULT_LEASE_NAME = "flink-failover-control-plane"


@dataclass(frozen=True)
class ControlPlaneOptions:
    contract: Contract = field(default_factory=Contract)  # the keys, under the restore policy's prefix
    get_timeout: float = 2.0  # seconds for the fresh GET of a binding (the restore policy's deadline)
    kubeconfig: str | None = None
    context: str | None = None
    capture: bool = True  # False: serve the webhook only (no watch, no writes)
    # Capture only while holding the Lease (--leader-elect). An empty identity is this process's own,
    # taken where the election starts (in the worker, after fork: a restarted worker is a new candidate).
    election: ElectionConfig | None = None

    def problem(self) -> str | None:
        """Checked before the server starts: a bad election setting is a usage error, not a dying worker."""
        if self.election is None:
            return None
        if not self.capture:
            return "--leader-elect elects the capturing replica: it cannot be combined with --no-capture"
        from webhook.controlplane.leader import default_identity

        return replace(self.election, identity=self.election.identity or default_identity()).problem()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    control = parser.add_argument_group("control-plane role")
    control.add_argument(
        "--no-capture",
        action="store_true",
        help="control-plane role: serve the Work webhook only, record no ResourceBinding state",
    )
    election = parser.add_argument_group(
        "leader election (control-plane role)",
        "with --leader-elect every replica serves the Work webhook and only the holder of a "
        "coordination.k8s.io Lease captures ResourceBinding state",
    )
    election.add_argument(
        "--leader-elect", action="store_true", help="capture only while holding the Lease (default: off)"
    )
    election.add_argument("--lease-name", default=DEFAULT_LEASE_NAME, help="default: %(default)s")
    add_env_option(
        election,
        "--lease-namespace",
        "POD_NAMESPACE",
        "default",
        "namespace of the Lease on the Karmada API server",
    )
    election.add_argument(
        "--lease-duration",
        type=float,
        default=15.0,
        help="seconds a Lease stays valid unrenewed (default: 15)",
    )
    election.add_argument(
        "--renew-deadline",
        type=float,
        default=10.0,
        help="seconds the leader keeps leading without a successful renewal (default: 10)",
    )
    election.add_argument(
        "--retry-period",
        type=float,
        default=2.0,
        help="seconds between tries to acquire or renew (default: 2)",
    )


def from_args(args: argparse.Namespace, contract: Contract, deadline: float) -> ControlPlaneOptions:
    """The typed settings; ``contract`` and ``deadline`` come from the restore policy."""
    election = None
    if args.leader_elect:
        from webhook.controlplane.leader import ElectionConfig

        election = ElectionConfig(
            namespace=args.lease_namespace,
            name=args.lease_name,
            lease_duration=args.lease_duration,
            renew_deadline=args.renew_deadline,
            retry_period=args.retry_period,
        )
    return ControlPlaneOptions(
        contract=contract,
        get_timeout=deadline,
        kubeconfig=args.kubeconfig,
        context=args.context,
        capture=not args.no_capture,
        election=election,
    )
