"""Baton's exceptions: one root, split by whose fault it is.

`ConfigError` is for the person who wrote the YAML; the others are run-time failures with
structured attributes. All of them survive pickling, since they cross Ray process boundaries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "BatonError",
    "ConfigError",
    "ConfigIssue",
    "DelegationRefused",
    "RefusalReason",
    "ToolImportError",
    "describe_error",
]


def describe_error(exc: BaseException, limit: int = 300) -> str:
    """`Type: first line of the message` (cut to `limit`), for errors shown in one line.

    Exception groups (anyio task groups wrap the real cause in them) are unwrapped first.
    """
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    first = text.splitlines()[0][:limit] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class BatonError(Exception):
    """Root of every error Baton raises."""


@dataclass(frozen=True)
class ConfigIssue:
    """One problem found in a config file, located as precisely as the YAML allows."""

    file: str
    line: int | None
    column: int | None
    field: str
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        field = f" {self.field}:" if self.field else ""
        return f"{where}: {self.severity}:{field} {self.message}"


class ConfigError(BatonError):
    """The agent-system config is invalid; `issues` lists every problem found."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.issues,))


class ToolImportError(BatonError):
    """A function tool's import path does not name an importable callable."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot load tool {path!r}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.reason))


RefusalReason = Literal[
    "unknown_agent", "not_allowed", "cycle", "depth", "deadline", "budget", "visits"
]


class DelegationRefused(BatonError):
    """A delegation failed the guard and was never dispatched."""

    def __init__(
        self,
        reason: RefusalReason,
        message: str,
        *,
        caller: str | None,
        target: str,
        chain: tuple[str, ...],
        limit: float | None = None,
    ) -> None:
        self.reason = reason
        self.message = message
        self.caller = caller
        self.target = target
        self.chain = chain
        self.limit = limit
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_refusal,
            (self.reason, self.message, self.caller, self.target, self.chain, self.limit),
        )


def _rebuild_refusal(
    reason: RefusalReason,
    message: str,
    caller: str | None,
    target: str,
    chain: tuple[str, ...],
    limit: float | None,
) -> DelegationRefused:
    return DelegationRefused(
        reason, message, caller=caller, target=target, chain=chain, limit=limit
    )
