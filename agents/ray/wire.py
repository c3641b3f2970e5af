"""What crosses Ray on the hot path between Baton's processes, as one argument of bytes.

Ray serializes each argument of an actor call and its return value on its own, through its
cloudpickle-based pickler (a Python hook per object); pickled here once with the standard
pickler, a call costs its sender and its receiver less. Measured: an own-actor hop about 0.6 ms
less per level than the five arguments and a result tree as objects (a bare chain of 16 actors
passing a `Delegation` and returning an `AgentResult` read 1.11x one passing a string; with the
bytes, 1.04x). A batch of 9 events and 4 spans for the ledger: 365 -> 230 us of the sender's
CPU and 1.31 -> 1.15 ms of the ledger's; a run's close, 312 -> 138 us of the orchestrator's.

So: a delegation to a host and its reply (`HostCall`, `HostReply`), and the ledger calls made
per run or per batch (`Batch`, `Commit`, `WaitCall`, `RunSettle`, `RunEnd`). Rarer calls
with plain arguments (a run id, a number) go as they are.

A result goes up a chain of processes one level at a time. Its subtree is pickled once, where
it was made (`HostReply.below`): a process that only carries a callee's subtree up to its own
caller keeps it as the bytes it came in (`Arrived`), and only the orchestrator opens the whole
tree (`open_tree`). A chain of 16 agents in processes of their own pickled the deepest node 16
times otherwise.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import PrivateAttr

from agents.core.events import Event, WaitOpened
from agents.core.messages import AgentResult, Delegation
from agents.core.steps import Step
from agents.ray.handover import Handover
from tracing import SpanRecord

__all__ = [
    "Arrived",
    "Batch",
    "Closed",
    "Commit",
    "HostCall",
    "HostReply",
    "RunEnd",
    "RunSettle",
    "Sealable",
    "SpendCheck",
    "WaitCall",
    "open_tree",
    "seal",
    "unseal",
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class HostCall:
    """What `AgentHost.invoke` is asked: run `delegation` on the hosted `agent`.

    `opening`: the run's first event, when this is the run's entry; it goes to the ledger with
    the agent's own events (the orchestrator makes no call of its own to open the run).
    `hand_back`: the caller is an agent; what the host queued for the run goes back with the
    reply (`HostReply.handover`). `carried`: what the caller's process had queued for the
    run, sent from the host as its own (`Outbox.hand_over`).
    """

    agent: str
    delegation: Delegation
    opening: Event | None = None
    hand_back: bool = False
    carried: Handover | None = None


# A result made in a process, for the wire: the node without its children, and its children,
# each made there too (a list) or sealed where it was made (bytes).
_Packed = tuple[AgentResult, "bytes | list[_Packed]"]


@dataclass(frozen=True)
class HostReply:
    """What `AgentHost.invoke` returns: the invocation's result and what travels with it.

    `result`: the result without its children; `below`: its children, sealed once here
    (see the module). `handover`: what the host still had queued for the run, for the caller's
    process to send (when the call asked for it: `HostCall.hand_back`). `sent`: the run's items
    (events and span shipments) queued for the ledger by this process and by those below it,
    by process (`Outbox.sent`): the ledger settles the run once it has them all.
    """

    result: AgentResult
    below: bytes
    handover: Handover | None = None
    sent: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, result: AgentResult, handover: Handover | None, sent: dict[str, int]) -> HostReply:
        """The reply for `result`, its subtree sealed (what came sealed stays as it came)."""
        below = pickle.dumps([_pack(c) for c in result.children], protocol=pickle.HIGHEST_PROTOCOL)
        return cls(_head(result), below, handover, sent)


class Arrived(AgentResult):
    """A callee's result as it came from another process, its subtree still sealed.

    The runtime reads it like any result (its own fields); the subtree travels on as the bytes
    it came in, when this process's result goes up in turn.
    """

    _below: bytes = PrivateAttr(default=b"")

    @classmethod
    def of(cls, reply: HostReply) -> Arrived:
        """The reply's result, carrying its sealed subtree."""
        arrived = cls.model_construct(**reply.result.__dict__)
        arrived._below = reply.below
        return arrived


def open_tree(reply: HostReply) -> AgentResult:
    """The reply's result with its whole subtree, opened (where the tree is read)."""
    return _unpack((reply.result, reply.below))


def _head(result: AgentResult) -> AgentResult:
    """The node alone, as a plain result (without the subtree an `Arrived` carries)."""
    return AgentResult.model_construct(**{**result.__dict__, "children": []})


