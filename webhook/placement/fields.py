"""Strict readers for plain YAML/JSON data: every unknown or mistyped field is an error that names it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from webhook.placement.errors import PlacementInputError

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader when libyaml is present


def mapping(value: Any, where: str, allowed: Iterable[str] | None = None) -> Mapping[str, Any]:
    """``value`` as a mapping (None reads as empty); with ``allowed``, any other key is rejected."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PlacementInputError(f"{where}: expected a mapping, got {type(value).__name__}")
    if allowed is not None:
        known = set(allowed)
        unknown = sorted(str(k) for k in value if k not in known)
        if unknown:
            raise PlacementInputError(
                f"{where}: unknown field {unknown[0]!r} (allowed: {', '.join(sorted(known))})"
            )
    return value


def sequence(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise PlacementInputError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def string(value: Any, where: str, default: str = "") -> str:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise PlacementInputError(f"{where}: expected a string, got {type(value).__name__}")
    return str(value)


def boolean(value: Any, where: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise PlacementInputError(f"{where}: expected true or false, got {value!r}")
    return value


def integer(value: Any, where: str, minimum: int = 0) -> int:
    if isinstance(value, bool):
        raise PlacementInputError(f"{where}: expected an integer, got {value!r}")
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise PlacementInputError(f"{where}: expected an integer, got {value!r}")
    if value < minimum:
        raise PlacementInputError(f"{where}: must be >= {minimum}, got {value}")
    return value


def string_map(value: Any, where: str) -> dict[str, str]:
    return {str(k): string(v, f"{where}.{k}") for k, v in mapping(value, where).items()}


def load_documents(path: str | Path) -> list[Any]:
    """Every document of a YAML (multi-document allowed) or JSON file, empty documents dropped."""
    from webhook.common import documents

    try:
        text = documents.read_text(path)  # '-' is standard input; UTF-16 / BOM files read as well
        if str(path).lower().endswith(".json"):
            try:
                return [json.loads(text)]
            except ValueError as exc:
                raise PlacementInputError(f"{path}: not valid JSON: {exc}") from exc
        return documents.parse(text, str(path), _LOADER)
    except documents.DocumentError as exc:
        raise PlacementInputError(str(exc)) from None
