"""The ``flink-failover`` command; each subcommand is a module of ``webhook.commands`` with ``add_arguments``
and ``run``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

from webhook import __version__

# The one-line help of each command. Its module (imported by name in ``_commands``: a literal import, so
# the import test and a reader see the edge) exposes add_arguments(parser) and run(args) -> exit code.
SUMMARIES: dict[str, str] = {
    "serve": "run the admission webhook server (member, control-plane or estimator role)",
    "review": "answer an AdmissionReview or a bare Flink object offline, as the server would",
    "certs": "generate, renew and publish the webhook's TLS certificates",
    "placement": "how many complete component sets fit each cluster, and where",
    "release": "start a job held for fencing, by hand (the old copy is gone)",
    "status": "every job's fencing state on a member cluster: held, whom it waits for, the ownership records",
    "keeper": "keep one job's lease from beside its JobManager; stop the JobManager when it cannot",
}


def _commands() -> dict[str, ModuleType]:
    """The command modules, imported when the parser is built, not when ``webhook.cli`` is imported."""
    from webhook.commands import certs, keeper, placement, release, review, serve, status

    return {
        "serve": serve,
        "review": review,
        "certs": certs,
        "placement": placement,
        "release": release,
        "status": status,
        "keeper": keeper,
    }


DESCRIPTION = """\
Stateful failover for Apache Flink jobs that Karmada spreads over Kubernetes clusters: when Karmada moves
a FlinkDeployment or FlinkSessionJob to another cluster, the job resumes from the newest restorable
checkpoint or savepoint of the job that ran before, never from empty state.

One command, three server roles: `serve --role member` on every member cluster (the admission webhook
that sets spec.job.initialSavepointPath), `serve --role control-plane` beside Karmada (records each job's
last good state, labels the Work bound for the new cluster), `serve --role estimator` for Karmada's
scheduler (how many complete component sets fit a member). `review` answers a request offline exactly
as the server would; `placement` counts how many complete sets of a workload fit each cluster; `certs` looks
after the webhook's TLS certificates. `flink-failover COMMAND --help` tells more."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; an option's help ends with its default when it has one and does not say it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or default in (None, False, "", argparse.SUPPRESS)
            or default == []
            or "default" in text
        ):
            return text
        return f"{text} (default: %(default)s)"


def _help_role(argv: Sequence[str]) -> str | None:
    """The role of ``serve --role ROLE --help``: its help then shows that role's options only."""
    args = list(argv)
    if "serve" not in args or not ({"-h", "--help"} & set(args)):
        return None
    for i, arg in enumerate(args):
        if arg == "--role" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--role="):
            return arg.split("=", 1)[1]
    return None


def build_parser(help_role: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="flink-failover", description=DESCRIPTION, formatter_class=HelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"flink-failover {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module in _commands().items():
        help_text = SUMMARIES[name]
        # A module's HELP is what a user reads; its docstring is for developers.
        description = getattr(module, "HELP", None) or module.__doc__
        command = sub.add_parser(name, help=help_text, description=description, formatter_class=HelpFormatter)
        if help_role is not None and name == "serve":
            module.add_arguments(command, only=help_role)
        else:
            module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_help_role(argv))
    args = parser.parse_args(argv)
    try:
        return int(args._run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