def _pack(node: AgentResult) -> _Packed:
    if isinstance(node, Arrived):
        return _head(node), node._below
    return _head(node), [_pack(c) for c in node.children]


def _unpack(packed: _Packed) -> AgentResult:
    node, below = packed
    children = pickle.loads(below) if isinstance(below, bytes) else below
    node.children = [_unpack(child) for child in children]
    return node


@dataclass(frozen=True)
class Batch:
    """What a process sends the ledger at once (`Outbox`): `LedgerActor.emit_many`'s call.

    `events`: runs' events, and handovers the process took over; `spans`: runs' span
    shipments; `steps`: steps for runs' step logs. `sender` names the process; `number` is the
    batch's place among the process's batches, from 1 (0: unnumbered), for the ledger to apply
    them in the order sent.
    """

    events: list[tuple[str, Event | Handover]] = field(default_factory=list)
    spans: list[tuple[str, list[SpanRecord]]] = field(default_factory=list)
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
class SpendCheck:
    """`LedgerActor.spend_check`'s call: may the run make another model call under its caps?

    The process's `earlier` batch goes with it: the spending of its replies so far is counted
    before the answer.
    """

    run_id: str
    earlier: Batch


@dataclass(frozen=True)
class WaitCall:
    """`LedgerActor.open_wait`'s call: a run waits for a person (`event` says what for).

    `again`: announced before the run was resumed, not announced twice. The process's `earlier`
    batch goes with it: an async actor does not keep one caller's calls in order, and the wait
    must not overtake the events before it.
    """

    run_id: str
    event: WaitOpened
    earlier: Batch
    again: bool = False


@dataclass(frozen=True)
class RunSettle:
    """`LedgerActor.settle`'s call: wait until the run's items are in, and give its spans.

    `sent`: the run's items queued for the ledger, by process (`HostReply.sent`); empty when
    the entry agent's call did not answer (cancelled, lost): then the ledger waits until every
    invocation that started has its span. `first`: the run's first event, if it was handed to
    the entry agent to send (recorded unless it came). `spans`: the orchestrator's own (the
    run's root span, and those it made for lost or abandoned invocations). `traced`: whether
    the run records spans at all (if not, only the events are waited for). `epoch`: the life of
    the run this caller ran (`RunContext.epoch`); the ledger refuses to end or release a life
    older than the run's own (another instance took the run over meanwhile). None: any.
    """

    run_id: str
    sent: dict[str, int]
    first: Event | None = None
    spans: list[SpanRecord] = field(default_factory=list)
    traced: bool = True
    epoch: int | None = None


@dataclass(frozen=True)
class RunEnd:
    """`LedgerActor.finish`'s call: the run's last event (`final`); close its event log.

    `settle`: settle the run first (see `RunSettle`), in the same call. `record`: how the run
    ended, as the values of its row in the run store; with a store, the ledger writes them and
    the run's spans there before it announces the end (`final`). `first`: the run's first
    event, as in `RunSettle` (for a run that was never settled). `spans_back`: the caller wants
    the run's spans (to export them, or to keep them). `returning`: False for a caller that
    keeps no store (the engine's own runs): no events come back (a chain of 16 sends ~100 back
    else).
    """

    run_id: str
    final: Event
    settle: RunSettle | None = None
    record: dict[str, Any] | None = None
    first: Event | None = None
    spans_back: bool = True
    returning: bool = True


@dataclass(frozen=True)
class Closed:
    """What `LedgerActor.finish` answers.

    The run's spans (when asked for, or when they could not be recorded), its events the store
    still lacks, and whether the run's end (`RunEnd.record`, and the spans) is in the store.
    `superseded`: the caller's life of the run is not the run's any more (see `RunSettle`):
    nothing was recorded or closed, and nothing of its end should be.
    """

    spans: list[SpanRecord]
    events: list[tuple[int, Event]]
    recorded: bool
    superseded: bool = False


Sealable = (
    HostCall | HostReply | Batch | Commit | SpendCheck | WaitCall | RunSettle | RunEnd | Closed
)


def seal(value: Sealable) -> bytes:
    """A call or a reply as the bytes that cross Ray."""
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def unseal(sealed: bytes, kind: type[_T]) -> _T:
    """What `seal` sealed, checked to be a `kind` (the bytes come from Baton's own processes)."""
    value = pickle.loads(sealed)
    if not isinstance(value, kind):
        raise TypeError(f"expected a sealed {kind.__name__}, got {type(value).__name__}")
    return value
