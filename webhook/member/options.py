"""The member role's ``serve`` options: what it reads beside the restore policy, typed once.

Its own options (``add_arguments``) and, from those and the shared ``--kubeconfig`` / ``--context`` /
``--cluster``, :class:`MemberOptions` (``from_args``: a message instead when one is unusable).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from webhook import __version__
from webhook.common.envoptions import add_env_option
from webhook.common.kubeclient import ClientConfig
from webhook.member.identity import AgentIdentity, token_subject
from webhook.member.keeper import Sidecars
from webhook.policy.restore import RestorePolicy

# The webhook registration's failurePolicy (the chart sets it from member.webhook.failurePolicy).
FAILURE_POLICY_ENV = "FLINK_FAILOVER_WEBHOOK_FAILURE_POLICY"
FAILURE_POLICIES = ("Fail", "Ignore")
# The lease keeper's image (the chart passes its own); without it, what `make image` tags for this release.
KEEPER_IMAGE_ENV = "FLINK_FAILOVER_KEEPER_IMAGE"
DEFAULT_KEEPER_IMAGE = f"flink-failover:{__version__}"
# Whether the member's Kubernetes serves native sidecars (member/keeper.py Sidecars; chart:
# member.keeper.nativeSidecars).
NATIVE_SIDECARS_ENV = "FLINK_FAILOVER_NATIVE_SIDECARS"


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
    # where the admissions' Kubernetes Events are written: the own cluster, or --events alone (an
    # account that may create events and nothing else); None: no Events
    events: ClientConfig | None = None
    fencing: FencingTarget | None = None  # None: no fencing (no --cluster, or the policy turns it off)
    # Who may set the fencing agent's release markers: the users given (--agent-user), else the member
    # role's own identity, learnt from its API server in each worker (``member/identity.py``); unknown:
    # nobody (said at start-up).
    agent_users: frozenset[str] = frozenset()
    agent_token: str = ""  # in a pod without --kubeconfig: the service account token's subject
    keeper_image: str = DEFAULT_KEEPER_IMAGE  # the image of the lease keeper's sidecar (with fencing)
    native_sidecars: Sidecars = Sidecars.AUTO  # auto: from the cluster's /version

    def identity(self) -> AgentIdentity:
        return AgentIdentity.of_cluster(self.agent_users, self.own_cluster, self.agent_token)


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
    member.add_argument(
        "--events",
        action="store_true",
        help="member role: write the restore decisions as Kubernetes Events on the Flink objects, in "
        "this cluster (--kubeconfig, else the in-cluster account); needs create and patch on "
        "events.k8s.io events, nothing else (chart: member.events). Implied by --cluster, "
        "--read-session-clusters and --kubeconfig",
    )
    add_env_option(
        member,
        "--agent-user",
        "FLINK_FAILOVER_AGENT_USERS",
        None,
        "member role: the user (userInfo.username) the fencing agent's releases come from; a "
        "'released' marker set by anyone else keeps a held job held (repeatable; the variable: "
        "comma-separated)",
        otherwise="the agent's own identity, asked of its API server with a SelfSubjectReview, else the "
        "pod's service account; unknown: no one's",
        action="append",
    )
    add_env_option(
        member,
        "--webhook-failure-policy",
        FAILURE_POLICY_ENV,
        "Fail",
        "member role: the webhook registration's failurePolicy (chart: member.webhook.failurePolicy); "
        "Ignore is refused with --cluster (fencing)",
        choices=FAILURE_POLICIES,
    )
    add_env_option(
        member,
        "--keeper-image",
        KEEPER_IMAGE_ENV,
        DEFAULT_KEEPER_IMAGE,
        "member role with fencing: the lease keeper's image, in each fenced JobManager pod (docs/keeper.md)",
        otherwise=f"{DEFAULT_KEEPER_IMAGE}, the name `make image` gives this release",
    )
    add_env_option(
        member,
        "--native-sidecars",
        NATIVE_SIDECARS_ENV,
        Sidecars.AUTO.value,
        "member role with fencing: native sidecars (the lease keeper) served? auto: from /version "
        "(1.29+); on: 1.28 with the SidecarContainers gate; off: no keeper",
        choices=[s.value for s in Sidecars],
    )


def from_args(args: argparse.Namespace, policy: RestorePolicy) -> MemberOptions | str:
    client = ClientConfig(kubeconfig=args.kubeconfig, context=args.context)
    fencing = None
    if args.cluster:
        from webhook.fencing.layout import ClusterNameError, check_cluster_name

        try:
            check_cluster_name(args.cluster)
        except ClusterNameError as exc:
            return f"--cluster: {exc}"
        if policy.fencing.enabled:
            fencing = FencingTarget(client, args.cluster)
    failure_policy = getattr(args, "webhook_failure_policy", None) or "Fail"
    if failure_policy not in FAILURE_POLICIES:  # from the environment: argparse checks only what is given
        return f"${FAILURE_POLICY_ENV}: {failure_policy!r} is not one of {', '.join(FAILURE_POLICIES)}"
    if fencing is not None and failure_policy != "Fail":
        return (
            f"--webhook-failure-policy {failure_policy} with fencing (--cluster {args.cluster}, the policy's "
            "fencing.enabled): while the webhook is down every held job would be let through and could run "
            "beside its old copy; register the webhook with failurePolicy: Fail and set "
            f"--webhook-failure-policy Fail (${FAILURE_POLICY_ENV}; chart: member.webhook.failurePolicy: "
            "Fail)"
        )
    own = client if args.kubeconfig or args.cluster or args.read_session_clusters else None
    named = list(getattr(args, "agent_user", None) or [])  # $FLINK_FAILOVER_AGENT_USERS, then each given
    token = token_subject() if not named and not args.kubeconfig else ""
    events = own or (client if getattr(args, "events", False) else None)
    image = (getattr(args, "keeper_image", None) or DEFAULT_KEEPER_IMAGE).strip()
    if not image or any(c.isspace() for c in image):
        return f"--keeper-image {image!r} is not an image reference"
    sidecars = (getattr(args, "native_sidecars", None) or Sidecars.AUTO.value).strip().lower()
    if sidecars not in set(Sidecars):  # from the environment: argparse checks only what is given
        return f"${NATIVE_SIDECARS_ENV}: {sidecars!r} is not one of {', '.join(Sidecars)}"
    return MemberOptions(
        policy,
        bool(args.require_storage_backends),
        own,
        events,
        fencing,
        frozenset(named),
        token,
        image,
        Sidecars(sidecars),
    )
