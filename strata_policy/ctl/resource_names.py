"""Resource names in a request checked against the cluster's, with a "did you mean".

The server accepts any resource name (``rdma``, ``ephemeral-storage``), so a typo such as
``gpus`` would only show up later as a NO_HEADROOM nobody can explain. ctl knows the names the
cluster's nodes have (and the reserved ``cpu``, ``memory``, ``gpu``) and refuses others before
sending, naming the line and the closest known name.
"""

from __future__ import annotations

from collections.abc import Iterable

from strata_policy.ctl.request_files import Decoded, FileError, did_you_mean

# The resource maps a request file may carry (the same spelling in snake_case and camelCase).
RESOURCE_FIELDS = ("request", "guarantee", "limit", "capacity")


def unknown_name(name: str, known: Iterable[str], where: str) -> str:
    """The message for a resource ``name`` that ``known`` lacks, or ``""`` when it is known."""
    names = sorted(set(known))
    if name in names:
        return ""
    hint = did_you_mean(name, names)
    return f"no resource {name!r} in {where}{hint} (it has {', '.join(names)})"


def check_names(decoded: Decoded, known: Iterable[str], where: str) -> None:
    """Raise ``FileError`` at the first resource name of ``decoded`` that ``known`` lacks."""
    names = set(known)
    for path, line in decoded.lines.items():
        parent, _, name = path.rpartition(".")
        if parent.rpartition(".")[2] not in RESOURCE_FIELDS or parent.endswith("capacity"):
            continue
        message = unknown_name(name, names, where)
        if message:
            raise FileError(decoded.path, message, line, 0, path)
