"""Command-line options whose default comes from the environment (the chart sets them as env)."""

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
