"""The AdmissionReviews ``flink-failover review`` sends through the handler: each document of FILE as a
request (a bare object wrapped as kube-apiserver would, ``--as-failover`` as the failover's CREATE), or
why it cannot be one."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.common import documents
from webhook.common.admission import KIND as REVIEW_KIND
from webhook.common.contract import Contract
from webhook.member.failover import NotRunning, failover_create
from webhook.member.sessions import is_session_cluster
from webhook.server.config import MAX_BODY_BYTES

OPERATIONS = ("CREATE", "UPDATE")


class UsageError(ValueError):
    """Unusable input: one line on stderr, exit 2."""


def _identity(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return (str(obj.get("kind", "")), str(meta.get("namespace") or "default"), str(meta.get("name", "")))


def describe(obj: Mapping[str, Any]) -> str:
    kind, namespace, name = _identity(obj)
    return f"{kind} {namespace}/{name}" if name else (kind or "object")


def wrap(obj: Mapping[str, Any], operation: str, old: Mapping[str, Any] | None, index: int) -> dict[str, Any]:
    """An AdmissionReview for a bare object, as kube-apiserver would send it."""
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    kind, namespace, name = _identity(obj)
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": kind.lower() + "s"}
    request: dict[str, Any] = {
        "uid": f"00000000-0000-4000-8000-{index:012d}",
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "namespace": namespace,
        "name": name,
        "operation": operation,
        "userInfo": {"username": "flink-failover-review"},
        "object": dict(obj),
        "dryRun": False,
    }
    if old is not None:
        request["oldObject"] = dict(old)
    return {"apiVersion": "admission.k8s.io/v1", "kind": REVIEW_KIND, "request": request}


def _is_object(doc: Any) -> bool:
    return isinstance(doc, Mapping) and bool(doc.get("apiVersion")) and bool(doc.get("kind"))


@dataclass(frozen=True)
class Unreviewable:
    """A document that cannot be reviewed as asked (``--as-failover`` of an object that never ran): told,
    and the review goes on with the others."""

    index: int
    problem: str


@dataclass(frozen=True)
class NotAJob:
    """A session cluster under ``--as-failover`` (a FlinkDeployment without ``spec.job``): there is no job
    to fail over, so it is passed over with one line, not an error; its jobs still read it."""

    index: int
    name: str

    REASON = "session cluster (no spec.job): not a job to fail over"


def items(docs: Sequence[Any]) -> Sequence[Any]:
    """``kubectl get ... -o yaml`` of several objects is one ``kind: List``: its items, in order."""
    out: list[Any] = []
    for doc in docs:
        if (
            isinstance(doc, Mapping)
            and str(doc.get("kind", "")).endswith("List")
            and isinstance(doc.get("items"), list)
        ):
            out.extend(items(doc["items"]))
        else:
            out.append(doc)
    return out


def limit_of(args: argparse.Namespace) -> int:
    """The most bytes FILE may hold: the server's (3 MiB) unless ``--max-bytes`` says."""
    return int(getattr(args, "max_bytes", None) or MAX_BODY_BYTES)


def requests_from(
    args: argparse.Namespace, contract: Contract | None = None, loaded: documents.Loaded | None = None
) -> list[Any]:
    """Every document of FILE (or of ``loaded``, FILE already read) as an AdmissionReview body (bare
    objects wrapped, a ``List`` taken item by item; with ``--as-failover`` each bare object first becomes
    the failover CREATE the control plane would send for it, or an :class:`Unreviewable` saying why it
    cannot)."""
    limit = limit_of(args)
    if loaded is None:
        loaded = documents.load_form(args.file, limit)
    docs = list(items(loaded.docs))
    if not docs:
        raise UsageError(f"{documents.display_name(args.file)}: no documents")
    olds: list[Any] = list(items(documents.load(args.old, limit=limit))) if args.old else []
    if args.old and not olds:
        raise UsageError(f"{args.old}: no documents")
    as_failover = getattr(args, "as_failover", False)
    if as_failover and (args.old or args.operation == "UPDATE"):
        raise UsageError("--as-failover reviews a CREATE: it takes no --old or --operation UPDATE")
    operation = args.operation or ("UPDATE" if args.old else "CREATE")
    if (
        operation == "UPDATE"
        and not args.old
        and any(_is_object(d) and d.get("kind") != REVIEW_KIND for d in docs)
    ):
        raise UsageError(
            "--operation UPDATE of a bare object needs --old FILE (the object before the update)"
        )
    by_identity = {_identity(o): o for o in olds if _is_object(o)}
    bodies: list[Any] = []
    for index, doc in enumerate(docs, 1):
        if isinstance(doc, Mapping) and doc.get("kind") == REVIEW_KIND:
            bodies.append(doc)
            continue
        if not _is_object(doc):
            raise UsageError(
                f"{documents.display_name(args.file)}: document {index} is not an AdmissionReview "
                "and not a Kubernetes object (apiVersion and kind)"
            )
        if as_failover and is_session_cluster(doc):
            bodies.append(NotAJob(index, describe(doc)))
            continue
        if as_failover:
            try:
                doc = failover_create(doc, contract or Contract())
            except NotRunning as exc:
                # The other documents are still answered; the review exits 2 at the end.
                bodies.append(Unreviewable(index, f"{describe(doc)}: {exc}"))
                continue
        old = None
        if operation == "UPDATE":
            old = olds[0] if len(olds) == 1 else by_identity.get(_identity(doc))
            if old is None:
                raise UsageError(f"{args.old}: no old version of {describe(doc)}")
        body = wrap(doc, operation, old, index)
        if len(json.dumps(body)) > MAX_BODY_BYTES:
            raise UsageError(
                f"{documents.display_name(args.file)}: document {index} ({describe(doc)}) makes a request "
                f"larger than {MAX_BODY_BYTES} bytes: the server would refuse it (413)"
            )
        bodies.append(body)
    return bodies
