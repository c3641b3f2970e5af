"""Secret redaction: no API key or configured secret reaches a span, a log line or the store.

Each process builds one `Redactor` from what it knows to be secret: the values of the
environment variables a config names, model parameters such as `api_key`, and any environment
variable whose name says it holds a credential. Well-known key shapes (`sk-...`, bearer tokens)
are caught too, as a safety net for keys nobody declared.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

__all__ = [
    "REDACTED",
    "Redactor",
    "install_log_redaction",
    "is_secret_name",
    "secret_values_from_env",
    "secret_values_in",
    "url_query_values",
]

REDACTED = "[REDACTED]"
# Shorter values would redact ordinary words; no real credential is this short (nor is any
# key shape or URL credential below).
_MIN_SECRET_CHARS = 6
# Redacted short strings remembered, and how short.
_SEEN_MAX = 4096
_SEEN_MAX_CHARS = 128
# A name says "credential" when its last part does: OPENAI_API_KEY, HF_TOKEN, x-api-key,
# Authorization, db_password; but not max_tokens or token_budget.
_SECRET_NAME = re.compile(
    r"(?:^|[_\-.])(?:api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|secret[_\-]?key"
    r"|secret|token|password|passwd|credentials?|authorization|auth)$",
    re.I,
)
_KEY_SHAPES = re.compile(
    r"sk-[A-Za-z0-9_\-]{16,}"  # OpenAI, Anthropic and many compatible servers
    r"|(?i:bearer)\s+[A-Za-z0-9._\-~+/]{16,}=*"
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|gh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack tokens
)

# Credentials inside URLs: a query parameter named like one (`?key=`, `&access_token=`,
# `X-Amz-Signature=`), and the password of `scheme://user:password@host`. The name stays.
_URL_SECRETS = re.compile(
    r"(?P<name>[?&][A-Za-z0-9_.\-]*(?:key|token|secret|password|passwd|signature|sig|auth)=)"
    r"[^&#\s\"'<>]+"
    r"|(?P<user>://[^/\s:@]+:)[^/\s@]+(?=@)",
    re.I,
)


def _keep_name(match: re.Match[str]) -> str:
    return (match.group("name") or match.group("user")) + REDACTED


# Where a config holds credentials whatever their names: header mappings, servers' URLs.
_HEADER_KEYS = frozenset({"headers", "extra_headers", "default_headers"})
_URL_KEYS = frozenset({"api_base", "base_url", "url", "endpoint"})


def _credential(value: str) -> set[str]:
    # "Bearer <token>": the token alone may show up elsewhere too.
    return {value, value.split(" ", 1)[-1]}


def url_query_values(url: str) -> set[str]:
    """The values of a URL's query (each may be a credential: `?code=`, `?sig=`, `?key=`)."""
    return {value for _, value in parse_qsl(urlsplit(url).query, keep_blank_values=False)}


def is_secret_name(name: str) -> bool:
    """Whether a variable or parameter name says that its value is a credential."""
    return bool(_SECRET_NAME.search(name))


def secret_values_from_env(environ: Mapping[str, str], names: Iterable[str] = ()) -> set[str]:
    """Values of the named variables, and of every variable whose name says it is a secret."""
    named = set(names)
    return {value for key, value in environ.items() if key in named or is_secret_name(key)}


def secret_values_in(data: Any) -> set[str]:
    """Credentials inside `data` (model params), by name and by position.

    By name: string values under secret-sounding keys. By position, whatever their names (a
    service may call its key anything: `Ocp-Apim-Subscription-Key`, Azure Functions' `?code=`):
    every value of a header mapping (`headers`, `extra_headers`), and every query value of a
    server's URL (`api_base`, `base_url`, `url`).
    """
    found: set[str] = set()
    if isinstance(data, Mapping):
        for key, item in data.items():
            if isinstance(item, str) and is_secret_name(str(key)):
                found |= _credential(item)
            elif str(key).lower() in _HEADER_KEYS and isinstance(item, Mapping):
                for value in item.values():
                    if isinstance(value, str):
                        found |= _credential(value)
            elif str(key).lower() in _URL_KEYS and isinstance(item, str):
                found |= url_query_values(item)
            else:
                found |= secret_values_in(item)
    elif isinstance(data, list | tuple):
        for item in data:
            found |= secret_values_in(item)
    return found


class Redactor:
    """Replaces known secret values and well-known key shapes with `[REDACTED]`."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        # Short strings recur (agent, model and tool names, span names): each is scanned once.
        self._seen: dict[str, str] = {}
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        """Also redact these values from now on."""
        fresh = {s for s in secrets if isinstance(s, str) and len(s) >= _MIN_SECRET_CHARS}
        with self._lock:
            if fresh <= self._secrets:
                return
            self._secrets |= fresh
            # Longest first, so that a secret containing another is replaced whole.
            ordered = sorted(self._secrets, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(s) for s in ordered))
            self._seen = {}

    def text(self, value: str) -> str:
        """`value` with every secret replaced."""
        if len(value) < _MIN_SECRET_CHARS:  # too short for any secret or key shape
            return value
        seen = self._seen
        known = seen.get(value)
        if known is not None:
            return known
        pattern = self._pattern
        redacted = value if pattern is None else pattern.sub(REDACTED, value)
        redacted = _URL_SECRETS.sub(_keep_name, _KEY_SHAPES.sub(REDACTED, redacted))
        if len(value) <= _SEEN_MAX_CHARS:
            if len(seen) >= _SEEN_MAX:
                seen.clear()
            seen[value] = redacted
        return redacted

    def value(self, value: Any) -> Any:
        """`value` with every string inside it redacted (dicts, lists and tuples walked)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.value(v) for v in value)
        return value

    def mapping(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of `data` in which values under secret-sounding keys are replaced whole."""
        out: dict[str, Any] = {}
        for key, item in data.items():
            if is_secret_name(str(key)) and item not in (None, ""):
                out[key] = REDACTED
            elif isinstance(item, Mapping):
                out[key] = self.mapping(item)
            elif isinstance(item, list | tuple):
                out[key] = [
                    self.mapping(v) if isinstance(v, Mapping) else self.value(v) for v in item
                ]
            else:
                out[key] = self.value(item)
        return out


_installed: Redactor | None = None


def install_log_redaction(redactor: Redactor) -> None:
    """Redact every log record this process creates, whatever logger or handler it goes to.

    The message is formatted with its arguments and redacted at creation time; an attached
    exception's traceback is formatted and redacted then too.
    """
    global _installed
    if _installed is not None:
        return
    _installed = redactor
    base = logging.getLogRecordFactory()
    formatter = logging.Formatter()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = base(*args, **kwargs)
        try:
            message = record.getMessage()
            redacted = redactor.text(message)
            if redacted != message:
                # Redact the arguments in place first: some formatters (uvicorn's access log)
                # read `args` as a tuple of fields, and must still find one.
                if isinstance(record.args, tuple):
                    record.args = tuple(
                        redactor.text(a) if isinstance(a, str) else a for a in record.args
                    )
                    record.msg = redactor.text(str(record.msg))
                if redactor.text(record.getMessage()) != record.getMessage():
                    record.msg, record.args = redacted, None  # a secret split across fields
            if record.exc_info and record.exc_info[0] is not None:
                record.exc_text = redactor.text(formatter.formatException(record.exc_info))
        except Exception:  # a record that cannot be formatted is left for logging to report
            pass
        return record

    logging.setLogRecordFactory(factory)
