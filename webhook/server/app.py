"""Flask routes: bytes in, AdmissionReview out. Every decision is made by the handler it is given."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from flask import Blueprint, Flask, Response, request
from werkzeug.exceptions import RequestEntityTooLarge

from webhook.admission import AdmissionRequest, AdmissionResponse, BadReview, Handler, review
from webhook.server import metrics

log = logging.getLogger("webhook.admission")

MAX_BODY_BYTES = 3 * 1024 * 1024  # kube-apiserver's own request limit is 3 MiB


@dataclass
class Endpoint:
    """One admission route: its handler and what an unexpected failure answers for that role."""

    path: str
    role: str
    handler: Handler
    on_error: Callable[[AdmissionRequest, Exception], AdmissionResponse]


@dataclass
class ServerConfig:
    endpoints: list[Endpoint]
    ready: Callable[[], str | None]  # None when ready, else the reason
    notes: tuple[str, ...] = ()  # shown under "ready" on /readyz: what works, but not everywhere
    blueprints: Iterable[Blueprint] = field(default_factory=tuple)
    max_body_bytes: int = MAX_BODY_BYTES


def _plain(text: str, status: int) -> Response:
    return Response(text + "\n", status=status, mimetype="text/plain")


def create_app(config: ServerConfig) -> Flask:
    app = Flask("flink-failover")
    app.config["MAX_CONTENT_LENGTH"] = config.max_body_bytes

    def make_view(endpoint: Endpoint) -> Callable[[], Response]:
        def view() -> Response:
            started = time.perf_counter()
            try:
                raw = request.get_data(cache=False)
            except RequestEntityTooLarge:
                metrics.BAD_REQUESTS.labels("413").inc()
                return _plain(f"request body larger than {config.max_body_bytes} bytes", 413)
            try:
                body = json.loads(raw)
            except (ValueError, RecursionError):
                metrics.BAD_REQUESTS.labels("400").inc()
                return _plain("request body is not JSON", 400)
            try:
                req, resp = review(body, endpoint.handler, _counting(endpoint))
            except BadReview as exc:
                metrics.BAD_REQUESTS.labels("400").inc()
                return _plain(f"not an AdmissionReview: {exc}", 400)
            elapsed = time.perf_counter() - started
            metrics.ADMISSIONS.labels(endpoint.role, resp.decision or "unknown").inc()
            metrics.LATENCY.labels(endpoint.role).observe(elapsed)
            if resp.detail.get("storageError"):
                metrics.STORAGE_ERRORS.inc()
            _log(endpoint.role, req, resp, elapsed)
            payload = json.dumps(resp.to_review(req.api_version), separators=(",", ":"))
            return Response(payload, status=200, mimetype="application/json")

        view.__name__ = f"admit_{endpoint.role}_{endpoint.path.strip('/').replace('-', '_')}"
        return view

    for endpoint in config.endpoints:
        app.add_url_rule(endpoint.path, view_func=make_view(endpoint), methods=["POST"])

    @app.get("/healthz")
    def healthz() -> Response:
        return _plain("ok", 200)

    @app.get("/readyz")
    def readyz() -> Response:
        reason = config.ready()
        if reason is not None:
            return _plain(reason, 503)
        return _plain("\n".join(["ready", *(f"warning: {n}" for n in config.notes)]), 200)

    @app.get("/metrics")
    def prometheus() -> Response:
        data, content_type = metrics.exposition()
        return Response(data, status=200, content_type=content_type)

    @app.errorhandler(RequestEntityTooLarge)
    def too_large(_: RequestEntityTooLarge) -> Response:
        metrics.BAD_REQUESTS.labels("413").inc()
        return _plain(f"request body larger than {config.max_body_bytes} bytes", 413)

    for blueprint in config.blueprints:
        app.register_blueprint(blueprint)
    return app


def _counting(endpoint: Endpoint) -> Callable[[AdmissionRequest, Exception], AdmissionResponse]:
    def on_error(req: AdmissionRequest, exc: Exception) -> AdmissionResponse:
        metrics.INTERNAL_ERRORS.labels(endpoint.role).inc()
        return endpoint.on_error(req, exc)

    return on_error


def _log(role: str, req: AdmissionRequest, resp: AdmissionResponse, elapsed: float) -> None:
    fields = {
        "role": role,
        "uid": req.uid,
        "kind": req.kind,
        "namespace": req.namespace,
        "name": req.name or _meta_name(req),
        "operation": req.operation,
        "dryRun": req.dry_run,
        "allowed": resp.allowed,
        "decision": resp.decision,
        "path": resp.detail.get("path", ""),
        "patchOps": len(resp.patch),
        "ms": round(elapsed * 1000, 3),
    }
    if resp.detail.get("reason"):
        fields["reason"] = resp.detail["reason"]
    log.info("admission", extra={"fields": fields})


def _meta_name(req: AdmissionRequest) -> str:
    meta = req.object.get("metadata")
    if isinstance(meta, dict):
        return str(meta.get("name") or meta.get("generateName") or "")
    return ""
