"""Mermaid text to SVG or PNG, offline: the npm `mermaid` package in headless Chromium.

With `MERMAID_INK_SERVER` set, mermaid-py's own rendering path is used instead: it sends the
diagram to that mermaid-ink server (never to the public mermaid.ink unless that is the address
given).
"""

from __future__ import annotations

import contextlib
import html
import io
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Literal

__all__ = ["RenderError", "default_mermaid_dist", "find_chromium", "render_diagram"]

Format = Literal["svg", "png"]

_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>rendering</title>
<script src="{script}"></script></head>
<body><pre id="src">{source}</pre><textarea id="out"></textarea>
<script>
mermaid.initialize({{startOnLoad: false, securityLevel: "strict", maxTextSize: 1000000}});
const out = document.getElementById("out");
mermaid.render("diagram", document.getElementById("src").textContent)
  .then((r) => {{ out.textContent = r.svg; document.title = "rendered"; }})
  .catch((e) => {{ out.textContent = String(e); document.title = "failed"; }});
</script></body></html>
"""
_PICTURE = """<!doctype html>
<html><head><meta charset="utf-8"><style>html, body {{ margin: 0; background: white; }}</style>
</head><body>{svg}</body></html>
"""


class RenderError(Exception):
    """The diagram could not be rendered (no browser, no mermaid package, a Mermaid error)."""


def default_mermaid_dist() -> Path:
    """Where `make setup` installs the npm `mermaid` package (`orchestrator/web`)."""
    return Path(__file__).resolve().parent / "web" / "node_modules" / "mermaid" / "dist"


def find_chromium(explicit: str | None = None) -> str | None:
    """The Chromium (or Chrome) binary: `explicit`, else the first one on PATH."""
    if explicit:
        return explicit
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _chromium(binary: str, url: str, workdir: Path, *extra: str) -> str:
    args = [
        binary,
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",  # the machine may have no network at all
        "--disable-component-update",
        "--disable-sync",
        "--allow-file-access-from-files",
        f"--user-data-dir={workdir / 'profile'}",
        *extra,
        url,
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.insert(1, "--no-sandbox")  # Chromium's sandbox refuses to run as root
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RenderError(f"could not run {binary}: {exc}") from exc
    return done.stdout


def _svg_size(svg: str) -> tuple[int, int]:
    box = re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) ([\d.]+)"', svg)
    if box is None:
        return 1200, 800
    return int(float(box.group(1))) + 20, int(float(box.group(2))) + 20


def _render_in_chromium(text: str, fmt: Format, chromium: str, mermaid_dist: Path) -> bytes:
    script = mermaid_dist / "mermaid.min.js"
    if not script.is_file():
        raise RenderError(
            f"the npm mermaid package is not installed ({script} is missing): run `make setup`"
        )
    with tempfile.TemporaryDirectory(prefix="baton-render-") as tmp:
        workdir = Path(tmp)
        page = workdir / "page.html"
        page.write_text(
            _PAGE.format(script=script.as_uri(), source=html.escape(text)), encoding="utf-8"
        )
        dom = _chromium(
            chromium, page.as_uri(), workdir, "--virtual-time-budget=30000", "--dump-dom"
        )
        found = re.search(r'<textarea id="out">(.*?)</textarea>', dom, re.S)
        result = html.unescape(found.group(1)) if found else ""
        if "<title>rendered</title>" not in dom or not result.startswith("<svg"):
            raise RenderError(f"Mermaid could not render the diagram: {result[:300] or dom[:300]}")
        if fmt == "svg":
            return result.encode()
        picture = workdir / "picture.html"
        picture.write_text(_PICTURE.format(svg=result), encoding="utf-8")
        width, height = _svg_size(result)
        png = workdir / "diagram.png"
        _chromium(
            chromium,
            picture.as_uri(),
            workdir,
            f"--window-size={width},{height}",
            f"--screenshot={png}",
            "--hide-scrollbars",
        )
        if not png.is_file():
            raise RenderError("Chromium did not write the screenshot")
        return png.read_bytes()


def _render_with_ink(text: str, fmt: Format) -> bytes:
    # mermaid-py's renderer reads MERMAID_INK_SERVER itself; it prints a notice on import.
    with contextlib.redirect_stdout(io.StringIO()):
        from mermaid import Graph, Mermaid
    try:
        rendered = Mermaid(Graph("diagram", text))
    except Exception as exc:  # network or server errors
        raise RenderError(f"the mermaid-ink server could not render it: {exc}") from exc
    response = rendered.svg_response if fmt == "svg" else rendered.img_response
    return bytes(response.content)


def render_diagram(
    text: str,
    fmt: Format,
    *,
    ink_server: str | None = None,
    chromium: str | None = None,
    mermaid_dist: Path | None = None,
) -> bytes:
    """Render Mermaid text as SVG or PNG bytes.

    Args:
        text: the Mermaid text.
        fmt: `svg` or `png`.
        ink_server: a mermaid-ink server's address (`MERMAID_INK_SERVER`): render there.
        chromium: the browser binary (default: found on PATH).
        mermaid_dist: the npm mermaid package's `dist` folder (default: `make setup`'s).

    Raises:
        RenderError: saying what is missing or what went wrong.
    """
    if ink_server:
        return _render_with_ink(text, fmt)
    binary = find_chromium(chromium)
    if binary is None:
        raise RenderError(
            "no Chromium found to render with: install it (apt-get install chromium), or set "
            "MERMAID_INK_SERVER to a mermaid-ink server; `.mmd` output needs neither"
        )
    return _render_in_chromium(text, fmt, binary, mermaid_dist or default_mermaid_dist())
