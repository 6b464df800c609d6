"""Reading Kubernetes JSON that nothing has validated: a wrong type reads as empty, never raises.

Admission bodies and watched objects arrive as arbitrary JSON; every module that reads them goes
through these three helpers so that a malformed field degrades the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def as_map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def as_str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def strings(doc: Any, **fields: str) -> dict[str, str]:
    """Several text fields of an untyped object at once, given as ``field=key``: each field's text at
    ``key``, "" where it is missing or not a string (``as_str``), to pass on to a typed record."""
    src = as_map(doc)
    return {field: as_str(src.get(key)) for field, key in fields.items()}


def str_map(value: Any) -> dict[str, str]:
    """Labels / annotations: string values only (a non-string value is not a label)."""
    return {str(k): v for k, v in as_map(value).items() if isinstance(v, str)}
