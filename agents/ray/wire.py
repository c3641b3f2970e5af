"""What crosses Ray on the hot path between Baton's processes, as one argument of bytes.

Ray serializes each argument of an actor call and its return value on its own, through its
cloudpickle-based pickler (a Python hook per object); pickled here once with the standard
pickler, a call costs its sender and its receiver less. Measured: an own-actor hop about 0.6 ms
less per level than the five arguments and a result tree as objects (a bare chain of 16 actors
passing a `Delegation` and returning an `AgentResult` read 1.11x one passing a string; with the
bytes, 1.04x). A batch of 9 events and 4 spans for the ledger: 365 -> 230 us of the sender's
CPU and 1.31 -> 1.15 ms of the ledger's; a run's close, 312 -> 138 us of the orchestrator's.

So: a delegation to a host and its result (`HostCall`, `AgentResult`), and the ledger calls made
per run or per batch (`Batch`, `Commit`, `ApprovalCall`, `RunEnd`). Rarer calls with plain
arguments (a run id, a number) go as they are.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import TypeVar

from agents.core.events import ApprovalRequested, Event
from agents.core.messages import AgentResult, Delegation
from agents.core.ports import Handover, SpanShipment
from agents.core.steps import Step
from agents.ray.handover import Carried

__all__ = ["ApprovalCall", "Batch", "Commit", "HostCall", "RunEnd", "Sealable", "seal", "unseal"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class HostCall:
    """What `AgentHost.invoke` is asked: run `delegation` on the hosted `agent`.

    `opening`: the run's first event, when this is the run's entry; it goes to the ledger with
    the agent's own events (the orchestrator makes no call of its own to open the run).
    `hand_back`: the caller is an agent; what the host queued for the run goes back with the
    result (see `AgentRuntime.invoke`). `carried`: what the caller's process had queued for the
    run, sent from the host as its own (`LedgerClient.hand_over`).
    """

    agent: str
    delegation: Delegation
    opening: Event | None = None
    hand_back: bool = False
    carried: Handover | None = None


@dataclass(frozen=True)
class Batch:
    """What a process sends the ledger at once (`Outbox`): `LedgerActor.emit_many`'s call.

    `events`: runs' events, and handovers the process took over (`Carried`); `spans`: its
    numbered span shipments; `steps`: steps for runs' step logs. `sender` names the process;
    `number` is the batch's place among the process's batches, from 1 (0: unnumbered), for
    the ledger to apply them in the order sent.
    """

    events: list[tuple[str, Event | Carried]] = field(default_factory=list)
    spans: list[SpanShipment] = field(default_factory=list)
    steps: list[tuple[str, Step]] = field(default_factory=list)
    sender: str = ""
    number: int = 0


@dataclass(frozen=True)
class Commit:
    """`LedgerActor.commit`'s call: store `step` of the run after its process's `earlier` batch."""

    run_id: str
    step: Step
    earlier: Batch


@dataclass(frozen=True)
class ApprovalCall:
    """`LedgerActor.request_approval`'s call: a tool call waits for a person (`event`).

    The process's `earlier` batch goes with it: an async actor does not keep one caller's calls
    in order, and the request must not overtake the events before it.
    """

    run_id: str
    call_id: str
    event: ApprovalRequested
    earlier: Batch


@dataclass(frozen=True)
class RunEnd:
    """`LedgerActor.finish`'s call: the run's last event (`final`); close its event log.

    `sent`: how many events of the run each agent process sent (the ledger waits a while for
    them: the caller may have its result before the ledger has a process's last batch).
    `first`: the run's first event, if it was handed to the entry agent to send (recorded
    unless it came). `returning`: False for a caller that keeps no store (the engine's own
    runs): no events come back (a chain of 16 sends ~100 back else).
    """

    run_id: str
    final: Event
    sent: dict[str, int] | None = None
    first: Event | None = None
    returning: bool = True


Sealable = HostCall | AgentResult | Batch | Commit | ApprovalCall | RunEnd


def seal(value: Sealable) -> bytes:
    """A call or a result as the bytes that cross Ray.

    A result's children are sealed already (see `AgentResult.seal_children`).
    """
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def unseal(sealed: bytes, kind: type[_T]) -> _T:
    """What `seal` sealed, checked to be a `kind` (the bytes come from Baton's own processes).

    A result's children stay sealed (see `AgentResult.open_children`).
    """
    value = pickle.loads(sealed)
    if not isinstance(value, kind):
        raise TypeError(f"expected a sealed {kind.__name__}, got {type(value).__name__}")
    return value
