"""The run page's waterfall with thousands of spans, in headless Chromium (Debian's).

A synthetic trace shaped like a run (a coordinator delegating to a worker over and over; each
delegation a tool span, the worker's invocation and its two model calls) of about 1,000 and
5,000 spans is drawn by the UI's own module (`orchestrator/web/static/waterfall.js`), then
filtered, folded, selected and scrolled. Each is timed in the page (`performance.now()`,
median of 5) and compared with a floor measured in the same page: building the same number of
bare rows (one `div` of text each). Target: drawing within 3x the floor; a filter, a fold, a
selection or a scroll well under 100 ms (what feels instant).

Run: .venv/bin/python bench/ui_waterfall.py
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from playwright.sync_api import sync_playwright

STATIC = Path(__file__).resolve().parent.parent / "orchestrator" / "web" / "static"
SIZES = (1_000, 5_000)

HARNESS = Path(__file__).with_suffix(".html")  # the page that draws and times


class _Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/harness.html":
            body = HARNESS.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def harness() -> Iterator[str]:
    """The UI's static files and the harness page on 127.0.0.1; yields the page's URL."""
    handler = functools.partial(_Handler, directory=str(STATIC))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/harness.html"
    finally:
        server.shutdown()
        server.server_close()


def main() -> int:
    chromium = shutil.which("chromium")
    if chromium is None:
        print("needs Debian's chromium (apt-get install chromium)", file=sys.stderr)
        return 2
    with harness() as url:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url)
            page.wait_for_function("window.ready === true")
            print("spans   draw ms  floor ms  ratio  filter ms  fold ms  select ms  scroll ms")
            for size in SIZES:
                m = page.evaluate(f"window.measure({size})")
                print(
                    f"{m['spans']:>5}  {m['draw']:8.1f}  {m['floor']:8.1f}  "
                    f"{m['draw'] / m['floor']:5.2f}  {m['filter']:9.1f}  {m['fold']:7.1f}  "
                    f"{m['select']:9.1f}  {m['scroll']:9.1f}"
                )
                print(json.dumps(m), file=sys.stderr)
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
