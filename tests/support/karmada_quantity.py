"""A quantity string read the way Karmada's general estimator reads it (facts from Karmada v1.18.2 and
k8s.io/apimachinery, for tests): what a component's ``resourceRequest`` counts for against a cluster's
resource summary.

The string is parsed as a ``resource.Quantity`` (a binary suffix gives BinarySI, a decimal suffix or
none DecimalSI, an exponent DecimalExponent), stored in the ResourceBinding in its canonical form
(a BinarySI amount below 1024 or not a whole multiple of 1024 prints as DecimalSI), and then counted
by ``quantityAsInt64``: the milli-value for DecimalSI and DecimalExponent, the value for BinarySI.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


def parse(text: str) -> tuple[Decimal, str]:
    """The amount and the format (``BinarySI``, ``DecimalSI``, ``DecimalExponent``) of a quantity."""
    match = _RE.match(text)
    if not match:
        raise ValueError(f"quantities must match the regular expression: {text!r}")
    number, exponent, suffix = match.groups()
    amount = Decimal(number)
    if exponent:
        return amount.scaleb(int(exponent[1:])), "DecimalExponent"
    if suffix in _BINARY:
        return amount * 1024 ** _BINARY[suffix], "BinarySI"
    return amount.scaleb(_DECIMAL[suffix or ""]), "DecimalSI"


def canonical_format(amount: Decimal, fmt: str) -> str:
    """The format the quantity has after the ResourceBinding round trip (``Quantity.String``)."""
    if fmt == "BinarySI":
        whole = math.ceil(amount)
        if -1024 < amount < 1024 or amount != whole or whole % 1024:
            return "DecimalSI"
    return fmt


def general_estimator_units(text: str) -> int:
    """What Karmada's general estimator counts for ``text`` (``quantityAsInt64`` after the round trip)."""
    amount, fmt = parse(text)
    if canonical_format(amount, fmt) == "BinarySI":
        return math.ceil(amount)
    return math.ceil(amount * 1000)
