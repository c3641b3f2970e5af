"""Process settings, read once from the environment at the edge (CLI and service start-up)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from orchestrator.access import ROLES
from orchestrator.oidc import OidcOptions
from orchestrator.store.records import (
    DEFAULT_POOL_SIZE,
    DEFAULT_STORE_WAIT_S,
    POOL_OVERFLOW,
    StoreRefused,
    store_url_of,
)

__all__ = ["Settings", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps a service reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Settings(BaseSettings):
    """`BATON_*` variables; `RAY_ADDRESS` selects a cluster (unset: a local Ray instance)."""

    model_config = SettingsConfigDict(env_prefix="BATON_", extra="ignore")

    config: Path | None = None
    store_url: str = Field(
        default="sqlite+aiosqlite:///baton.db",
        description="Run store: `sqlite:///PATH` or `postgresql://USER:PASSWORD@HOST:PORT/DB` "
        "(the async drivers, aiosqlite and asyncpg, are taken; their SQLAlchemy names work too).",
    )
    store_pool_size: int = Field(
        default=DEFAULT_POOL_SIZE,
        ge=1,
        description="Run store connections a service keeps open for reuse (up to "
        f"{POOL_OVERFLOW} more are opened in a burst and closed after use).",
    )
    store_wait_s: float = Field(
        default=DEFAULT_STORE_WAIT_S,
        gt=0,
        le=600,
        description="How long a store call waits on the database (a connection, a statement, "
        "SQLite's write lock) before the API answers 503 with Retry-After.",
    )
    store_start_wait_s: float = Field(
        default=60.0,
        ge=0,
        le=3600,
        description="How long `baton serve` waits at start for a run store that does not answer "
        "yet (a Kubernetes pod often starts before its database), retrying with backoff; then "
        "it stops, saying where and why in one line.",
    )
    namespace: str = "baton"
    ray_address: str | None = Field(
        default=None, validation_alias=AliasChoices("RAY_ADDRESS", "BATON_RAY_ADDRESS")
    )

    # The HTTP service (`baton serve`).
    host: str = "127.0.0.1"
    public_url: str | None = Field(
        default=None,
        description="Where A2A clients reach this service, as its agent card says (default: "
        "http://HOST:PORT).",
    )
    port: int = Field(default=8000, ge=0, le=65535)
    retention_days: float | None = Field(
        default=None,
        gt=0,
        description="Finished runs older than this many days are removed with their spans, "
        "events and steps (default: kept); `baton serve` sweeps hourly, `baton prune` at once.",
    )
    retention_max_runs: int | None = Field(
        default=None,
        ge=1,
        description="Only the newest this many finished runs are kept (default: all).",
    )
    memory_retention_days: float | None = Field(
        default=None,
        gt=0,
        description="Long-term memory items not written for this many days are removed "
        "(default: kept); by the same sweep as runs, and by `baton prune --memory-older-than`.",
    )
    thread_max_turns: int = Field(
        default=1000,
        ge=1,
        description="A thread takes at most this many turns; the next is refused (409 "
        "`thread_full`): start a new thread.",
    )
    retention_sweep_s: float = Field(
        default=3600.0,
        gt=0,
        description="How often `baton serve` applies the retention policy (seconds).",
    )
    request_head_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="How long a request's head (request line and headers) may take to arrive; "
        "past it the service answers 408 and closes the connection. Heads are also bounded to "
        "64 KiB and 100 headers (431).",
    )
    a2a_blocking_wait_s: float | None = Field(
        default=None,
        gt=0,
        description="How long a blocking A2A SendMessage waits for the task's end before it "
        "answers with the task as it stands, still working (default: to the end, as the A2A "
        "spec says). Set it below your A2A clients' timeout (the a2a-sdk client's is 5 s) so "
        "that a long task's client learns its id and follows it.",
    )
    a2a_push_allow_private: bool = Field(
        default=False,
        description="A2A push notification webhooks may be plain HTTP and on private or "
        "loopback addresses (default: HTTPS on public addresses only).",
    )
    api_keys: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(), description="Accepted bearer keys, comma-separated."
    )
    api_keys_file: Path | None = Field(default=None, description="One accepted key per line.")
    access_file: Path | None = Field(
        default=None,
        description="Keys with a name, a tenant and roles, kept as hashes (YAML; `baton keys "
        "new` adds one). Read again when it changes.",
    )
    oidc_issuer: str | None = Field(
        default=None,
        description="Accept bearer JWTs of this OpenID Connect issuer (its `iss`) besides API "
        "keys; needs `oidc_audience` and `oidc_jwks_url`.",
    )
    oidc_audience: str | None = Field(
        default=None, description="The `aud` accepted tokens carry (this service's client id)."
    )
    oidc_jwks_url: str | None = Field(
        default=None,
        description="Where the issuer publishes its signing keys (`jwks_uri` of its "
        "`/.well-known/openid-configuration`).",
    )
    oidc_tenant_claim: str = Field(
        default="tenant", description="The claim naming the caller's tenant (required)."
    )
    oidc_roles_claim: str = Field(
        default="roles",
        description="The claim listing the caller's roles (a list, or a space-separated string).",
    )
    oidc_default_roles: Annotated[tuple[str, ...], NoDecode] = Field(
        default=("submit", "read"),
        description="The roles of a token without the roles claim, comma-separated.",
    )
    tenant_daily_usd: float | None = Field(
        default=None, gt=0, description="Each tenant's spending cap a UTC day, in dollars."
    )
    tenant_daily_tokens: int | None = Field(
        default=None, ge=1, description="Each tenant's spending cap a UTC day, in tokens."
    )
    key_daily_usd: float | None = Field(
        default=None, gt=0, description="Each API key's spending cap a UTC day, in dollars."
    )
    key_daily_tokens: int | None = Field(
        default=None, ge=1, description="Each API key's spending cap a UTC day, in tokens."
    )
    spend_warn_at: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="The share of a spending cap at which its runs get a `spend_warning`.",
    )
    allowed_origins: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="Origins (scheme://host[:port]) allowed to call /mcp besides loopback ones, "
        "comma-separated.",
    )
    max_body_bytes: int = Field(default=1_048_576, ge=1024)
    max_concurrent_runs: int = Field(default=32, ge=1)
    max_queued_runs: int = Field(default=1000, ge=0)
    rate_limit_per_s: float = Field(default=50.0, gt=0, description="Requests per key.")
    rate_limit_burst: int = Field(default=200, ge=1)
    sse_heartbeat_s: float = Field(default=15.0, gt=0)
    ledger_feed_events: int = Field(
        default=50_000,
        ge=1_000,
        le=10_000_000,
        description="Events of every run the ledger keeps in memory for services following it "
        "(a follower further behind reads the store); its memory is bounded by them.",
    )
    ledger_shards: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="Actors the team's ledger is cut into (each run's traffic on one); unset: "
        "one per 4 cores of the Ray cluster. A ledger already up keeps its count.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info",
        description="What `baton serve` logs of its own (versions rolled, runs recorded late, "
        "retention, problems): from this level up, on stderr.",
    )
    access_log: bool = Field(
        default=True,
        description="Log every HTTP request (uvicorn's access log); off, a busy service spends "
        "about 5% less CPU (behind a proxy that logs requests itself, say).",
    )
    lease_s: float = Field(
        default=30.0,
        gt=0,
        description="A run whose service instance has not renewed its lease for this long is "
        "marked interrupted by another instance.",
    )
    shutdown_grace_s: float = Field(
        default=10.0,
        ge=0,
        description="On SIGTERM or SIGINT, how long runs in flight may go on before they are "
        "interrupted (and recorded with their events and spans).",
    )
    instance_id: str | None = Field(
        default=None, description="Names this service instance (default: host name and port)."
    )
    forbid_remote_models: bool = Field(
        default=False,
        description="Agents may call only built-in models and servers on loopback (tests).",
    )
    server: str | None = Field(default=None, description="`baton run --server` default URL.")
    mermaid_ink_server: str | None = Field(
        default=None,
        validation_alias=AliasChoices("MERMAID_INK_SERVER", "BATON_MERMAID_INK_SERVER"),
        description="Render SVG/PNG diagrams on this mermaid-ink server instead of Chromium.",
    )
    chromium: str | None = Field(default=None, description="The browser that renders diagrams.")
    mermaid_dist: Path | None = Field(
        default=None, description="The npm mermaid package's dist folder (default: make setup's)."
    )
    api_key: str | None = Field(default=None, description="The key `baton run --server` sends.")

    @field_validator("store_url")
    @classmethod
    def _store_driver(cls, value: str) -> str:
        try:
            return store_url_of(value)
        except StoreRefused:
            return value  # (refused when opened, in one line: never echoed with its password)

    @field_validator("api_keys", "allowed_origins", "oidc_default_roles", mode="before")
    @classmethod
    def _split_keys(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(k.strip() for k in value.split(",") if k.strip())
        return value

    @model_validator(mode="after")
    def _oidc_whole(self) -> Settings:
        given = [self.oidc_issuer, self.oidc_audience, self.oidc_jwks_url]
        if any(given) and not all(given):
            raise ValueError(
                "BATON_OIDC_ISSUER, BATON_OIDC_AUDIENCE and BATON_OIDC_JWKS_URL go together: "
                "set all three to accept an issuer's tokens"
            )
        unknown = set(self.oidc_default_roles) - set(ROLES)
        if unknown:
            raise ValueError(f"oidc_default_roles: unknown roles {sorted(unknown)}: {ROLES}")
        return self

    def oidc(self) -> OidcOptions | None:
        """Which bearer JWTs are accepted (None: no issuer is configured)."""
        if not (self.oidc_issuer and self.oidc_audience and self.oidc_jwks_url):
            return None
        return OidcOptions(
            issuer=self.oidc_issuer,
            audience=self.oidc_audience,
            jwks_url=self.oidc_jwks_url,
            tenant_claim=self.oidc_tenant_claim,
            roles_claim=self.oidc_roles_claim,
            default_roles=tuple(r for r in ROLES if r in self.oidc_default_roles),
        )

    def accepted_keys(self) -> tuple[str, ...]:
        """`api_keys` plus the lines of `api_keys_file` (blank lines and `#` comments skipped)."""
        keys = list(self.api_keys)
        if self.api_keys_file is not None:
            for line in self.api_keys_file.read_text(encoding="utf-8").splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    keys.append(line)
        return tuple(keys)
