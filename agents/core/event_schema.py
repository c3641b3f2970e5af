"""The JSON Schema of every event kind: `make schema` writes the web UI's copy from it."""

from __future__ import annotations

import json
from typing import Any

from agents.core.events import EVENTS

__all__ = ["events_json_schema"]


def events_json_schema() -> dict[str, Any]:
    """The JSON Schema of every event kind (what the UI's copy is generated from)."""
    return EVENTS.json_schema(mode="serialization")


if __name__ == "__main__":  # `make schema`: the UI's copy, generated, never edited by hand
    print(json.dumps(events_json_schema(), indent=2, sort_keys=True))
