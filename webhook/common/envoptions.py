"""Command-line options whose default comes from the environment (the chart sets them as env)."""

from __future__ import annotations

import argparse
import os
from typing import Any


def add_env_option(
    parser: argparse._ActionsContainer,
    flag: str,
    env: str,
    fallback: str | None,
    text: str,
    *,
    otherwise: str = "",
    **kwargs: Any,
) -> argparse.Action:
    """``flag``, defaulting to ``$env`` (``fallback`` when it is unset or empty), the variable and the
    fallback named in its help, so that ``--help`` tells which variable the chart sets."""
    shown = otherwise or fallback
    return parser.add_argument(
        flag,
        default=os.environ.get(env) or fallback,
        help=f"{text} (default: ${env}, else {shown})" if shown else f"{text} (${env})",
        **kwargs,
    )
