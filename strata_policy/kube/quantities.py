"""Kubernetes quantities ("500m", "1.5Gi", "2e3") to Strata's integer base units.

A quantity is parsed exactly (``Decimal``), then rounded **up** to the base unit, as
``resource.Quantity.MilliValue``/``Value`` do in apimachinery: a pod asking for ``0.1m`` CPU still
takes one millicore, never zero. ``cpu`` becomes millicores, ``memory`` and every other resource
its plain value (bytes, counts), and GPUs are converted by the callers (``nodes``/``pods``), which
know the device conventions.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"^([+-]?[0-9]*\.?[0-9]*)([eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE]?)$")
MAX_EXPONENT = 30  # beyond any real amount; keeps Decimal arithmetic bounded
MAX_QUANTITY = 2**62  # Strata's amounts stay clear of int64 overflow when summed


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity, or one Strata cannot hold (negative, huge)."""

    def __init__(self, text: object, why: str) -> None:
        super().__init__(f"quantity {text!r}: {why}")
        self.text = text
        self.why = why


def parse_quantity(text: str | int | float | Decimal) -> Decimal:
    """The exact value of a quantity (``"1.5Gi"`` → 1610612736); ints and floats taken as is."""
    if isinstance(text, bool):
        raise QuantityError(text, "not a quantity")
    if isinstance(text, Decimal):
        return text
    if isinstance(text, int | float):
        return Decimal(str(text))
    match = _QUANTITY.match(text.strip())
    if not match or match.group(1) in ("", ".", "+", "-") or len(text) > 64:
        raise QuantityError(text, "not a Kubernetes quantity")
    number, suffix = match.groups()
    try:
        value = Decimal(number)
    except InvalidOperation:
        raise QuantityError(text, "not a number") from None
    if suffix in _BINARY:
        return value * _BINARY[suffix]
    if suffix[:1] in ("e", "E"):
        exponent = int(suffix[1:])
        if abs(exponent) > MAX_EXPONENT:
            raise QuantityError(text, "exponent out of range")
        return value * Decimal(10) ** exponent
    return value * _DECIMAL[suffix]


def to_units(text: str | int | float | Decimal, *, milli: bool = False) -> int:
    """The quantity in base units (``milli``: thousandths), rounded up; never negative."""
    value = parse_quantity(text) * (1000 if milli else 1)
    if value < 0:
        raise QuantityError(text, "negative")
    out = int(value.to_integral_value(rounding=ROUND_CEILING))
    if out > MAX_QUANTITY:
        raise QuantityError(text, "too large")
    return out


def resource_units(name: str, text: str | int | float | Decimal) -> int:
    """A Kubernetes resource amount in Strata's base unit: ``cpu`` in millicores, others as is."""
    return to_units(text, milli=name == "cpu")
