"""Span names and attribute keys: the GenAI semantic conventions, and Baton's own.

Baton's own names stand where the conventions have none. Every module that makes or reads
spans takes its names from here.
"""

from __future__ import annotations

from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_AGENT_DESCRIPTION,
    GEN_AI_AGENT_ID,
    GEN_AI_AGENT_NAME,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_EVALUATION_EXPLANATION,
    GEN_AI_EVALUATION_NAME,
    GEN_AI_EVALUATION_SCORE_LABEL,
    GEN_AI_EVALUATION_SCORE_VALUE,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_SYSTEM_INSTRUCTIONS,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_CALL_RESULT,
    GEN_AI_TOOL_DEFINITIONS,
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    GEN_AI_WORKFLOW_NAME,
)
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE

__all__ = [
    "AGENT_SPAN_PREFIX",
    "ASK_USER_TOOL",
    "BATON_A2A_STATE",
    "BATON_A2A_TASK_ID",
    "BATON_AGENT_LOST",
    "BATON_APPROVAL_ID",
    "BATON_CANCELLED_BY",
    "BATON_DELEGATION_CHAIN",
    "BATON_DELEGATION_DEPTH",
    "BATON_DELEGATION_TARGET",
    "BATON_EVALUATION_CASE",
    "BATON_EVALUATION_DATASET",
    "BATON_EVALUATION_OUTCOME",
    "BATON_GATE",
    "BATON_GATE_REASON",
    "BATON_GATE_WAITED",
    "BATON_GUARDRAIL",
    "BATON_GUARDRAIL_STAGE",
    "BATON_HANDED_BACK_TO",
    "BATON_HAND_BACK",
    "BATON_HOST_ACTOR",
    "BATON_HOST_CAUSE",
    "BATON_HOST_RESTARTS",
    "BATON_HOST_STATE",
    "BATON_INPUT",
    "BATON_MEMORY_FOUND",
    "BATON_MEMORY_KEY",
    "BATON_MEMORY_NAMESPACE",
    "BATON_MEMORY_QUERY",
    "BATON_MODEL_USED",
    "BATON_PROCESS_ROLE",
    "BATON_QUESTION_ID",
    "BATON_RAY_NODE_ID",
    "BATON_REFUSAL_REASON",
    "BATON_REPLAYED",
    "BATON_RUN_EPOCH",
    "BATON_RUN_ID",
    "BATON_SPEND_MESSAGE",
    "BATON_SPEND_SCOPE",
    "BATON_STEP",
    "BATON_SUBMITTED_BY",
    "BATON_SYSTEM_VERSION",
    "BATON_TENANT",
    "BATON_USAGE_COST",
    "BATON_WORKFLOW_ITERATION",
    "BATON_WORKFLOW_PLACE",
    "BATON_WORKFLOW_ROUTE",
    "BATON_WORKFLOW_SHAPE",
    "CHAT_SPAN_PREFIX",
    "DELEGATE_TOOL_PREFIX",
    "ERROR_TYPE",
    "EVALUATION_SPAN_PREFIX",
    "EVENT_APPROVAL_DECIDED",
    "EVENT_APPROVAL_REQUESTED",
    "EVENT_CONTEXT_FITTED",
    "EVENT_DELEGATION_REFUSED",
    "EVENT_EVALUATION_RESULT",
    "EVENT_GUARDRAIL_TRIPPED",
    "EVENT_HOOK_VETO",
    "EVENT_INPUT_PROVIDED",
    "EVENT_INPUT_REQUESTED",
    "EVENT_MODEL_FALLBACK",
    "EVENT_MODEL_RETRY",
    "EVENT_OUTPUT_INVALID",
    "EVENT_SPEND_WARNING",
    "EVENT_STATE_CHANGED",
    "EVENT_STEERED",
    "EVENT_STEP_RULES",
    "GATE_WAIT_SPAN",
    "GEN_AI_AGENT_DESCRIPTION",
    "GEN_AI_AGENT_ID",
    "GEN_AI_AGENT_NAME",
    "GEN_AI_CONVERSATION_ID",
    "GEN_AI_EVALUATION_EXPLANATION",
    "GEN_AI_EVALUATION_NAME",
    "GEN_AI_EVALUATION_SCORE_LABEL",
    "GEN_AI_EVALUATION_SCORE_VALUE",
    "GEN_AI_INPUT_MESSAGES",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_OUTPUT_MESSAGES",
    "GEN_AI_PROVIDER_NAME",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_RESPONSE_FINISH_REASONS",
    "GEN_AI_RESPONSE_MODEL",
    "GEN_AI_SYSTEM_INSTRUCTIONS",
    "GEN_AI_TOOL_CALL_ARGUMENTS",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_CALL_RESULT",
    "GEN_AI_TOOL_DEFINITIONS",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_TOOL_TYPE",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "GEN_AI_WORKFLOW_NAME",
    "HANDOFF_TOOL_PREFIX",
    "HOST_WAIT_SPAN_PREFIX",
    "INPUT_VALUE",
    "MEMORY_SPAN_PREFIX",
    "OPENINFERENCE_CHAIN",
    "OPENINFERENCE_EVALUATOR",
    "OPENINFERENCE_LLM",
    "OPENINFERENCE_SPAN_KIND",
    "OP_CHAT",
    "OP_EXECUTE_TOOL",
    "OP_INVOKE_AGENT",
    "OP_INVOKE_WORKFLOW",
    "OUTPUT_VALUE",
    "SERVER_ADDRESS",
    "SERVER_PORT",
    "TOOL_SPAN_PREFIX",
    "URL_FULL",
    "WORKFLOW_SPAN",
    "agent_span_name",
    "chat_span_name",
    "tool_span_name",
]

