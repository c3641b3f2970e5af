"""Which bearer JWTs of an OpenID Connect issuer are accepted, and how a refused one is told.

`orchestrator.api.tokens` checks them: apart, so that reading the settings does not load PyJWT
and cryptography (0.12 s measured), which only `baton serve` needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.access import Role

__all__ = ["OidcOptions", "TokenRefused"]


class TokenRefused(Exception):
    """A bearer JWT was not accepted; the message says why (it is told to the caller)."""


@dataclass(frozen=True)
class OidcOptions:
    """Which tokens are accepted, and which claims name the caller's tenant and roles.

    Args:
        issuer: the `iss` tokens must carry.
        audience: the `aud` tokens must carry (this service's client id or URL).
        jwks_url: where the issuer publishes its signing keys.
        tenant_claim: the claim that names the caller's tenant (required in every token).
        roles_claim: the claim listing the caller's roles (a list or a space-separated string).
        default_roles: the roles of a token without `roles_claim`.
        algorithms: the signature algorithms accepted.
    """

    issuer: str
    audience: str
    jwks_url: str
    tenant_claim: str = "tenant"
    roles_claim: str = "roles"
    default_roles: tuple[Role, ...] = ("submit", "read")
    algorithms: tuple[str, ...] = ("RS256", "ES256", "PS256", "EdDSA")
