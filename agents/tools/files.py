"""Built-in read-only file tools over one base directory.

Every path a model gives is relative to the base directory and must stay inside it: absolute
paths, `..` that climbs out, and symbolic links (anywhere on the path) are refused, so a link
planted in the tree cannot point a tool elsewhere. Reads and searches are bounded in size.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from agents.core.spec import FileToolsSpec
from agents.tools.base import FunctionTool

__all__ = ["FILE_TOOL_NAMES", "FileAccessError", "FileTools"]

FILE_TOOL_NAMES = ("read_file", "list_files", "search_files", "file_info")


class FileAccessError(ValueError):
    """A path the file tools refuse, with the reason."""


class FileTools:
    """The file tools of one agent, bound to its base directory.

    Args:
        spec: the base directory and the size limits.
        config_dir: a relative `base_dir` is resolved from here (the config file's folder).
    """

    def __init__(self, spec: FileToolsSpec, config_dir: Path | None = None) -> None:
        base = Path(spec.base_dir).expanduser()
        if not base.is_absolute():
            base = (config_dir or Path.cwd()) / base
        self.base = base.resolve()
        self.spec = spec

    def tools(self) -> list[FunctionTool]:
        """The file tools, bound to this base folder."""
        built = []
        for fn in (self.read_file, self.list_files, self.search_files, self.file_info):
            tool = FunctionTool.from_callable(fn)
            tool.idempotent = True  # they only read
            built.append(tool)
        return built

    def resolve(self, path: str) -> Path:
        """`path` inside the base directory, or FileAccessError saying why not."""
        if "\x00" in path:
            raise FileAccessError("the path contains a NUL byte")
        relative = PurePosixPath(path.replace("\\", "/"))
        if relative.is_absolute() or (relative.parts and relative.parts[0].endswith(":")):
            raise FileAccessError(f"{path!r} is absolute; give a path relative to the base folder")
        current = self.base
        for part in relative.parts:
            if part in ("", "."):
                continue
            if part == "..":
                raise FileAccessError(f"{path!r} leaves the base folder ('..' is not allowed)")
            current = current / part
            if current.is_symlink():
                raise FileAccessError(f"{path!r} goes through a symbolic link, which is refused")
        # Belt and braces: whatever the checks above missed, the real path must be inside.
        if not current.resolve().is_relative_to(self.base):
            raise FileAccessError(f"{path!r} is outside the base folder")
        return current

    def _show(self, path: Path) -> str:
        return path.relative_to(self.base).as_posix() or "."

    def read_file(self, path: str, offset: int = 0) -> str:
        """Read a text file in the base folder (long files are cut; read on with offset).

        Args:
            path: relative to the base folder, for example "docs/intro.md".
            offset: the byte to start reading at.
        """
        target = self.resolve(path)
        if not target.is_file():
            raise FileAccessError(f"{path!r} is not a file")
        limit = self.spec.max_read_bytes
        with target.open("rb") as f:
            f.seek(max(0, offset))
            data = f.read(limit + 1)
        text = data[:limit].decode("utf-8", errors="replace")
        if len(data) > limit:
            text += f"\n[cut at {limit} bytes; read on with offset={max(0, offset) + limit}]"
        return text

    def _walk(self, pattern: str) -> list[Path]:
        found = []
        for root, dirs, files in os.walk(self.base, followlinks=False):
            dirs[:] = sorted(d for d in dirs if not (Path(root) / d).is_symlink())
            for name in sorted(files):
                full = Path(root) / name
                if full.is_symlink():
                    continue
                if fnmatch.fnmatch(self._show(full), pattern) or fnmatch.fnmatch(name, pattern):
                    found.append(full)
        return found

    def list_files(self, pattern: str = "*") -> list[str]:
        """List the files in the base folder whose path or name matches a glob pattern.

        Args:
            pattern: for example "*.md" or "docs/*.txt"; "*" lists everything.
        """
        found = self._walk(pattern)
        shown = [self._show(p) for p in found[: self.spec.max_results]]
        if len(found) > self.spec.max_results:
            shown.append(f"[{len(found) - self.spec.max_results} more not shown]")
        return shown

    def search_files(self, text: str, pattern: str = "*") -> list[str]:
        """Find lines containing some text (case-insensitive) in the base folder's files.

        Args:
            text: what to look for.
            pattern: only files whose path or name matches this glob.
        """
        if not text:
            raise FileAccessError("give some text to search for")
        needle = text.lower()
        hits: list[str] = []
        for path in self._walk(pattern):
            if path.stat().st_size > self.spec.max_read_bytes:
                continue
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            for number, line in enumerate(lines, 1):
                if needle in line.lower():
                    hits.append(f"{self._show(path)}:{number}: {line.strip()[:200]}")
                    if len(hits) >= self.spec.max_results:
                        return [*hits, "[more matches not shown]"]
        return hits

    def file_info(self, path: str) -> dict[str, Any]:
        """Size, kind and modification time of a file or folder in the base folder.

        Args:
            path: relative to the base folder ("." for the folder itself).
        """
        target = self.resolve(path)
        info = target.lstat()
        return {
            "path": self._show(target),
            "kind": "folder" if stat.S_ISDIR(info.st_mode) else "file",
            "size_bytes": info.st_size,
            "modified": datetime.fromtimestamp(info.st_mtime, UTC).isoformat(),
        }
