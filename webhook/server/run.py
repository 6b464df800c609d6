"""Serve admission endpoints over HTTPS with gunicorn (threaded workers, keep-alive, hot-reloaded TLS).

Knows no role: the composition root (``webhook.roles``) passes a function that builds the endpoints in
each worker after fork.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from webhook.common.envoptions import add_env_option
from webhook.server import logs
from webhook.server.config import Ready, ServerConfig
from webhook.server.runtime import tune_worker
from webhook.server.tls import CertificateReloader

if TYPE_CHECKING:
    from flask import Flask

log = logging.getLogger(__name__)

# Two workers x eight threads: one process per core for CPU-bound admission work, threads to
# overlap storage round-trips. bench/ measures this setting (see README "Performance").
DEFAULT_WORKERS = 2
DEFAULT_THREADS = 8

BuildConfig = Callable[[Ready], ServerConfig]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The server's own options; a role adds its own beside them."""
    add_env_option(
        parser,
        "--cert-dir",
        "FLINK_FAILOVER_CERT_DIR",
        "certs",
        "directory with tls.crt and tls.key, re-read when they change",
    )
    add_env_option(parser, "--bind", "FLINK_FAILOVER_BIND", "0.0.0.0:8443", "HOST:PORT to listen on")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help=f"gunicorn worker processes (default: {DEFAULT_WORKERS}; control-plane: 1, one watch cache)",
    )
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS, help="threads per worker")
    add_env_option(
        parser,
        "--probe-bind",
        "FLINK_FAILOVER_PROBE_BIND",
        None,
        "also answer /healthz and /readyz here, from a thread no admission occupies, so probes answer "
        "at once while admissions wait on storage (same TLS as --bind; the chart's probes use it)",
        otherwise="only on --bind",
        metavar="HOST:PORT",
    )
    add_env_option(parser, "--log-level", "FLINK_FAILOVER_LOG_LEVEL", "info", "debug, info, warning, error")
    parser.add_argument(
        "--insecure-plain-http",
        action="store_true",
        help="development only: serve plain HTTP without TLS (kube-apiserver never accepts this)",
    )


def serve(args: argparse.Namespace, name: str, build: BuildConfig, default_workers: int) -> int:
    """Check the certificates, then run gunicorn; ``build`` makes the endpoints in each worker."""
    logs.configure(args.log_level)
    reloader = None
    if not args.insecure_plain_http:
        reloader = CertificateReloader(args.cert_dir)
        reason = reloader.ready()
        if reason is not None:
            print(f"flink-failover: {reason}", file=sys.stderr)
            return 2
    workers = args.workers or default_workers
    probe_socket = None
    if getattr(args, "probe_bind", None):
        from webhook.server import probes

        try:
            probe_socket = probes.listen(args.probe_bind)
        except (OSError, ValueError) as exc:
            print(f"flink-failover: --probe-bind {args.probe_bind}: {exc}", file=sys.stderr)
            return 2
    factory = app_factory(build, reloader, probe_socket)
    options = gunicorn_options(args.bind, workers, args.threads, args.log_level, reloader)
    own_dir = prepare_metrics_dir()
    log.info("starting", extra={"fields": {"role": name, "bind": args.bind, "workers": workers}})
    master = os.getpid()
    try:
        WebhookServer(factory, options).run()
    finally:
        # gunicorn's workers leave through SystemExit too, up this same stack: only the master cleans up.
        if own_dir is not None and os.getpid() == master:
            shutil.rmtree(own_dir, ignore_errors=True)
    return 0


def app_factory(
    build: BuildConfig, reloader: CertificateReloader | None, probe_socket: socket.socket | None = None
) -> Callable[[], Flask]:
    """Built in each worker after fork, so thread pools and storage clients are per process; with a
    probe socket each worker also answers the probes on it from a thread of its own."""

    def ready() -> str | None:
        return reloader.ready() if reloader is not None else None

    def make() -> Flask:
        from webhook.server.app import create_app, probe_answers

        config = build(ready)
        if probe_socket is not None:
            from webhook.server import probes

            probes.start(probe_socket, probe_answers(config), reloader.context if reloader else None)
        app = create_app(config)
        tune_worker()  # GC pauses and GIL waits made the tail of a burst (server/runtime.py)
        return app

    return make


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
        "filters": {"client_disconnects": {"()": "webhook.server.logs.ClientDisconnects"}},
        "handlers": {"stderr": {"class": "webhook.server.logs.LineHandler", "formatter": "json", "fd": 2}},
        "root": {"level": level.upper(), "handlers": ["stderr"]},
        "loggers": {
            "gunicorn.error": {
                "level": level.upper(),
                "handlers": ["stderr"],
                "propagate": False,
                "filters": ["client_disconnects"],
            },
            "gunicorn.access": {"level": "WARNING", "handlers": ["stderr"], "propagate": False},
        },
    }


def _child_exit(_server: Any, worker: Any) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


_OWN_METRICS_DIR: list[str] = []  # the directory this process made (and removes when it stops)


def prepare_metrics_dir() -> str | None:
    """Metrics from all workers are summed through files in one directory, emptied at start.

    Must run before anything imports ``prometheus_client``: it picks its multiprocess value class once,
    at import, from ``PROMETHEUS_MULTIPROC_DIR`` (a role that imported it first counted in memory and
    served an empty /metrics). Returns the directory when this process made it, else None; idempotent.
    """
    if _OWN_METRICS_DIR:
        return _OWN_METRICS_DIR[0]
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    own = None
    if not path:
        path = own = os.path.join(tempfile.gettempdir(), f"flink-failover-metrics-{os.getpid()}")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
        _OWN_METRICS_DIR.append(own)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path, exist_ok=True)
    return own


def discard_metrics_dir() -> None:
    """Undo :func:`prepare_metrics_dir` when the server does not start: the directory it made and the
    environment variable it set (a process that goes on, e.g. a test runner, must not pass it on)."""
    for path in _OWN_METRICS_DIR:
        shutil.rmtree(path, ignore_errors=True)
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR") == path:
            del os.environ["PROMETHEUS_MULTIPROC_DIR"]
    _OWN_METRICS_DIR.clear()


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
