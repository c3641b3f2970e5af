"""The web UI: four pages over the JSON API, their script and style, and Mermaid.

The npm `mermaid` package renders diagrams in the browser; `make setup` installs it and it is
served from here: no CDN, nothing vendored, works offline.
"""

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SecurityHeaders", "mount_ui"]

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


def mount_ui(app: FastAPI, mermaid_dist: Path) -> None:
    """Serve the pages and their assets.

    `/`, `/runs/{id}`, `/threads`, `/threads/{id}`, `/agents`, `/experiments` and
    `/experiments/{id}`.
    """
    pages = WEB / "pages"

    @app.get("/", include_in_schema=False)
    async def runs_page() -> FileResponse:
        return FileResponse(pages / "runs.html")

    @app.get("/runs/{run_id}", include_in_schema=False)
    async def run_page(run_id: str) -> FileResponse:
        return FileResponse(pages / "run.html")

    @app.get("/threads", include_in_schema=False)
    async def threads_page() -> FileResponse:
        return FileResponse(pages / "threads.html")

    @app.get("/threads/{thread_id}", include_in_schema=False)
    async def thread_page(thread_id: str) -> FileResponse:
        return FileResponse(pages / "thread.html")

    @app.get("/agents", include_in_schema=False)
    async def agents_page() -> FileResponse:
        return FileResponse(pages / "agents.html")

    @app.get("/experiments", include_in_schema=False)
    async def experiments_page() -> FileResponse:
        return FileResponse(pages / "experiments.html")

    @app.get("/experiments/{experiment_id}", include_in_schema=False)
    async def experiment_page(experiment_id: str) -> FileResponse:
        return FileResponse(pages / "experiment.html")

    app.mount("/static", StaticFiles(directory=WEB / "static"), name="static")
    # check_dir=False: without `make setup` the pages still load and say Mermaid is missing.
    app.mount(
        "/vendor/mermaid", StaticFiles(directory=mermaid_dist, check_dir=False), name="mermaid"
    )
