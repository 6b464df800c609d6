"""Files a person hands to the command line: read as text whatever the editor or shell wrote, parse as JSON
or YAML (one or many documents), and fail with one line naming the file and the problem.

PowerShell's ``>`` writes UTF-16 with a byte order mark, Notepad may add a UTF-8 BOM: the encoding is
detected as JSON's own rules do (``json.detect_encoding``: a BOM, or the NUL pattern of the first bytes,
which holds for YAML too since a document starts with an ASCII character). ``-`` is standard input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

STDIN = "-"


class DocumentError(ValueError):
    """Unusable input; the message starts with the file's name and says what is wrong with it."""


def display_name(source: str) -> str:
    return "standard input" if source == STDIN else str(source)


def decode(data: bytes, source: str) -> str:
    encoding = json.detect_encoding(data)
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise DocumentError(
            f"{display_name(source)}: not UTF-8, UTF-16 or UTF-32 text "
            f"(undecodable byte at offset {exc.start})"
        ) from None
    return text.removeprefix("\ufeff")


def read_text(source: str | Path) -> str:
    """The text of a file (or of standard input for ``-``), in whichever Unicode encoding it was saved."""
    name = str(source)
    if name == STDIN:
        data = sys.stdin.buffer.read()
    else:
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise DocumentError(f"{name}: cannot read: {exc.strerror or exc}") from None
    return decode(data, name)


def parse(text: str, source: str, loader: type[Any] = yaml.SafeLoader) -> list[Any]:
    """Every document: JSON (one), else YAML (a stream; empty documents dropped)."""
    try:
        return [json.loads(text)]
    except ValueError:
        pass
    try:
        docs = list(yaml.load_all(text, Loader=loader))
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1}, column {where.column + 1})" if where is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise DocumentError(f"{display_name(source)}: neither JSON nor YAML: {problem}{at}") from None
    return [d for d in docs if d is not None]


def load(source: str | Path, loader: type[Any] = yaml.SafeLoader) -> list[Any]:
    return parse(read_text(source), str(source), loader)
