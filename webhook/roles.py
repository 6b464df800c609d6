"""The composition root: which roles exist, the options each reads, and how each serves and answers offline.

The only module that imports more than one role. The server (``webhook.server``) knows no role; a role
knows no server. Every role is one :class:`Role` entry; ``flink-failover serve`` (``commands/serve.py``)
refuses an option the chosen role does not read (exit 2) with a message naming the option that does
(``refused_options``), rather than accepting and ignoring it. Imports no command.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from webhook.common.admission import Handler, OnError
from webhook.controlplane import options as control_plane_options
from webhook.estimator import options as estimator_options  # options only: no gRPC loaded here
from webhook.member import options as member_options
from webhook.member.options import MemberOptions
from webhook.policy.load import Unusable, load
from webhook.policy.restore import RestorePolicy
from webhook.server import logs
from webhook.server import run as server
from webhook.server.config import Endpoint, Ready, ServerConfig

log = logging.getLogger(__name__)

MEMBER = "member"
CONTROL_PLANE = "control-plane"
ESTIMATOR = "estimator"  # Karmada's scheduler-estimator over gRPC: served by its own package, no gunicorn
MEMBER_PATH = "/mutate"

GIVEN = "_given"  # on the parsed namespace: dest -> the option string given on the command line

# Every action name argparse knows: an option added with any of them is seen by ``_dests``.
_ACTIONS = (
    None,
    "store",
    "store_const",
    "store_true",
    "store_false",
    "append",
    "append_const",
    "count",
    "extend",
)


def _dests(add_arguments: Callable[[argparse.ArgumentParser], None]) -> frozenset[str]:
    """The dests of the options an ``add_arguments`` adds (so a new option is owned where it is added),
    seen through argparse's action registry as each option is added, not read from the parser's
    private list of actions (an action given as a class, which these options do not use, is not seen)."""
    seen: list[str] = []

    class Seen(argparse.Action):
        def __init__(self, option_strings: Sequence[str], dest: str, **_: Any) -> None:
            seen.append(dest)
            super().__init__(option_strings, dest)

    parser = argparse.ArgumentParser(add_help=False)
    for name in _ACTIONS:
        parser.register("action", name, Seen)
    add_arguments(parser)
    return frozenset(seen)


EVERY_ROLE = frozenset({"role", "log_level"})
SERVER = _dests(server.add_arguments) - EVERY_ROLE  # gunicorn's, read by the admission roles
KUBE = frozenset({"kubeconfig", "context"})


@dataclass(frozen=True)
class Role:
    """One role: the ``serve`` options it reads, how it serves, and how ``review`` answers as it would."""

    name: str
    summary: str  # for ``--role``'s help
    options: frozenset[str]  # dests of the serve options it reads, beyond EVERY_ROLE
    serve: Callable[[argparse.Namespace], int]
    offline: Callable[[argparse.Namespace, RestorePolicy], tuple[Handler, OnError]] | None = None
    instead: Mapping[str, str] = field(default_factory=dict)  # an option it does not read -> what it reads
    # How it is served: by ``webhook.server`` (gunicorn, whose workers share a Prometheus multiprocess
    # directory prepared before the role loads), or by a server of its own (the estimator's gRPC).
    own_server: bool = False
    # Adds the options of its own package (``serve`` shows them; ``options`` owns their dests).
    add_options: Callable[[argparse.ArgumentParser], None] | None = None

    def refusal(self, dest: str, option: str, roles: Sequence[Role]) -> str:
        """Why ``option`` is refused for this role, naming what this role reads instead or who reads it."""
        if dest in self.instead:
            return f"--role {self.name} does not use {option}: {self.instead[dest]}"
        users = [r.name for r in roles if dest in r.options]
        whose = " and ".join(users) or "another"
        return f"--role {self.name} does not use {option}: it is an option of the {whose} role" + (
            "s" if len(users) > 1 else ""
        )


# --- member --------------------------------------------------------------------------------------------


def _member_endpoints(options: MemberOptions, ready: Ready) -> ServerConfig:
    """Built in each worker after fork. With its own cluster's API the webhook reads a session job's
    FlinkDeployment for its directories; with ``options.fencing`` it fences failover admissions and the
    fencing agent starts (it runs in one worker: ``member.fencing.runner``)."""
    from webhook.member.handler import MemberHandler, ParentSource, internal_error

    clusters: ParentSource | None = None
    parents: ParentSource | None = None
    if options.own_cluster is not None:
        from webhook.member.sessions import BLUE_GREENS, KubeSessionClusters

        clusters = KubeSessionClusters(options.own_cluster)
        parents = KubeSessionClusters(options.own_cluster, BLUE_GREENS)  # a held parent holds its children
    fencing = options.fencing
    events = None
    if options.events is not None:
        from webhook.fencing.runner import recorder

        events = recorder(options.events, fencing.cluster if fencing else "")
    identity = options.identity()
    if fencing is not None:
        identity.announce()  # once per worker: whose release markers a held job accepts
    vouch = lanes = keeper = admitted = None
    if fencing is not None:
        from webhook.fencing import runner
        from webhook.fencing.lanes import process_lanes
        from webhook.member.followup import AdmittedHeartbeats
        from webhook.member.keeper import KeeperSetup, Sidecars
        from webhook.member.kubeversion import ClusterVersion

        # a heartbeat written at an admission whose object is gone (or refused) goes before its lease ends
        admitted = AdmittedHeartbeats(fencing.client, options.policy).schedule

        lanes = process_lanes(options.policy.fencing.call_timeout)
        lease = options.policy.fencing.lease_seconds

        def vouch(kind: str) -> str | None:
            return runner.vouches(kind, lease)

        # native sidecars need 1.29: read once, in the background, unless --native-sidecars says
        version = ClusterVersion(fencing.client)
        sidecars = options.native_sidecars
        if sidecars is Sidecars.AUTO:
            version.start()
        image, cluster = options.keeper_image, fencing.cluster

        def keeper() -> KeeperSetup:
            return KeeperSetup(image, cluster, *version.current(), sidecars)

    handler = MemberHandler.from_policy(
        options.policy,
        clusters,
        cluster=fencing.cluster if fencing else "",
        agent_users=identity,
        events=events,
        vouch=vouch,
        lanes=lanes,
        blue_green_parents=parents,
        keeper=keeper,
        admitted=admitted,
    )
    if fencing is not None:
        agent = runner.AgentOptions(fencing.cluster, fencing.client.kubeconfig, fencing.client.context)
        runner.start(agent, options.policy)
        from webhook.fencing.http import status_blueprint

        # /readyz is the webhook's own readiness only: a restore the agent cannot vouch for is admitted
        # held with the reason, so an agent in trouble never blocks admission (failurePolicy: Fail).
        status = status_blueprint(fencing.client, fencing.cluster, options.policy)
        return ServerConfig(
            [Endpoint(MEMBER_PATH, MEMBER, handler, internal_error)], ready, blueprints=[status]
        )
    return ServerConfig([Endpoint(MEMBER_PATH, MEMBER, handler, internal_error)], ready)


def _member_offline(args: argparse.Namespace, policy: RestorePolicy) -> tuple[Handler, OnError]:
    """Writes nothing; with ``--cluster`` reads the ownership records as that cluster's server would
    (the same hold); the session clusters are review's, read from FILE itself and ``--objects``
    (``member.sessions.review_session_clusters``)."""
    from webhook.member.handler import MemberHandler, internal_error

    clusters = getattr(args, "session_clusters", None)
    cluster = getattr(args, "cluster", None) or ""
    # Offline no API server says who the agent is: its release markers count only from --agent-user.
    users = frozenset(getattr(args, "agent_user", None) or ())
    handler = MemberHandler.from_policy(
        policy, clusters, daemon_lookups=True, cluster=cluster, read_only=True, agent_users=users
    )
    return handler, internal_error


def _serve_member(args: argparse.Namespace) -> int:
    policy = _policy(args)
    if policy is None:
        return 2
    options = member_options.from_args(args, policy)
    if isinstance(options, str):
        return _usage(options)
    from webhook.restore.storage.backends import missing_backends

    notes = tuple(m.message() for m in missing_backends(policy.allowed_schemes))
    for note in notes:
        log.warning(note)
    if notes and options.require_storage_backends:
        for note in notes:
            print(f"flink-failover: {note}", file=sys.stderr)
        return 2

    def build(ready: Ready) -> ServerConfig:
        return replace(_member_endpoints(options, ready), notes=notes)

    return server.serve(args, MEMBER, build, server.DEFAULT_WORKERS)


# --- control plane -------------------------------------------------------------------------------------


def _control_plane_endpoints(
    options: control_plane_options.ControlPlaneOptions, ready: Ready
) -> ServerConfig:
    """The Work webhook (with its capture loop) and the component-fit placement API, in one worker."""
    from webhook.controlplane.handler import internal_error
    from webhook.controlplane.serve import WORK_PATH, start_control_plane
    from webhook.placement.http import blueprint

    plane = start_control_plane(options)

    def combined_ready() -> str | None:
        return ready() or plane.ready()

    endpoint = Endpoint(WORK_PATH, CONTROL_PLANE, plane.handler, internal_error)
    return ServerConfig([endpoint], combined_ready, blueprints=[blueprint])


def _control_plane_offline(args: argparse.Namespace, policy: RestorePolicy) -> tuple[Handler, OnError]:
    from webhook.controlplane.offline import offline_handler

    return offline_handler(args, policy.contract)


def _serve_control_plane(args: argparse.Namespace) -> int:
    policy = _policy(args)
    if policy is None:
        return 2
    options = control_plane_options.from_args(args, policy.contract, policy.deadline_seconds)
    problem = options.problem()
    if problem is not None:
        return _usage(problem)
    # One worker: the watch thread, its cache and the webhook share one process.
    return server.serve(args, CONTROL_PLANE, lambda ready: _control_plane_endpoints(options, ready), 1)


# --- estimator -----------------------------------------------------------------------------------------


def _serve_estimator(args: argparse.Namespace) -> int:
    logs.configure(args.log_level)
    options = estimator_options.from_args(args)
    if isinstance(options, str):
        return _usage(options)
    from webhook.estimator import run as estimator

    return estimator.run(options)


# --- the roles -----------------------------------------------------------------------------------------

_GUNICORN_INSTEAD = {  # what the gunicorn roles read where the estimator reads its gRPC options
    "server_port": "the webhook listens on --bind HOST:PORT",
    "server_address": "the webhook listens on --bind HOST:PORT",
    "metrics_bind": "/metrics is served on --bind, beside the webhook",
    "grpc_auth_cert_file": "the webhook's TLS certificate and key are read from --cert-dir",
    "grpc_auth_key_file": "the webhook's TLS certificate and key are read from --cert-dir",
    "grpc_client_ca_file": "the webhook's TLS certificate and key are read from --cert-dir",
    "insecure_skip_grpc_client_verify": "the webhook's TLS certificate and key are read from --cert-dir",
    "grpc_workers": "the webhook's concurrency is --workers and --threads",
}
_ESTIMATOR_INSTEAD = {
    "bind": "its gRPC port is --server-port (and --server-address), its HTTP port for /metrics and "
    "the probes --metrics-bind",
    "cert_dir": "it serves gRPC over TLS with --grpc-auth-cert-file and --grpc-auth-key-file",
    "workers": "its gRPC concurrency is --grpc-workers",
    "threads": "its gRPC concurrency is --grpc-workers",
    "insecure_plain_http": "it serves plaintext gRPC unless --grpc-auth-cert-file is given",
    "policy": "it reads no restore policy",
}

SERVED: dict[str, Role] = {
    MEMBER: Role(
        MEMBER,
        "the Flink admission webhook on a member cluster",
        frozenset({"policy", *SERVER, *KUBE, "cluster", *_dests(member_options.add_arguments)}),
        _serve_member,
        _member_offline,
        _GUNICORN_INSTEAD,
        add_options=member_options.add_arguments,
    ),
    CONTROL_PLANE: Role(
        CONTROL_PLANE,
        "the Karmada component",
        frozenset({"policy", *SERVER, *KUBE, *_dests(control_plane_options.add_arguments)}),
        _serve_control_plane,
        _control_plane_offline,
        _GUNICORN_INSTEAD,
        add_options=control_plane_options.add_arguments,
    ),
    ESTIMATOR: Role(
        ESTIMATOR,
        "Karmada's scheduler-estimator for one member cluster (gRPC)",
        frozenset({*KUBE, "cluster", *_dests(estimator_options.add_arguments)}),
        _serve_estimator,
        instead=_ESTIMATOR_INSTEAD,
        own_server=True,
        add_options=estimator_options.add_arguments,
    ),
}
# The roles ``flink-failover review`` can answer as (commands/review.py's --role choices).
ROLES: dict[str, Role] = {name: role for name, role in SERVED.items() if role.offline is not None}


def review_handler(args: argparse.Namespace, policy: RestorePolicy) -> tuple[Handler, OnError]:
    """The handler ``flink-failover review`` runs for ``args.role``: the server's, without the server."""
    offline = ROLES[args.role].offline
    if offline is None:  # not reached: ROLES holds only the roles that answer offline
        raise ValueError(f"--role {args.role} has no offline review")
    return offline(args, policy)


def _usage(problem: str) -> int:
    print(f"flink-failover: {problem}", file=sys.stderr)
    return 2


def _policy(args: argparse.Namespace) -> RestorePolicy | None:
    """The restore policy ``--policy`` (or the environment) names; None after saying why it is unusable."""
    logs.configure(args.log_level)
    loaded = load(args.policy, os.environ)
    if isinstance(loaded, Unusable):
        print(f"flink-failover: {loaded.message()}", file=sys.stderr)
        return None
    source = loaded.source
    log.info("restore policy loaded", extra={"fields": {"policy": str(source.path), "from": source.origin}})
    for note in loaded.notes:
        log.warning(note)
    return loaded.policy


def refused_options(role: Role, given: Mapping[str, str | None]) -> list[str]:
    """A message for every option given that ``role`` does not read (in the order of the roles' table)."""
    roles = list(SERVED.values())
    return [
        role.refusal(dest, option or dest, roles)
        for dest, option in given.items()
        if dest not in EVERY_ROLE and dest not in role.options
    ]
