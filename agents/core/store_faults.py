"""Telling a store that is away, stalled or locked from one that refuses what it was given.

For every writer of the run store (the service's `orchestrator.store`, the ledger's writer).
Apart from `storable` (which the API's schemas import): it loads SQLAlchemy.
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

__all__ = ["STORE_UNAVAILABLE", "store_refused", "store_unavailable"]

# What a store call raises when the database is away, stalled or locked (not a bug in a query):
# the API answers 503 for it, and what can wait for the store does.
STORE_UNAVAILABLE: tuple[type[Exception], ...] = (
    OperationalError,
    InterfaceError,
    PoolTimeout,
    OSError,  # TimeoutError (a statement past its bound) and refused connections among them
)


# PostgreSQL's SQLSTATEs of a server that is away for now: a connection exception (class 08),
# a shutdown (57P01 to 57P03: "the database system is shutting down"), too many connections.
_AWAY_CLASSES = ("08",)
_AWAY_CODES = frozenset({"57P01", "57P02", "57P03", "53300"})


def store_unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the database is away, stalled or locked (not a bug in a query).

    Besides `STORE_UNAVAILABLE`: a connection lost mid-statement, which drivers report as a
    plain DBAPI error (asyncpg's "connection was closed in the middle of operation"), and a
    server that says it is shutting down or full (its SQLSTATE).
    """
    if isinstance(exc, STORE_UNAVAILABLE):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    code = str(getattr(exc.orig, "sqlstate", None) or "")
    return code.startswith(_AWAY_CLASSES) or code in _AWAY_CODES


def store_refused(exc: BaseException) -> bool:
    """Whether the database refused a statement for what it holds: that write's fault.

    A value too long for its column, a key taken: not an outage of the store.
    """
    return isinstance(exc, DBAPIError) and not store_unavailable(exc)
