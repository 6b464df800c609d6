"""The gRPC edge: Karmada's Estimator service and the gRPC health service over one port.

Each method checks the cluster name (Karmada's error text), reads the request (``wire``), answers from
the current snapshot (``answer``) and records metrics; everything else lives in those pure modules.
Plaintext by default, like Karmada's estimator; with a certificate it serves TLS (reloaded when the
files change), and with a client CA it requires and verifies client certificates.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol, TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import Counter, Histogram

from webhook.estimator import answer, memo, wire
from webhook.estimator.options import TlsFiles
from webhook.estimator.proto import estimator_pb2 as pb
from webhook.estimator.proto import service_pb2, service_pb2_grpc
from webhook.estimator.workloads import Unanswerable, Workloads, unsupported
from webhook.placement.model import Cluster, Component

log = logging.getLogger(__name__)

T = TypeVar("T")
S = TypeVar("S")
SERVICE = service_pb2.DESCRIPTOR.services_by_name["Estimator"].full_name

REQUESTS = Counter(
    "flink_failover_estimator_requests_total",
    "Estimator calls answered, by method and gRPC code",
    ["method", "code"],
)
ERRORS = Counter(
    "flink_failover_estimator_errors_total",
    "Estimator calls that ended in an error, by method and code",
    ["method", "code"],
)
LATENCY = Histogram(
    "flink_failover_estimator_duration_seconds",
    "Time to answer one estimator call (the scheduler's budget is 3 s for all clusters)",
    ["method"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)


class _EstimateRequest(Protocol):
    """What both estimate requests carry besides what to place."""

    @property
    def cluster(self) -> str: ...

    @property
    def assumedWorkloads(self) -> Sequence[pb.AssumedWorkload]: ...  # the protobuf field's name

    def SerializeToString(self, *, deterministic: bool = ...) -> bytes: ...  # the memo's key


class StateView(Protocol):
    """What the service reads of the cluster state (``state.ClusterState``; a fixed snapshot in the bench)."""

    @property
    def name(self) -> str: ...

    @property
    def synced(self) -> bool: ...

    def snapshot(self) -> Cluster: ...


class _Abort(Exception):
    """The state cannot answer (another cluster's name, not listed yet): raised from ``_ready``."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _object(context: grpc.ServicerContext) -> str:
    """The scheduler's ``object`` metadata (``kind=..., name=ns/name``), for the logs only."""
    for key, value in context.invocation_metadata() or ():
        if key == "object":
            return str(value)
    return ""


@dataclass(frozen=True)
class _Estimated:
    """What one estimate call computes, shared by the calls asking the same of the same snapshot."""

    result: answer.Answer
    summary: dict[str, Any]  # ``answer.witness_summary``: computed once, not per call


class EstimatorService(service_pb2_grpc.EstimatorServicer):
    def __init__(self, state: StateView, recent: int = 20, answers: int = memo.DEFAULT_ENTRIES) -> None:
        self.state = state
        self.recent: deque[dict[str, Any]] = deque(maxlen=recent)
        # per snapshot, by method and request bytes (``answers=0``: every call computes)
        self.answers: memo.Answers[_Estimated | wire.Invalid] = memo.Answers(answers)

    def _ready(self, cluster: str) -> Cluster:
        if cluster != self.state.name:
            # Karmada's own wording and code (a plain Go error: Unknown)
            raise _Abort(
                grpc.StatusCode.UNKNOWN,
                f"cluster name does not match, got: {cluster}, desire: {self.state.name}",
            )
        if not self.state.synced:
            raise _Abort(grpc.StatusCode.UNAVAILABLE, "nodes and pods are not listed yet")
        return self.state.snapshot()

    def _serve(
        self, method: str, context: grpc.ServicerContext, compute: Callable[[], T | wire.Invalid]
    ) -> T:
        """The one place a call ends in a gRPC error: an unreadable request (``wire.Invalid``, a value
        from ``wire``) is INVALID_ARGUMENT with the field's path, ``_Abort`` its own code, anything
        else INTERNAL (an answer must still go out; the scheduler drops the round on errors)."""
        started = time.perf_counter()
        code, message = grpc.StatusCode.OK, ""
        try:
            result = compute()
            if isinstance(result, wire.Invalid):
                code, message = grpc.StatusCode.INVALID_ARGUMENT, result.message
        except _Abort as exc:
            code, message = exc.code, exc.message
        except Exception:
            log.exception("estimator %s failed", method)
            code, message = grpc.StatusCode.INTERNAL, "internal error (see the estimator's log)"
        finally:
            LATENCY.labels(method).observe(time.perf_counter() - started)
            REQUESTS.labels(method, code.name).inc()
            if code is not grpc.StatusCode.OK:
                ERRORS.labels(method, code.name).inc()
        if code is not grpc.StatusCode.OK or isinstance(result, wire.Invalid):  # (the second: for mypy)
            self._abort(context, code, message)
        return result

    @staticmethod
    def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
        context.abort(code, message)
        raise AssertionError("unreachable")  # pragma: no cover - abort raises

    def _record(self, method: str, obj: str, result: _Estimated, computed: bool) -> None:
        summary = {"method": method, "object": obj, **result.summary, "computedForThisCall": computed}
        self.recent.append(summary)
        log.info("estimated", extra={"fields": {k: v for k, v in summary.items() if k != "assignment"}})
        if log.isEnabledFor(logging.DEBUG):
            log.debug("witness %s", json.dumps(summary["assignment"], sort_keys=True))

    def _estimate(
        self,
        method: str,
        request: _EstimateRequest,
        context: grpc.ServicerContext,
        read: Callable[[], S | wire.Invalid],
        compute: Callable[[Cluster, S, list[tuple[Component, ...]]], answer.Answer],
        respond: Callable[[int], T],
    ) -> T:
        """One estimate call, as both estimate methods answer: the cluster checked, then what to place
        read (``read``), then the workloads assumed placed before it; the first unreadable part is the
        answer. All of that is done once per snapshot and request bytes (``memo``): concurrent callers
        asking the same wait for one computation. The estimate is recorded for the logs and its count
        goes out in the method's reply."""

        def run() -> T | wire.Invalid:
            cluster = self._ready(request.cluster)

            def estimated() -> _Estimated | wire.Invalid:
                subject = read()
                if isinstance(subject, wire.Invalid):
                    return subject
                assumed = wire.assumed(request.assumedWorkloads)
                if isinstance(assumed, wire.Invalid):
                    return assumed
                result = compute(cluster, subject, assumed)
                return _Estimated(result, dict(answer.witness_summary(result)))

            key = (method, request.SerializeToString(deterministic=True))
            found = self.answers.get(cluster, key, estimated)
            if isinstance(found.value, wire.Invalid):
                return found.value
            self._record(method, _object(context), found.value, found.computed)
            return respond(found.value.result.value)

        return self._serve(method, context, run)

    def MaxAvailableComponentSets(
        self, request: pb.MaxAvailableComponentSetsRequest, context: grpc.ServicerContext
    ) -> pb.MaxAvailableComponentSetsResponse:
        def read() -> tuple[Component, ...] | wire.Invalid:
            return wire.components(request.components)

        def respond(sets: int) -> pb.MaxAvailableComponentSetsResponse:
            return pb.MaxAvailableComponentSetsResponse(maxSets=sets)

        return self._estimate(
            "MaxAvailableComponentSets", request, context, read, answer.component_sets, respond
        )

    def MaxAvailableReplicas(
        self, request: pb.MaxAvailableReplicasRequest, context: grpc.ServicerContext
    ) -> pb.MaxAvailableReplicasResponse:
        def read() -> Component | wire.Invalid:
            return wire.replica_component(request.replicaRequirements)

        def respond(replicas: int) -> pb.MaxAvailableReplicasResponse:
            return pb.MaxAvailableReplicasResponse(maxReplicas=replicas)

        return self._estimate("MaxAvailableReplicas", request, context, read, answer.replicas, respond)

    def GetUnschedulableReplicas(
        self, request: pb.UnschedulableReplicasRequest, context: grpc.ServicerContext
    ) -> pb.UnschedulableReplicasResponse:
        def compute() -> pb.UnschedulableReplicasResponse:
            self._ready(request.cluster)
            ref = request.resource
            refused = unsupported(ref.apiVersion, ref.kind, ref.namespace, ref.name)
            if refused is not None:  # Karmada's text, as a plain Go error: Unknown
                raise _Abort(grpc.StatusCode.UNKNOWN, refused.message)
            workloads = getattr(self.state, "workloads", None)
            if not isinstance(workloads, Workloads):
                raise _Abort(grpc.StatusCode.UNKNOWN, "this estimator does not watch Deployments")
            if not workloads.synced:
                raise _Abort(
                    grpc.StatusCode.UNAVAILABLE,
                    "deployments and replicasets are not listed yet (the estimator needs get, list and "
                    "watch on apps/v1 deployments and replicasets)",
                )
            count = workloads.unschedulable(
                ref.apiVersion, ref.kind, ref.namespace, ref.name, request.unschedulableThreshold, time.time()
            )
            if isinstance(count, Unanswerable):  # Karmada's text, as a plain Go error: Unknown
                raise _Abort(grpc.StatusCode.UNKNOWN, count.message)
            log.info(
                "unschedulable replicas",
                extra={"fields": {"object": f"{ref.kind} {ref.namespace}/{ref.name}", "replicas": count}},
            )
            return pb.UnschedulableReplicasResponse(unschedulableReplicas=min(count, answer.INT32_MAX))

        return self._serve("GetUnschedulableReplicas", context, compute)


def _stamp(tls: TlsFiles) -> tuple[float, ...]:
    paths = [tls.cert, tls.key] + ([tls.client_ca] if tls.client_ca else [])
    return tuple(os.stat(p).st_mtime_ns for p in paths)


def _configuration(tls: TlsFiles) -> Any:
    ca = tls.client_ca.read_bytes() if tls.client_ca and not tls.skip_client_verify else None
    return grpc.ssl_server_certificate_configuration([(tls.key.read_bytes(), tls.cert.read_bytes())], ca)


def credentials(tls: TlsFiles) -> grpc.ServerCredentials:
    """TLS credentials re-read when the files change (cert-manager rotation), checked at each handshake."""
    seen = {"stamp": _stamp(tls)}

    def fetch() -> Any:
        try:
            stamp = _stamp(tls)
            if stamp == seen["stamp"]:
                return None
            config = _configuration(tls)
        except OSError as exc:  # half-written during rotation: keep the current one, try next time
            log.warning("TLS files not reloaded: %s", exc)
            return None
        seen["stamp"] = stamp
        log.info("TLS files reloaded")
        return config

    require = tls.client_ca is not None and not tls.skip_client_verify
    return grpc.dynamic_ssl_server_credentials(_configuration(tls), fetch, require)


@dataclass
class Running:
    server: grpc.Server
    port: int
    health: health.HealthServicer
    service: EstimatorService

    def serving(self, ok: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if ok else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", SERVICE):
            self.health.set(name, status)

    def stop(self, grace: float = 5.0) -> None:
        self.serving(False)
        self.server.stop(grace).wait()


def start(
    state: StateView,
    address: str,
    tls: TlsFiles | None = None,
    workers: int = 8,
    answers: int = memo.DEFAULT_ENTRIES,
) -> Running:
    """Serve on ``address`` (``host:port``; port 0 picks one); health says NOT_SERVING until told.

    ``answers``: distinct requests whose answer is kept per snapshot (0: every call computes)."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="estimator"),
        options=[("grpc.so_reuseport", 0)],  # a second server on the port is an error, not a silent share
    )
    service = EstimatorService(state, answers=answers)
    service_pb2_grpc.add_EstimatorServicer_to_server(service, server)  # type: ignore[no-untyped-call]
    checker = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    port = server.add_secure_port(address, credentials(tls)) if tls else server.add_insecure_port(address)
    if not port:
        raise OSError(f"cannot listen on {address}")
    running = Running(server, port, checker, service)
    running.serving(False)
    server.start()
    return running
