"""A streaming model's text, coalesced into `model_delta` events a client can keep up with."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["DELTA_EVERY_S", "Deltas"]

# At most one delta per model call this often: a fast model sends hundreds of pieces a second.
DELTA_EVERY_S = 0.05


class Deltas:
    """Gathers the pieces of one streamed reply and sends them on at most every `every_s`.

    Text goes out in whole words (the last, maybe partial, word waits for the next piece or the
    end), so that the redactor, which `send` applies, sees a secret whole, never split across
    two events. What is pending after a quiet `every_s` goes out by itself.
    """

    def __init__(self, send: Callable[[str], None], every_s: float = DELTA_EVERY_S) -> None:
        self._send = send
        self._every_s = every_s
        self._pending = ""
        self._last = float("-inf")
        self._timer: asyncio.TimerHandle | None = None

    def add(self, text: str) -> None:
        """Take a piece of the reply."""
        self._pending += text
        wait = self._last + self._every_s - time.monotonic()
        if wait <= 0:
            self._flush(whole=False)
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(wait, self._flush, False)

    def close(self) -> None:
        """The reply ended (or failed): send what is left."""
        self._flush(whole=True)

    def _flush(self, whole: bool) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        cut = len(self._pending) if whole else _last_space(self._pending)
        if cut:
            text, self._pending = self._pending[:cut], self._pending[cut:]
            self._last = time.monotonic()
            self._send(text)


def _last_space(text: str) -> int:
    """Where the text's last whole word ends (0: none is whole yet)."""
    return max(text.rfind(" "), text.rfind("\n"), text.rfind("\t")) + 1
