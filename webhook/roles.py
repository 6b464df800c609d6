"""The composition root: which roles exist, and how each is wired to endpoints and to the offline review.

The only module that imports more than one role. The server (``webhook.server``) knows no role; a role
knows no server. ``flink-failover serve`` is this module's ``add_arguments`` / ``run``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace

from webhook.common.admission import Handler
from webhook.member.policy import PolicyError, RestorePolicy, load_policy, policy_source
from webhook.server import logs
from webhook.server import run as server
from webhook.server.config import Endpoint, OnError, Ready, ServerConfig

log = logging.getLogger(__name__)

HELP = """\
Run one role of flink-failover as a server (--role, default member):

  member         the admission webhook on every member cluster (FlinkDeployment, FlinkSessionJob):
                 restores a failed-over job from its newest restorable checkpoint or savepoint
  control-plane  beside Karmada: records each job's last good state, labels the Work bound for the new
                 cluster (/mutate-work), serves component-fit placement (/placement)
  estimator      Karmada's scheduler-estimator (gRPC) for one member cluster

`flink-failover serve --role ROLE --help` lists that role's options only; docs/install.md tells how the
Helm chart runs each."""

MEMBER = "member"
CONTROL_PLANE = "control-plane"
ESTIMATOR = "estimator"  # Karmada's scheduler-estimator over gRPC: served by its own package, no gunicorn
MEMBER_PATH = "/mutate"


@dataclass(frozen=True)
class Role:
    """How one role serves (endpoints built in each worker) and answers offline."""

    name: str
    default_workers: int
    endpoints: Callable[[argparse.Namespace, RestorePolicy, Ready], ServerConfig]
    offline: Callable[[argparse.Namespace, RestorePolicy], tuple[Handler, OnError]]


def _member_endpoints(args: argparse.Namespace, policy: RestorePolicy, ready: Ready) -> ServerConfig:
    """The Flink webhook. With --kubeconfig or --cluster it reads its own cluster: a session job's
    FlinkDeployment for its directories, and with --cluster the fencing agent runs (in one worker) and the
    webhook fences failover admissions."""
    from webhook.member.handler import MemberHandler, SessionClusterSource, internal_error

    cluster = _fencing_cluster(args, policy)
    clusters: SessionClusterSource | None = None
    if getattr(args, "kubeconfig", None) or cluster:  # a session job's cluster is read for its dirs
        from webhook.common.kubeclient import ClientConfig
        from webhook.member.sessions import KubeSessionClusters

        clusters = KubeSessionClusters(ClientConfig(args.kubeconfig, getattr(args, "context", None)))
    handler = MemberHandler.from_policy(policy, clusters, cluster=cluster)
    if cluster:
        from webhook.member.fencing import runner

        runner.start(runner.AgentOptions(cluster, args.kubeconfig, args.context), policy)
    return ServerConfig([Endpoint(MEMBER_PATH, MEMBER, handler, internal_error)], ready)


def _fencing_cluster(args: argparse.Namespace, policy: RestorePolicy) -> str:
    cluster = getattr(args, "cluster", None) or ""
    return cluster if cluster and policy.fencing.enabled else ""


def _member_offline(args: argparse.Namespace, policy: RestorePolicy) -> tuple[Handler, OnError]:
    from webhook.member.handler import MemberHandler, internal_error
    from webhook.member.sessions import load_session_clusters

    # Offline answers never write a fence: review shows the restore, not a hold that needs the agent.
    objects = getattr(args, "objects", None)
    clusters = load_session_clusters(objects) if objects else None
    return MemberHandler.from_policy(policy, clusters, daemon_lookups=True), internal_error


def _control_plane_endpoints(args: argparse.Namespace, policy: RestorePolicy, ready: Ready) -> ServerConfig:
    """The Work webhook (with its capture loop) and the component-fit placement API, in one worker."""
    from webhook.controlplane.handler import internal_error
    from webhook.controlplane.serve import (
        WORK_PATH,
        ControlPlaneOptions,
        election_config,
        start_control_plane,
    )
    from webhook.placement.http import blueprint

    options = ControlPlaneOptions(
        args.kubeconfig,
        args.context,
        capture=not args.no_capture,
        get_timeout=policy.deadline_seconds,
        election=election_config(args),
    )
    plane = start_control_plane(policy.contract, options)

    def combined_ready() -> str | None:
        return ready() or plane.ready()

    endpoint = Endpoint(WORK_PATH, CONTROL_PLANE, plane.handler, internal_error)
    return ServerConfig([endpoint], combined_ready, blueprints=[blueprint])


def _control_plane_offline(args: argparse.Namespace, policy: RestorePolicy) -> tuple[Handler, OnError]:
    from webhook.controlplane.offline import offline_handler

    return offline_handler(args, policy.contract)


ROLES: dict[str, Role] = {
    MEMBER: Role(MEMBER, server.DEFAULT_WORKERS, _member_endpoints, _member_offline),
    # One worker: the watch thread, its cache and the webhook share one process.
    CONTROL_PLANE: Role(CONTROL_PLANE, 1, _control_plane_endpoints, _control_plane_offline),
}


def offline_handler(args: argparse.Namespace, policy: RestorePolicy) -> tuple[Handler, OnError]:
    """The handler ``flink-failover review`` runs for ``args.role``: the server's, without the server."""
    return ROLES[args.role].offline(args, policy)


