"""Kubernetes quantities and Flink memory sizes, as exact integers in the units the estimator counts.

cpu is counted in millicores, every other resource in its base unit (bytes, pods, devices). Requests are
rounded up and capacities down, so rounding can never make an assignment look feasible when it is not.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from webhook.placement.errors import PlacementInputError

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL = "ephemeral-storage"
PODS = "pods"

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")

# Flink's MemorySize: an integer and an optional case-insensitive unit, binary multiples throughout.
_FLINK_UNITS = {
    "": 0,
    "b": 0,
    "bytes": 0,
    "k": 1,
    "kb": 1,
    "kibibytes": 1,
    "m": 2,
    "mb": 2,
    "mebibytes": 2,
    "g": 3,
    "gb": 3,
    "gibibytes": 3,
    "t": 4,
    "tb": 4,
    "tebibytes": 4,
}
_FLINK_RE = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


def _text(value: object, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise PlacementInputError(f"{where}: malformed quantity {value!r} (expected a string or number)")
    return str(value).strip()


def parse_decimal(value: object, where: str) -> Decimal:
    """A Kubernetes quantity (``500m``, ``2Gi``, ``1e3``, ``1.5``) as an exact, non-negative Decimal."""
    text = _text(value, where)
    match = _QUANTITY_RE.match(text)
    if not match:
        raise PlacementInputError(f"{where}: malformed quantity {text!r}")
    number, exponent, suffix = match.groups()
    try:
        amount = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid decimals
        raise PlacementInputError(f"{where}: malformed quantity {text!r}") from exc
    if exponent:
        amount = amount.scaleb(int(exponent[1:]))
    elif suffix in _BINARY:
        amount *= 1024 ** _BINARY[suffix]
    else:
        amount = amount.scaleb(_DECIMAL[suffix or ""])
    if amount < 0:
        raise PlacementInputError(f"{where}: negative quantity {text!r}")
    return amount


def _scale(resource: str) -> int:
    return 1000 if resource == CPU else 1


def request_units(resource: str, value: object, where: str) -> int:
    """A requested amount in counting units, rounded up (millicores for cpu)."""
    return math.ceil(parse_decimal(value, where) * _scale(resource))


def capacity_units(resource: str, value: object, where: str) -> int:
    """An available amount in counting units, rounded down (millicores for cpu)."""
    return math.floor(parse_decimal(value, where) * _scale(resource))


def flink_memory_bytes(value: object, where: str) -> int:
    """Flink's memory syntax first (``2048m`` = 2048 MiB, ``2g``, bare number = bytes), then a k8s quantity.

    This is the order the Flink operator reads ``resource.memory`` in; Karmada's interpreter reads
    ``2048m`` as 2.048 bytes, which is wrong for Flink.
    """
    text = _text(value, where)
    match = _FLINK_RE.match(text)
    if match and match.group(2).lower() in _FLINK_UNITS:
        return int(match.group(1)) << (10 * _FLINK_UNITS[match.group(2).lower()])
    try:
        return math.ceil(parse_decimal(text, where))
    except PlacementInputError:
        raise PlacementInputError(
            f"{where}: malformed memory size {text!r} (neither Flink MemorySize nor a Kubernetes quantity)"
        ) from None


def flink_cpu_millis(value: object, where: str) -> int:
    """Flink's ``resource.cpu`` (a number of cores, fractions allowed) in millicores, rounded up."""
    return request_units(CPU, value, where)


def is_bytes(resource: str) -> bool:
    return resource in (MEMORY, EPHEMERAL) or resource.startswith("hugepages-")


def whole_kib(resource: str, units: int) -> int:
    """A byte request rounded up to a whole KiB (other resources as they are).

    Kubernetes prints a byte count that is not a multiple of 1024 as a DecimalSI quantity, which
    Karmada's general estimator reads x1000; the components customization therefore emits whole KiB,
    and the parser asks for the same amount so both agree (never more than 1023 bytes above the spec).
    """
    return -(-units // 1024) * 1024 if is_bytes(resource) else units


def format_quantity(resource: str, units: int) -> str:
    """Counting units back to a readable Kubernetes quantity (``1``/``500m`` cpu, ``2Gi`` bytes)."""
    if resource == CPU:
        return str(units // 1000) if units % 1000 == 0 else f"{units}m"
    if is_bytes(resource):
        for suffix, power in sorted(_BINARY.items(), key=lambda item: -item[1]):
            step = 1024**power
            if units and units % step == 0:
                return f"{units // step}{suffix}"
    return str(units)
