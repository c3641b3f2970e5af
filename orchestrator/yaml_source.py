"""YAML parsing that remembers where every value came from, for errors that name a line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from agents.core.errors import ConfigIssue

__all__ = ["Located", "parse_yaml"]

Path = tuple[str | int, ...]


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


def parse_yaml(text: str, file: str) -> Located:
    """Parse `text`; a syntax error becomes an issue with its line and column, not an exception."""
    located = Located(file=file, data=None)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        located.data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        column = mark.column + 1 if mark else None
        problem = " ".join(filter(None, [exc.context, exc.problem])) or "invalid YAML"
        located.issues.append(ConfigIssue(file, line, column, "", f"YAML syntax: {problem}"))
        return located
    except yaml.YAMLError as exc:
        located.issues.append(ConfigIssue(file, None, None, "", f"YAML: {exc}"))
        return located
    if node is not None:
        _walk(node, (), located)
    return located
