"""A run as a Mermaid sequence diagram, computed from its spans (the trace is the only source).

Participants are the client, the orchestrator and each agent (with `detail="tools"` each
function tool too, with `detail="full"` each model too). A delegation is an arrow that activates
its agent (a hand-off an open-headed one, whose agent answers for the one that handed over); its
return is a dashed arrow with the status, the duration and the tokens; a step taken from the
record (a replay, a fork before its fork point) says "replayed"; a failure returns with a cross
and a note; a refused delegation is a note; the tool calls of one model step are a `par` block.
Arrows are numbered (`autonumber`); `Diagram.arrows[n - 1]` is the span arrow `n` stands for.
Open spans end in a "running…" note.

Large runs stay within Mermaid's text limit: three or more alike calls in one step fold into
one `loop` block, alike steps in a row likewise, and what still does not fit is split into
pages. Every fold is said in the diagram and listed in `Diagram.folded`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

from tracing import attributes as attr
from tracing.mermaid_text import label, mermaid_modules
from tracing.mermaid_text import title as diagram_title
from tracing.records import SpanRecord
from tracing.tree import SpanTree as _Node
from tracing.tree import span_forest

__all__ = ["DEFAULT_MAX_CHARS", "Detail", "Diagram", "sequence_diagram"]

Detail = Literal["agents", "tools", "full"]
# Mermaid refuses diagrams over 50,000 characters unless configured otherwise; keep a margin.
DEFAULT_MAX_CHARS = 40_000
COLLAPSE_AT = 3  # alike calls (or steps) from this many on are folded into one loop

_AGENT = attr.AGENT_SPAN_PREFIX
_TOOL = attr.TOOL_SPAN_PREFIX
_CHAT = attr.CHAT_SPAN_PREFIX
_DELEGATE = attr.DELEGATE_TOOL_PREFIX
_TIMES = "\N{MULTIPLICATION SIGN}"


class _Arrow(Enum):
    """Arrow types, with Mermaid's activation shorthand.

    `+` activates the target, `-` deactivates the sender.
    """

    CALL = "->>+"
    HANDOFF = "-)+"  # the conversation goes over; its answer comes back as the caller's
    RETURN = "-->>-"
    FAIL = "--x-"
    SEND = "->>"
    REPLY = "-->>"
    CROSS = "--x"


@dataclass
class Diagram:
    """Mermaid text of one page, and the span behind each numbered arrow."""

    text: str
    arrows: list[str]
    page: int = 1
    pages: int = 1
    folded: list[str] = field(default_factory=list)


def _duration(node: _Node) -> str:
    ms = node.duration_ms
    if ms is None:
        return "running"
    return f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def _tokens(node: _Node) -> str:
    inp = node.attrs.get(attr.GEN_AI_USAGE_INPUT_TOKENS)
    out = node.attrs.get(attr.GEN_AI_USAGE_OUTPUT_TOKENS)
    return f"{inp}/{out} tok" if inp is not None else ""


@dataclass
class _Chunk:
    """Diagram elements with the spans of their arrows, in text order."""

    elements: list[Any] = field(default_factory=list)
    arrows: list[str] = field(default_factory=list)
    shape: int = 0  # equal for calls that look the same (what folding compares)
    chars: int = 0

    def add(self, other: _Chunk) -> None:
        self.elements += other.elements
        self.arrows += other.arrows
        self.chars += other.chars


class _Builder:
    def __init__(self, detail: Detail, comparable: bool = False) -> None:
        self.sequence, _ = mermaid_modules()
        self.detail = detail
        self.comparable = comparable
        self.cast: dict[tuple[str, str], Any] = {}
        self.folded: list[str] = []
        self.totals: dict[str, list[int]] = {}

    def took(self, node: _Node) -> str:
        return "-" if self.comparable else _duration(node)

    def replayed(self, node: _Node) -> bool:
        """A step taken from the record (said, except where runs are compared as text)."""
        return not self.comparable and bool(node.attrs.get(attr.BATON_REPLAYED))

    def who(self, kind: str, name: str) -> Any:
        key = (kind, name)
        if key not in self.cast:
            participant = self.sequence.Participant(label(name, 40))
            participant.id_ = f"{kind[0]}{len(self.cast) + 1}"  # never a Mermaid keyword
            self.cast[key] = participant
        return self.cast[key]

    def arrow(self, src: Any, dst: Any, kind: _Arrow, text: str, span: SpanRecord) -> _Chunk:
        link = self.sequence.Link(src, dst, kind, label(text))
        return _Chunk([link], [str(span["span_id"])], chars=len(str(link)))

    def note(self, over: Any, text: str, limit: int = 120) -> _Chunk:
        note = self.sequence.Note(label(text, limit), over)
        return _Chunk([note], chars=len(str(note)))

    def loop(self, title: str, inner: _Chunk) -> _Chunk:
        block = self.sequence.Loop(label(title), inner.elements)
        return _Chunk([block], inner.arrows, inner.shape, len(str(block)))

    def parallel(self, branches: list[tuple[str, _Chunk]]) -> _Chunk:
        block = self.sequence.Parallel({label(t): c.elements for t, c in branches})
        arrows = [a for _, c in branches for a in c.arrows]
        return _Chunk([block], arrows, hash(tuple(c.shape for _, c in branches)), len(str(block)))

    @property
    def orchestrator(self) -> Any:
        return self.who("orchestrator", "Orchestrator")

    def run(self, root: _Node) -> tuple[_Chunk, list[_Chunk], _Chunk]:
        """(opening arrows, the entry agent's steps, closing arrows and totals)."""
        client, orch = self.who("client", "Client"), self.orchestrator
        head, tail = _Chunk(), _Chunk()
        run_id = str(root.attrs.get(attr.BATON_RUN_ID, ""))[:12]
        head.add(
            self.arrow(
                client, orch, _Arrow.SEND, "run" if self.comparable else f"run {run_id}", root.span
            )
        )
        entries = [c for c in root.children if c.name.startswith(_AGENT)]
        steps: list[_Chunk] = []
        for entry in entries:
            agent = self.who("agent", entry.agent)
            head.add(self.arrow(orch, agent, _Arrow.CALL, "task", entry.span))
            self.count(entry)
            steps += self.steps(entry, agent)
            tail.add(self.returning(entry, agent, orch))
        if not root.open:
            # How the run ended, in its own word (cancelled, guardrail_tripped, ...).
            status = str(root.attrs.get(attr.ERROR_TYPE) or "failed") if root.failed else "done"
            tail.add(
                self.arrow(orch, client, _Arrow.REPLY, f"{status} · {self.took(root)}", root.span)
            )
        for (kind, name), participant in self.cast.items():
            if kind == "agent" and name in self.totals:
                runs, models, inp, out = self.totals[name]
                counted = f"{runs} invocation{'s' * (runs != 1)}, {models} model call"
                counted += f"{'s' * (models != 1)} · {inp}/{out} tokens"
                tail.add(self.note(participant, f"{name}: {counted}"))
        return head, steps, tail

    def count(self, node: _Node) -> None:
        # Named as everywhere else (CLI, UI): invocations of the agent, and its model calls.
        totals = self.totals.setdefault(node.agent, [0, 0, 0, 0])
        chats = [c for c in node.children if c.name.startswith(_CHAT)]
        totals[0] += 1
        totals[1] += len(chats)
        # An agent still at work has no totals of its own yet: its model calls so far count.
        counted = chats if node.open else [node]
        for source in counted:
            totals[2] += int(source.attrs.get(attr.GEN_AI_USAGE_INPUT_TOKENS) or 0)
            totals[3] += int(source.attrs.get(attr.GEN_AI_USAGE_OUTPUT_TOKENS) or 0)

    def returning(
        self, node: _Node, agent: Any, caller: Any, answers_for: str | None = None
    ) -> _Chunk:
        """How an invocation ended: its answer back to the caller, or how it failed.

        `answers_for`: the agent that handed the conversation over to this one (whose answer
        this one gives).
        """
        chunk = _Chunk()
        if node.open:
            chunk.add(self.note(agent, "running…"))
            return chunk
        if node.failed:
            kind = node.attrs.get(attr.ERROR_TYPE) or "error"
            chunk.add(
                self.arrow(agent, caller, _Arrow.FAIL, f"{kind} · {self.took(node)}", node.span)
            )
            chunk.add(self.note(agent, f"✗ {node.span.get('status_message') or kind}"))
        else:
            taker = _handed_over_to(node)
            back = node.attrs.get(attr.BATON_HANDED_BACK_TO)
            said = (
                f"hands back to {back}"
                if back
                else f"answers for {answers_for}"
                if answers_for
                else f"answer from {taker}"
                if taker
                else "ok"
            )
            parts = [said, self.took(node), _tokens(node)]
            chunk.add(
                self.arrow(agent, caller, _Arrow.RETURN, " · ".join(filter(None, parts)), node.span)
            )
        chunk.shape = hash(("return", node.failed, str(node.attrs.get(attr.ERROR_TYPE))))
        return chunk

    def steps(self, node: _Node, agent: Any) -> list[_Chunk]:
        """The agent's model steps, each with the tool calls it asked for.

        Alike steps in a row are folded into a loop.
        """
        grouped: list[tuple[_Node | None, list[_Node]]] = []
        for child in node.children:
            if child.name.startswith(_CHAT) or not grouped:
                grouped.append((child if child.name.startswith(_CHAT) else None, []))
            if child.name.startswith(_TOOL):
                grouped[-1][1].append(child)
        steered = _steered(node)  # (by the model step they changed)
        chunks = []
        for number, (chat, tools) in enumerate(grouped, 1):
            chunk = _Chunk()
            for said in steered.pop(number if chat is not None else 0, []):
                chunk.add(self.note(agent, said))
            step = self.step(agent, chat, tools)
            chunk.add(step)
            chunk.shape = hash((step.shape, len(chunk.elements)))
            chunks.append(chunk)
        if steered:  # (what stopped it came after its last step)
            last = _Chunk()
            for said in (n for notes in steered.values() for n in notes):
                last.add(self.note(agent, said))
            chunks.append(last)
        return self.fold_runs([c for c in chunks if c.elements], "steps", agent)

    def step(self, agent: Any, chat: _Node | None, tools: list[_Node]) -> _Chunk:
        chunk = _Chunk()
        if chat is not None and not self.comparable:
            held = self.held(agent, chat)
            chunk.add(held)
            chunk.shape = hash(tuple(map(str, held.elements)))  # steps held alike fold alike
        if chat is not None and self.detail == "full":
            model = self.who("model", chat.model)
            chunk.add(self.arrow(agent, model, _Arrow.SEND, "chat", chat.span))
            if not chat.open:
                back = _Arrow.CROSS if chat.failed else _Arrow.REPLY
                said = _tokens(chat) or self.took(chat)
                if self.replayed(chat):  # taken from the record, not asked again
                    said = " · ".join(filter(None, ["↻ replayed", _tokens(chat)]))
                chunk.add(self.arrow(model, agent, back, said, chat.span))
        calls = [(t, self.tool(agent, t)) for t in tools]
        calls = [(t, c) for t, c in calls if c.elements]
        drawn = self.iterations(agent, [self.wave(agent, w) for w in _waves(calls)])
        for inner in self.fold_runs([c for _, c in drawn], "calls", agent):
            chunk.add(inner)
        chunk.shape = hash((chunk.shape, tuple(c.shape for _, c in drawn)))
        return chunk

    def wave(self, agent: Any, calls: list[tuple[_Node, _Chunk]]) -> tuple[_Node, _Chunk]:
        """Calls that ran at the same time: a `par` block (one call: itself, or its route)."""
        if len(calls) == 1:
            node, chunk = calls[0]
            chosen = node.attrs.get(attr.BATON_WORKFLOW_ROUTE)
            if chosen is None:
                return node, chunk
            block = self.sequence.Optional(label(f"route: {chosen}"), chunk.elements)
            return node, _Chunk(
                [block], chunk.arrows, hash(("route", chunk.shape)), len(str(block))
            )
        return calls[0][0], self.parallel(self.fold_alike(calls, agent))

    def iterations(
        self, agent: Any, drawn: list[tuple[_Node, _Chunk]]
    ) -> list[tuple[_Node, _Chunk]]:
        """A workflow loop's calls, one iteration after another, in one `loop` block."""
        out: list[tuple[_Node, _Chunk]] = []
        i = 0
        while i < len(drawn):
            if drawn[i][0].attrs.get(attr.BATON_WORKFLOW_ITERATION) is None:
                out.append(drawn[i])
                i += 1
                continue
            j, body, last = i, _Chunk(), 0
            while j < len(drawn) and drawn[j][0].attrs.get(attr.BATON_WORKFLOW_ITERATION):
                iteration = int(drawn[j][0].attrs[attr.BATON_WORKFLOW_ITERATION])
                if iteration != last:
                    body.add(self.note(agent, f"iteration {iteration}"))
                    last = iteration
                body.add(drawn[j][1])
                j += 1
            title = f"loop: {last} iteration{'s' * (last != 1)}, one after another"
            block = self.loop(title, body)
            block.shape = hash(("iterations", last, tuple(c.shape for _, c in drawn[i:j])))
            out.append((drawn[i][0], block))
            i = j
        return out

    def held(self, agent: Any, chat: _Node) -> _Chunk:
        """What held a model call back: waits at provider gates and fallbacks, as notes.

        Not where runs are compared: they would differ by the load of the moment.
        """
        chunk = _Chunk()
        for wait in (c for c in chat.children if c.name == attr.GATE_WAIT_SPAN):
            gate, seconds = wait.attrs.get(attr.BATON_GATE), wait.attrs.get(attr.BATON_GATE_WAITED)
            said = "closed" if wait.failed else f"waited {float(seconds or 0):.1f}s"
            chunk.add(
                self.note(agent, f"◴ gate {gate} {said}: {wait.attrs.get(attr.BATON_GATE_REASON)}")
            )
        for event in chat.span.get("events") or []:
            ea = event.get("attributes") or {}
            if event.get("name") == attr.EVENT_MODEL_FALLBACK:
                chunk.add(
                    self.note(agent, f"↪ {ea.get('from')} → {ea.get('to')}: {ea.get('reason')}")
                )
        return chunk

    def tool(self, agent: Any, node: _Node) -> _Chunk:
        """A tool call, and what a hook changed of it (a veto, a replaced result) as a note."""
        chunk = self.call(agent, node)
        for said in (n for notes in _steered(node).values() for n in notes):
            chunk.add(self.note(agent, said))
        return chunk

    def call(self, agent: Any, node: _Node) -> _Chunk:
        tool = node.name.removeprefix(_TOOL)
        target = node.attrs.get(attr.BATON_DELEGATION_TARGET) or (
            tool.removeprefix(_DELEGATE) if tool.startswith(_DELEGATE) else None
        )
        events = node.span.get("events") or []
        refusals = [e for e in events if e.get("name") == attr.EVENT_DELEGATION_REFUSED]
        if refusals:
            attrs = refusals[0].get("attributes") or {}
            reason = attrs.get(attr.BATON_REFUSAL_REASON, "refused")
            text = f"⊘ {target} refused ({reason}): {attrs.get('message', '')}"
            chunk = self.note(agent, text)
            chunk.shape = hash(("refused", target, reason))
            return chunk
        if target is not None:
            return self.delegation(agent, node, str(target))
        if tool == attr.ASK_USER_TOOL:
            return self.question(agent, node)
        return self.function(agent, node, tool)

    def question(self, agent: Any, node: _Node) -> _Chunk:
        """An agent's question to the person (`ask_user`): an arrow to the client and back.

        With the question and the answer when the trace keeps contents.
        """
        client = self.who("client", "Client")
        asked, answered = "question", "answer"
        if not self.comparable:
            arguments = _json(node.attrs.get(attr.GEN_AI_TOOL_CALL_ARGUMENTS))
            if isinstance(arguments, dict) and arguments.get("question"):
                asked = f"? {arguments['question']}"
            result = node.attrs.get(attr.GEN_AI_TOOL_CALL_RESULT)
            if isinstance(result, str) and result:
                answered = result
        chunk = self.arrow(agent, client, _Arrow.SEND, asked, node.span)
        if node.open:
            chunk.add(self.note(client, "waiting for the answer…"))
        elif node.failed:
            chunk.add(self.arrow(client, agent, _Arrow.CROSS, "no answer", node.span))
        else:
            chunk.add(self.arrow(client, agent, _Arrow.REPLY, answered, node.span))
        chunk.shape = hash(("question", node.failed))
        return chunk

    def delegation(self, agent: Any, node: _Node, target: str) -> _Chunk:
        tool = node.name.removeprefix(_TOOL)
        if node.attrs.get(attr.BATON_HAND_BACK):  # up the chain: its answer goes back there
            chunk = self.note(agent, f"hands control back to {target}")
            chunk.shape = hash(("hand back", target))
            return chunk
        callee = self.who("agent", target)
        kind = _Arrow.HANDOFF if tool.startswith(attr.HANDOFF_TOOL_PREFIX) else _Arrow.CALL
        chunk = self.arrow(agent, callee, kind, tool, node.span)
        invocations = [c for c in node.children if c.name.startswith(_AGENT)]
        if not invocations:  # dispatched, not started yet (or its spans are still on the way)
            chunk.add(self.note(callee, "running…" if node.open else "no record of the call"))
            return chunk
        child = invocations[0]
        self.count(child)
        inner = self.steps(child, callee)
        for step in inner:
            chunk.add(step)
        answers_for = agent.name if kind is _Arrow.HANDOFF else None
        back = self.returning(child, callee, agent, answers_for)
        chunk.add(back)
        chunk.shape = hash(("delegate", target, tuple(s.shape for s in inner), back.shape))
        return chunk

    def function(self, agent: Any, node: _Node, tool: str) -> _Chunk:
        message = str(node.span.get("status_message") or "error")
        if self.detail == "agents":  # tools are not drawn; their failures are
            chunk = self.note(agent, f"✗ {tool}: {message}") if node.failed else _Chunk()
        else:
            participant = self.who("tool", tool)
            chunk = self.arrow(agent, participant, _Arrow.SEND, tool, node.span)
            if node.open:
                chunk.add(self.note(participant, "running…"))
            elif node.failed:
                chunk.add(self.arrow(participant, agent, _Arrow.CROSS, "error", node.span))
                chunk.add(self.note(participant, f"✗ {message}"))
            else:
                said = "↻ replayed" if self.replayed(node) else f"ok · {self.took(node)}"
                chunk.add(self.arrow(participant, agent, _Arrow.REPLY, said, node.span))
        chunk.shape = hash(("tool", tool, node.failed))
        return chunk

    def fold_alike(self, calls: list[tuple[_Node, _Chunk]], agent: Any) -> list[tuple[str, _Chunk]]:
        """One branch per call (they ran at once); alike ones, from `COLLAPSE_AT` on, as one.

        The folded branch is drawn once and says how many ran at once (never a `loop`: that
        reads as one after another).
        """
        counts = Counter(c.shape for _, c in calls)
        done: set[int] = set()
        branches: list[tuple[str, _Chunk]] = []
        for i, (node, chunk) in enumerate(calls, 1):
            tool = node.name.removeprefix(_TOOL)
            if counts[chunk.shape] < COLLAPSE_AT:
                branches.append((f"{tool} #{i}", chunk))
            elif chunk.shape not in done:
                done.add(chunk.shape)
                n = counts[chunk.shape]
                self.folded.append(f"{n} alike {tool} calls of {agent.name} at once, drawn once")
                chunk.shape = hash((chunk.shape, n))  # 3 alike calls are not 11
                branches.append((f"{_TIMES}{n} alike {tool} calls at once", chunk))
        return branches

    def fold_runs(self, chunks: list[_Chunk], what: str, agent: Any) -> list[_Chunk]:
        """Alike chunks in a row, from `COLLAPSE_AT` on, as one loop."""
        out: list[_Chunk] = []
        i = 0
        while i < len(chunks):
            j = i
            while j + 1 < len(chunks) and chunks[j + 1].shape == chunks[i].shape:
                j += 1
            n = j - i + 1
            if n >= COLLAPSE_AT:
                self.folded.append(f"{n} alike {what} of {agent.name} drawn once")
                folded = self.loop(f"{_TIMES}{n} alike {what}", chunks[i])
                folded.shape = hash((chunks[i].shape, n))
                out.append(folded)
            else:
                out += chunks[i : j + 1]
            i = j + 1
        return out


def _json(value: Any) -> Any:
    """A JSON attribute's value (None when it is not JSON)."""
    if not isinstance(value, str):
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None


def _steered(node: _Node) -> dict[int, list[str]]:
    """Notes of what hooks and step rules changed and what was written to the shared state.

    By the model step they come before.
    """
    notes: dict[int, list[str]] = {}
    for event in node.span.get("events") or []:
        said = event.get("attributes") or {}
        step = int(said.get("step") or 0)
        if event.get("name") == attr.EVENT_STEERED:
            notes.setdefault(step, []).append(f"↪ {said.get('by')} {said.get('change')}")
        elif event.get("name") == attr.EVENT_STATE_CHANGED:
            keys = ", ".join(str(k) for k in said.get("keys") or ())
            notes.setdefault(step, []).append(f"✎ state: {keys}")
    return notes


def _handed_over_to(node: _Node) -> str | None:
    """The agent an invocation handed its conversation over to (it gave the answer)."""
    for child in node.children:
        tool = child.name.removeprefix(_TOOL)
        back = any(c.attrs.get(attr.BATON_HANDED_BACK_TO) for c in child.children)
        if tool.startswith(attr.HANDOFF_TOOL_PREFIX) and not child.failed and not back:
            return tool.removeprefix(attr.HANDOFF_TOOL_PREFIX)
    return None


def _waves(calls: list[tuple[_Node, _Chunk]]) -> list[list[tuple[_Node, _Chunk]]]:
    """The calls grouped by time: each group's calls overlapped (ran at once), in start order.

    A call still running overlaps everything after its start.
    """
    waves: list[list[tuple[_Node, _Chunk]]] = []
    until = 0
    for node, chunk in sorted(calls, key=lambda c: int(c[0].span["start_ns"])):
        start, end = int(node.span["start_ns"]), node.span.get("end_ns") or 2**63
        if waves and start < until:
            waves[-1].append((node, chunk))
            until = max(until, int(end))
        else:
            waves.append([(node, chunk)])
            until = int(end)
    return waves


def _pages(steps: list[_Chunk], budget: int) -> list[list[_Chunk]]:
    pages: list[list[_Chunk]] = [[]]
    used = 0
    for step in steps:
        if pages[-1] and used + step.chars > budget:
            pages.append([])
            used = 0
        pages[-1].append(step)
        used += step.chars
    return pages


def sequence_diagram(
    spans: list[SpanRecord],
    *,
    detail: Detail = "agents",
    page: int = 1,
    max_chars: int = DEFAULT_MAX_CHARS,
    title: str = "Run",
    comparable: bool = False,
) -> Diagram:
    """The run whose spans these are, as a Mermaid sequence diagram (one page of it).

    Args:
        spans: span records (`tracing.records.span_record` dicts); open spans have no `end_ns`.
        detail: `agents`, `tools` (function tools as participants) or `full` (models too).
        page: which page, when the run does not fit in `max_chars`.
        max_chars: the size a page may take.
        title: the diagram's title.
        comparable: no durations, no run id: two executions of one run compare as text.
    """
    sequence, _ = mermaid_modules()
    builder = _Builder(detail, comparable)
    roots = span_forest(spans)
    workflow = next((r for r in roots if r.name == attr.WORKFLOW_SPAN), None)
    if workflow is None:
        if roots:  # no run span (an odd trace): show what there is under a synthetic root
            workflow = _Node(_synthetic_root(), roots)
        else:
            orch = builder.orchestrator
            note = sequence.Note("no spans were recorded for this run", orch)
            empty = sequence.SequenceDiagram(diagram_title(title), [orch, note])
            return Diagram(str(empty.script), [])
    head, steps, tail = builder.run(workflow)
    budget = max(max_chars - head.chars - tail.chars - 2_000, 1_000)
    pages = _pages(steps, budget)
    page = min(max(page, 1), len(pages))
    body = _Chunk()
    for chunk in pages[page - 1]:
        body.add(chunk)
    folded = list(builder.folded)
    if len(pages) > 1:
        before = sum(len(p) for p in pages[: page - 1])
        shown = len(pages[page - 1])
        text = (
            f"page {page} of {len(pages)}: steps {before + 1} to {before + shown} of {len(steps)}"
        )
        folded.append(text)
        body.elements.insert(0, sequence.Note(label(text), builder.orchestrator))
    if builder.folded:
        summary = sequence.Note(
            label(
                f"folded: {len(builder.folded)} groups of alike calls or steps, each drawn once",
                120,
            ),
            builder.orchestrator,
        )
        tail.elements.append(summary)
    participants = list(builder.cast.values())
    elements = participants + head.elements + body.elements + tail.elements
    diagram = sequence.SequenceDiagram(diagram_title(title), elements, auto_number=True)
    return Diagram(
        text=str(diagram.script),
        arrows=head.arrows + body.arrows + tail.arrows,
        page=page,
        pages=len(pages),
        folded=folded,
    )


def _synthetic_root() -> SpanRecord:
    """A run span standing in for a missing one (it shows as the run, still open)."""
    return SpanRecord(
        trace_id="",
        span_id="",
        parent_span_id=None,
        name="run",
        kind="INTERNAL",
        start_ns=0,
        end_ns=None,
        status="UNSET",
        status_message=None,
        attributes={},
        events=[],
        resource={},
    )
