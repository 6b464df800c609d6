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
import os
import sys

from webhook.commands.review_answers import (
    PROG,
    Reviewed,
    dump_all,
    explain,
    head_of,
    session_cluster_note,
    unified_diff,
)
from webhook.commands.review_requests import (
    OPERATIONS,
    NotAJob,
    Unreviewable,
    UsageError,
    items,
    limit_of,
    requests_from,
)
from webhook.common import documents
from webhook.common.admission import BadReview, review
from webhook.common.envoptions import positive_int
from webhook.member.sessions import review_session_clusters
from webhook.policy.load import Unusable, load
from webhook.roles import ROLES, review_handler
from webhook.server.config import MAX_BODY_BYTES

EXIT_OK = 0
EXIT_DENIED = 1
EXIT_USAGE = 2


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


def _fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return EXIT_USAGE


def _can_apply_patches() -> bool:
    try:
        import jsonpatch  # noqa: F401
    except ImportError:
        return False
    return True


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
        loaded = documents.load_form(args.file, limit_of(args))
    except documents.TooLarge as exc:
        return _fail(
            f"{exc}: the server refuses requests over {MAX_BODY_BYTES} bytes (413); --max-bytes N reads more"
        )
    except documents.DocumentError as exc:
        return _fail(str(exc))
    clusters = None
    try:
        if args.role == "member":
            clusters = review_session_clusters(items(loaded.docs), getattr(args, "objects", None))
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
            print(f"{head_of(answer, numbered)}: note: {hint}", file=sys.stderr)
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
