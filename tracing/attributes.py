"""Span attribute names: the GenAI semantic conventions, plus Baton's own where they have none."""

from __future__ import annotations

from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_AGENT_DESCRIPTION,
    GEN_AI_AGENT_ID,
    GEN_AI_AGENT_NAME,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_CALL_RESULT,
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    GEN_AI_WORKFLOW_NAME,
)
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE

__all__ = [
    "BATON_AGENT_LOST",
    "BATON_DELEGATION_CHAIN",
    "BATON_DELEGATION_DEPTH",
    "BATON_DELEGATION_TARGET",
    "BATON_REFUSAL_REASON",
    "BATON_RUN_ID",
    "BATON_USAGE_COST",
    "ERROR_TYPE",
    "GEN_AI_AGENT_DESCRIPTION",
    "GEN_AI_AGENT_ID",
    "GEN_AI_AGENT_NAME",
    "GEN_AI_CONVERSATION_ID",
    "GEN_AI_INPUT_MESSAGES",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_OUTPUT_MESSAGES",
    "GEN_AI_PROVIDER_NAME",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_RESPONSE_FINISH_REASONS",
    "GEN_AI_TOOL_CALL_ARGUMENTS",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_CALL_RESULT",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_TOOL_TYPE",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "GEN_AI_WORKFLOW_NAME",
]

BATON_RUN_ID = "baton.run.id"
BATON_DELEGATION_DEPTH = "baton.delegation.depth"
BATON_DELEGATION_CHAIN = "baton.delegation.chain"
BATON_REFUSAL_REASON = "baton.refusal.reason"
# On an `invoke_agent` span made by the caller for an invocation whose own spans were lost.
BATON_AGENT_LOST = "baton.agent.lost"
# The agent a delegation tool hands work to (on its `execute_tool` span, refused or not).
BATON_DELEGATION_TARGET = "baton.delegation.target"
# litellm's cost of a model call in USD, from its local price tables (the conventions have no
# name for cost yet).
BATON_USAGE_COST = "baton.usage.cost_usd"
