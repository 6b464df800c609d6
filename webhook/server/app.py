"""Flask routes: bytes in, AdmissionReview out. Knows no role: every decision is made by the handler
it is given (wrapped by ``instrument`` for errors, metrics and the audit log)."""

from __future__ import annotations

import json
from collections.abc import Callable

from flask import Flask, Response, request
from werkzeug.exceptions import RequestEntityTooLarge

from webhook.common.admission import BadReview, review
from webhook.server import metrics
from webhook.server.config import MAX_BODY_BYTES, Endpoint, ServerConfig
from webhook.server.instrument import instrumented

__all__ = ["MAX_BODY_BYTES", "Endpoint", "ServerConfig", "create_app"]


def _plain(text: str, status: int) -> Response:
    return Response(text + "\n", status=status, mimetype="text/plain")


def probe_answers(config: ServerConfig) -> dict[str, Callable[[], tuple[int, str]]]:
    """What /healthz and /readyz answer, on the webhook port and on the probe port alike."""

    def healthz() -> tuple[int, str]:
        return 200, "ok"

    def readyz() -> tuple[int, str]:
        reason = config.ready()
        if reason is not None:
            return 503, reason
        return 200, "\n".join(["ready", *(f"warning: {n}" for n in config.notes)])

    return {"/healthz": healthz, "/readyz": readyz}


def create_app(config: ServerConfig) -> Flask:
    app = Flask("flink-failover")
    app.config["MAX_CONTENT_LENGTH"] = config.max_body_bytes

    def make_view(endpoint: Endpoint) -> Callable[[], Response]:
        handler = instrumented(endpoint)

        def view() -> Response:
            # A body over the limit raises RequestEntityTooLarge here: answered 413 by too_large below.
            raw = request.get_data(cache=False)
            try:
                body = json.loads(raw)
            except (ValueError, RecursionError):
                metrics.BAD_REQUESTS.labels("400").inc()
                return _plain("request body is not JSON", 400)
            try:
                req, resp = review(body, handler)  # instrumented: failures are answered inside
            except BadReview as exc:
                metrics.BAD_REQUESTS.labels("400").inc()
                return _plain(f"not an AdmissionReview: {exc}", 400)
            payload = json.dumps(resp.to_review(req.api_version), separators=(",", ":"))
            return Response(payload, status=200, mimetype="application/json")

        view.__name__ = f"admit_{endpoint.role}_{endpoint.path.strip('/').replace('-', '_')}"
        return view

    for endpoint in config.endpoints:
        app.add_url_rule(endpoint.path, view_func=make_view(endpoint), methods=["POST"])

    probes = probe_answers(config)

    @app.get("/healthz")
    def healthz() -> Response:
        status, text = probes["/healthz"]()
        return _plain(text, status)

    @app.get("/readyz")
    def readyz() -> Response:
        status, text = probes["/readyz"]()
        return _plain(text, status)

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
