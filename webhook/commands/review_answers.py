"""What ``flink-failover review`` prints of each answer: the answer, the patched object or the diff (YAML
or JSON) on standard output, and on standard error why nothing changed, the warnings, and where a session
cluster was looked for."""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from webhook.commands.review_requests import describe
from webhook.common import documents
from webhook.common.admission import AdmissionRequest, AdmissionResponse
from webhook.member.sessions import StaticSessionClusters

PROG = "flink-failover review"


@dataclass(frozen=True)
class Reviewed:
    request: AdmissionRequest
    response: AdmissionResponse
    index: int = 1  # the document's place in FILE, from 1

    @property
    def name(self) -> str:
        return describe(self.request.object) if self.request.object else f"request {self.request.uid}"

    def patched(self) -> Any:
        import jsonpatch  # the review extra (checked by ``run`` before anything is reviewed)

        obj = self.request.object
        return jsonpatch.apply_patch(obj, self.response.patch) if self.response.patch else obj


def dump(doc: Any, output: str) -> str:
    if output == "yaml":
        return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False).rstrip("\n")
    return json.dumps(doc, indent=2)


def dump_all(docs: Sequence[Any], output: str, names: Sequence[str] = ()) -> str:
    """One document, or many: YAML documents each headed by a comment naming the object answered (in
    input order, as the JSON List's items are)."""
    if len(docs) == 1:
        return dump(docs[0], output)
    if output == "yaml":
        heads = [f"# {n}\n" for n in names] if len(names) == len(docs) else [""] * len(docs)
        return "\n---\n".join(h + dump(d, output) for h, d in zip(heads, docs, strict=True))
    return dump({"apiVersion": "v1", "kind": "List", "items": list(docs)}, output)


def unified_diff(answer: Reviewed, output: str) -> str:
    # Both texts end with a newline, so a changed last line is not glued to the next diff line.
    before = (dump(answer.request.object, output) + "\n").splitlines(keepends=True)
    after = (dump(answer.patched(), output) + "\n").splitlines(keepends=True)
    label = answer.name
    return "".join(difflib.unified_diff(before, after, f"{label} (request)", f"{label} (admitted)"))


def head_of(answer: Reviewed, numbered: bool) -> str:
    if numbered:
        return f"{PROG}: [{answer.index}] {answer.name} (uid {answer.request.uid})"
    return f"{PROG}: {answer.name}"


def session_cluster_note(
    answer: Reviewed, clusters: StaticSessionClusters, file: str, objects: str | None
) -> str | None:
    """Where a FlinkSessionJob's session cluster was looked for and how to hand it over, when the answer
    warns about it and review had none: the server would GET it from the member cluster, review reads
    only FILE and ``--objects FILE``."""
    obj = answer.request.object or {}
    if obj.get("kind") != "FlinkSessionJob":
        return None
    spec = obj.get("spec")
    name = str(spec.get("deploymentName") or "") if isinstance(spec, Mapping) else ""
    meta = obj.get("metadata")
    namespace = str((meta.get("namespace") if isinstance(meta, Mapping) else "") or answer.request.namespace)
    namespace = namespace or "default"
    where = f"FlinkDeployment {namespace}/{name}"
    if not name or clusters.get(namespace, name) is not None:
        return None
    if not any(where in warning for warning in answer.response.warnings):
        return None  # its directories were not needed from the cluster (or it was not restored)
    shown = documents.display_name(file)
    if objects:
        return (
            f"session cluster {where} was not found in the given objects (--objects {objects}) nor in "
            f"{shown}: add its FlinkDeployment to either"
        )
    return (
        f"session cluster {where} is not in {shown}: review reads a session job's cluster from the reviewed "
        "file and from --objects FILE; give its FlinkDeployment with --objects FILE (or in the same file)"
    )


def explain(answer: Reviewed, numbered: bool = False) -> None:
    """What a person would otherwise have to guess: why nothing changed, or why not, and the warnings the
    API server would show (why a job is held, an ignored savepoint), whatever the output form.

    With several documents every answer gets a line, numbered in input order with its uid, so each
    answer in the output can be matched to its object.
    """
    response = answer.response
    head = head_of(answer, numbered)
    if not response.allowed:
        print(f"{head}: denied: {response.message}", file=sys.stderr)
    elif response.decision == "skip":
        reason = response.audit.reason or "not a request this webhook changes"
        print(f"{head}: skipped: {reason}", file=sys.stderr)
    elif not response.patch:
        decision = response.decision
        said = "allowed unchanged" if decision in ("", "unchanged") else f"allowed unchanged ({decision})"
        print(f"{head}: {said}", file=sys.stderr)
    elif numbered or response.decision == "carried":
        print(f"{head}: {response.decision or 'patched'}", file=sys.stderr)
    for warning in response.warnings:
        print(f"{head}: warning: {warning}", file=sys.stderr)
