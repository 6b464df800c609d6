"""Files a person hands to the command line: read as text whatever the editor or shell wrote, parse as JSON
or YAML (one or many documents), and fail with one line naming the file and the problem.

PowerShell's ``>`` writes UTF-16 with a byte order mark, Notepad may add a UTF-8 BOM: the encoding is
detected as JSON's own rules do (``json.detect_encoding``: a BOM, or the NUL pattern of the first bytes,
which holds for YAML too since a document starts with an ASCII character). ``-`` is standard input.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

STDIN = "-"


class DocumentError(ValueError):
    """Unusable input; the message starts with the file's name and says what is wrong with it."""


class TooLarge(DocumentError):
    """Input over the size a command accepts: refused before it is parsed (parsing 30 MB of YAML takes
    half a minute and 190 MB)."""


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


def read_text(source: str | Path, limit: int | None = None) -> str:
    """The text of a file (or of standard input for ``-``), in whichever Unicode encoding it was saved;
    with ``limit``, never more than that many bytes read (:class:`TooLarge` beyond)."""
    name = str(source)
    want = -1 if limit is None else limit + 1
    if name == STDIN:
        data = sys.stdin.buffer.read(want)
    else:
        try:
            with Path(source).open("rb") as found:
                data = found.read(want)
        except OSError as exc:
            raise DocumentError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if limit is not None and len(data) > limit:
        raise TooLarge(f"{display_name(name)}: larger than {limit} bytes")
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


def load(source: str | Path, loader: type[Any] = yaml.SafeLoader, limit: int | None = None) -> list[Any]:
    return parse(read_text(source, limit), str(source), loader)


@dataclass(frozen=True)
class Loaded:
    docs: list[Any]
    json: bool  # the input was one JSON document (else YAML): the form a reply in kind takes


def load_form(source: str | Path, limit: int | None = None) -> Loaded:
    """Every document and whether the input was JSON, so output can answer in the input's form."""
    text = read_text(source, limit)
    try:
        return Loaded([json.loads(text)], True)
    except ValueError:
        return Loaded(parse(text, str(source)), False)
