"""uvicorn's server, made to drain the run service as soon as it is asked to exit."""

from __future__ import annotations

import asyncio
from types import FrameType

import uvicorn
from typing_extensions import override

__all__ = ["DrainingServer"]


class DrainingServer(uvicorn.Server):
    """Starts `RunService.drain` on SIGTERM or SIGINT, before uvicorn waits for connections.

    uvicorn closes open connections first and runs the app's shutdown after; draining at once
    lets the event streams still open deliver the end of each run (finished, or interrupted
    and recorded) to their followers.
    """

    @override
    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        state = getattr(self.config.app, "state", None)  # the FastAPI app Baton passed in
        service = getattr(state, "service", None)
        if service is not None:
            asyncio.get_running_loop().call_soon_threadsafe(service.drain)
        super().handle_exit(sig, frame)
