"""Resource amounts: integers in base units, with the reserved names and human formatting.

`cpu` is in millicores, `memory` in bytes, `gpu` in milli-GPUs (1000 = one device); any other
name is a plain scalar. Amounts are never negative; the arithmetic here never produces a negative
amount silently (``subtract`` floors at zero only where the caller asks for the positive part).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

CPU = "cpu"
MEMORY = "memory"
GPU = "gpu"
RESERVED = (CPU, MEMORY, GPU)
MILLI_PER_GPU = 1000
MAX_AMOUNT = 2**62  # keeps every sum of a snapshot's amounts clear of int64 overflow

Resources = Mapping[str, int]


def add(a: Resources, b: Resources) -> dict[str, int]:
    """``a + b`` per resource (absent = 0)."""
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) + amount
    return out


def subtract(a: Resources, b: Resources) -> dict[str, int]:
    """``a - b`` per resource (absent = 0); may be negative."""
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) - amount
    return out


def scale(a: Resources, factor: int) -> dict[str, int]:
    """``a × factor`` per resource."""
    return {name: amount * factor for name, amount in a.items()}


def total(items: Iterable[Resources]) -> dict[str, int]:
    """The sum of many amounts."""
    out: dict[str, int] = {}
    for item in items:
        for name, amount in item.items():
            out[name] = out.get(name, 0) + amount
    return out


def nonzero(a: Resources) -> dict[str, int]:
    """``a`` without its zero entries (the canonical form for comparisons and output)."""
    return {name: amount for name, amount in a.items() if amount != 0}


def positive_part(a: Resources) -> dict[str, int]:
    """Entries of ``a`` above zero."""
    return {name: amount for name, amount in a.items() if amount > 0}


def is_gpu_share(gpu_milli: int) -> bool:
    """A request below one device: needs one device with that much free."""
    return 0 < gpu_milli < MILLI_PER_GPU


def valid_gpu_request(gpu_milli: int) -> bool:
    """Below 1000 (a share of one device) or a whole number of devices."""
    return gpu_milli >= 0 and (gpu_milli < MILLI_PER_GPU or gpu_milli % MILLI_PER_GPU == 0)


_GIB = 1024**3
_UNITS_MEMORY = {
    "": 1,
    "k": 1000,
    "m": 1000**2,
    "g": 1000**3,
    "t": 1000**4,
    "ki": 1024,
    "mi": 1024**2,
    "gi": 1024**3,
    "ti": 1024**4,
}
_AMOUNT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def format_amount(resource: str, amount: int) -> str:
    """A human form: ``12 CPU``, ``48 GiB``, ``6.5 GPU``; other resources as plain numbers."""
    if resource == CPU:
        return f"{_trim(amount / 1000)} CPU"
    if resource == GPU:
        return f"{_trim(amount / MILLI_PER_GPU)} GPU"
    if resource == MEMORY:
        for unit, size in (("TiB", 1024**4), ("GiB", _GIB), ("MiB", 1024**2), ("KiB", 1024)):
            if abs(amount) >= size:
                return f"{_trim(amount / size)} {unit}"
        return f"{amount} B"
    return str(amount)


def format_resources(amounts: Resources) -> str:
    """``cpu=12 CPU, gpu=6.5 GPU`` in reserved-first order, or ``-`` when empty."""
    names = sorted(amounts, key=lambda n: (RESERVED.index(n) if n in RESERVED else 3, n))
    return ", ".join(format_amount(n, amounts[n]) for n in names) if names else "-"


def parse_amount(resource: str, text: str) -> int:
    """Parse a human amount into base units: ``cpu=8`` or ``500m``, ``memory=48Gi``, ``gpu=0.5``.

    CPU and GPU take whole or fractional units (``m`` suffix = milli); memory takes Kubernetes
    quantities (``Ki``/``Mi``/``Gi``/``Ti``, ``k``/``M``/``G``/``T``, ``B``/``iB`` tolerated);
    other resources take plain integers. Raises ``ValueError`` on anything else.
    """
    match = _AMOUNT.match(text)
    if not match:
        raise ValueError(f"cannot parse {resource} amount {text!r}")
    number, unit = match.group(1), match.group(2).lower()
    value = float(number)
    if resource in (CPU, GPU):
        unit = unit.removesuffix("cpu").removesuffix("gpu")
        if unit == "m":
            return round(value)
        if unit:
            raise ValueError(f"unknown {resource} unit {match.group(2)!r} in {text!r}")
        return round(value * 1000)
    if resource == MEMORY:
        unit = unit.removesuffix("b")
        if unit not in _UNITS_MEMORY:
            raise ValueError(f"unknown memory unit {match.group(2)!r} in {text!r}")
        return round(value * _UNITS_MEMORY[unit])
    if unit or "." in number:
        raise ValueError(f"{resource} takes a whole number, not {text!r}")
    return int(number)


def parse_resources(text: str) -> dict[str, int]:
    """Parse ``gpu=8,cpu=64,memory=256Gi`` into base units."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, amount = part.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"expected NAME=AMOUNT, got {part!r}")
        out[name.strip()] = parse_amount(name.strip(), amount)
    return out


def _trim(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")
