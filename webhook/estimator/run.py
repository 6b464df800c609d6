"""``flink-failover serve --role estimator``: wire the member-cluster watch, the gRPC server and the
HTTP side port (``/metrics``, ``/healthz``, ``/readyz``, ``/debug/estimates``) together.

Start-up order follows Karmada's estimator: nothing is answered until nodes and pods have been listed
in full; until then gRPC health says NOT_SERVING, ``/readyz`` says 503 and calls get UNAVAILABLE.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import Gauge

from webhook.common.kubeclient import ApiFailure, ClientConfig
from webhook.common.signals import stop_on_signals
from webhook.estimator import grpcserver
from webhook.estimator.member_api import DEPLOYMENTS, NODES, PODS, REPLICASETS, EstimatorApi, feed
from webhook.estimator.options import EstimatorOptions
from webhook.estimator.state import ClusterState
from webhook.server import logs
from webhook.server.metrics import exposition

log = logging.getLogger(__name__)


def _split(bind: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``); an empty host means every interface."""
    host, _, port = bind.rpartition(":")
    return host.strip("[]"), int(port)


class _Side(BaseHTTPRequestHandler):
    server: _SideServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            body, content_type = exposition()
            self._send(200, body, content_type)
        elif path == "/healthz":
            self._send(200, b"ok\n")
        elif path == "/readyz":
            ok = self.server.ready.is_set()
            self._send(200 if ok else 503, b"ok\n" if ok else b"nodes and pods not listed yet\n")
        elif path == "/debug/estimates":
            body = json.dumps(list(self.server.service.recent), indent=2).encode()
            self._send(200, body, "application/json")
        else:
            self._send(404, b"not found\n")


class _SideServer(ThreadingHTTPServer):
    daemon_threads = True
    ready: threading.Event  # set together with gRPC health SERVING
    service: grpcserver.EstimatorService


def start_side(bind: str, service: grpcserver.EstimatorService) -> _SideServer:
    server = _SideServer(_split(bind), _Side)
    server.ready = threading.Event()
    server.service = service
    threading.Thread(target=server.serve_forever, name="estimator-http", daemon=True).start()
    return server


def _gauges(state: ClusterState) -> None:
    Gauge(
        "flink_failover_estimator_cache_age_seconds", "Seconds since the node/pod state last changed"
    ).set_function(state.age)
    Gauge("flink_failover_estimator_nodes", "Nodes in the state").set_function(lambda: state.counts()[0])
    Gauge("flink_failover_estimator_pods", "Pods holding a node in the state").set_function(
        lambda: state.counts()[1]
    )


def run(options: EstimatorOptions) -> int:
    """Serve until SIGTERM or SIGINT; 2 when the member cluster or a port cannot be had."""
    logs.configure(options.log_level)
    tls = options.tls
    api = EstimatorApi.connect(ClientConfig(kubeconfig=options.kubeconfig, context=options.context))
    if isinstance(api, ApiFailure):
        print(f"flink-failover: {api.message}", file=sys.stderr)
        return 2
    state = ClusterState(options.cluster, refresh_s=options.refresh_s)
    _gauges(state)
    stop = threading.Event()
    try:
        running = grpcserver.start(
            state, options.address, tls, workers=options.grpc_workers, answers=options.answer_cache
        )
        side = start_side(options.metrics_bind, running.service)
    except (OSError, ValueError, RuntimeError) as exc:  # grpc reports a port in use as RuntimeError
        print(f"flink-failover: cannot listen: {exc}", file=sys.stderr)
        return 2
    for resource, replace, apply in (
        (NODES, state.replace_nodes, state.node_event),
        (PODS, state.replace_pods, state.pod_event),
        (DEPLOYMENTS, state.workloads.replace_deployments, state.workloads.deployment_event),
        (REPLICASETS, state.workloads.replace_replicasets, state.workloads.replicaset_event),
    ):
        loop = feed(api, resource, replace, apply, stop)
        threading.Thread(target=loop.run, name=f"watch-{resource}", daemon=True).start()
    stop_on_signals(stop)
    log.info(
        "estimator starting",
        extra={"fields": {"cluster": options.cluster, "port": running.port, "tls": tls is not None}},
    )
    while not stop.is_set() and not state.synced:
        stop.wait(0.1)
    if state.synced:
        nodes, pods = state.counts()
        running.serving(True)
        side.ready.set()
        log.info("estimator ready", extra={"fields": {"nodes": nodes, "pods": pods, "port": running.port}})
    stop.wait()
    log.info("estimator stopping")
    running.stop()
    side.shutdown()
    return 0
