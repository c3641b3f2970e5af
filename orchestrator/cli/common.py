"""What every `baton` command shares.

The Typer app, the consoles, loading a config, opening the store.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from agents.core.errors import ConfigError
from orchestrator.cli.report import print_issues
from orchestrator.settings import Settings
from orchestrator.system.config import AgentSystem, default_config_path, load_config
from tracing import OtlpExport, otlp_export_from_env, otlp_metrics_from_env

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricExporter

    from orchestrator.store import RunStore

__all__ = [
    "AgentOption",
    "ConfigOption",
    "JsonOption",
    "LocalOption",
    "RunIdArgument",
    "ServerOption",
    "VerboseOption",
    "app",
    "console",
    "echo",
    "err",
    "load_system",
    "open_export",
    "open_metric_export",
    "open_store",
    "otlp_export_asked",
    "print_table",
    "progress",
]

app = typer.Typer(
    help="Baton: multi-agent orchestration on Ray.", no_args_is_help=True, add_completion=False
)
console = Console()
err = Console(stderr=True)
# How wide a table printed whole may be (a pipe's or a file's: no terminal to fit).
_WHOLE_WIDTH = 10_000


def print_table(table: Table, to: Console | None = None) -> None:
    """A table fitted to the terminal; into a pipe or a file, whole at its own width.

    (Rich takes 80 columns where there is no terminal: cells would wrap, and `grep` or a CI log
    would get pieces of rows. `COLUMNS` still decides when set.)
    """
    to = to or console
    if to.is_terminal or "COLUMNS" in os.environ:
        to.print(table)
        return
    width = Measurement.get(to, to.options.update_width(_WHOLE_WIDTH), table).maximum
    Console(file=to.file, width=width, no_color=to.no_color).print(table)


def progress() -> Console:
    """Where progress goes: the terminal that shows the answer, else stderr.

    With stdout piped or redirected, only the answer goes there (`baton run ... | cat`).
    """
    return console if console.is_terminal else err


def echo(text: str, *, nl: bool = True) -> None:
    """Plain text (JSON, Mermaid) on the command's output."""
    typer.echo(text, nl=nl, file=console.file)


@contextlib.contextmanager
def _answer_on_stdout() -> Iterator[None]:
    """The command's answer on stdout, anything else the process prints on stderr.

    A Ray driver prints what the cluster broadcasts (the raylet's "N worker processes have been
    started" warnings, whatever `log_to_driver` says) to `sys.stdout` from a thread of its own:
    in a `--json` answer that would break the reader.
    """
    console.file = answer = sys.stdout
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = answer
        console.file = None  # type: ignore[assignment]  # back to following sys.stdout


@app.callback()
def _every_command(ctx: typer.Context) -> None:
    # `baton mcp`'s transport claims stdout itself (its descriptor points at stderr meanwhile).
    if ctx.invoked_subcommand != "mcp":
        ctx.with_resource(_answer_on_stdout())


ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", help="Agent-system YAML (default: $BATON_CONFIG or configs/default.yaml)."
    ),
]


AgentOption = Annotated[
    str | None,
    typer.Option("--agent", "-a", help="Entry agent, or 'auto' to route by capabilities."),
]
ServerOption = Annotated[
    str | None,
    typer.Option(
        help="Use the running Baton service at this URL (default: $BATON_SERVER) instead of "
        "running here; its key comes from $BATON_API_KEY."
    ),
]
LocalOption = Annotated[
    bool,
    typer.Option(
        "--local",
        help="Run here even when a `baton serve` of this config and store runs.",
        metavar="",
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print the answer as JSON (the API's views).", metavar="")
]
VerboseOption = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="Show every event (model calls, tools), not only agents'.",
        metavar="",
    ),
]


def load_system(path: Path | None, settings: Settings) -> AgentSystem:
    """Load and check the config (or exit 2 listing every error); print its warnings."""
    path = path or settings.config or default_config_path()
    try:
        system = load_config(path)
    except ConfigError as exc:
        print_issues(err, exc.issues)
        err.print(
            f"{path}: {sum(i.severity == 'error' for i in exc.issues)} error(s)", style="bold red"
        )
        raise typer.Exit(2) from None
    print_issues(err, system.warnings)
    return system


def otlp_export_asked() -> bool:
    """Whether this process's environment asks for an OTLP export (`OTEL_EXPORTER_OTLP_*`)."""
    return any(
        os.environ.get(name)
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def open_export() -> OtlpExport | None:
    """The OTLP export the standard `OTEL_EXPORTER_OTLP_*` variables ask for, if any."""
    try:
        return otlp_export_from_env(os.environ)
    except ValueError as exc:
        err.print(f"cannot export traces: {exc}", style="red")
        raise typer.Exit(2) from None


def open_metric_export() -> MetricExporter | None:
    """The OTLP metric exporter the standard `OTEL_EXPORTER_OTLP_*` variables ask for, if any."""
    return otlp_metrics_from_env(os.environ)


async def open_store(url: str, start_wait_s: float = 0.0) -> RunStore:
    """Open the run store (waiting up to `start_wait_s` for it), or exit 2 saying why not.

    In one line, and never with the URL's password.
    """
    from orchestrator.store import StoreRefused, shown_url
    from orchestrator.store.store import RunStore  # the database stack, only when needed

    try:
        return await RunStore.open(url, start_wait_s=start_wait_s)
    except StoreRefused as exc:
        err.print(str(exc), style="red", markup=False, highlight=False, soft_wrap=True)
    except Exception as exc:
        cause = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        said = f"cannot open the run store {shown_url(url)}: {type(exc).__name__}: {cause}"
        err.print(said, style="red", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


RunIdArgument = Annotated[
    str, typer.Argument(help="A run id from `baton runs` (or its first 6 characters or more).")
]
