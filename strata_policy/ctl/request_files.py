"""Read ctl's request files (YAML or JSON) into the proto JSON mapping, or say in one line why not.

A file is checked against the request's message descriptor as it is read, so every mistake is
reported where it was made: ``place.yaml:4:5: workloads[0].scopeID: unknown field; did you mean
'scopeId'?``. Field names may be camelCase or snake_case (as ``grpcurl -d`` and the proto JSON
mapping allow); enum values may drop their prefix and case (``order: fair``). Every
``map<string, int64>`` of the API is a resource map, and its amounts are Kubernetes quantities
(``cpu: 4``, ``memory: 4Gi``, ``gpu: 0.5``, see ``model.quantity``) unless ``raw`` is set, in
which case they are integers in base units, exactly what the server receives.

The walk follows the descriptor rather than a hand-written schema so that a field added to the
protos is accepted here the day it is generated. Each decoded field remembers its line
(``Decoded.lines``), so an error the server reports about a field path can point at the file too.
"""

from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

from strata_policy.model.quantity import QuantityError, parse_quantity

_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
}
_FLOATS = frozenset({FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT})
# Fields of other formats that people paste into a request file, and what to write instead.
_ELSEWHERE = {
    "spread_key": "write spread: {topologyKey: ...}",
    "arrival_ms": "a simulate trace's pending workload: push nodes and scopes, send the "
    "workloads with ctl admit or ctl place",
    "departure_ms": "a simulate trace field; ctl files have no departures",
    "requests": "did you mean 'request'? (one replica's amounts, like a pod's requests)",
    "limits": "a workload has no limits; a scope's 'limit' caps its subtree",
    "nodes": "a snapshot's field: send snapshots with ctl push",
    "scopes": "a snapshot's field: send snapshots with ctl push, one scope with ctl quota set",
}


@dataclass(frozen=True)
class FileError(Exception):
    """A request file that cannot be sent: where (file, line, column, field) and why."""

    path: str
    message: str
    line: int = 0
    column: int = 0
    field_path: str = ""

    def __str__(self) -> str:
        where = self.path + (f":{self.line}" if self.line else "")
        where += f":{self.column}" if self.line and self.column else ""
        return f"{where}: {self.field_path + ': ' if self.field_path else ''}{self.message}"


@dataclass
class Decoded:
    """A request in the proto JSON mapping, and the line of every field path in its file."""

    path: str
    data: dict[str, Any]
    lines: dict[str, int] = field(default_factory=dict)


def read_text(path: str) -> str:
    """The file's text (``-`` = standard input); a missing or unreadable file is a ``FileError``."""
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileError(path, "no such file") from None
    except IsADirectoryError:
        raise FileError(path, "is a directory, not a file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FileError(path, f"cannot read: {exc}") from None


def decode(path: str, text: str, message: Any, *, raw: bool = False) -> Decoded:
    """``text`` read as ``message``, a message ``Descriptor`` (typed ``Any``: the C and the
    Python protobuf runtimes have distinct descriptor types); the top level must be a mapping."""
    if path.endswith(".json"):
        text = text.replace("\t", " ")  # JSON allows tabs between tokens, YAML does not
    loader = None
    try:
        loader = yaml.SafeLoader(text)
        node = loader.get_single_node()
        if node is None:
            raise FileError(path, f"is empty; expected a mapping ({message.name})")
        walker = _Walker(path, raw, loader)
        return Decoded(path, walker.message(node, message, ""), walker.lines)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "syntax error"
        if exc.context and problem.startswith("but "):  # "expected one document, but found..."
            problem = f"{exc.context}, {problem}"
        if "block" in problem or "indentation" in problem:
            problem += " (check the indentation)"
        raise FileError(
            path,
            f"{'JSON' if path.endswith('.json') else 'YAML'} syntax: {problem}",
            mark.line + 1 if mark else 0,
            mark.column + 1 if mark else 0,
        ) from None
    except yaml.YAMLError as exc:
        raise FileError(path, f"syntax: {exc}") from None
    except RecursionError:
        raise FileError(path, "is nested too deeply to be a request") from None
    finally:
        if loader is not None:
            loader.dispose()


def top_level_keys(path: str, text: str) -> set[str]:
    """The keys of the file's top-level mapping (empty when it is not one, or not readable:
    ``decode`` then reports why), to choose which message to read it as."""
    if path.endswith(".json"):
        text = text.replace("\t", " ")
    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError):
        return set()
    return {str(k) for k in data} if isinstance(data, dict) else set()


def load(path: str, message: Any, *, raw: bool = False) -> Decoded:
    """Read and decode one file."""
    return decode(path, read_text(path), message, raw=raw)


def did_you_mean(word: str, choices: list[str]) -> str:
    """``; did you mean 'x'?`` for the closest choice (ignoring case and ``_``), or ``""``."""
    norm = {c.lower().replace("_", ""): c for c in choices}
    key = word.lower().replace("_", "").replace("-", "")
    best = norm.get(key) or next(iter(difflib.get_close_matches(key, list(norm), n=1)), None)
    if best is None:
        return ""
    return f"; did you mean {norm.get(best, best)!r}?"


