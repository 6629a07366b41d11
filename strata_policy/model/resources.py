"""Resource amounts: integers in base units, with the reserved names and human formatting.

`cpu` is in millicores, `memory` in bytes, `gpu` in milli-GPUs (1000 = one device); any other
name is a plain scalar. Amounts are never negative; the arithmetic here never produces a negative
amount silently (``subtract`` floors at zero only where the caller asks for the positive part).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from strata_policy.model.quantity import QuantityError, parse_quantity

CPU = "cpu"
MEMORY = "memory"
GPU = "gpu"
RESERVED = (CPU, MEMORY, GPU)
MILLI_PER_GPU = 1000
MAX_AMOUNT = 2**62  # one amount, and a cluster's total of one resource (state.validate)

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


_GIB = 1024**3


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
    """A Kubernetes quantity in ``resource``'s base units (``cpu=8`` or ``500m``, ``memory=48Gi``,
    ``gpu=0.5``); raises ``ValueError`` (``QuantityError``). See ``model.quantity``."""
    return parse_quantity(resource, text)


def parse_resources(text: str) -> dict[str, int]:
    """Parse ``gpu=8,cpu=64,memory=256Gi`` into base units; a name given twice is an error."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, amount = part.partition("=")
        name = name.strip()
        if not sep or not name:
            raise QuantityError(f"expected NAME=AMOUNT (e.g. gpu=8,memory=64Gi), got {part!r}")
        if name in out:
            raise QuantityError(f"{name} is given twice")
        try:
            out[name] = parse_quantity(name, amount)
        except QuantityError as exc:
            raise QuantityError(f"{name}: {exc}") from None
    return out


def _trim(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")
