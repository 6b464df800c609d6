"""Wrappers around an admission handler, each adding one concern (as Kyverno's handler decorators do):
unexpected failures turned into the role's answer, the JSON audit line, the Prometheus metrics.

The Flask view only moves bytes; a wrapped handler can be called, and tested, without it.
"""

from __future__ import annotations

import logging
import time

from webhook.common.admission import AdmissionRequest, AdmissionResponse, Handler, answering
from webhook.server import metrics
from webhook.server.config import Endpoint, OnError

log = logging.getLogger("webhook.admission")


def instrumented(endpoint: Endpoint) -> Handler:
    """The endpoint's handler with error answers, metrics and the audit log around it."""
    return with_audit_log(endpoint.role, with_metrics(endpoint.role, with_errors(endpoint.role, endpoint)))


def with_errors(role: str, endpoint: Endpoint) -> Handler:
    """An unexpected failure becomes the role's own answer (``common.admission.answering``), counted."""
    on_error: OnError = endpoint.on_error

    def counted(request: AdmissionRequest, exc: Exception) -> AdmissionResponse:
        metrics.INTERNAL_ERRORS.labels(role).inc()
        return on_error(request, exc)

    return answering(endpoint.handler, counted)


def with_metrics(role: str, handler: Handler) -> Handler:
    """Counts every answer by role and decision, and times it."""

    def answer(request: AdmissionRequest) -> AdmissionResponse:
        started = time.perf_counter()
        response = handler(request)
        metrics.ADMISSIONS.labels(role, response.decision or "unknown").inc()
        metrics.LATENCY.labels(role).observe(time.perf_counter() - started)
        return response

    return answer


def with_audit_log(role: str, handler: Handler) -> Handler:
    """One JSON line per answer: who asked what, what was answered, how long it took."""

    def answer(request: AdmissionRequest) -> AdmissionResponse:
        started = time.perf_counter()
        response = handler(request)
        _log(role, request, response, time.perf_counter() - started)
        return response

    return answer


def _log(role: str, req: AdmissionRequest, resp: AdmissionResponse, elapsed: float) -> None:
    audit = resp.audit
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
        "path": audit.path,
        "patchOps": len(resp.patch),
        "ms": round(elapsed * 1000, 3),
    }
    if audit.reason:
        fields["reason"] = audit.reason
    fields.update(audit.fields())
    log.log(logging.WARNING if audit.warns() else logging.INFO, "admission", extra={"fields": fields})


def _meta_name(req: AdmissionRequest) -> str:
    meta = req.object.get("metadata")
    if isinstance(meta, dict):
        return str(meta.get("name") or meta.get("generateName") or "")
    return ""
