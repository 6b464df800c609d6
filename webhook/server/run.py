"""Serve the admission webhook over HTTPS with gunicorn (threaded workers, keep-alive, hot-reloaded TLS)."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from flask import Flask

from webhook.policy import PolicyError, RestorePolicy, load_policy, policy_source
from webhook.server import logs
from webhook.server.tls import CertificateReloader

log = logging.getLogger(__name__)

# Two workers x eight threads: one process per core for CPU-bound admission work, threads to
# overlap storage round-trips. bench/ measures this setting (see README "Performance").
DEFAULT_WORKERS = 2
DEFAULT_THREADS = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--role",
        choices=["member", "control-plane"],
        default="member",
        help="member: the Flink admission webhook on a member cluster; control-plane: the Karmada component",
    )
    parser.add_argument(
        "--policy",
        default=None,
        help="restore policy file (default: $FLINK_FAILOVER_POLICY, else the policy shipped in the package)",
    )
    parser.add_argument(
        "--cert-dir",
        default=os.environ.get("FLINK_FAILOVER_CERT_DIR", "certs"),
        help="directory with tls.crt and tls.key, re-read when they change ($FLINK_FAILOVER_CERT_DIR)",
    )
    parser.add_argument(
        "--bind",
        default=os.environ.get("FLINK_FAILOVER_BIND", "0.0.0.0:8443"),
        help="HOST:PORT to listen on ($FLINK_FAILOVER_BIND)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help=f"gunicorn worker processes (default: {DEFAULT_WORKERS}; control-plane: 1, one watch cache)",
    )
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS, help="threads per worker")
    parser.add_argument(
        "--log-level",
        default=os.environ.get("FLINK_FAILOVER_LOG_LEVEL", "info"),
        help="debug, info, warning, error ($FLINK_FAILOVER_LOG_LEVEL)",
    )
    parser.add_argument(
        "--insecure-plain-http",
        action="store_true",
        help="development only: serve plain HTTP without TLS (kube-apiserver never accepts this)",
    )
    member = parser.add_argument_group("member role")
    member.add_argument(
        "--require-storage-backends",
        action="store_true",
        help="member role: refuse to start when the policy allows a storage scheme with no fsspec backend "
        "installed (default: start, warn in the log and on /readyz)",
    )
    control = parser.add_argument_group("control-plane role")
    control.add_argument(
        "--kubeconfig",
        default=None,
        help="control-plane role: kubeconfig of the Karmada API server "
        "(default: in-cluster, else ~/.kube/config)",
    )
    control.add_argument(
        "--context", default=None, help="control-plane role: kubeconfig context (default: its current one)"
    )
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
    election.add_argument("--lease-name", default="flink-failover-control-plane", help="default: %(default)s")
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


def run(args: argparse.Namespace) -> int:
    logs.configure(args.log_level)
    if args.role == "control-plane":
        from webhook.controlplane.serve import check_arguments

        problem = check_arguments(args)
        if problem is not None:
            print(f"flink-failover: {problem}", file=sys.stderr)
            return 2
    source = policy_source(args.policy, os.environ)
    try:
        policy = load_policy(source.path)
    except PolicyError as exc:
        print(f"flink-failover: policy {source.describe()}: {exc}", file=sys.stderr)
        return 2
    log.info("restore policy loaded", extra={"fields": {"policy": str(source.path), "from": source.origin}})
    notes: tuple[str, ...] = ()
    if args.role == "member":
        from webhook.storage import missing_backends

        notes = tuple(m.message() for m in missing_backends(policy.allowed_schemes))
        for note in notes:
            log.warning(note)
        if notes and args.require_storage_backends:
            for note in notes:
                print(f"flink-failover: {note}", file=sys.stderr)
            return 2
    reloader = None
    if not args.insecure_plain_http:
        reloader = CertificateReloader(args.cert_dir)
        reason = reloader.ready()
        if reason is not None:
            print(f"flink-failover: {reason}", file=sys.stderr)
            return 2
    workers = args.workers or (1 if args.role == "control-plane" else DEFAULT_WORKERS)
    factory = app_factory(args, policy, reloader, notes)
    options = gunicorn_options(args.bind, workers, args.threads, args.log_level, reloader)
    _prepare_metrics_dir()
    log.info("starting", extra={"fields": {"role": args.role, "bind": args.bind, "workers": workers}})
    WebhookServer(factory, options).run()
    return 0


def app_factory(
    args: argparse.Namespace,
    policy: RestorePolicy,
    reloader: CertificateReloader | None,
    notes: tuple[str, ...] = (),
) -> Callable[[], Flask]:
    """Built in each worker after fork, so thread pools and storage clients are per process."""

    def ready() -> str | None:
        return reloader.ready() if reloader is not None else None

    def build() -> Flask:
        from webhook.server.app import ServerConfig, create_app

        if args.role == "member":
            from webhook.member import MemberHandler, internal_error
            from webhook.server.app import Endpoint

            handler = MemberHandler.from_policy(policy)
            config = ServerConfig([Endpoint("/mutate", "member", handler, internal_error)], ready, notes)
        else:
            from webhook.controlplane.serve import control_plane_config

            config = control_plane_config(args, policy, ready)
        return create_app(config)

    return build


def gunicorn_options(
    bind: str, workers: int, threads: int, log_level: str, reloader: CertificateReloader | None
) -> dict[str, Any]:
    options: dict[str, Any] = {
        "bind": [bind],
        "workers": workers,
        "threads": threads,
        "worker_class": "gthread",
        "keepalive": 75,  # kube-apiserver reuses connections; keep them longer than its idle timeout
        "timeout": 60,
        "graceful_timeout": 20,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": log_level,
        "logconfig_dict": _gunicorn_logging(log_level),
        "proc_name": "flink-failover",
        "worker_tmp_dir": tempfile.gettempdir(),
        "child_exit": _child_exit,
        # gunicorn >= 25 opens a control socket in $HOME (worker count, reload, shutdown) by default;
        # nothing here uses it, and every server on a host would share the one path.
        "control_socket_disable": True,
    }
    if reloader is not None:
        options["certfile"] = str(reloader.cert_file)
        options["keyfile"] = str(reloader.key_file)
        options["ssl_context"] = lambda _conf, _default: reloader.context()
    return options


def _gunicorn_logging(level: str) -> dict[str, Any]:
    """gunicorn's own lines (start, worker exits) in the same JSON shape as the admission log."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "webhook.server.logs.JsonFormatter"}},
        "handlers": {"stderr": {"class": "webhook.server.logs.LineHandler", "formatter": "json", "fd": 2}},
        "root": {"level": level.upper(), "handlers": ["stderr"]},
        "loggers": {
            "gunicorn.error": {"level": level.upper(), "handlers": ["stderr"], "propagate": False},
            "gunicorn.access": {"level": "WARNING", "handlers": ["stderr"], "propagate": False},
        },
    }


def _child_exit(_server: Any, worker: Any) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


def _prepare_metrics_dir() -> None:
    """Metrics from all workers are summed through files in one directory, emptied at start."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not path:
        path = os.path.join(tempfile.gettempdir(), f"flink-failover-metrics-{os.getpid()}")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path, exist_ok=True)


class WebhookServer:
    """A gunicorn application configured from a dict rather than a config file."""

    def __new__(cls, factory: Callable[[], Flask], options: dict[str, Any]) -> Any:
        from gunicorn.app.base import BaseApplication

        class _App(BaseApplication):  # type: ignore[misc]
            def load_config(self) -> None:
                for key, value in options.items():
                    self.cfg.set(key, value)

            def load(self) -> Flask:
                return factory()

        return _App()
