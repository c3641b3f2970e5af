"""Objects a config names by import path (`package.module:name`), with where an import failed.

Tools, workflows, output models, guardrail and check functions are all named so. A module that
does not import says why and where: the file and line of a syntax error, or of the statement
that raised while the module ran.

A team file's folder is on the import path of every process that reads it and of every agent
host (`on_import_path`), so `tools:search` finds `tools.py` beside the team file.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from typing import Any

__all__ = ["ImportProblem", "import_object", "on_import_path"]


class ImportProblem(ValueError):
    """The path names nothing importable; the message says why (and where, when it can)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot import {path}: {reason}")


def on_import_path(*folders: str) -> None:
    """Put these folders on this process's import path, after what is there already.

    After, not first: a module of the team's named like one of Python's own (`queue.py`,
    `email.py`) must not replace it in a process that imports it later.
    """
    for folder in folders:
        if folder not in sys.path:
            sys.path.append(folder)
            importlib.invalidate_caches()


def import_object(path: str) -> Any:
    """The object `package.module:name` (or `package.module.name`) names.

    Raises:
        ImportProblem: the path is malformed, its module does not import, or lacks the name.
    """
    module_name, sep, name = path.partition(":")
    if not sep:
        module_name, _, name = path.rpartition(".")
    if not module_name or not name:
        raise ImportProblem(path, "expected 'package.module:name'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise ImportProblem(path, f"no module named {exc.name!r}") from None
        raise ImportProblem(path, _where(exc)) from None
    except Exception as exc:  # the module ran and failed: say where
        raise ImportProblem(path, _where(exc)) from None
    found = module
    for part in name.split("."):
        if not hasattr(found, part):
            raise ImportProblem(path, f"module {module_name!r} has no attribute {name!r}")
        found = getattr(found, part)
    return found


def _where(exc: BaseException) -> str:
    """`SyntaxError at pkg/mod.py:12: invalid syntax`, or the module's line the error left."""
    if isinstance(exc, SyntaxError):
        return f"{type(exc).__name__} at {exc.filename}:{exc.lineno}: {exc.msg}"
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if frame.filename != __file__
        and "importlib" not in frame.filename
        and "<frozen" not in frame.filename
    ]
    at = f" at {frames[0].filename}:{frames[0].lineno}" if frames else ""
    return f"{type(exc).__name__}{at}: {exc}"
