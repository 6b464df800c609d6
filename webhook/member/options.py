"""The member role's ``serve`` options: what it reads beside the restore policy, typed once.

Its own options (``add_arguments``) and, from those and the shared ``--kubeconfig`` / ``--context`` /
``--cluster``, :class:`MemberOptions` (``from_args``: a message instead when one is unusable).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from webhook.common.kubeclient import ClientConfig
from webhook.member.policy import RestorePolicy


@dataclass(frozen=True)
class FencingTarget:
    """``--cluster`` (with ``--kubeconfig``, else the in-cluster account): the member role's fencing agent."""

    client: ClientConfig
    cluster: str


@dataclass(frozen=True)
class MemberOptions:
    policy: RestorePolicy
    require_storage_backends: bool = False
    # --kubeconfig, --cluster or --read-session-clusters: session clusters are read there
    own_cluster: ClientConfig | None = None
    fencing: FencingTarget | None = None  # None: no fencing (no --cluster, or the policy turns it off)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    member = parser.add_argument_group("member role")
    member.add_argument(
        "--require-storage-backends",
        action="store_true",
        help="member role: refuse to start when the policy allows a storage scheme with no fsspec "
        "backend installed (default: start, warn in the log and on /readyz)",
    )
    member.add_argument(
        "--read-session-clusters",
        action="store_true",
        help="member role: read the FlinkDeployment a FlinkSessionJob runs on (its checkpoint directory) "
        "from this cluster's API (--kubeconfig, else the in-cluster account) without --cluster; needs "
        "get on flinkdeployments (chart: member.readSessionClusters)",
    )


def from_args(args: argparse.Namespace, policy: RestorePolicy) -> MemberOptions | str:
    client = ClientConfig(kubeconfig=args.kubeconfig, context=args.context)
    fencing = None
    if args.cluster:
        from webhook.member.fencing.layout import ClusterNameError, check_cluster_name

        try:
            check_cluster_name(args.cluster)
        except ClusterNameError as exc:
            return f"--cluster: {exc}"
        if policy.fencing.enabled:
            fencing = FencingTarget(client, args.cluster)
    own = client if args.kubeconfig or args.cluster or args.read_session_clusters else None
    return MemberOptions(policy, bool(args.require_storage_backends), own, fencing)
