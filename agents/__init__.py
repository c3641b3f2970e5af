"""The work: the agent runtime (tool loop), tools, models, and the Ray actors around them."""

import os

# litellm fetches a price list from the internet at import unless told otherwise; every process
# that imports agents (driver and Ray workers alike) gets the local copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agents.core.errors import (
    BatonError,
    ConfigError,
    ConfigIssue,
    DelegationRefused,
    ToolImportError,
)
from agents.core.limits import (
    DEFAULT_DEADLINE_S,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_PARALLEL_TOOLS,
    DEFAULT_MAX_STEPS,
    Limits,
)
from agents.core.messages import (
    AgentResult,
    Delegation,
    Refusal,
    RunContext,
    RunStatus,
    Usage,
)
from agents.core.spec import OFFLINE_MODEL, AgentCard, AgentSpec, ModelSpec, RayOptions, Timeouts

__all__ = [
    "DEFAULT_DEADLINE_S",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_PARALLEL_TOOLS",
    "DEFAULT_MAX_STEPS",
    "OFFLINE_MODEL",
    "AgentCard",
    "AgentResult",
    "AgentSpec",
    "BatonError",
    "ConfigError",
    "ConfigIssue",
    "Delegation",
    "DelegationRefused",
    "Limits",
    "ModelSpec",
    "RayOptions",
    "Refusal",
    "RunContext",
    "RunStatus",
    "Timeouts",
    "ToolImportError",
    "Usage",
]
