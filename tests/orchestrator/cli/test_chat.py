"""`baton chat` in a real pseudo-terminal, as a person types: turns of one thread, a turn
cancelled with Ctrl-C (SIGINT) without ending the chat, the commands, and /exit."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

import httpx
import pytest

from tests.service import ServiceProcess

pytestmark = [pytest.mark.ray]

ASK = "ask the user which account to pay the rent from"

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


class Terminal:
    """A command in a pseudo-terminal: what it shows, and what is typed into it."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self._main, side = pty.openpty()
        env = {**os.environ, "COLUMNS": "100", "TERM": "xterm-256color", **(env or {})}
        self.process = subprocess.Popen(command, stdin=side, stdout=side, stderr=side, env=env)
        os.close(side)
        self.shown = ""
        self._read = 0  # where the next `expect` starts looking

    def expect(self, pattern: str, timeout_s: float = 60) -> re.Match[str]:
        """Wait until the screen shows `pattern` (a regex) after what was matched before."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = re.compile(pattern).search(self.shown, self._read)
            if found:
                self._read = found.end()
                return found
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"never showed {pattern!r}; it showed:\n{self.shown}")
            ready, _, _ = select.select([self._main], [], [], left)
            if ready:
                try:
                    chunk = os.read(self._main, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"ended before {pattern!r}; it showed:\n{self.shown}")
                self.shown += ANSI.sub("", chunk.decode(errors="replace")).replace("\r\n", "\n")

    def type(self, line: str) -> None:
        os.write(self._main, line.encode() + b"\n")

    def close(self) -> int:
        try:
            return self.process.wait(timeout=60)
        finally:
            os.close(self._main)


def test_a_chat_of_turns_in_one_thread_a_cancelled_turn_and_the_commands(api: str) -> None:
    chat = Terminal(
        [sys.executable, "-m", "orchestrator", "chat", "--server", api, "--agent", "parrot"]
    )
    try:
        chat.expect("you> ")
        chat.type("hello")
        # The parrot answers by its turn's number: the second answer proves the first turn was
        # in the second's history (one thread).
        chat.expect("first answer")
        chat.expect("you> ")
        chat.type("and again")
        chat.expect("second answer")
        chat.expect("you> ")
        chat.type("/thread")
        thread = chat.expect(r"([0-9a-f]{32})").group(1)
        chat.type("/diagram")
        chat.expect("sequenceDiagram")
        chat.expect("parrot")
        # A new thread, with an agent that takes a minute: Ctrl-C cancels the turn only.
        chat.type("/new")
        chat.expect("a new thread")
        chat.type("/agent dozer")
        chat.expect("the next turns go to dozer")
        chat.type("doze off")
        chat.expect("dozer")  # its start, as it happens
        chat.process.send_signal(signal.SIGINT)
        chat.expect("turn cancelled")
        chat.expect("you> ")
        chat.type("/thread")
        dozing = chat.expect(r"([0-9a-f]{32})").group(1)
        chat.type("/exit")
        assert chat.close() == 0
    finally:
        if chat.process.poll() is None:
            chat.process.kill()
    turns = httpx.get(f"{api}/v1/threads/{thread}").json()["turns"]
    assert [t["status"] for t in turns] == ["succeeded", "succeeded"]
    assert [t["output"] for t in turns] == ["first answer", "second answer"]
    # (The cancelled turn is found by its thread: other tests' dozer runs share the service.)
    [turn] = httpx.get(f"{api}/v1/threads/{dozing}").json()["turns"]
    # A cancel is accepted (202) before the run has stopped: its event stream ends with it.
    assert "run_finished" in httpx.get(f"{api}/v1/runs/{turn['run_id']}/events", timeout=60).text
    [cancelled] = httpx.get(f"{api}/v1/threads/{dozing}").json()["turns"]
    assert cancelled["status"] == "cancelled", cancelled
    assert httpx.get(f"{api}/v1/runs/{cancelled['run_id']}").json()["task"] == "doze off"


def test_every_turn_prints_its_answer_and_a_question_is_shown_once(api: str) -> None:
    """Six fast turns: each answer is printed, even when its text was written before the chat
    followed the turn (a late follower gets no streamed text). A question: one line."""
    chat = Terminal(
        [sys.executable, "-m", "orchestrator", "chat", "--server", api, "--agent", "parrot"]
    )
    try:
        for thread in (1, 2):  # (a thread of the test service takes three turns)
            for n, answer in enumerate(["first answer", "second answer", "third answer"], 1):
                chat.expect("you> ")
                chat.type(f"thread {thread}, turn {n}")
                chat.expect(f"parrot ▸ {answer}")
            chat.expect("you> ")
            chat.type("/new")
        chat.type("/agent teller")
        chat.expect("the next turns go to teller")
        chat.type(ASK)
        chat.expect("your answer")
        chat.type("savings")
        chat.expect("ask_user: savings")
        chat.expect("you> ")
        assert chat.shown.count(f"asks: {ASK}") == 1, chat.shown
        chat.type("/exit")
        assert chat.close() == 0
    finally:
        if chat.process.poll() is None:
            chat.process.kill()


def test_a_word_the_key_may_not_give_is_refused_at_once_and_the_chat_goes_on(
    tenanted: ServiceProcess, access_keys: dict[str, str]
) -> None:
    """A key without `approve`: its approval is refused (403), said at once (not after the
    approval's ten minutes), and the person is back at the prompt."""
    env = {"BATON_API_KEY": access_keys["clerk"]}
    chat = Terminal(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "chat",
            "--server",
            tenanted.url,
            "--agent",
            "clerk",
        ],
        env,
    )
    try:
        chat.expect("you> ")
        chat.type("pay the invoice")
        chat.expect(r"approve this call\?")
        chat.type("y")
        chat.expect(
            "your word was refused: 403 forbidden: this key \\(clerk\\) lacks the 'approve' role"
        )
        chat.expect("you> ", timeout_s=10)
        chat.type("/exit")
        assert chat.close() == 0
    finally:
        if chat.process.poll() is None:
            chat.process.kill()
