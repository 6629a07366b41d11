"""Slot setters of frozen dataclasses, for building values without their ``__init__``.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (about 0.3 µs a
field); ``object.__new__`` plus one slot-descriptor call per field costs about a third of that
and gives an equal value. The builders that do so (``model.new_workload``, ``model.new_result``,
``placement.outputs``, ``placement.place``, ``service.place_request_decoder``) take their
setters from here, which
checks that they name every field in order: a field added to one of those classes fails loudly
at import instead of leaving a slot unset.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

Setter = Callable[[Any, Any], None]


def setters(cls: type, names: tuple[str, ...]) -> tuple[Setter, ...]:
    """The slot setters of ``cls``'s fields, which must be exactly ``names`` in order."""
    fields = tuple(f.name for f in dataclasses.fields(cls))
    if fields != names:
        raise TypeError(f"{cls.__name__} has fields {fields}, the builder sets {names}")
    return tuple(cls.__dict__[name].__set__ for name in names)
