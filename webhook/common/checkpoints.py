"""Flink's checkpoint directory names (``chk-N``), read one way for the whole product. Pure.

The restore's lookup, the verdict it keeps, the fencing agent's release and the Flink status reader
all ask "which checkpoint does this name?": one strict answer, so no part takes a name another passes
over (``chk-007`` would resolve to another directory than Flink's ``chk-7``).
"""

from __future__ import annotations

from collections.abc import Iterable

CHECKPOINT_PREFIX = "chk-"
MAX_DIGITS = 18  # a long's digits (Flink's checkpoint id), short of overflowing one


def checkpoint_number(name: str) -> int | None:
    """N of a ``chk-N`` name, None for any other name. Only the spelling Flink writes counts: ``chk-``
    and 1-18 ASCII digits without a leading zero, and nothing after them (not even the newline a ``$``
    regex lets through). String tests rather than a regex: a job directory lists thousands of names."""
    if not name.startswith(CHECKPOINT_PREFIX):
        return None
    digits = name[len(CHECKPOINT_PREFIX) :]
    if (
        0 < len(digits) <= MAX_DIGITS
        and digits.isascii()
        and digits.isdigit()
        and (digits[0] != "0" or digits == "0")
    ):
        return int(digits)
    return None


def checkpoint_numbers(names: Iterable[str]) -> list[int]:
    """The checkpoint numbers among directory entry names, highest first; other names are ignored."""
    ids = {n for n in map(checkpoint_number, names) if n is not None}
    return sorted(ids, reverse=True)
