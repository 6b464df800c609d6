"""The composition root: which roles exist, and how each is wired to endpoints and to the offline review.

The only module that imports more than one role. The server (``webhook.server``) knows no role; a role
knows no server. ``flink-failover serve`` is this module's ``add_arguments`` / ``run``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from webhook.common.admission import Handler
from webhook.member.policy import DEFAULT_POLICY, PolicyError, RestorePolicy, load_policy
from webhook.server import run as server
from webhook.server.config import Endpoint, OnError, Ready, ServerConfig

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


def _member_endpoints(_args: argparse.Namespace, policy: RestorePolicy, ready: Ready) -> ServerConfig:
    from webhook.member.handler import MemberHandler, internal_error

    handler = MemberHandler.from_policy(policy)
    return ServerConfig([Endpoint(MEMBER_PATH, MEMBER, handler, internal_error)], ready)


def _member_offline(_args: argparse.Namespace, policy: RestorePolicy) -> tuple[Handler, OnError]:
    from webhook.member.handler import MemberHandler, internal_error

    return MemberHandler.from_policy(policy), internal_error


def _control_plane_endpoints(args: argparse.Namespace, policy: RestorePolicy, ready: Ready) -> ServerConfig:
    """The Work webhook (with its capture loop) and the component-fit placement API, in one worker."""
    from webhook.controlplane.handler import internal_error
    from webhook.controlplane.serve import WORK_PATH, ControlPlaneOptions, start_control_plane
    from webhook.placement.http import blueprint

    options = ControlPlaneOptions(
        args.kubeconfig, args.context, capture=not args.no_capture, get_timeout=policy.deadline_seconds
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from webhook.estimator import options as estimator  # options only: no gRPC loaded here

    parser.add_argument("--role", choices=[*ROLES, ESTIMATOR], default=MEMBER)
    parser.add_argument("--policy", default=os.environ.get("FLINK_FAILOVER_POLICY", DEFAULT_POLICY))
    server.add_arguments(parser)
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="control-plane: the Karmada API server; estimator: the member cluster",
    )
    parser.add_argument("--context", default=None, help="control-plane and estimator: kubeconfig context")
    parser.add_argument("--no-capture", action="store_true", help="control-plane: serve the webhook only")
    estimator.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """``flink-failover serve``: load the policy, then serve the chosen role."""
    if args.role == ESTIMATOR:
        from webhook.estimator import run as estimator

        return estimator.run(args)
    try:
        policy = load_policy(args.policy)
    except PolicyError as exc:
        print(f"flink-failover: {exc}", file=sys.stderr)
        return 2
    role = ROLES[args.role]

    def build(ready: Ready) -> ServerConfig:
        return role.endpoints(args, policy, ready)

    return server.serve(args, role.name, build, role.default_workers)
