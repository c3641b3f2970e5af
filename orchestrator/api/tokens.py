"""Bearer JWTs from an OpenID Connect issuer, as callers: tenant and roles from their claims.

PyJWT checks the signature against the issuer's published keys (its JWKS, fetched and cached;
fetched again when a token names a key not seen yet, as issuers rotate them), the expiry, the
issuer and the audience. Only the asymmetric algorithms configured are accepted: never `none`,
never a shared-secret algorithm a public key could be abused as.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jwt

from orchestrator.access import ROLES, Access, Role
from orchestrator.oidc import OidcOptions, TokenRefused

__all__ = ["OidcVerifier"]


@dataclass
class OidcVerifier:
    """Turns a bearer JWT into the caller it names, or refuses it (`TokenRefused`)."""

    options: OidcOptions
    _keys: jwt.PyJWKClient = field(init=False)

    def __post_init__(self) -> None:
        self._keys = jwt.PyJWKClient(self.options.jwks_url, cache_keys=True, lifespan=300)

    @staticmethod
    def takes(presented: str) -> bool:
        """Whether a bearer credential is a JWT (three dot-separated parts), not an API key."""
        return presented.count(".") == 2 and presented.startswith("eyJ")

    async def identify(self, token: str) -> Access:
        """The caller the token names: `sub` as who, its tenant and roles from its claims."""
        options = self.options
        try:
            header = jwt.get_unverified_header(token)
            if header.get("alg") not in options.algorithms:
                raise TokenRefused(f"the token's algorithm {header.get('alg')!r} is not accepted")
            # PyJWKClient fetches with urllib: in a thread, not on the event loop.
            key = await asyncio.to_thread(self._keys.get_signing_key_from_jwt, token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=list(options.algorithms),
                audience=options.audience,
                issuer=options.issuer,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except TokenRefused:
            raise
        except jwt.ExpiredSignatureError:
            raise TokenRefused("the token has expired") from None
        except jwt.InvalidAudienceError:
            raise TokenRefused("the token is not for this service (its audience)") from None
        except jwt.InvalidIssuerError:
            raise TokenRefused("the token was not issued by the configured issuer") from None
        except jwt.PyJWKClientError as exc:
            raise TokenRefused(f"the token's signing key is unknown: {exc}") from None
        except jwt.InvalidTokenError as exc:
            raise TokenRefused(f"the token is not valid: {exc}") from None
        tenant = claims.get(options.tenant_claim)
        if not isinstance(tenant, str) or not tenant:
            raise TokenRefused(f"the token names no tenant (its `{options.tenant_claim}` claim)")
        return Access(f"jwt:{claims['sub']}", tenant, frozenset(self._roles(claims)))

    def _roles(self, claims: dict[str, Any]) -> Sequence[Role]:
        said = claims.get(self.options.roles_claim)
        if said is None:
            return self.options.default_roles
        names = said.split() if isinstance(said, str) else said if isinstance(said, list) else []
        return [r for r in ROLES if r in names]  # roles Baton does not know are not kept
