"""Provider gates: what each gate of the cluster lets through, and the calls waiting at it.

Plain code with the clock passed in (`book.GateBook`, and `book.GateKeeper`, the book callers
wait on); `agents.ray.gate_actor` hosts one for the cluster, `agents.models.gated` asks it
before each model call.
"""

from agents.gates.book import GateBook, GateKeeper

__all__ = ["GateBook", "GateKeeper"]
