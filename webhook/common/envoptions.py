"""Command-line options: defaults from the environment (the chart sets them as env), and the argument
types more than one command takes."""

from __future__ import annotations

import argparse
import os
from typing import Any

# The member's name in Karmada, for serve's --cluster (the chart sets it); status's --cluster reads it too.
CLUSTER_ENV = "FLINK_FAILOVER_CLUSTER"


def add_env_option(
    parser: argparse._ActionsContainer,
    flag: str,
    env: str,
    fallback: str | None,
    text: str,
    *,
    otherwise: str = "",
    aliases: tuple[str, ...] = (),
    **kwargs: Any,
) -> argparse.Action:
    """``flag`` (and its ``aliases``), defaulting to ``$env`` (``fallback`` when it is unset or empty),
    the variable and the fallback named in its help, so that ``--help`` tells which variable the chart
    sets. With ``action="append"`` the variable is a comma-separated list the given values add to."""
    shown = otherwise or fallback
    raw = os.environ.get(env)
    default: Any = raw or fallback
    if kwargs.get("action") == "append":
        default = [item.strip() for item in (raw or "").split(",") if item.strip()] or None
    return parser.add_argument(
        flag,
        *aliases,
        default=default,
        help=f"{text} (default: ${env}, else {shown})" if shown else f"{text} (${env})",
        **kwargs,
    )


def positive_int(text: str) -> int:
    """An argument type: a whole number of at least 1 (``--max-sets``, ``--max-bytes``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value