BATON_RUN_ID = "baton.run.id"
BATON_DELEGATION_DEPTH = "baton.delegation.depth"
BATON_DELEGATION_CHAIN = "baton.delegation.chain"
BATON_REFUSAL_REASON = "baton.refusal.reason"
# On an `invoke_agent` span whose turn ended by handing control back up its chain: to whom.
BATON_HANDED_BACK_TO = "baton.handed_back_to"
# On an `execute_tool` span of a delegation to an agent up the chain: a hand-back, not a call.
BATON_HAND_BACK = "baton.hand_back"
# On an `invoke_agent` span made by the caller for an invocation whose own spans were lost.
BATON_AGENT_LOST = "baton.agent.lost"
# On a `wait_for_host` span: the host replica waited for after it died, and how it ended
# (`alive`, `restarting` if the wait ran out, `crash_loop`), its restarts by Baton and why it died.
BATON_HOST_ACTOR = "baton.host.actor"
BATON_HOST_STATE = "baton.host.state"
BATON_HOST_RESTARTS = "baton.host.restarts"
BATON_HOST_CAUSE = "baton.host.cause"
HOST_WAIT_SPAN_PREFIX = "wait_for_host "
# The agent a delegation tool hands work to (on its `execute_tool` span, refused or not).
BATON_DELEGATION_TARGET = "baton.delegation.target"
# litellm's cost of a model call in USD, from its local price tables (the conventions have no
# name for cost yet).
BATON_USAGE_COST = "baton.usage.cost_usd"

