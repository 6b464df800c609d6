"""Release a job held for fencing, for the on-call engineer who knows the old cluster's copy is gone.

Run against the member cluster that holds the job (the one where it was restored). It sets the
``<prefix>/release: "true"`` annotation; that cluster's fencing agent then resolves the newest
restorable checkpoint again and starts the job at its next poll (``released: manual at ...``). The
same annotation set with kubectl does the same. A hold superseded by a newer restore elsewhere is
never released: that copy must not run.

A request counts only for the hold it was made for: the member webhook records who asked
(``release-requested-by``) only while the job is held, and the agent releases only with that record. So
a copy that is not held is refused (``--force`` sets the annotation anyway; it then releases nothing,
not even a later hold), and a ``release: "true"`` left over from before is first removed, so that the
request is seen (and recorded) now.
"""

from __future__ import annotations

import argparse
import sys

from webhook.commands import fencing as command
from webhook.common.contract import HOLD, RELEASE, RELEASE_REQUESTED_BY
from webhook.common.kubeclient import ApiFailure
from webhook.fencing.flinkapi import PLURALS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target", metavar="NAMESPACE/NAME", help="the held FlinkDeployment or FlinkSessionJob"
    )
    parser.add_argument("--kind", choices=list(PLURALS), default="FlinkDeployment", help="its kind")
    command.add_cluster_arguments(parser, "its prefix")
    parser.add_argument(
        "--force",
        action="store_true",
        help="set the annotation even if the object shows no hold (it then releases nothing)",
    )


def run(args: argparse.Namespace) -> int:
    started = command.start("release", args, args.target)
    if isinstance(started, int):
        return started
    if started.target is None:  # a target was given, so start() has read it
        return 2
    (namespace, name), policy, api = started.target, started.policy, started.api
    found = api.get(args.kind, namespace, name)
    if found is None or isinstance(found, ApiFailure):
        problem = "not found" if found is None else found.message
        print(f"flink-failover release: {args.kind} {namespace}/{name}: {problem}", file=sys.stderr)
        return 1
    annotations = (found.get("metadata") or {}).get("annotations") or {}
    hold = annotations.get(policy.key(HOLD), "")
    if not hold and not args.force:
        print(
            f"flink-failover release: {args.kind} {namespace}/{name} is not held (no {policy.key(HOLD)} "
            "annotation); --force sets the release annotation anyway (it releases nothing that is not held "
            "now, not even a later hold)",
            file=sys.stderr,
        )
        return 1
    key = policy.key(RELEASE)
    if str(annotations.get(key, "")).strip().lower() == "true" and not annotations.get(
        policy.key(RELEASE_REQUESTED_BY)
    ):
        # A leftover request, never recorded: remove it first so that this one is an UPDATE the member
        # webhook sees (and records, naming who asked).
        cleared = api.patch(args.kind, namespace, name, {"metadata": {"annotations": {key: None}}})
        if isinstance(cleared, ApiFailure):
            print(f"flink-failover release: {cleared.message}", file=sys.stderr)
            return 1
    answer = api.patch(args.kind, namespace, name, {"metadata": {"annotations": {key: "true"}}})
    if isinstance(answer, ApiFailure):
        print(f"flink-failover release: {answer.message}", file=sys.stderr)
        return 1
    if not hold:
        print(
            f"{args.kind} {namespace}/{name}: release annotation set (--force); it is not held, so nothing "
            "is released"
        )
        return 0
    print(f"{args.kind} {namespace}/{name}: release requested; it was held with: {hold}")
    print(
        "the fencing agent of this cluster starts it at its next poll, from the newest restorable checkpoint"
    )
    return 0
