"""Every error code the HTTP API answers with is in its reference (docs/http-api.md)."""

from __future__ import annotations

import re
from pathlib import Path

from orchestrator.api import errors as api_errors
from orchestrator.errors import ServiceError

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = ROOT / "docs" / "http-api.md"
# How the API's own layers name a code in their source: `_refuse(send, 401, "unauthorized", ...)`.
_LITERAL = re.compile(r'(?:_refuse\(send, \d+, |error_response\(\s*\d+, |"code": )"([a-z_]+)"')


def _service_codes(kind: type[ServiceError]) -> set[str]:
    found = set(getattr(kind, "codes", {}).values()) or {kind.code}
    for sub in kind.__subclasses__():
        found |= _service_codes(sub)
    return found


def _codes() -> set[str]:
    codes = _service_codes(ServiceError) | set(api_errors._HTTP_CODES.values())
    for source in (ROOT / "orchestrator" / "api").rglob("*.py"):
        codes |= set(_LITERAL.findall(source.read_text(encoding="utf-8")))
    return codes


def test_every_error_code_is_documented() -> None:
    codes = _codes()
    assert {"run_not_found", "unauthorized", "validation_error", "thread_full"} <= codes
    documented = set(re.findall(r"`([a-z_]+)`", REFERENCE.read_text(encoding="utf-8")))
    assert sorted(codes - documented) == []