BATON_APPROVAL_ID = "baton.approval.id"
BATON_QUESTION_ID = "baton.question.id"
# A step taken from the run's step log instead of being done again (a resumed or replayed run).
BATON_REPLAYED = "baton.step.replayed"
# Where a span's step is in the run's step log, "<invocation>/<key>" (a fork may start there).
BATON_STEP = "baton.step"
# How many times the run was resumed when this span was made.
BATON_RUN_EPOCH = "baton.run.epoch"
# Resource attributes: which process (and Ray node) recorded a span.
BATON_PROCESS_ROLE = "baton.process.role"
BATON_RAY_NODE_ID = "baton.ray.node_id"
# A remote agent (A2A): where it is served (OTel's `server.address`/`url.full`), and its task.
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
URL_FULL = "url.full"
BATON_A2A_TASK_ID = "baton.a2a.task_id"
BATON_A2A_STATE = "baton.a2a.state"
# Span events (not spans) that the runtime records on tool spans.
EVENT_DELEGATION_REFUSED = "delegation_refused"
# ... and on agent spans: an answer that did not match the output schema (and was sent back).
EVENT_OUTPUT_INVALID = "output_invalid"
# ... and where a guardrail tripped (which one, on what: input, output, a tool's arguments...).
EVENT_GUARDRAIL_TRIPPED = "guardrail_tripped"
# ... and where step rules changed a model call, or a hook vetoed a tool call.
EVENT_STEP_RULES = "step_rules"
EVENT_CONTEXT_FITTED = "context_fitted"  # older messages dropped or summarized for a request
EVENT_HOOK_VETO = "hook_veto"
# A hook or step rule changed the agent's course (`by`, `change`, the model `step` it changed).
EVENT_STEERED = "baton.steered"
# On an `invoke_agent` span: its tools, hooks or answer wrote the shared state (`keys`, `step`).
EVENT_STATE_CHANGED = "baton.state_changed"
# A read or write of long-term memory (`baton.memory {op}`: remember, recall, forget, get, put,
# delete, search), by an agent's tool or over HTTP: where, which key or query, what came back.
MEMORY_SPAN_PREFIX = "baton.memory "
BATON_MEMORY_NAMESPACE = "baton.memory.namespace"
BATON_MEMORY_KEY = "baton.memory.key"
BATON_MEMORY_QUERY = "baton.memory.query"
BATON_MEMORY_FOUND = "baton.memory.found"  # items a search returned, or whether a key was there
BATON_GUARDRAIL = "baton.guardrail.name"
BATON_GUARDRAIL_STAGE = "baton.guardrail.stage"
EVENT_APPROVAL_REQUESTED = "approval_requested"
EVENT_APPROVAL_DECIDED = "approval_decided"
EVENT_INPUT_REQUESTED = "input_requested"
EVENT_INPUT_PROVIDED = "input_provided"
# A run, or its tenant or key today, passed the warning share of a spending cap.
EVENT_SPEND_WARNING = "spend_warning"
BATON_SPEND_SCOPE = "baton.spend.scope"
# A model call held at a provider gate (`agents.models.gated`): its own span under the call's,
# what held it and for how long; retries and fallbacks are events on the call's span, and the
# model that answered after a fallback an attribute there.
GATE_WAIT_SPAN = "baton.gate.wait"
BATON_GATE = "baton.gate"
BATON_GATE_WAITED = "baton.gate.waited_s"
BATON_GATE_REASON = "baton.gate.reason"
EVENT_MODEL_RETRY = "baton.model.retry"
EVENT_MODEL_FALLBACK = "baton.model.fallback"
BATON_MODEL_USED = "baton.model.used"
BATON_SPEND_MESSAGE = "baton.spend.message"
# Whose run it is and who submitted it (an API key's name), on the run's root span.
BATON_TENANT = "baton.tenant"
BATON_SYSTEM_VERSION = "baton.system.version"  # the team's release label and config digest
# `baton eval`'s verdicts on a run, on a span under its root (`evaluation {case}`): one
# `gen_ai.evaluation.result` event per expectation, as the GenAI conventions describe it.
EVALUATION_SPAN_PREFIX = "evaluation "
EVENT_EVALUATION_RESULT = "gen_ai.evaluation.result"
BATON_EVALUATION_DATASET = "baton.evaluation.dataset"
BATON_EVALUATION_CASE = "baton.evaluation.case"
BATON_EVALUATION_OUTCOME = "baton.evaluation.outcome"
BATON_CANCELLED_BY = "baton.cancelled_by"
BATON_SUBMITTED_BY = "baton.submitted_by"
# An invocation's (or a run's) structured input, as JSON (content: recorded as contents are).
BATON_INPUT = "baton.input"
# A workflow's call: its place in the workflow's order of calls (`w3`), and how a call of a
# workflow's shape was made (`parallel`, `loop`, `route`), with a loop's iteration and a
# route's choice.
BATON_WORKFLOW_PLACE = "baton.workflow.place"
BATON_WORKFLOW_SHAPE = "baton.workflow.shape"
BATON_WORKFLOW_ITERATION = "baton.workflow.iteration"
BATON_WORKFLOW_ROUTE = "baton.workflow.route"

# OpenInference's names (Arize Phoenix and other viewers list and show spans by them): a span's
# input and output as plain text, which the GenAI conventions have no name for, and the kind of
# the root span (viewers derive the others from `gen_ai.operation.name`, but not a workflow).
INPUT_VALUE = "input.value"
OUTPUT_VALUE = "output.value"
OPENINFERENCE_SPAN_KIND = "openinference.span.kind"
OPENINFERENCE_CHAIN = "CHAIN"
OPENINFERENCE_EVALUATOR = "EVALUATOR"
OPENINFERENCE_LLM = "LLM"

# `gen_ai.operation.name` values, and span names `{operation} {target}` as the conventions name
# them.
OP_INVOKE_WORKFLOW = "invoke_workflow"
OP_INVOKE_AGENT = "invoke_agent"
OP_EXECUTE_TOOL = "execute_tool"
OP_CHAT = "chat"
WORKFLOW_SPAN = f"{OP_INVOKE_WORKFLOW} baton"
AGENT_SPAN_PREFIX = f"{OP_INVOKE_AGENT} "
TOOL_SPAN_PREFIX = f"{OP_EXECUTE_TOOL} "
CHAT_SPAN_PREFIX = f"{OP_CHAT} "
# Delegations are tools named after their target: `delegate_to_{agent}`; hand-offs likewise.
DELEGATE_TOOL_PREFIX = "delegate_to_"
ASK_USER_TOOL = "ask_user"  # the built-in question to the person (drawn as arrows to the client)
HANDOFF_TOOL_PREFIX = "transfer_to_"


def agent_span_name(agent: str) -> str:
    """The name of an agent invocation's span."""
    return AGENT_SPAN_PREFIX + agent


def tool_span_name(tool: str) -> str:
    """The name of a tool call's span."""
    return TOOL_SPAN_PREFIX + tool


def chat_span_name(model: str) -> str:
    """The name of a model call's span."""
    return CHAT_SPAN_PREFIX + model
