"""``flink-failover status``: every job's fencing state on one member cluster (``fencing/status.py``
``collect`` reads it, ``render`` writes it); ``HELP`` is what the user reads."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from webhook.commands import fencing as command
from webhook.common.envoptions import CLUSTER_ENV, add_env_option
from webhook.fencing.flinkapi import PLURALS
from webhook.fencing.status import collect, render

HELP = """\
Every job's fencing state on one member cluster, for the on-call engineer. For each FlinkDeployment,
FlinkSessionJob and FlinkBlueGreenDeployment (or the one named): what fencing makes of it (running,
held, stopping, fenced, stepped-down, ending), whom a held job waits for and when that cluster's lease runs
out, the last decisions written on the object, and the ownership records in its checkpoint storage
with their ages in the storage's own time. Reads only: nothing is written to the cluster or the
storage. The member role serves the same view as JSON at GET /fencing/status.

Exit 0 when everything asked for was read; 1 when something could not be (the cluster, a kind, the
job named, a job's records): each reason on stderr, what was read still printed; 2 on unusable input."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", metavar="NAMESPACE/NAME", help="one job (default: every job)")
    parser.add_argument(
        "--kind", choices=list(PLURALS), default="FlinkDeployment", help="the kind of the job named"
    )
    parser.add_argument("--held", action="store_true", help="only jobs held until an old copy stops")
    add_env_option(
        parser,
        "--cluster",
        CLUSTER_ENV,
        None,
        "this member's name in Karmada, to say whom a held job waits for and when its lease runs out "
        "(without it, who is waited for is not worked out)",
    )
    command.add_cluster_arguments(parser, "its prefix and storage options")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")


PROG = "flink-failover status"


def run(args: argparse.Namespace) -> int:
    cluster = args.cluster or ""
    if cluster:
        from webhook.fencing.layout import ClusterNameError, check_cluster_name

        try:
            check_cluster_name(cluster)
        except ClusterNameError as exc:
            print(f"{PROG}: --cluster: {exc}", file=sys.stderr)
            return 2
    started = command.start("status", args, args.target)
    if isinstance(started, int):
        return started
    policy, api = started.policy, started.api
    target = (args.kind, *started.target) if started.target is not None else None
    from webhook.fencing.lanes import Lanes
    from webhook.fencing.records import FencingStore
    from webhook.restore.storage.search import CheckpointStorage

    lanes = Lanes(max(policy.fencing.call_timeout, 5.0))
    try:
        store = FencingStore(CheckpointStorage(policy.storage_options), cluster or "status", lanes)
        found = collect(api, store, policy, cluster, target, args.held)
    finally:
        lanes.close()
    if args.output == "json":
        body = {"jobs": [asdict(v) for v in found.views], "problems": found.problems, "notes": found.notes}
        print(json.dumps(body, indent=2, default=str))
    elif found.views:
        print(render(found.views))
    for note in found.notes:
        print(f"{PROG}: note: {note}", file=sys.stderr)
    for problem in found.problems:
        print(f"{PROG}: {problem}", file=sys.stderr)
    if found.problems:
        return 1
    if not found.views and args.output == "text":
        print(f"{PROG}: no {'held ' if args.held else ''}Flink jobs on this cluster", file=sys.stderr)
    return 0
