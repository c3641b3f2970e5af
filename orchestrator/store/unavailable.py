"""Telling a store that is away, stalled or locked from a bug in a query.

Apart from `records` (which the API's schemas import): it loads SQLAlchemy.
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

__all__ = ["STORE_UNAVAILABLE", "store_unavailable"]

# What a store call raises when the database is away, stalled or locked (not a bug in a query):
# the API answers 503 for it, and what can wait for the store does.
STORE_UNAVAILABLE: tuple[type[Exception], ...] = (
    OperationalError,
    InterfaceError,
    PoolTimeout,
    OSError,  # TimeoutError (a statement past its bound) and refused connections among them
)


def store_unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the database is away, stalled or locked (not a bug in a query).

    Besides `STORE_UNAVAILABLE`: a connection lost mid-statement, which drivers report as a
    plain DBAPI error (asyncpg's "connection was closed in the middle of operation").
    """
    if isinstance(exc, STORE_UNAVAILABLE):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)
