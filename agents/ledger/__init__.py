"""The run ledger: what every process of a run sends, and what the run-wide counts are.

Plain Python: a run's events in causal order and on one feed for the services (`book.RunLedger`,
`causal.CausalOrder`), its spans until it settles, its waits for a person, its budget and what
runs spend against their caps (`spend.SpendMeter`). `agents.ray.ledger_actor` hosts it on Ray,
as one or more shards (`shards`: which shard carries a run).
"""

from agents.ledger.book import RunLedger
from agents.ledger.causal import CausalOrder
from agents.ledger.shards import new_run_id, shard_of
from agents.ledger.spend import SpendEntry, SpendMeter, Spent

__all__ = [
    "CausalOrder",
    "RunLedger",
    "SpendEntry",
    "SpendMeter",
    "Spent",
    "new_run_id",
    "shard_of",
]
