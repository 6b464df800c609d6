"""What the fencing commands (``release``, ``status``) do first: read the target, the policy, connect.

Each failure is said in one line on stderr with the command's name, and becomes its exit code.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

from webhook.common.kubeclient import ApiFailure, ClientConfig
from webhook.fencing.flinkapi import FlinkApi
from webhook.policy.load import Unusable, load
from webhook.policy.restore import RestorePolicy


def add_cluster_arguments(parser: argparse.ArgumentParser, policy_use: str) -> None:
    """``--kubeconfig``, ``--context`` and ``--policy`` (``policy_use``: what the command reads of it)."""
    parser.add_argument(
        "--kubeconfig", default=None, help="the member cluster (default: in-cluster, else ~/.kube/config)"
    )
    parser.add_argument("--context", default=None, help="kubeconfig context (default: its current one)")
    parser.add_argument(
        "--policy",
        default=None,
        help=f"restore policy, for {policy_use} (default: $FLINK_FAILOVER_POLICY, else built in)",
    )


@dataclass(frozen=True)
class Started:
    target: tuple[str, str] | None  # (namespace, name), when the command was given one
    policy: RestorePolicy
    api: FlinkApi


def start(command: str, args: argparse.Namespace, target: str | None) -> Started | int:
    """``Started``, or the exit code: 2 for unusable input, 1 when the cluster cannot be reached."""
    prog = f"flink-failover {command}"
    named = None
    if target is not None:
        namespace, _, name = target.partition("/")
        if not namespace or not name or "/" in name:
            print(f"{prog}: {target!r} is not NAMESPACE/NAME", file=sys.stderr)
            return 2
        named = (namespace, name)
    loaded = load(args.policy, os.environ)
    if isinstance(loaded, Unusable):
        print(f"{prog}: {loaded.error}", file=sys.stderr)
        return 2
    api = FlinkApi.connect(ClientConfig(args.kubeconfig, args.context))
    if isinstance(api, ApiFailure):
        print(f"{prog}: {api.message}", file=sys.stderr)
        return 1
    return Started(named, loaded.policy, api)
