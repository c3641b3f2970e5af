"""A store that is away for now is told from one that refuses what it was given, by the
error the driver raises: the first is waited for, the second is that write's fault."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError

from agents.core.store_faults import store_refused, store_unavailable


class _ShuttingDown(Exception):
    sqlstate = "57P03"  # PostgreSQL's "the database system is shutting down"


class _KeyTaken(Exception):
    sqlstate = "23505"


def test_a_server_shutting_down_is_away_for_now_and_a_taken_key_is_a_refusal() -> None:
    down = DBAPIError("SELECT 1", None, _ShuttingDown("the database system is shutting down"))
    assert store_unavailable(down) and not store_refused(down)
    taken = DBAPIError("INSERT", None, _KeyTaken("duplicate key value"))
    assert store_refused(taken) and not store_unavailable(taken)
