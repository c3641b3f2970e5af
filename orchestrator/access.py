"""Who may do what: API keys with a name, a tenant and roles.

Keys come from `BATON_API_KEYS` / `BATON_API_KEYS_FILE` (plain keys: one tenant, every role) and
from an access file (`BATON_ACCESS_FILE`, YAML) that holds only a hash of each key:

    keys:
      - id: 3kq9z1xw             # the key's public part: baton_3kq9z1xw_<secret>
        name: billing-ci         # who did it, in runs, events and spans
        tenant: billing          # sees only its tenant's runs and threads
        roles: [submit, read]    # submit, read, approve, admin
        hash: scrypt:16384:8:1:<salt>:<digest>

The hash is scrypt (RFC 7914, in Python's standard library): a password hash, so a leaked file
gives nothing even for a key someone chose by hand. Its cost (about 50 ms and 16 MiB) is paid once
per key per process: the id names the one entry to check, and a key that matched is remembered
(by its SHA-256) so later requests cost a dictionary lookup. `baton keys new` makes a key of 256
random bits, prints it once and appends its hash.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents.core.limits import SpendCap

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_TENANT",
    "LOCAL",
    "ROLES",
    "Access",
    "AccessFile",
    "AccessFileError",
    "AccessFileWatch",
    "KeyEntry",
    "KeyRing",
    "Role",
    "SpendPolicy",
    "TenantCaps",
    "TokenVerifier",
    "new_key",
]

Role = Literal["submit", "read", "approve", "admin"]
ROLES: tuple[Role, ...] = ("submit", "read", "approve", "admin")
DEFAULT_TENANT = "default"

_PREFIX = "baton"
_SCRYPT = (2**14, 8, 1)  # n, r, p: OWASP's minimum for scrypt
_NAME = r"^[A-Za-z0-9_.@:-]{1,64}$"


@dataclass(frozen=True)
class Access:
    """A caller as the service knows it: who, of which tenant, allowed what."""

    who: str
    tenant: str = DEFAULT_TENANT
    roles: frozenset[Role] = frozenset(ROLES)

    def may(self, role: Role) -> bool:
        """Whether the caller has `role` (an admin has every role)."""
        return role in self.roles or "admin" in self.roles

    def lacks(self, role: Role) -> str | None:
        """Why the caller may not do what needs `role`, as every door says it (None: it may)."""
        return None if self.may(role) else f"this key ({self.who}) lacks the {role!r} role"

    def own(self, key: str) -> str:
        """An idempotency key as the caller's own (another caller's same key is another)."""
        return f"{self.who}:{key}"

    @property
    def tenant_filter(self) -> str | None:
        """The tenant the caller's reads are limited to (None: an admin sees every tenant)."""
        return None if "admin" in self.roles else self.tenant

    def sees(self, tenant: str) -> bool:
        """Whether something of `tenant` is the caller's to see."""
        return "admin" in self.roles or tenant == self.tenant


# A run started here, not through a door (`baton run`, the tests): every tenant, every role.
LOCAL = Access("local")


class KeyEntry(BaseModel):
    """One key of an access file (its hash, never the key)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9]{8}$")
    name: str = Field(pattern=_NAME)
    tenant: str = Field(default=DEFAULT_TENANT, pattern=_NAME)
    roles: list[Role] = Field(min_length=1)
    hash: str = Field(pattern=r"^scrypt:\d+:\d+:\d+:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$")
    daily_usd: float | None = Field(default=None, gt=0, description="The key's cap a UTC day.")
    daily_tokens: int | None = Field(default=None, ge=1)


class TenantCaps(BaseModel):
    """A tenant's spending caps a UTC day (beside the service's defaults)."""

    model_config = ConfigDict(extra="forbid")

    daily_usd: float | None = Field(default=None, gt=0)
    daily_tokens: int | None = Field(default=None, ge=1)


class AccessFile(BaseModel):
    """The access file: its keys."""

    model_config = ConfigDict(extra="forbid")

    keys: list[KeyEntry] = Field(default_factory=list)
    tenants: dict[Annotated[str, Field(pattern=_NAME)], TenantCaps] = Field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> AccessFile:
        """The file's keys; `AccessFileError` naming the file and the place when it is wrong."""
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except FileNotFoundError:
            return cls()
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise AccessFileError(f"{path}: {exc}") from None
        try:
            found = cls.model_validate(data)
        except ValidationError as exc:
            where = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'the file'}: {e['msg']}"
                for e in exc.errors()
            )
            raise AccessFileError(f"{path}: {where}") from None
        seen: set[str] = set()
        for entry in found.keys:
            for value in (entry.id, entry.name):
                if value in seen:
                    raise AccessFileError(f"{path}: {value!r} names two keys")
                seen.add(value)
        return found

    def write(self, path: Path) -> None:
        """Write the file (readable by its owner only: the hashes are still not for everyone)."""
        text = yaml.safe_dump(self.model_dump(), sort_keys=False)
        temporary = path.with_name(path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)


