from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from agents.core.errors import ToolImportError
from agents.core.messages import RunContext
from agents.tools.base import FunctionTool, ToolCallContext, load_function_tool
from configs.tools import calculate


def _call_ctx() -> ToolCallContext:
    return ToolCallContext(RunContext(run_id="r", deadline=time.time() + 5), "a", "c1")


def scale(values: list[float], factor: float = 2.0, label: str | None = None) -> list[float]:
    """Multiply every value by a factor.

    Longer text that is not part of the description.
    """
    return [v * factor for v in values]


def test_function_tool_schema_comes_from_type_hints_and_docstring() -> None:
    tool = FunctionTool.from_callable(scale)
    assert tool.description == "Multiply every value by a factor."
    assert tool.parameters["required"] == ["values"]
    assert tool.parameters["properties"]["values"] == {
        "items": {"type": "number"},
        "title": "Values",
        "type": "array",
    }
    assert tool.parameters["properties"]["factor"]["default"] == 2.0


@pytest.mark.anyio
async def test_function_tool_validates_arguments_against_its_schema() -> None:
    tool = FunctionTool.from_callable(scale)
    assert (await tool.call({"values": [1, 2]}, _call_ctx())).content == "[2.0, 4.0]"
    bad = await tool.call({"values": "nope", "extra": 1}, _call_ctx())
    assert bad.is_error
    assert "values" in bad.content and "extra" in bad.content


def test_tools_load_by_import_path_in_either_form() -> None:
    assert load_function_tool("configs.tools:calculate").fn is calculate
    assert load_function_tool("configs.tools.calculate").fn is calculate


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("configs.tools:nope", "has no attribute 'nope'"),
        ("no_such_module:fn", "no module named 'no_such_module'"),
        ("configs.tools:_MAX_EXPONENT", "is not callable"),
    ],
)
def test_bad_tool_paths_say_what_is_wrong(path: str, reason: str) -> None:
    with pytest.raises(ToolImportError, match=reason):
        load_function_tool(path)


def test_calculate_evaluates_arithmetic_and_refuses_anything_else() -> None:
    assert calculate("17 * 23 + 4") == 395
    with pytest.raises(ValueError, match="unsupported"):
        calculate("__import__('os').system('true')")


def test_a_module_that_fails_as_it_imports_names_its_file_and_line(tmp_path: Path) -> None:
    package = tmp_path / "broken_tools"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "syntax.py").write_text("x = 1\ndef f(:\n    pass\n")
    (package / "raising.py").write_text("import os\n\nKEY = os.environ['BATON_NOT_SET_EVER']\n")
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(ToolImportError, match=rf"SyntaxError at {package / 'syntax.py'}:2"):
            load_function_tool("broken_tools.syntax:f")
        with pytest.raises(ToolImportError, match=rf"KeyError at {package / 'raising.py'}:3"):
            load_function_tool("broken_tools.raising:f")
    finally:
        sys.path.remove(str(tmp_path))
