"""The ``flink-failover`` command; each subcommand is a module with ``add_arguments`` and ``run``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from webhook import __version__

# name -> (module, one-line help). A module exposes add_arguments(parser) and run(args) -> exit code.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("webhook.roles", "run the admission webhook server (member or control-plane role)"),
    "review": ("webhook.review", "answer a sample AdmissionReview offline, through the server's code path"),
    "certs": ("webhook.certs.cli", "generate, renew and publish the webhook's TLS certificates"),
    "placement": ("webhook.placement.cli", "how many complete component sets fit each cluster, and where"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flink-failover", description=__doc__)
    parser.add_argument("--version", action="version", version=f"flink-failover {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # subcommand not part of this build
            raise
        command = sub.add_parser(name, help=help_text, description=module.__doc__)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
