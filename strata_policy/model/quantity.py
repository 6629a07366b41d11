"""Kubernetes resource quantities (``"4"``, ``"500m"``, ``4Gi``, ``0.5``) ↔ integers in base units.

One parser for every human-written amount: ctl's files, ``ctl quota set`` flags and simulate's
JSON traces all come through ``parse_quantity``, so ``cpu: 4`` means four CPUs everywhere.

The grammar is Kubernetes' ``resource.Quantity``: a non-negative decimal number followed by at
most one suffix, binary (``Ki Mi Gi Ti Pi Ei``), decimal SI (``n u m k M G T P E``, case
matters: ``m`` is milli, ``M`` mega) or an exponent (``e3``, ``E-2``). The quantity is then put
in the resource's base unit: ``cpu`` and ``gpu`` count thousandths (``cpu: 4`` = 4000
millicores, ``gpu: 0.5`` = 500 milli-GPUs), every other resource counts its own unit
(``memory: 4Gi`` = 4·2^30 bytes). The result must be a whole number of base units: ``0.5m`` CPU
or ``1.5`` bytes are refused, where Kubernetes would round up, because an amount that silently
changes on its way in is exactly the surprise this parser exists to prevent.
"""

from __future__ import annotations

import difflib
import re
from fractions import Fraction

MILLI_RESOURCES = ("cpu", "gpu")
MAX_AMOUNT = 2**62  # as model.resources.MAX_AMOUNT: every sum of a snapshot stays in int64

BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL_SUFFIXES = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
SUFFIXES: dict[str, Fraction] = {
    **DECIMAL_SUFFIXES,
    **{k: Fraction(v) for k, v in BINARY_SUFFIXES.items()},
}
_QUANTITY = re.compile(r"^\+?(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<suffix>.*)$")
_EXPONENT = re.compile(r"^[eE](?P<exp>[+-]?[0-9]+)$")
# Common spellings that are not Kubernetes suffixes, and what the writer most likely meant.
_MISSPELLED = {"B": "", "KB": "k", "K": "k", "KiB": "Ki", "MB": "M", "MiB": "Mi", "GB": "G"}
_MISSPELLED |= {"GiB": "Gi", "TB": "T", "TiB": "Ti", "PB": "P", "PiB": "Pi"}


class QuantityError(ValueError):
    """An amount that is not a quantity of its resource; the message says why, with a hint."""


def base_scale(resource: str) -> int:
    """How many base units one unit of ``resource`` is: 1000 for cpu and gpu, else 1."""
    return 1000 if resource in MILLI_RESOURCES else 1


def parse_quantity(resource: str, value: str | int) -> int:
    """``value`` (a Kubernetes quantity) in ``resource``'s base unit; raises ``QuantityError``."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise QuantityError("expected a quantity such as 4, 500m or 4Gi")
    text = str(value).strip()
    if text.startswith("-"):
        raise QuantityError(f"{text!r} is negative; amounts are never negative")
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(f"cannot parse {text!r} as a quantity (examples: 4, 500m, 4Gi)")
    number = Fraction(match.group("number"))
    suffix = match.group("suffix")
    exponent = _EXPONENT.match(suffix)
    if exponent:
        exp = int(exponent.group("exp"))
        if abs(exp) > 30:
            raise QuantityError(f"{text!r} has an exponent out of range")
        multiplier = Fraction(10) ** exp
    elif suffix in SUFFIXES:
        multiplier = SUFFIXES[suffix]
    else:
        raise QuantityError(f"{text!r} has an unknown suffix {suffix!r}{_hint(suffix)}")
    amount = number * multiplier * base_scale(resource)
    if amount.denominator != 1:
        smallest = "1m" if resource in MILLI_RESOURCES else "1"
        raise QuantityError(
            f"{text!r} is not a whole number of base units (the smallest {resource} "
            f"amount is {smallest})"
        )
    if amount > MAX_AMOUNT:
        raise QuantityError(f"{text!r} is too large (at most 2^62 base units)")
    return int(amount)


def format_quantity(resource: str, amount: int) -> str:
    """The shortest exact quantity for ``amount`` base units: ``parse_quantity`` gives it back.

    cpu and gpu: whole units as ``4``, the rest as a decimal (``0.5``, ``2.25``); other resources:
    the largest binary suffix that divides the amount exactly (``4Gi``), else the plain number.
    """
    if amount < 0:
        raise QuantityError(f"{resource}: {amount} is negative; amounts are never negative")
    scale = base_scale(resource)
    if scale > 1:
        whole, milli = divmod(amount, scale)
        return str(whole) if not milli else f"{whole}.{milli:03d}".rstrip("0")
    for suffix, size in reversed(BINARY_SUFFIXES.items()):
        if amount and amount % size == 0:
            return f"{amount // size}{suffix}"
    return str(amount)


def _hint(suffix: str) -> str:
    if suffix in _MISSPELLED:
        meant = _MISSPELLED[suffix]
        return f"; did you mean {meant!r}?" if meant else "; write bytes as a plain number"
    close = [s for s in SUFFIXES if s and s.lower() == suffix.lower()]
    close = close or [s for s in BINARY_SUFFIXES if suffix.isalpha() and s[0] == suffix[0].upper()]
    close = close or difflib.get_close_matches(suffix, [s for s in SUFFIXES if s], n=1)
    return (
        f"; did you mean {close[0]!r}?" if close else " (one of Ki Mi Gi Ti Pi Ei, m k M G T P E)"
    )
