"""The one error bad placement input raises, so the CLI and HTTP edges can answer it cleanly."""

from __future__ import annotations


class PlacementInputError(ValueError):
    """Input that cannot be read: names the offending field (and value) in its message."""
