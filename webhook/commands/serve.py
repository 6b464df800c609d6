"""``flink-failover serve``: its options (every role's, from the roles' table) and its entry.

An option the chosen role does not read is refused (exit 2, ``roles.refused_options``), so the options
given on the command line are noted as they are parsed (``GIVEN``); defaults are not.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from webhook.common.envoptions import CLUSTER_ENV, add_env_option
from webhook.roles import CONTROL_PLANE, ESTIMATOR, GIVEN, MEMBER, SERVED, refused_options
from webhook.server import run as server

HELP = """\
Run one role of flink-failover as a server (--role, default member):

  member         the admission webhook on every member cluster (FlinkDeployment, FlinkSessionJob):
                 restores a failed-over job from its newest restorable checkpoint or savepoint; given
                 its cluster's name (--cluster), also its fencing agent: one running copy of every job
  control-plane  beside Karmada: records each job's last good state, labels the Work bound for the new
                 cluster (/mutate-work), serves component-fit placement (/placement)
  estimator      Karmada's scheduler-estimator (gRPC) for one member cluster

`flink-failover serve --role ROLE --help` lists that role's options only; docs/install.md tells how the
Helm chart runs each."""


def _note_given(namespace: argparse.Namespace, dest: str, option_string: str | None) -> None:
    setattr(namespace, GIVEN, {**getattr(namespace, GIVEN, {}), dest: option_string})


class _Store(argparse.Action):
    """``store`` that also notes, on the namespace, that its option was given (defaults are not)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)
        _note_given(namespace, self.dest, option_string)


class _StoreTrue(_Store):
    """``store_true`` that also notes that its option was given (no argument: ``const``, True, is stored)."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        default: bool = False,
        required: bool = False,
        help: str | None = None,
    ) -> None:
        super().__init__(
            option_strings, dest, nargs=0, const=True, default=default, required=required, help=help
        )


def _add_options(parser: argparse.ArgumentParser, role: str) -> None:
    add = SERVED[role].add_options
    if add is not None:
        add(parser)


def add_arguments(parser: argparse.ArgumentParser, only: str | None = None) -> None:
    """Every role's options; ``only`` (``serve --role ROLE --help``) leaves the other roles' options out of
    the help (parsing always takes all of them)."""

    def shows(*roles: str) -> bool:
        return only not in SERVED or only in roles

    for name, action in ((None, _Store), ("store", _Store), ("store_true", _StoreTrue)):
        parser.register("action", name, action)
    parser.add_argument(
        "--role",
        choices=list(SERVED),
        default=MEMBER,
        help="; ".join(f"{role.name}: {role.summary}" for role in SERVED.values()),
    )
    if shows(MEMBER, CONTROL_PLANE):
        parser.add_argument(
            "--policy",
            default=None,
            help="member and control-plane: restore policy file (default: $FLINK_FAILOVER_POLICY, else the "
            "policy shipped in the package)",
        )
        server.add_arguments(parser)
    if shows(MEMBER):
        _add_options(parser, MEMBER)
    kube = parser.add_argument_group(
        "Kubernetes API (control-plane role: Karmada's; estimator: the member cluster's; member role: its "
        "own cluster's, for session clusters and, with --cluster, its fencing agent)"
    )
    kube.add_argument(
        "--kubeconfig",
        default=None,
        help="control-plane: the Karmada API server; estimator: the member cluster; member: its own "
        "cluster, to read the FlinkDeployment a FlinkSessionJob runs on and, with --cluster, for the "
        "fencing agent (default: in-cluster, else ~/.kube/config; member: not read without --cluster or "
        "--read-session-clusters)",
    )
    kube.add_argument("--context", default=None, help="kubeconfig context (default: its current one)")
    if shows(MEMBER, ESTIMATOR):
        add_env_option(
            kube,
            "--cluster",
            CLUSTER_ENV,
            "",
            "the member cluster's name in Karmada; member: runs the fencing agent (one running copy); "
            "estimator: requests for other clusters are refused",
            aliases=("--cluster-name",),  # Karmada's estimator spells it so
            dest="cluster",
        )
    if shows(CONTROL_PLANE):
        _add_options(parser, CONTROL_PLANE)
    if shows(ESTIMATOR):
        _add_options(parser, ESTIMATOR)


def run(args: argparse.Namespace) -> int:
    """``flink-failover serve``: refuse the options the role does not read, then serve the chosen role."""
    role = SERVED[args.role]
    problems = refused_options(role, getattr(args, GIVEN, {}))
    for problem in problems:
        print(f"flink-failover: {problem}", file=sys.stderr)
    if problems:
        return 2
    if role.own_server:
        return role.serve(args)  # its own server and metrics registry
    server.prepare_metrics_dir()  # before any role module imports prometheus_client
    code = role.serve(args)
    server.discard_metrics_dir()  # serve removes it when it ran; a refused start leaves nothing either
    return code
