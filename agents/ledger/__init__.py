"""The run ledger: what every process of a run sends, and what the run-wide counts are.

Plain Python: a run's events in causal order and on one feed for the services (`book.RunLedger`,
`causal.CausalOrder`), its spans until it settles, its waits for a person, its budget and what
runs spend against their caps (`spend.SpendMeter`). `agents.ray.ledger_actor` hosts it on Ray.
"""

from agents.ledger.book import RunLedger
from agents.ledger.causal import CausalOrder
from agents.ledger.spend import SpendEntry, SpendMeter, Spent

__all__ = ["CausalOrder", "RunLedger", "SpendEntry", "SpendMeter", "Spent"]
