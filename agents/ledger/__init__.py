"""The run ledger: what every process of a run sends, and what the run-wide counts are.

Its parts, plain Python: the runs' books (`book.RunLedger`: a run's events in causal order,
`causal.CausalOrder`, its spans until it settles, its budget), the feed the services follow
(`feed.EventFeed`), each run's desk of waits for a person (`desk.WaitDesk`), the open runs' step
logs and started effects (`steps.StepBook`), the spending meter under the caps
(`spend.SpendMeter`), and the store's writer (`writer.StoreWriter`, imported where it is used:
it needs SQLAlchemy). `agents.ray.ledger_actor` hosts them on Ray, as one or more shards
(`shards`: which shard carries a run).
"""

from agents.ledger.book import RunLedger
from agents.ledger.causal import CausalOrder
from agents.ledger.desk import WaitDesk
from agents.ledger.feed import EventFeed
from agents.ledger.shards import new_run_id, shard_of
from agents.ledger.spend import SpendEntry, SpendMeter, Spent
from agents.ledger.steps import StepBook

__all__ = [
    "CausalOrder",
    "EventFeed",
    "RunLedger",
    "SpendEntry",
    "SpendMeter",
    "Spent",
    "StepBook",
    "WaitDesk",
    "new_run_id",
    "shard_of",
]
