"""AdmissionReview (admission.k8s.io/v1) in and out, independent of transport.

A ``Handler`` turns an :class:`AdmissionRequest` into an :class:`AdmissionResponse`; the server, the
offline CLI and the tests all go through :func:`review`, so they give the same answer.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.common.patch import Op
from webhook.common.untyped import as_map, as_str, strings

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
MAX_WARNINGS = 4
MAX_WARNING_LEN = 240  # kube-apiserver truncates longer warnings; keep ours readable


class BadReview(ValueError):
    """The body is not an AdmissionReview we can answer: HTTP 400."""


@dataclass(frozen=True)
class AdmissionRequest:
    uid: str
    group: str
    version: str
    kind: str
    resource: str
    sub_resource: str
    operation: str
    namespace: str
    name: str
    object: Mapping[str, Any]
    old_object: Mapping[str, Any] | None
    dry_run: bool
    api_version: str = API_VERSION
    user: str = ""  # userInfo.username of who sent the request (the member role trusts only its agent's)


@dataclass(frozen=True)
class Audit:
    """What the server logs about an answer beside the request; never sent to the API server.

    A role may extend it with fields of its own (the member role records the jobId and the storage
    outcome); the server logs ``path`` and ``reason``.
    """

    path: str = ""  # the restore path the answer sets, when it sets one
    reason: str = ""  # why, in words

    def fields(self) -> dict[str, Any]:
        """A role's own fields for the log line, beside ``path`` and ``reason``."""
        return {}

    def warns(self) -> bool:
        """Whether the line is logged as a warning: an answer someone should look at (a refusal for a
        storage error, a job held), not routine."""
        return False


@dataclass(frozen=True)
class AdmissionResponse:
    """One answer. Build it with :func:`allowed`, :func:`patched`, :func:`denied` or :func:`errored`."""

    uid: str
    allowed: bool
    patch: list[Op] = field(default_factory=list)
    message: str = ""
    code: int = 0
    warnings: tuple[str, ...] = ()
    # What happened, for logs and metrics (never sent to the API server): the role's decision (its enum
    # is a str), and the audit record.
    decision: str = ""
    audit: Audit = field(default_factory=Audit)

    def to_review(self, api_version: str = API_VERSION) -> dict[str, Any]:
        response: dict[str, Any] = {"uid": self.uid, "allowed": self.allowed}
        if self.patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(
                json.dumps(self.patch, separators=(",", ":")).encode()
            ).decode()
        if not self.allowed:
            response["status"] = {
                "status": "Failure",
                "code": self.code or 403,
                "reason": _REASONS.get(self.code or 403, "InternalError"),
                "message": self.message or "denied",
            }
        if self.warnings:
            response["warnings"] = [_short(w) for w in self.warnings[:MAX_WARNINGS]]
        return {"apiVersion": api_version, "kind": KIND, "response": response}


def allowed(
    request: AdmissionRequest, decision: str, audit: Audit | None = None, warnings: tuple[str, ...] = ()
) -> AdmissionResponse:
    """Admit the object as it is."""
    return AdmissionResponse(request.uid, True, warnings=warnings, decision=decision, audit=audit or Audit())


def patched(
    request: AdmissionRequest,
    patch: list[Op],
    decision: str,
    audit: Audit | None = None,
    warnings: tuple[str, ...] = (),
) -> AdmissionResponse:
    """Admit the object after the JSON patch (an empty patch admits it unchanged)."""
    return AdmissionResponse(
        request.uid, True, patch=patch, warnings=warnings, decision=decision, audit=audit or Audit()
    )


def denied(
    request: AdmissionRequest, message: str, decision: str, audit: Audit | None = None
) -> AdmissionResponse:
    """Refuse the object (403): the client sees ``message``."""
    return AdmissionResponse(
        request.uid, False, message=message, code=403, decision=decision, audit=audit or Audit()
    )


def errored(
    request: AdmissionRequest, message: str, decision: str, audit: Audit | None = None, code: int = 500
) -> AdmissionResponse:
    """Refuse because this webhook failed (500) or could not read what it decides on (503), so the
    client retries."""
    return AdmissionResponse(
        request.uid, False, message=message, code=code, decision=decision, audit=audit or Audit()
    )


Handler = Callable[[AdmissionRequest], AdmissionResponse]
OnError = Callable[[AdmissionRequest, Exception], AdmissionResponse]  # a role's answer to its own failure

# metav1.StatusReason for the codes we answer with (503: try again, the state could not be read).
_REASONS = {403: "Forbidden", 429: "TooManyRequests", 503: "ServiceUnavailable"}


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_WARNING_LEN else text[: MAX_WARNING_LEN - 3] + "..."


def parse_review(body: Any) -> AdmissionRequest:
    """Validate the envelope; the object inside is left for the handler to judge."""
    if not isinstance(body, Mapping):
        raise BadReview("body is not a JSON object")
    if body.get("kind") != KIND:
        raise BadReview(f"kind must be {KIND}")
    api_version = body.get("apiVersion")
    if api_version not in (API_VERSION, "admission.k8s.io/v1beta1"):
        raise BadReview(f"apiVersion must be {API_VERSION}")
    request = body.get("request")
    if not isinstance(request, Mapping):
        raise BadReview("request is missing or not an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid is missing")
    if len(uid) > 256:
        raise BadReview("request.uid is too long")
    obj = request.get("object")
    old = request.get("oldObject")
    return AdmissionRequest(
        uid=uid,
        **strings(request.get("kind"), group="group", version="version", kind="kind"),
        **strings(request.get("resource"), resource="resource"),
        **strings(
            request, sub_resource="subResource", operation="operation", namespace="namespace", name="name"
        ),
        object=obj if isinstance(obj, Mapping) else {},
        old_object=old if isinstance(old, Mapping) else None,
        dry_run=request.get("dryRun") is True,
        api_version=str(api_version),
        user=as_str(as_map(request.get("userInfo")).get("username")),
    )


def answering(handler: Handler, on_error: OnError) -> Handler:
    """``handler`` that never raises: the one place an unexpected failure becomes an admission answer
    (the role's ``on_error``), on the server (``server.instrument``) and offline (``review``) alike.

    RecursionError passes: ``review`` answers it as a bad request (an object nested too deeply).
    """

    def answer(request: AdmissionRequest) -> AdmissionResponse:
        try:
            return handler(request)
        except RecursionError:
            raise
        except Exception as exc:
            return on_error(request, exc)

    return answer


def review(
    body: Any, handler: Handler, on_error: OnError | None = None
) -> tuple[AdmissionRequest, AdmissionResponse]:
    """Parse, then handle (through :func:`answering` when ``on_error`` is given, so every uid gets a
    complete answer); raises :class:`BadReview` for what is not an AdmissionReview."""
    request = parse_review(body)
    if on_error is not None:
        handler = answering(handler, on_error)
    try:
        response = handler(request)
    except RecursionError:
        # An object nested deeper than the interpreter can walk (the Flink CRDs preserve unknown fields
        # under flinkConfiguration, so kube-apiserver admits such a body): a bad request, answered 400
        # without a thousand-frame traceback in the log, not an internal error (tests/fuzz).
        raise BadReview("object nested too deeply") from None
    return request, response
