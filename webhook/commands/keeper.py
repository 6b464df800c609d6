"""``flink-failover keeper``: keep one job's lease from beside its JobManager (docs/keeper.md)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

from webhook.common.envoptions import add_env_option
from webhook.common.flink import BLUE_GREEN
from webhook.common.paths import StoragePath, StoragePathError
from webhook.common.signals import stop_on_signals
from webhook.fencing.layout import ClusterNameError, Workload, check_cluster_name

if TYPE_CHECKING:
    from webhook.keeper.keeper import Settings
    from webhook.keeper.session_keeper import SessionSettings

HELP = """\
Keep one Flink job's lease from beside its JobManager (--mode session: the leases of the fenced
FlinkSessionJobs a session cluster runs, docs/keeper.md): renew this cluster's heartbeat in the job's
ownership folder (<checkpoint-dir>/flink-failover/<namespace>/<kind>/<name>/, the record the fencing
agent writes) by the agent's rules and the policy's fencing timings, and SIGKILL the JobManager (found
in the pod's shared process namespace by its main class) whenever it runs while the lease is not held:
when the heartbeat could not be renewed for renewDeadlineSeconds, when another cluster's fence is newer
than this copy's epoch, and when a JobManager restarts before the lease is held again. /readyz answers
200 only while the lease is held (the native sidecar's startup probe), /healthz while the keeper's loops
run, /metrics its metrics. It needs storage credentials only (the policy's storageOptions, the
environment), no Kubernetes ones. In session mode it cancels through the JobManager's REST endpoint
(--rest) one session job it cannot keep, and kills the JobManager only when it can keep none. Exits 2 on
unusable settings."""

_KINDS = {"flinkdeployment": "FlinkDeployment", BLUE_GREEN.lower(): BLUE_GREEN}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_env_option(
        parser, "--cluster", "FLINK_FAILOVER_CLUSTER", None, "this member cluster's name in Karmada"
    )
    add_env_option(
        parser,
        "--checkpoint-dir",
        "FLINK_FAILOVER_KEEPER_CHECKPOINT_DIR",
        None,
        "the job's checkpoint directory, as Flink names it (its ownership records lie below it)",
    )
    add_env_option(
        parser,
        "--workload",
        "FLINK_FAILOVER_KEEPER_WORKLOAD",
        None,
        "KIND/NAMESPACE/NAME of the object the records are kept for (FlinkDeployment, or a blue/green "
        "child's FlinkBlueGreenDeployment)",
    )
    add_env_option(
        parser,
        "--epoch",
        "FLINK_FAILOVER_KEEPER_EPOCH",
        "0",
        "the copy's epoch (its own newest fence wins)",
        type=int,
    )
    add_env_option(
        parser, "--job-id", "FLINK_FAILOVER_KEEPER_JOB_ID", "", "the jobId, for the heartbeat's body"
    )
    add_env_option(
        parser,
        "--mode",
        "FLINK_FAILOVER_KEEPER_MODE",
        "job",
        "job: keep the lease of --workload's job; session: --workload is a session cluster "
        "(FlinkDeployment/NAMESPACE/NAME), keep the leases of the fenced FlinkSessionJobs it runs",
        choices=("job", "session"),
    )
    add_env_option(
        parser,
        "--rest",
        "FLINK_FAILOVER_KEEPER_REST",
        "http://127.0.0.1:8081",
        "session mode: the JobManager's REST endpoint (which jobs run; a job's cancel)",
    )
    parser.add_argument(
        "--policy",
        default=None,
        help="restore policy: its fencing timings and storageOptions (default: $FLINK_FAILOVER_POLICY, "
        "else built in)",
    )
    add_env_option(
        parser,
        "--policy-json",
        "FLINK_FAILOVER_KEEPER_POLICY",
        None,
        "the policy inline, as JSON (the injection sets it: its fencing block and storage options); "
        "wins over --policy",
    )
    add_env_option(
        parser,
        "--bind",
        "FLINK_FAILOVER_KEEPER_BIND",
        "0.0.0.0:8091",
        "HOST:PORT of /readyz, /healthz, /metrics",
    )
    add_env_option(
        parser,
        "--jobmanager-marker",
        "FLINK_FAILOVER_KEEPER_JOBMANAGER_MARKER",
        "",
        "a further text the JobManager's command line must carry (tests on a shared machine; in a pod the "
        "process namespace is the pod's)",
    )
    add_env_option(parser, "--log-level", "FLINK_FAILOVER_LOG_LEVEL", "INFO", "log level")


def _settings(
    args: argparse.Namespace,
) -> tuple[Settings | SessionSettings, dict[str, dict[str, Any]]] | str:
    if not args.cluster:
        return "--cluster is required (or $FLINK_FAILOVER_CLUSTER)"
    try:
        cluster = check_cluster_name(args.cluster)
    except ClusterNameError as exc:
        return str(exc)
    if not args.checkpoint_dir:
        return "--checkpoint-dir is required"
    try:
        root = StoragePath.parse(args.checkpoint_dir)
    except StoragePathError as exc:
        return f"--checkpoint-dir: {exc}"
    parts = (args.workload or "").split("/")
    if len(parts) != 3 or not parts[1] or not parts[2]:
        return f"--workload {args.workload!r} is not KIND/NAMESPACE/NAME"
    kind = _KINDS.get(parts[0].lower())
    if kind is None:
        return (
            f"--workload: {parts[0]!r} has no JobManager of its own to keep (FlinkDeployment, {BLUE_GREEN})"
        )
    if args.mode == "session" and kind != "FlinkDeployment":
        return f"--mode session: --workload must be the session cluster's FlinkDeployment, not {kind}"
    if args.epoch < 0:
        return "--epoch must be 0 or more"
    # Loaded here, not when the command line is built: `flink-failover --help` loads no storage library.
    from webhook.keeper.keeper import Settings
    from webhook.keeper.session_keeper import SessionSettings
    from webhook.policy.load import Unusable, load
    from webhook.policy.restore import PolicyError, policy_from_dict

    if args.policy_json:
        try:
            policy = policy_from_dict(json.loads(args.policy_json))
        except PolicyError as exc:
            return str(exc)
        except ValueError as exc:  # not JSON
            return f"--policy-json: {exc}"
    else:
        loaded = load(args.policy, os.environ)
        if isinstance(loaded, Unusable):
            return str(loaded.error)
        policy = loaded.policy
    workload = Workload(kind, parts[1], parts[2])
    if args.mode == "session":
        return SessionSettings(cluster, workload, root, policy.fencing, args.rest), dict(
            policy.storage_options
        )
    settings = Settings(cluster, workload, root, args.epoch, policy.fencing, args.job_id)
    return settings, dict(policy.storage_options)


def run(args: argparse.Namespace) -> int:
    from webhook.fencing.lanes import Lanes
    from webhook.fencing.records import FencingStore
    from webhook.keeper.flinkrest import FlinkRest
    from webhook.keeper.http import Probed, ProbeServer
    from webhook.keeper.jobmanager import JobManagers
    from webhook.keeper.keeper import Keeper, Settings
    from webhook.keeper.session_keeper import SessionKeeper
    from webhook.restore.storage.search import CheckpointStorage
    from webhook.server import logs

    logs.configure(args.log_level)
    log = logging.getLogger("webhook.keeper")
    made = _settings(args)
    if isinstance(made, str):
        print(f"flink-failover keeper: {made}", file=sys.stderr)
        return 2
    settings, storage_options = made
    host, _, port = args.bind.rpartition(":")
    if not port.isdigit():
        print(f"flink-failover keeper: --bind {args.bind!r} is not HOST:PORT", file=sys.stderr)
        return 2
    store = FencingStore(
        CheckpointStorage(storage_options), settings.cluster, Lanes(settings.policy.call_timeout)
    )
    jobmanagers = JobManagers(args.jobmanager_marker)
    keeper: Keeper | SessionKeeper
    if isinstance(settings, Settings):
        keeper = Keeper(settings, store, jobmanagers)
        where = str(settings.folder)
    else:
        keeper = SessionKeeper(settings, store, jobmanagers, FlinkRest(settings.rest))
        where = str(settings.root)
    probed: Probed = keeper
    try:
        # a pod's probes come from the kubelet, on the pod's address
        everywhere = "0.0.0.0"  # noqa: S104  # nosec B104
        server = ProbeServer(probed, host or everywhere, int(port))
    except OSError as exc:
        print(f"flink-failover keeper: cannot listen on {args.bind}: {exc}", file=sys.stderr)
        return 2
    done = threading.Event()
    stop_on_signals(done)
    keeper.start()
    server.start()
    log.info(
        "keeper serving probes",
        extra={
            "fields": {
                "event": "serving",
                "port": server.port,
                "folder": where,
                "enabled": settings.policy.enabled,
            }
        },
    )
    done.wait()
    log.info("keeper stopping", extra={"fields": {"event": "stopping"}})
    server.stop()
    keeper.stop()
    return 0
