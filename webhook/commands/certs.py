"""Generate, renew and publish the webhook's TLS certificates.

  certs generate --service NAME --namespace NS --out DIR [--extra-san NAME|IP ...]
  certs renew --out DIR [--before-days 30]
  certs ca-bundle --out DIR
  certs inject --webhook-config NAME [--validating] [--out DIR]

With ``--secret`` (and ``--ca-secret``), generate and renew start from the Secrets' content and write
the result back, so a Job or CronJob in the cluster keeps the CA stable across runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from webhook.certs import pki, secrets, store
from webhook.common.kubeclient import ApiFailure

EXIT_OK = 0
EXIT_ERROR = 1
SECRET_LABELS = {"app.kubernetes.io/managed-by": "flink-failover-certs"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    current = parser.formatter_class
    if not (isinstance(current, type) and issubclass(current, argparse.RawDescriptionHelpFormatter)):
        parser.formatter_class = argparse.RawDescriptionHelpFormatter  # keep the docstring's usage lines
    sub = parser.add_subparsers(dest="certs_command", metavar="ACTION")
    sub.required = True

    gen = _action(parser, sub, "generate", "create (or reuse) the CA and issue the serving certificate")
    gen.add_argument("--service", required=True, help="the webhook Service name")
    gen.add_argument("--namespace", required=True, help="the webhook Service namespace")
    gen.add_argument(
        "--extra-san", action="append", default=[], metavar="NAME|IP", help="additional SAN (repeatable)"
    )
    gen.add_argument("--ca-days", type=int, default=pki.DEFAULT_CA_DAYS, help="CA validity (new CA only)")
    _issue_arguments(gen)
    _secret_arguments(gen)

    ren = _action(parser, sub, "renew", "re-issue the serving certificate when it expires soon")
    _issue_arguments(ren)
    ren.add_argument("--namespace", default=None, help="namespace of --secret (default: the pod's namespace)")
    _secret_arguments(ren)

    bundle = _action(parser, sub, "ca-bundle", "print the base64 CA bundle (clientConfig.caBundle)")
    bundle.add_argument("--out", default="certs", type=Path, help="directory holding ca.crt")

    inject = _action(parser, sub, "inject", "write the CA bundle into every webhook of a configuration")
    inject.add_argument(
        "--webhook-config", required=True, metavar="NAME", help="the MutatingWebhookConfiguration to update"
    )
    inject.add_argument(
        "--validating", action="store_true", help="a ValidatingWebhookConfiguration (default: mutating)"
    )
    inject.add_argument("--out", default="certs", type=Path, help="directory holding ca.crt")
    _kube_arguments(inject)


def _action(parser: argparse.ArgumentParser, sub: Any, name: str, text: str) -> argparse.ArgumentParser:
    """A certs action: its one-line help is also its description (``certs ACTION --help``)."""
    made: argparse.ArgumentParser = sub.add_parser(
        name, help=text, description=text[0].upper() + text[1:] + ".", formatter_class=parser.formatter_class
    )
    return made


def _issue_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the serving certificate is kept, how long a new one is valid and when an existing one is
    re-issued: generate and renew decide this alike."""
    parser.add_argument("--out", default="certs", type=Path, help="certificate directory (default: certs)")
    parser.add_argument(
        "--days", type=int, default=pki.DEFAULT_DAYS, help="validity of a newly issued serving certificate"
    )
    parser.add_argument(
        "--before-days",
        type=int,
        default=pki.DEFAULT_RENEW_BEFORE_DAYS,
        help="re-issue an existing serving certificate that expires within this many days",
    )
    parser.add_argument(
        "--force", action="store_true", help="re-issue the serving certificate now, whatever its expiry"
    )


def _kube_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig", default=None, help="default: in-cluster, else KUBECONFIG / ~/.kube/config"
    )
    parser.add_argument("--context", default=None, help="kubeconfig context (default: its current one)")