def add_arguments(parser: argparse.ArgumentParser, only: str | None = None) -> None:
    """Every role's options; ``only`` (``serve --role ROLE --help``) leaves out the other roles' groups
    from the help (parsing always takes all of them)."""
    from webhook.estimator import options as estimator  # options only: no gRPC loaded here

    shows = (lambda role: True) if only not in (*ROLES, ESTIMATOR) else (lambda role: role == only)

    parser.add_argument(
        "--role",
        choices=[*ROLES, ESTIMATOR],
        default=MEMBER,
        help="member: the Flink admission webhook on a member cluster; control-plane: the Karmada "
        "component; estimator: Karmada's scheduler-estimator for one member cluster (gRPC)",
    )
    parser.add_argument(
        "--policy",
        default=None,
        help="restore policy file (default: $FLINK_FAILOVER_POLICY, else the policy shipped in the package)",
    )
    server.add_arguments(parser)
    if shows(MEMBER):
        member = parser.add_argument_group("member role")
        member.add_argument(
            "--require-storage-backends",
            action="store_true",
            help="member role: refuse to start when the policy allows a storage scheme with no fsspec "
            "backend installed (default: start, warn in the log and on /readyz)",
        )
    control = parser.add_argument_group(
        "control-plane role (--kubeconfig and --context: the estimator and the member role too)"
    )
    control.add_argument(
        "--kubeconfig",
        default=None,
        help="control-plane: the Karmada API server; estimator: the member cluster (default: in-cluster, "
        "else ~/.kube/config); member: its own cluster, to read the FlinkDeployment a FlinkSessionJob "
        "runs on for its checkpoint directory and, with --cluster, for the fencing agent (default: not "
        "read; with --cluster: in-cluster)",
    )
    control.add_argument("--context", default=None, help="kubeconfig context (default: its current one)")
    if shows(CONTROL_PLANE):
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
        election.add_argument(
            "--lease-name", default="flink-failover-control-plane", help="default: %(default)s"
        )
        election.add_argument(
            "--lease-namespace",
            default=os.environ.get("POD_NAMESPACE", "default"),
            help="namespace of the Lease on the Karmada API server (default: $POD_NAMESPACE, else default)",
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
    if shows(ESTIMATOR):
        estimator.add_arguments(parser)


def _check_member_arguments(args: argparse.Namespace) -> str | None:
    cluster = getattr(args, "cluster", None)
    if cluster:
        from webhook.member.fencing.records import ClusterNameError, check_cluster_name

        try:
            check_cluster_name(cluster)
        except ClusterNameError as exc:
            return f"--cluster: {exc}"
    return None


def run(args: argparse.Namespace) -> int:
    """``flink-failover serve``: check the role's options, load the policy, then serve the chosen role."""
    if args.role == ESTIMATOR:
        from webhook.estimator import run as estimator

        return estimator.run(args)
    server.prepare_metrics_dir()  # before any role module imports prometheus_client
    code = _serve(args)
    server.discard_metrics_dir()  # serve removes it when it ran; a refused start leaves nothing either
    return code


def _serve(args: argparse.Namespace) -> int:
    if args.role == CONTROL_PLANE:
        from webhook.controlplane.serve import check_arguments

        problem = check_arguments(args)
        if problem is not None:
            print(f"flink-failover: {problem}", file=sys.stderr)
            return 2
    if args.role == MEMBER:
        problem = _check_member_arguments(args)
        if problem is not None:
            print(f"flink-failover: {problem}", file=sys.stderr)
            return 2
    logs.configure(args.log_level)
    source = policy_source(args.policy, os.environ)
    try:
        policy = load_policy(source.path)
    except PolicyError as exc:
        print(f"flink-failover: policy {source.describe()}: {exc}", file=sys.stderr)
        return 2
    log.info("restore policy loaded", extra={"fields": {"policy": str(source.path), "from": source.origin}})
    notes: tuple[str, ...] = ()
    if args.role == MEMBER:
        from webhook.member.storage import missing_backends

        notes = tuple(m.message() for m in missing_backends(policy.allowed_schemes))
        for note in notes:
            log.warning(note)
        if notes and args.require_storage_backends:
            for note in notes:
                print(f"flink-failover: {note}", file=sys.stderr)
            return 2
    role = ROLES[args.role]

    def build(ready: Ready) -> ServerConfig:
        return replace(role.endpoints(args, policy, ready), notes=notes)

    return server.serve(args, role.name, build, role.default_workers)
