"""Answer AdmissionReview files offline, through exactly the code path the server uses.

Prints the AdmissionReview response (patch base64 as on the wire) or, with ``--print-object``, the
object after the patch. Exit 0 when an answer was produced (allowed or denied), 2 on unusable input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import jsonpatch
import yaml

from webhook.common.admission import AdmissionRequest, AdmissionResponse, BadReview, Handler, review
from webhook.member.policy import DEFAULT_POLICY, PolicyError, load_policy
from webhook.roles import ROLES, offline_handler
from webhook.server.config import OnError

EXIT_OK = 0
EXIT_USAGE = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="AdmissionReview JSON (or YAML) file, '-' for standard input")
    parser.add_argument("--policy", default=DEFAULT_POLICY, help="restore policy file")
    parser.add_argument("--role", choices=list(ROLES), default="member")
    parser.add_argument(
        "--objects", help="control-plane: YAML stream of ResourceBindings standing in for Karmada"
    )
    parser.add_argument(
        "--print-object", action="store_true", help="print the object after the patch instead"
    )


def _fail(message: str) -> int:
    print(f"flink-failover review: {message}", file=sys.stderr)
    return EXIT_USAGE


def load_body(source: str) -> Any:
    if source == "-":
        text = sys.stdin.read()
    else:
        with open(source, encoding="utf-8") as file:
            text = file.read()
    try:
        return json.loads(text)
    except ValueError:
        return yaml.safe_load(text)  # YAML is a superset; friendlier for hand-written samples


def build_handler(args: argparse.Namespace) -> tuple[Handler, OnError]:
    return offline_handler(args, load_policy(args.policy))


def run(args: argparse.Namespace) -> int:
    try:
        handler, on_error = build_handler(args)
    except PolicyError as exc:
        return _fail(str(exc))
    except (OSError, ValueError) as exc:
        return _fail(str(exc))
    try:
        body = load_body(args.file)
    except OSError as exc:
        return _fail(f"cannot read {args.file}: {exc.strerror or exc}")
    except yaml.YAMLError:
        return _fail(f"{args.file} is neither JSON nor YAML")
    try:
        request, response = review(body, handler, on_error)
    except BadReview as exc:
        return _fail(f"not an AdmissionReview: {exc}")
    if args.print_object:
        print(json.dumps(patched_object(request, response), indent=2, sort_keys=True))
    else:
        print(json.dumps(response.to_review(request.api_version), indent=2))
    return EXIT_OK


def patched_object(request: AdmissionRequest, response: AdmissionResponse) -> Any:
    if not response.allowed:
        return {"denied": response.message}
    return jsonpatch.apply_patch(request.object, response.patch) if response.patch else request.object