def _secret_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--secret",
        default=None,
        metavar="NAME",
        help="read from and write tls.crt/tls.key/ca.crt to this Secret",
    )
    parser.add_argument(
        "--ca-secret",
        default=None,
        metavar="NAME",
        help="keep ca.crt/ca.key in this Secret (default: ca.key goes into --secret)",
    )
    _kube_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        if args.certs_command == "generate":
            return _generate(args)
        if args.certs_command == "renew":
            return _renew(args)
        if args.certs_command == "ca-bundle":
            print(store.ca_bundle(store.read_dir(args.out)))
            return EXIT_OK
        return _inject(args)
    except BrokenPipeError:
        raise  # the caller closed our output (| head): not an error of ours
    except (pki.CertError, OSError) as exc:
        print(f"flink-failover certs: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except _Failed as failed:  # an ApiFailure from the Kubernetes API, told once here
        print(f"flink-failover certs: {failed.failure.message}", file=sys.stderr)
        return EXIT_ERROR


class _Failed(Exception):
    def __init__(self, failure: ApiFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


T = TypeVar("T")


def _ok(answer: T | ApiFailure) -> T:
    """The answer, or out to ``run`` with the failure."""
    if isinstance(answer, ApiFailure):
        raise _Failed(answer)
    return answer


def _load(args: argparse.Namespace, namespace: str) -> tuple[dict[str, bytes], Any]:
    """Start from the Secrets with ``--secret`` (they are the source of truth), else from the directory."""
    if args.secret is None:
        return store.read_dir(args.out), None
    api = _ok(secrets.connect(args.kubeconfig, args.context))
    serving = _ok(secrets.read_secret(api, namespace, args.secret)) or {}
    files = {k: v for k, v in serving.items() if k in store.SECRET_FILES}
    if args.ca_secret and args.ca_secret != args.secret:
        # the CA Secret owns the CA: a ca.crt copy in the serving Secret never decides anything
        files.pop(store.CA_CERT, None)
        files.pop(store.CA_KEY, None)
        ca = _ok(secrets.read_secret(api, namespace, args.ca_secret)) or {}
        files.update({k: ca[k] for k in (store.CA_CERT, store.CA_KEY) if k in ca})
    return files, api


def _save(args: argparse.Namespace, namespace: str, api: Any, files: Mapping[str, bytes]) -> None:
    changed = store.write_files(args.out, files)
    if changed:
        print(f"wrote {', '.join(changed)} to {args.out}", file=sys.stderr)
    if api is None:
        return
    serving = {k: files[k] for k in (store.TLS_CERT, store.TLS_KEY, store.CA_CERT)}
    if args.ca_secret and args.ca_secret != args.secret:
        ca = {k: files[k] for k in (store.CA_CERT, store.CA_KEY)}
        what = _ok(secrets.write_secret(api, namespace, args.ca_secret, ca, "Opaque", SECRET_LABELS))
        print(f"Secret {namespace}/{args.ca_secret} {what}", file=sys.stderr)
    else:
        serving[store.CA_KEY] = files[store.CA_KEY]
    what = _ok(secrets.write_secret(api, namespace, args.secret, serving, "kubernetes.io/tls", SECRET_LABELS))
    print(f"Secret {namespace}/{args.secret} {what}", file=sys.stderr)


def _describe(outcome: store.Issuance) -> str:
    cert = outcome.serving
    names = ", ".join(pki.dns_names(cert))
    return f"serial {cert.serial_number:x}, expires {cert.not_valid_after_utc.isoformat()}, SANs {names}"


def _generate(args: argparse.Namespace) -> int:
    files, api = _load(args, args.namespace)
    before = dict(files)
    outcome = store.generate(
        files,
        args.service,
        args.namespace,
        args.extra_san,
        days=args.days,
        ca_days=args.ca_days,
        before_days=args.before_days,
        force=args.force,
    )
    print(f"CA: {'created' if outcome.ca_created else 'reused'}", file=sys.stderr)
    if outcome.serving_issued:
        print(f"serving certificate issued ({outcome.reason}): {_describe(outcome)}", file=sys.stderr)
    else:
        print(f"serving certificate kept: {_describe(outcome)}", file=sys.stderr)
    if outcome.files == before and api is not None:
        store.write_files(args.out, outcome.files)  # the Secrets already hold exactly this
        print("Secrets unchanged", file=sys.stderr)
        return EXIT_OK
    _save(args, args.namespace, api, outcome.files)
    return EXIT_OK


def _renew(args: argparse.Namespace) -> int:
    namespace = args.namespace
    if namespace is None:
        namespace = secrets.current_namespace()
    files, api = _load(args, namespace)
    outcome = store.renew(files, before_days=args.before_days, days=args.days, force=args.force)
    if not outcome.serving_issued:
        print(f"nothing to do: {outcome.reason}", file=sys.stderr)
        store.write_files(args.out, outcome.files)  # with --secret: leave a usable copy in --out
        return EXIT_OK
    print(f"serving certificate renewed ({outcome.reason}): {_describe(outcome)}", file=sys.stderr)
    _save(args, namespace, api, outcome.files)
    return EXIT_OK


def _inject(args: argparse.Namespace) -> int:
    bundle = store.ca_bundle(store.read_dir(args.out))
    api = _ok(secrets.connect(args.kubeconfig, args.context))
    names = _ok(secrets.inject_ca_bundle(api, args.webhook_config, bundle, validating=args.validating))
    kind = "ValidatingWebhookConfiguration" if args.validating else "MutatingWebhookConfiguration"
    print(f"caBundle set on {len(names)} webhook(s) of {kind} {args.webhook_config}: {', '.join(names)}")
    return EXIT_OK
