"""YAML parsing that remembers where every value came from, for errors that name a line.

The parser is bounded: a config is read by every `baton` command and by the service, so a
small hostile file (nested aliases, a "billion laughs") must not exhaust memory or time. Size,
nesting, aliases and the size the document expands to through its aliases are all capped, and
the error says which cap was hit and where.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError

from agents.core.errors import ConfigIssue

__all__ = ["MAX_CONFIG_BYTES", "Located", "parse_yaml", "validation_issues"]

Path = tuple[str | int, ...]

MAX_CONFIG_BYTES = 1 << 20
# Far above any real agent system (the default team has ~100 values), far below harm.
MAX_DEPTH = 64
MAX_ALIASES = 1_000
MAX_EXPANDED_VALUES = 100_000


class _TooLarge(yaml.MarkedYAMLError):  # type: ignore[misc]  # PyYAML is untyped
    """A bound of the loader was hit (raised with the mark of the node that hit it)."""


class _BoundedLoader(yaml.SafeLoader):  # type: ignore[misc]
    """PyYAML's safe loader, counting aliases and nesting while it composes."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        mark = self.peek_event().start_mark
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _TooLarge(problem=f"more than {MAX_ALIASES} aliases", problem_mark=mark)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _TooLarge(problem=f"nested more than {MAX_DEPTH} levels deep", problem_mark=mark)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a document that aliases expand past the bound, or that contains itself."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise _TooLarge(
                problem="an alias refers to a value that contains it", problem_mark=node.start_mark
            )
        open_.add(key)
        total = 1
        if isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total += sum(size(item) for item in node.value)
        open_.discard(key)
        if total > MAX_EXPANDED_VALUES:
            raise _TooLarge(
                problem=f"aliases expand it to more than {MAX_EXPANDED_VALUES:,} values",
                problem_mark=node.start_mark,
            )
        sizes[key] = total
        return total

    size(root)


@dataclass
class Located:
    """Parsed YAML data plus the (line, column) of each value, keyed by its path."""

    file: str
    data: Any
    marks: dict[Path, tuple[int, int]] = field(default_factory=dict)
    issues: list[ConfigIssue] = field(default_factory=list)

    def where(self, path: Path) -> tuple[int | None, int | None]:
        """The closest known location of `path` (its own, or its nearest parent's)."""
        for end in range(len(path), -1, -1):
            mark = self.marks.get(tuple(path[:end]))
            if mark is not None:
                return mark
        return None, None

    def issue(self, path: Path, message: str, severity: str = "error") -> ConfigIssue:
        """A config problem at `path`, located in the file where the YAML allows."""
        line, column = self.where(path)
        return ConfigIssue(self.file, line, column, format_path(path), message, severity)  # type: ignore[arg-type]


def format_path(path: Path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _walk(node: yaml.Node, path: Path, out: Located) -> None:
    out.marks[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in seen:
                out.marks[(*path, key)] = (
                    key_node.start_mark.line + 1,
                    key_node.start_mark.column + 1,
                )
                out.issues.append(out.issue((*path, key), f"duplicate key {key!r}"))
            seen.add(key)
            _walk(value_node, (*path, key), out)
            # Point at the key, which is where a reader looks for a field.
            out.marks[(*path, key)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), out)


def _position(data: str | bytes, at: int) -> tuple[int | None, int | None]:
    """The line and column (from 1) of offset `at` in `data`."""
    text = data if isinstance(data, str) else data.decode("latin-1")  # one char per byte
    return text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1


def parse_yaml(source: str | bytes, file: str) -> Located:
    """Parse `source` (bytes must be UTF-8); a problem is an issue with a line, not an exception."""
    located = Located(file=file, data=None)
    if len(source) > MAX_CONFIG_BYTES:
        message = f"the file is larger than {MAX_CONFIG_BYTES:,} bytes"
        located.issues.append(ConfigIssue(file, None, None, "", message))
        return located
    try:
        text = source if isinstance(source, str) else source.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _position(source, exc.start)
        message = f"not UTF-8 text: byte 0x{exc.object[exc.start]:02x} cannot be decoded"
        located.issues.append(ConfigIssue(file, line, column, "", message))
        return located
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)
        node = loader.get_single_node()
        if node is None:
            located.marks[()] = (1, 1)  # an empty file: its problem is at its start
        else:
            _check_expansion(node)
            _walk(node, (), located)  # before construction, which rewrites merge keys (<<)
            located.data = loader.construct_document(node)
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        line, column = _position(text, exc.position)
        problem = f"YAML: control character #x{exc.character:04x} is not allowed"
        located.issues.append(ConfigIssue(file, line, column, "", problem))
        return located
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        column = mark.column + 1 if mark else None
        problem = " ".join(filter(None, [exc.context, exc.problem])) or "invalid YAML"
        kind = (
            "YAML refused (a bound on config files)"
            if isinstance(exc, _TooLarge)
            else "YAML syntax"
        )
        located.issues.append(ConfigIssue(file, line, column, "", f"{kind}: {problem}"))
        return located
    except yaml.YAMLError as exc:
        located.issues.append(ConfigIssue(file, None, None, "", f"YAML: {exc}"))
        return located
    finally:
        if loader is not None:
            loader.dispose()
    return located


def validation_issues(src: Located, exc: ValidationError) -> list[ConfigIssue]:
    """A model's validation errors of `src`'s data, each located in the file."""
    errors = exc.errors()
    paths = [tuple(e["loc"]) for e in errors]
    issues = []
    for error, path in zip(errors, paths, strict=True):
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = f"unknown field {path[-1]!r}"
        elif error["type"] == "missing":
            message = f"required field {path[-1]!r} is missing"
        elif error["type"] == "too_short" and any(
            p[: len(path)] == path and p != path for p in paths
        ):
            continue  # a list is "too short" only because one of its items was invalid
        issues.append(src.issue(path, message))
    return issues
