"""Span attribute names: the GenAI semantic conventions, plus Baton's own where they have none."""

from __future__ import annotations

from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_AGENT_ID,
    GEN_AI_AGENT_NAME,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_OPERATION_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_NAME,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
)
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE

__all__ = [
    "BATON_DELEGATION_CHAIN",
    "BATON_DELEGATION_DEPTH",
    "BATON_REFUSAL_REASON",
    "BATON_RUN_ID",
    "ERROR_TYPE",
    "GEN_AI_AGENT_ID",
    "GEN_AI_AGENT_NAME",
    "GEN_AI_CONVERSATION_ID",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
]

BATON_RUN_ID = "baton.run.id"
BATON_DELEGATION_DEPTH = "baton.delegation.depth"
BATON_DELEGATION_CHAIN = "baton.delegation.chain"
BATON_REFUSAL_REASON = "baton.refusal.reason"
