"""The diagrams Baton writes are valid Mermaid: rendered by the npm mermaid package in a real
headless Chromium, hostile labels and large runs included."""

from __future__ import annotations

import re

import pytest

from orchestrator.render import find_chromium, render_diagram
from orchestrator.system.topology import topology_flowchart
from tests.testkit import config, local_trace
from tests.tracing.test_sequence import HOSTILE_TEAM, wide_team
from tracing.sequence import sequence_diagram

pytestmark = [pytest.mark.browser, pytest.mark.anyio]


@pytest.fixture(scope="module", autouse=True)
def chromium() -> None:
    if find_chromium() is None:
        pytest.fail("Chromium is not installed; `make test` installs it (apt: chromium)")


def svg_texts(svg: str) -> list[str]:
    return re.findall(r">([^<>]+)<", svg)


async def test_hostile_labels_render_as_text_at_every_detail() -> None:
    _, spans = await local_trace(HOSTILE_TEAM, "go")
    for detail in ("agents", "tools", "full"):
        svg = render_diagram(sequence_diagram(spans, detail=detail).text, "svg").decode()  # type: ignore[arg-type]
        assert svg.startswith("<svg") and "<script" not in svg
        texts = svg_texts(svg)
        assert "end" in texts and "par" in texts  # Mermaid keywords, as participants
        assert any("&lt;script&gt;alert(1)&lt;/script&gt;" in t for t in texts)


async def test_a_thousand_delegations_render() -> None:
    _, spans = await local_trace(wide_team(20, 50), "fan out")
    svg = render_diagram(sequence_diagram(spans).text, "svg").decode()
    label = "[\N{MULTIPLICATION SIGN}50 alike delegate_to_worker calls at once]"
    assert label in " ".join(svg_texts(svg))  # Mermaid wraps it over two lines


def test_the_topology_renders_with_cycles_and_keyword_names() -> None:
    system = config("""
        allow_cycles: true
        agents:
          - {name: end, delegates: [subgraph]}
          - {name: subgraph, delegates: [end, classDef]}
          - {name: classDef}
          - {name: lonely}
    """)
    text = topology_flowchart(system.topology, 5)
    assert '|"cycle"|' in text and "lonely · unreachable" in text
    svg = render_diagram(text, "svg").decode()
    assert "end · depth 1" in svg and "classDef · depth 3" in svg


def test_png_output_is_a_png() -> None:
    png = render_diagram(topology_flowchart(config("agents: [{name: solo}]").topology, 5), "png")
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000


def test_every_glyph_a_diagram_draws_is_in_a_font_the_renderer_has() -> None:
    # (An emoji such as ❓ has no font here: Chromium drew it as an empty box.)
    import ast
    import shutil
    import subprocess
    from pathlib import Path

    import tracing.sequence

    source = Path(tracing.sequence.__file__).read_text(encoding="utf-8")
    drawn = {
        ch
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        for ch in node.value
        if ord(ch) > 0x7F
    }
    assert drawn, "the diagrams draw no glyph beyond ASCII? (this test reads tracing.sequence)"
    fc_list = shutil.which("fc-list")
    assert fc_list is not None, "fontconfig comes with Chromium"
    missing = [
        f"{ch} (U+{ord(ch):04X})"
        for ch in sorted(drawn)
        if not subprocess.run(
            [fc_list, f":charset={ord(ch):x}", "family"], capture_output=True, text=True
        ).stdout.strip()
    ]
    assert missing == []
