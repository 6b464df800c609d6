"""Reviewed admission requests offline, through exactly the code path the server uses.

FILE holds AdmissionReviews or bare objects (a FlinkDeployment, a FlinkSessionJob, a Karmada Work), JSON
or YAML, one or many documents; ``-`` reads standard input. A bare object is sent as a CREATE, or as an
UPDATE of the object in ``--old FILE``. Prints the AdmissionReview answer (the patch base64 as on the
wire), ``--print-object`` the object after the patch, or ``--diff`` the change as a unified diff (both in
the input's form, YAML or JSON, unless ``-o`` says otherwise); a request left alone says why on
standard error. A file larger than the server accepts (3 MiB, ``--max-bytes``) is refused unread. A
``kind: List`` (``kubectl get -o yaml``) is reviewed item by item. A FlinkSessionJob's session cluster is
read from FILE itself (a FlinkDeployment beside its jobs) and from ``--objects FILE``. Exit 0 when every
request was answered, 1 when ``--print-object`` or ``--diff`` met a denial, 2 on unusable input, and 2 at
the end when a document could not be reviewed as asked (the others are answered first; a session cluster
under ``--as-failover`` is passed over, not an error).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from webhook.common import documents
from webhook.common.admission import KIND as REVIEW_KIND
from webhook.common.admission import AdmissionRequest, AdmissionResponse, BadReview, review
from webhook.common.contract import Contract
from webhook.common.envoptions import positive_int
from webhook.member.failover import NotRunning, failover_create
from webhook.member.sessions import StaticSessionClusters, is_session_cluster, review_session_clusters
from webhook.policy.load import Unusable, load
from webhook.roles import ROLES, review_handler
from webhook.server.config import MAX_BODY_BYTES

EXIT_OK = 0
EXIT_DENIED = 1
EXIT_USAGE = 2
PROG = "flink-failover review"
OPERATIONS = ("CREATE", "UPDATE")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        help="AdmissionReview(s) or bare object(s), JSON or YAML, one or many documents; '-' for stdin",
    )
    parser.add_argument(
        "--policy",
        default=None,
        help="restore policy file (default: $FLINK_FAILOVER_POLICY, else the policy shipped in the package)",
    )
    parser.add_argument(
        "--role",
        choices=list(ROLES),
        default="member",
        help="which role answers (default: member)",
    )
    parser.add_argument(
        "--operation",
        choices=OPERATIONS,
        type=str.upper,
        help="for bare objects: the operation to review (default: CREATE, or UPDATE with --old)",
    )
    parser.add_argument("--old", metavar="FILE", help="for bare objects: the object before an UPDATE")
    parser.add_argument(
        "--objects",
        help="objects standing in for the cluster (YAML stream or List): control-plane role, the "
        "ResourceBindings Karmada would hold; member role, the session clusters' FlinkDeployments a "
        "FlinkSessionJob names (other kinds there are passed over; a session cluster in the reviewed "
        "file itself, beside its jobs, is read too, --objects winning on a clash)",
    )
    parser.add_argument(
        "--cluster",
        default=None,
        help="member role: review as this member cluster's server would with fencing (--cluster NAME of "
        "serve): the ownership records in the job's storage are read, never written, and a restore is "
        "held exactly when the server would hold it",
    )
    parser.add_argument(
        "--agent-user",
        action="append",
        default=None,
        metavar="USER",
        help="member role: the user the fencing agent's releases come from, as serve --agent-user: an "
        "UPDATE from this user may release a held job (repeatable; default: nobody, so a 'released' "
        "marker keeps the job held, as a server that cannot know the agent's identity answers)",
    )
    parser.add_argument(
        "--as-failover",
        action="store_true",
        help="for bare objects: review the object as the failover CREATE the control plane would send "
        "(jobId and last savepoint from its status, status dropped): what a failover would do to it",
    )
    show = parser.add_mutually_exclusive_group()
    show.add_argument(
        "--print-object", action="store_true", help="print the object after the patch (a denial exits 1)"
    )
    show.add_argument(
        "--diff", action="store_true", help="print the object's change as a unified diff (a denial exits 1)"
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=["json", "yaml"],
        default=None,
        help="output format (default: json for the AdmissionReview answer; with --print-object or --diff "
        "the input's own form, yaml for YAML input)",
    )
    parser.add_argument(
        "--max-bytes",
        type=positive_int,
        default=MAX_BODY_BYTES,
        metavar="N",
        help="refuse an input file larger than N bytes, unread (default: the server's request limit, "
        f"{MAX_BODY_BYTES}; a request the server would refuse with 413 is refused here too)",
    )


class UsageError(ValueError):
    """Unusable input: one line on stderr, exit 2."""


def _fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return EXIT_USAGE


def _identity(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return (str(obj.get("kind", "")), str(meta.get("namespace") or "default"), str(meta.get("name", "")))


def _describe(obj: Mapping[str, Any]) -> str:
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


def _items(docs: Sequence[Any]) -> Sequence[Any]:
    """``kubectl get ... -o yaml`` of several objects is one ``kind: List``: its items, in order."""
    out: list[Any] = []
    for doc in docs:
        if (
            isinstance(doc, Mapping)
            and str(doc.get("kind", "")).endswith("List")
            and isinstance(doc.get("items"), list)
        ):
            out.extend(_items(doc["items"]))
        else:
            out.append(doc)
    return out


def requests_from(
    args: argparse.Namespace, contract: Contract | None = None, loaded: documents.Loaded | None = None
) -> list[Any]:
    """Every document of FILE (or of ``loaded``, FILE already read) as an AdmissionReview body (bare
    objects wrapped, a ``List`` taken item by item; with ``--as-failover`` each bare object first becomes
    the failover CREATE the control plane would send for it, or an :class:`Unreviewable` saying why it
    cannot)."""
    limit = _limit(args)
    if loaded is None:
        loaded = documents.load_form(args.file, limit)
    docs = list(_items(loaded.docs))
    if not docs:
        raise UsageError(f"{documents.display_name(args.file)}: no documents")
    olds: list[Any] = list(_items(documents.load(args.old, limit=limit))) if args.old else []
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
            bodies.append(NotAJob(index, _describe(doc)))
            continue
        if as_failover:
            try:
                doc = failover_create(doc, contract or Contract())
            except NotRunning as exc:
                # The other documents are still answered; the review exits 2 at the end.
                bodies.append(Unreviewable(index, f"{_describe(doc)}: {exc}"))
                continue
        old = None
        if operation == "UPDATE":
            old = olds[0] if len(olds) == 1 else by_identity.get(_identity(doc))
            if old is None:
                raise UsageError(f"{args.old}: no old version of {_describe(doc)}")
        body = wrap(doc, operation, old, index)
        if len(json.dumps(body)) > MAX_BODY_BYTES:
            raise UsageError(
                f"{documents.display_name(args.file)}: document {index} ({_describe(doc)}) makes a request "
                f"larger than {MAX_BODY_BYTES} bytes: the server would refuse it (413)"
            )
        bodies.append(body)
    return bodies


def _can_apply_patches() -> bool:
    try:
        import jsonpatch  # noqa: F401
    except ImportError:
        return False
    return True


def _limit(args: argparse.Namespace) -> int:
    return int(getattr(args, "max_bytes", None) or MAX_BODY_BYTES)


@dataclass(frozen=True)
class Reviewed:
    request: AdmissionRequest
    response: AdmissionResponse
    index: int = 1  # the document's place in FILE, from 1

    @property
    def name(self) -> str:
        return _describe(self.request.object) if self.request.object else f"request {self.request.uid}"

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


def _head(answer: Reviewed, numbered: bool) -> str:
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
    head = _head(answer, numbered)
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


def run(args: argparse.Namespace) -> int:
    if (args.diff or args.print_object) and not _can_apply_patches():
        return _fail(
            "--print-object and --diff apply the answer's patch with jsonpatch, which is not installed: "
            "pip install 'flink-failover[review]'"
        )
    if args.cluster:
        from webhook.fencing.layout import ClusterNameError, check_cluster_name

        try:
            check_cluster_name(args.cluster)
        except ClusterNameError as exc:
            return _fail(f"--cluster: {exc}")
    try:
        loaded_policy = load(args.policy, os.environ)
    except (OSError, ValueError) as exc:
        return _fail(str(exc))
    if isinstance(loaded_policy, Unusable):
        return _fail(loaded_policy.message())
    policy, source = loaded_policy.policy, loaded_policy.source
    try:
        # Read before the handler is built: a session cluster in FILE stands in for the member cluster's.
        loaded = documents.load_form(args.file, _limit(args))
    except documents.TooLarge as exc:
        return _fail(
            f"{exc}: the server refuses requests over {MAX_BODY_BYTES} bytes (413); --max-bytes N reads more"
        )
    except documents.DocumentError as exc:
        return _fail(str(exc))
    clusters = None
    try:
        if args.role == "member":
            clusters = review_session_clusters(_items(loaded.docs), getattr(args, "objects", None))
            args.session_clusters = clusters  # the member role's offline handler reads them (roles.py)
        handler, on_error = review_handler(args, policy)
    except (OSError, ValueError) as exc:
        return _fail(str(exc))
    print(f"{PROG}: policy {source.describe()}", file=sys.stderr)
    for note in loaded_policy.notes:
        print(f"{PROG}: warning: {note}", file=sys.stderr)
    try:
        if args.output is None:
            args.output = "yaml" if (args.diff or args.print_object) and not loaded.json else "json"
        bodies = requests_from(args, policy.contract, loaded)
        answers = []
        unreviewable = [b for b in bodies if isinstance(b, Unreviewable)]
        for index, body in enumerate(bodies, 1):
            if isinstance(body, (Unreviewable, NotAJob)):
                continue
            try:
                answers.append(Reviewed(*review(body, handler, on_error), index=index))
            except BadReview as exc:
                raise UsageError(
                    f"{documents.display_name(args.file)}: not an AdmissionReview: {exc}"
                ) from None
    except documents.TooLarge as exc:
        return _fail(
            f"{exc}: the server refuses requests over {MAX_BODY_BYTES} bytes (413); --max-bytes N reads more"
        )
    except (documents.DocumentError, UsageError) as exc:
        return _fail(str(exc))
    numbered = len(bodies) > 1
    for answer in answers:
        explain(answer, numbered=numbered)
        hint = (
            session_cluster_note(answer, clusters, args.file, getattr(args, "objects", None))
            if clusters
            else None
        )
        if hint:
            print(f"{_head(answer, numbered)}: note: {hint}", file=sys.stderr)
    for passed in (b for b in bodies if isinstance(b, NotAJob)):
        where = f"[{passed.index}] {passed.name}" if numbered else passed.name
        print(f"{PROG}: {where}: skipped: {NotAJob.REASON}", file=sys.stderr)
    for skipped in unreviewable:
        print(f"{PROG}: [{skipped.index}] cannot review as a failover: {skipped.problem}", file=sys.stderr)
    denied = any(not a.response.allowed for a in answers)
    code = EXIT_USAGE if unreviewable else EXIT_DENIED if denied else EXIT_OK
    if args.diff:
        print("".join(unified_diff(a, args.output) for a in answers if a.response.allowed), end="")
        return code
    if args.print_object:
        admitted = [a for a in answers if a.response.allowed]
        if admitted:
            heads = [f"[{a.index}] {a.name}" if numbered else a.name for a in admitted]
            print(dump_all([a.patched() for a in admitted], args.output, heads))
        return code
    reviews = [a.response.to_review(a.request.api_version) for a in answers]
    if reviews:
        print(
            dump_all(reviews, args.output, [f"[{a.index}] {a.name} (uid {a.request.uid})" for a in answers])
        )
    return EXIT_USAGE if unreviewable else EXIT_OK
