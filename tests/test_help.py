"""The command line explains itself: the product first, every option with help text and its default,
role-specific options named by role, every subcommand with a description."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from webhook.cli import build_parser


def parsers(
    parser: argparse.ArgumentParser, path: str = "flink-failover"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, f"{path} {name}")


ALL = list(parsers(build_parser()))


def test_top_level_help_describes_the_product() -> None:
    text = build_parser().format_help()
    assert "Karmada" in text and "checkpoint" in text and "never from empty state" in text
    assert "add_arguments" not in text and "module" not in text


@pytest.mark.parametrize(("path", "parser"), ALL, ids=[p for p, _ in ALL])
def test_every_command_has_a_description_and_every_option_help(
    path: str, parser: argparse.ArgumentParser
) -> None:
    assert parser.description and len(parser.description) > 20, path
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._VersionAction | argparse._SubParsersAction):
            continue
        assert action.help, f"{path} {action.option_strings or action.dest}: no help text"
    text = parser.format_help()
    for action in parser._actions:
        default = action.default
        # an empty default is no default to show: "(default: )" told nobody anything (issue 30)
        if action.option_strings and default not in (None, False, "", argparse.SUPPRESS) and default != []:
            lines = text.split("\n")
            line = next(
                i for i, part in enumerate(lines) if part.strip().startswith(action.option_strings[0])
            )
            window = " ".join(lines[line : line + 5])
            assert "default" in window, f"{path} {action.option_strings[-1]}: default {default!r} not shown"


def test_role_specific_serve_options_say_which_role() -> None:
    serve = dict(ALL)["flink-failover serve"]
    member = {"--require-storage-backends"}
    control = {
        "--kubeconfig",
        "--context",
        "--no-capture",
        "--leader-elect",
        "--lease-name",
        "--lease-namespace",
    }
    control |= {"--lease-duration", "--renew-deadline", "--retry-period"}
    for group in serve._action_groups:
        for action in group._group_actions:
            option = action.option_strings[-1] if action.option_strings else ""
            if option in member:
                assert "member role" in (group.title or "") and "member role" in (action.help or ""), option
            if option in control:
                assert "control-plane role" in (group.title or ""), option


def _help(*argv: str) -> str:
    import contextlib
    import io

    from webhook.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main([*argv, "--help"])
    return out.getvalue()


def test_help_names_every_role_and_serve_speaks_to_users() -> None:
    """Issue 17 item 13: "two roles", and ``serve --help`` showed the composition root's docstring."""
    top = build_parser().format_help()
    assert "two roles" not in top and "--role estimator" in top
    serve = _help("serve")
    assert "composition root" not in serve and "control-plane  beside Karmada" in serve


def test_role_specific_help_shows_that_roles_options_only() -> None:
    member, control, estimator = (
        _help("serve", "--role", r) for r in ("member", "control-plane", "estimator")
    )
    assert len({member, control, estimator}) == 3  # before: identical for every role
    assert "--require-storage-backends" in member and "--leader-elect" not in member
    assert "--server-port" not in member and "--cluster CLUSTER" in member  # the fencing agent
    assert "--cluster CLUSTER" not in control and "--cluster CLUSTER" in estimator
    assert "--leader-elect" in control and "--require-storage-backends" not in control
    assert "--server-port" in estimator and "--leader-elect" not in estimator
    assert all("--kubeconfig" in text and "--cert-dir" in text for text in (member, control))
