"""An OpenID Connect issuer's signing side on 127.0.0.1: its JWKS over HTTP, and tokens it signs."""

from __future__ import annotations

import http.server
import json
import threading
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

__all__ = ["AUDIENCE", "ISSUER", "FakeIssuer"]

ISSUER = "https://issuer.test"
AUDIENCE = "baton-tests"


class FakeIssuer:
    """Publishes one RSA key (`kid` "k1") at `jwks_url`; `token` signs claims with it."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        body = json.dumps({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]})
        self.fetches = 0
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.fetches += 1
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def jwks_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/jwks.json"

    def token(
        self,
        sub: str = "alice",
        *,
        key: Any = None,
        algorithm: str = "RS256",
        expires_in: float = 300,
        **claims: Any,
    ) -> str:
        """A token of `sub`, valid for `expires_in` seconds (negative: expired), with `claims`
        (by default this issuer's `iss` and `aud`)."""
        now = int(time.time())
        payload = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now}
        payload |= {"exp": now + int(expires_in)} | claims
        signing = self.key if key is None else key
        return jwt.encode(payload, signing, algorithm=algorithm, headers={"kid": "k1"})

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