class _Walker:
    """Walks a composed YAML node tree and its message descriptor side by side."""

    def __init__(self, path: str, raw: bool, loader: yaml.SafeLoader) -> None:
        self.path = path
        self.raw = raw
        self.constructor = loader
        self.lines: dict[str, int] = {}

    def fail(self, node: yaml.Node, where: str, message: str) -> FileError:
        mark = node.start_mark
        return FileError(self.path, message, mark.line + 1, mark.column + 1, where)

    def message(self, node: yaml.Node, desc: Descriptor, where: str) -> dict[str, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, where, f"expected a mapping ({desc.name}), got {_kind(node)}")
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            fd = desc.fields_by_camelcase_name.get(key) or desc.fields_by_name.get(key)
            here = f"{where}.{key}" if where else key
            if fd is None:
                snake, camel = [f.name for f in desc.fields], [f.json_name for f in desc.fields]
                names = camel + snake if "_" in key else snake + camel  # the key's own style wins
                hint = f"; {_ELSEWHERE[key]}" if key in _ELSEWHERE else did_you_mean(key, names)
                if desc.name == "RunningWorkload" and not hint:
                    hint = (
                        "; a running workload nests its fields under 'workload:', beside its "
                        "'placements'; pending workloads go to ctl admit or ctl place"
                    )
                known = ", ".join(f.json_name for f in desc.fields)
                raise self.fail(
                    key_node, here, f"unknown field in {desc.name}{hint or f' (fields: {known})'}"
                )
            if fd.json_name in out:
                raise self.fail(key_node, here, "given twice")
            self.lines[here] = key_node.start_mark.line + 1
            if _is_null(value_node):
                continue
            out[fd.json_name] = self.field(value_node, fd, here)
        return out

    def field(self, node: yaml.Node, fd: FieldDescriptor, where: str) -> Any:
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            return self.map(node, fd.message_type, where)
        if fd.is_repeated:
            if not isinstance(node, yaml.SequenceNode):
                raise self.fail(node, where, f"expected a list, got {_kind(node)}")
            return [self.single(item, fd, f"{where}[{i}]") for i, item in enumerate(node.value)]
        return self.single(node, fd, where)

    def map(self, node: yaml.Node, entry: Descriptor, where: str) -> dict[str, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, where, f"expected a mapping, got {_kind(node)}")
        value_fd = entry.fields_by_name["value"]
        resources = value_fd.type == FieldDescriptor.TYPE_INT64
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            here = f"{where}.{key}"
            if key in out:
                raise self.fail(key_node, here, "given twice")
            self.lines[here] = key_node.start_mark.line + 1
            if resources:
                out[key] = str(self.amount(value_node, key, here))
            else:
                out[key] = self.single(value_node, value_fd, here)
        return out

    def amount(self, node: yaml.Node, resource: str, where: str) -> int:
        if not isinstance(node, yaml.ScalarNode) or _is_null(node):
            raise self.fail(node, where, f"expected an amount such as 4 or 4Gi, got {_kind(node)}")
        text = str(node.value)
        if self.raw:
            if not text.isdigit():
                raise self.fail(
                    node,
                    where,
                    f"{text!r} is not an integer in base units (--raw); "
                    "without --raw, quantities such as 4, 500m or 4Gi are read",
                )
            return int(text)
        try:
            return parse_quantity(resource, text)
        except QuantityError as exc:
            raise self.fail(node, where, str(exc)) from None

    def single(self, node: yaml.Node, fd: FieldDescriptor, where: str) -> Any:
        if fd.message_type is not None:
            return self.message(node, fd.message_type, where)
        if not isinstance(node, yaml.ScalarNode):
            raise self.fail(node, where, f"expected a single value, got {_kind(node)}")
        if fd.enum_type is not None:
            return self.enum(node, fd.enum_type, where)
        try:
            value = self.constructor.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError) as exc:
            raise self.fail(node, where, f"cannot read {node.value!r}: {exc}") from None
        if fd.type == FieldDescriptor.TYPE_BOOL:
            if not isinstance(value, bool):
                raise self.fail(node, where, f"expected true or false, got {node.value!r}")
            return value
        if fd.type in _INT_RANGES:
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise self.fail(node, where, f"expected a whole number, got {node.value!r}")
            try:
                number = int(str(value))
            except ValueError:
                raise self.fail(
                    node, where, f"expected a whole number, got {node.value!r}"
                ) from None
            low, high = _INT_RANGES[fd.type]
            if not low <= number <= high:
                raise self.fail(node, where, f"{number} is out of range [{low}, {high}]")
            return number
        if fd.type in _FLOATS:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise self.fail(node, where, f"expected a number, got {node.value!r}")
            return float(value)
        return str(node.value)

    def enum(self, node: yaml.ScalarNode, enum: EnumDescriptor, where: str) -> str:
        text = str(node.value).strip().upper()
        prefix = _enum_prefix(enum)
        for name in (text, prefix + text):
            if name in enum.values_by_name:
                return name
        shorts = [v.name.removeprefix(prefix) for v in enum.values if v.number != 0]
        hint = did_you_mean(text, shorts)
        raise self.fail(
            node,
            where,
            f"unknown {enum.name} {node.value!r}{hint or ''} (one of {', '.join(shorts)})",
        )


def _enum_prefix(enum: EnumDescriptor) -> str:
    """``ORDER_`` for ``Order``: buf's STANDARD rules prefix every value with the enum's name."""
    return (
        "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(enum.name)).upper() + "_"
    )


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return f"{node.value!r}" if node.value != "" else "nothing"