class AccessFileError(ValueError):
    """An access file that cannot be read or says something wrong."""


class AccessFileWatch:
    """An access file, read again when it changes (looked at at most once a second).

    One per service, shared by its key ring and its spending policy. Its first reading raises
    `AccessFileError` (a service does not start on a wrong file); a later one that fails keeps
    what was read last (a file being edited by hand), and says why at once, with the mistake's
    place: in the log (once per version of the file), and as `problem` (the service's
    readiness checks and metrics show it) until a good file is read.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp = self._look()
        self.current = AccessFile.read(path)
        self._looked_at = time.monotonic()
        self.problem: str | None = None  # why the file as it is now is not in force

    def _look(self) -> tuple[int, int]:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return (0, 0)
        return (info.st_mtime_ns, info.st_size)

    def refresh(self) -> AccessFile:
        """The file as it is now (read again if it changed since); a new object when it did."""
        now = time.monotonic()
        if now - self._looked_at >= 1.0:
            self._looked_at = now
            stamp = self._look()
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self.current = AccessFile.read(self.path)
                    self.problem = None
                except AccessFileError as exc:
                    self.problem = f"{exc}: the file read before stays in force"
                    logger.error("BATON_ACCESS_FILE %s", self.problem)
        return self.current


def _scrypt(key: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(key.encode(), salt=salt, n=n, r=r, p=p, maxmem=2**26, dklen=32)


def new_key(name: str, tenant: str, roles: Iterable[Role]) -> tuple[str, KeyEntry]:
    """A new key (shown once) and the entry that holds its hash."""
    key_id = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(8))
    key = f"{_PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
    salt = secrets.token_bytes(16)
    n, r, p = _SCRYPT
    digest = _scrypt(key, salt, n, r, p)
    encoded = f"scrypt:{n}:{r}:{p}:{base64.b64encode(salt).decode()}:"
    entry = KeyEntry(
        id=key_id,
        name=name,
        tenant=tenant,
        roles=sorted(set(roles), key=ROLES.index),
        hash=encoded + base64.b64encode(digest).decode(),
    )
    return key, entry


def _matches(key: str, stored: str) -> bool:
    _, n, r, p, salt, digest = stored.split(":")
    found = _scrypt(key, base64.b64decode(salt), int(n), int(r), int(p))
    return hmac.compare_digest(found, base64.b64decode(digest))


class TokenVerifier(Protocol):
    """Bearer tokens of an identity provider (`orchestrator.api.tokens.OidcVerifier`)."""

    def takes(self, presented: str) -> bool:
        """Whether a presented credential is one of its tokens (not an API key)."""

    async def identify(self, token: str) -> Access:
        """The caller the token names (raises `orchestrator.oidc.TokenRefused` if refused)."""


class KeyRing:
    """The accepted credentials: API keys, and an OIDC issuer's JWTs when one is configured.

    Plain keys have one tenant and every role; an access file's are kept as hashes; a JWT names
    its caller by its claims (`orchestrator.oidc`). A plain key is compared with every accepted
    one in constant time; a file's key is checked against the one entry its id names (scrypt,
    in a thread, two at a time), then remembered. The file is read again when it changes (at
    most once a second), so a key added or removed takes effect without a restart. Keys are
    never logged; plain keys' callers are named by a hash of their key.
    """

    _REMEMBER = 4096  # keys that matched (or did not), by their SHA-256

    def __init__(
        self,
        keys: Iterable[str] = (),
        access: AccessFileWatch | None = None,
        oidc: TokenVerifier | None = None,
    ) -> None:
        self._plain = [k.encode() for k in keys]
        self._watch = access
        self._oidc = oidc
        self._read = AccessFile()  # the file `_entries` were built from
        self._entries: dict[str, KeyEntry] = {}
        self._known: OrderedDict[bytes, Access | None] = OrderedDict()
        self._hashing = asyncio.Semaphore(2)

    @property
    def enabled(self) -> bool:
        """Whether the service requires API keys."""
        return bool(self._plain) or self._watch is not None or self._oidc is not None

    def _plain_access(self, presented: str) -> Access | None:
        candidate = presented.encode()
        matched = False
        for key in self._plain:  # no early exit: every key is compared
            matched |= hmac.compare_digest(candidate, key)
        if not matched:
            return None
        return Access("key:" + hashlib.sha256(candidate).hexdigest()[:16])

    async def identify(self, presented: str) -> Access | None:
        """The caller a presented key names, or None when it is not accepted."""
        plain = self._plain_access(presented)
        if plain is not None or self._watch is None:
            return plain
        current = self._watch.refresh()
        if current is not self._read:
            self._read, self._entries = current, {e.id: e for e in current.keys}
            self._known.clear()  # a key removed from the file stops working now
        fingerprint = hashlib.sha256(presented.encode()).digest()
        if fingerprint in self._known:
            self._known.move_to_end(fingerprint)
            return self._known[fingerprint]
        prefix, _, rest = presented.partition("_")
        key_id, _, _ = rest.partition("_")
        entry = self._entries.get(key_id) if prefix == _PREFIX else None
        access = None
        if entry is not None:
            async with self._hashing:
                ok = await asyncio.to_thread(_matches, presented, entry.hash)
            if ok:
                access = Access(entry.name, entry.tenant, frozenset(entry.roles))
        self._known[fingerprint] = access
        while len(self._known) > self._REMEMBER:
            self._known.popitem(last=False)
        return access

    async def bearer(self, authorization: str) -> Access | None:
        """The caller when an `Authorization` header carries an accepted bearer key or JWT.

        Raises:
            TokenRefused: a JWT that is not accepted (the message says why).
        """
        scheme, _, presented = authorization.partition(" ")
        if scheme.lower() != "bearer":
            return None
        presented = presented.strip()
        if self._oidc is not None and self._oidc.takes(presented):
            return await self._oidc.identify(presented)
        return await self.identify(presented)


class SpendPolicy:
    """The spending caps a run is held to: its tenant's and its key's per UTC day.

    The service's defaults (settings), overridden per tenant (`tenants:`) and per key
    (`daily_usd`, `daily_tokens` on its entry) by the access file, read again when it changes.
    """

    def __init__(
        self,
        *,
        tenant_daily_usd: float | None = None,
        tenant_daily_tokens: int | None = None,
        key_daily_usd: float | None = None,
        key_daily_tokens: int | None = None,
        warn_at: float = 0.8,
        access: AccessFileWatch | None = None,
    ) -> None:
        self._tenant = (tenant_daily_usd, tenant_daily_tokens)
        self._key = (key_daily_usd, key_daily_tokens)
        self._warn_at = warn_at
        self._watch = access

    def caps(self, tenant: str, who: str | None) -> tuple[SpendCap, ...]:
        """The daily caps of a run of `tenant` submitted by `who` (a key's name)."""
        file = self._watch.refresh() if self._watch is not None else AccessFile()
        found: list[SpendCap] = []
        own = file.tenants.get(tenant)
        usd = own.daily_usd if own and own.daily_usd is not None else self._tenant[0]
        tokens = own.daily_tokens if own and own.daily_tokens is not None else self._tenant[1]
        if usd is not None or tokens is not None:
            found.append(
                SpendCap(scope=f"tenant:{tenant}", usd=usd, tokens=tokens, warn_at=self._warn_at)
            )
        entry = next((e for e in file.keys if e.name == who), None)
        usd = entry.daily_usd if entry and entry.daily_usd is not None else self._key[0]
        tokens = entry.daily_tokens if entry and entry.daily_tokens is not None else self._key[1]
        if who and (usd is not None or tokens is not None):
            found.append(
                SpendCap(scope=f"key:{who}", usd=usd, tokens=tokens, warn_at=self._warn_at)
            )
        return tuple(found)
