"""The web UI: its pages over the JSON API, their script and style, and Mermaid.

The npm `mermaid` package renders diagrams in the browser; `make setup` installs it and it is
served from here: no CDN, nothing vendored, works offline.
"""

from collections.abc import Awaitable, Callable
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["PAGES", "SecurityHeaders", "mount_ui"]

WEB = Path(__file__).resolve().parent.parent / "web"

# Scripts only from this origin; styles inline too, since Mermaid's SVG carries its own.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
# FastAPI's own API browsers load their assets from a CDN: they keep their defaults.
_EXEMPT = ("/docs", "/redoc")


class SecurityHeaders:
    """Adds the Content-Security-Policy (and nosniff, no-referrer) to every answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, adding the security headers to the answer."""
        if scope["type"] != "http" or str(scope["path"]).startswith(_EXEMPT):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)


# Each page's path and the file that is its page (its script reads the rest from the API).
PAGES = {
    "/": "runs.html",
    "/runs/{run_id}": "run.html",
    "/threads": "threads.html",
    "/threads/{thread_id}": "thread.html",
    "/agents": "agents.html",
    "/experiments": "experiments.html",
    "/experiments/{experiment_id}": "experiment.html",
}


def mount_ui(app: FastAPI, mermaid_dist: Path) -> None:
    """Serve the pages (`PAGES`) and their assets."""
    for path, page in PAGES.items():
        app.add_api_route(path, _page(WEB / "pages" / page), include_in_schema=False)
    app.mount("/static", StaticFiles(directory=WEB / "static"), name="static")
    # check_dir=False: without `make setup` the pages still load and say Mermaid is missing.
    app.mount(
        "/vendor/mermaid", StaticFiles(directory=mermaid_dist, check_dir=False), name="mermaid"
    )


def _page(file: Path) -> Callable[[], Awaitable[FileResponse]]:
    async def page() -> FileResponse:
        return FileResponse(file)

    return page
