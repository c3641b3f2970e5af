"""What a delegation across agent systems carries in its A2A message's metadata.

The client side (`agents.runtime.remote`) writes it; a Baton server (`orchestrator.a2a`) reads
it back into the run it starts, so that one trace, one chain and one deadline span both systems.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.struct_pb2 import Struct

__all__ = [
    "META_AGENT",
    "META_CHAIN",
    "META_DEADLINE",
    "META_STATUS",
    "META_SYSTEMS",
    "META_USAGE",
    "TRACE_KEYS",
    "message_metadata",
    "qualified_chain",
    "struct",
]

META_CHAIN = "baton.chain"  # the delegation chain so far, names qualified by system
META_SYSTEMS = "baton.systems"  # the agent systems the chain went through, in order
META_DEADLINE = "baton.deadline_s"  # seconds the caller still has
META_AGENT = "baton.agent"  # the entry agent asked for (default: the system's)
META_USAGE = "baton.usage"  # what the run spent (a final status update's metadata)
META_STATUS = "baton.status"  # how the run ended, in Baton's words (limit_exceeded...)
TRACE_KEYS = ("traceparent", "tracestate")  # W3C trace context, as in HTTP headers


def qualified_chain(chain: tuple[str, ...], system: str) -> tuple[str, ...]:
    """The chain with this system's agents named `system/agent` (others' already are).

    Agent names never contain "/", so names from different systems never collide.
    """
    return tuple(name if "/" in name else f"{system}/{name}" for name in chain)


def message_metadata(
    chain: tuple[str, ...],
    systems: tuple[str, ...],
    trace_context: dict[str, str],
    deadline_s: float,
    agent: str | None = None,
) -> Struct:
    """A delegation's place, for the metadata of the message that carries it to another system."""
    return struct(
        {
            META_CHAIN: list(chain),
            META_SYSTEMS: list(systems),
            META_DEADLINE: deadline_s,
            META_AGENT: agent,
            **{k: v for k, v in trace_context.items() if k in TRACE_KEYS},
        }
    )


def struct(data: dict[str, Any]) -> Struct:
    """A protobuf Struct of the items that are set."""
    out = Struct()
    out.update({k: v for k, v in data.items() if v is not None})
    return out
