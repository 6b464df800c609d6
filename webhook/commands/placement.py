"""How many complete component sets of a workload fit each cluster, with a checkable witness, and where to
place it. The workload is a FlinkDeployment, a Karmada ResourceBinding (spec.components) or a components
list; clusters come from snapshot files, kubectl node/pod lists, Karmada Cluster objects or live contexts.
"""

from __future__ import annotations

import argparse
import json
import sys

from webhook.common.envoptions import positive_int
from webhook.placement import fields as f
from webhook.placement.api import format_table, place
from webhook.placement.cluster import load_cluster_file
from webhook.placement.components import load_workload
from webhook.placement.errors import PlacementInputError
from webhook.placement.model import Cluster

EXIT_BAD_INPUT = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workload",
        required=True,
        metavar="FILE",
        help="FlinkDeployment, ResourceBinding or components file (JSON or YAML; '-' for stdin)",
    )
    parser.add_argument(
        "--clusters",
        action="append",
        default=[],
        metavar="FILE",
        help="snapshot / kubectl List / Karmada Cluster file (repeatable; NAME=FILE names a kubectl List; "
        "'-' for stdin)",
    )
    parser.add_argument(
        "--context",
        action="append",
        default=[],
        metavar="NAME",
        help="live cluster: kubeconfig context (repeatable)",
    )
    parser.add_argument(
        "--kubeconfig", metavar="FILE", help="kubeconfig for --context (default: the usual lookup)"
    )
    parser.add_argument("--max-sets", type=positive_int, metavar="N", help="stop searching at N sets")
    parser.add_argument(
        "--witness", action="store_true", help="include the assignment of every replica to a node"
    )
    parser.add_argument("--format", choices=("table", "json"), default="table", help="default: table")


def run(args: argparse.Namespace) -> int:
    try:
        if [args.workload, *args.clusters].count("-") > 1:
            raise PlacementInputError("standard input ('-') can be read only once")
        docs = f.load_documents(args.workload)
        if len(docs) != 1:
            raise PlacementInputError(f"{args.workload}: expected one workload document, found {len(docs)}")
        components = load_workload(docs[0], args.workload)
        clusters: list[Cluster] = []
        for path in args.clusters:
            clusters.extend(load_cluster_file(path))
        if args.context:
            from webhook.placement.live import clusters_from_contexts

            clusters.extend(clusters_from_contexts(args.context, args.kubeconfig))
        if not clusters:
            raise PlacementInputError("no clusters given (use --clusters FILE or --context NAME)")
        result = place(components, clusters, args.max_sets, args.witness)
    except PlacementInputError as exc:
        print(f"flink-failover placement: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        print(format_table(result))
    return 0
