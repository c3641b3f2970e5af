"""Reading the run store: `baton runs`, `show`, `trace`, `diagram`, `compare`; `prune`."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated, Any, cast

import typer
import yaml

from orchestrator.cli.common import (
    JsonOption,
    RunIdArgument,
    app,
    console,
    echo,
    err,
    open_store,
)
from orchestrator.cli.report import print_run_view, print_runs, print_trace
from orchestrator.errors import AmbiguousRunId
from orchestrator.schemas import run_page_view, run_view
from orchestrator.settings import Settings
from orchestrator.store import RunPage, StoredRun
from tracing import SpanRecord
from tracing.compare import differences

__all__ = ["compare", "diagram", "export", "runs", "show", "trace_"]


runs_app = typer.Typer(invoke_without_command=True, add_completion=False)
app.add_typer(runs_app, name="runs")


@runs_app.callback()
def runs(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option(help="Only runs with this status.")] = None,
    agent: Annotated[str | None, typer.Option(help="Only runs with this entry agent.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many runs.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """List stored runs, newest first (in a pipe: tab-separated, one line a run).

    `baton runs export RUN_ID... --dataset FILE` makes cases of a dataset from runs.
    """
    if ctx.invoked_subcommand is not None:
        return

    async def fetch() -> RunPage:
        store = await open_store(Settings().store_url)
        try:
            return await store.list(status=status, agent=agent, limit=limit)
        finally:
            await store.close()

    page = asyncio.run(fetch())
    if as_json:
        echo(run_page_view(page, limit, 0).model_dump_json(indent=2))
        return
    print_runs(console, page)


@runs_app.command("export")
def export(
    run_ids: Annotated[list[str], typer.Argument(help="Stored runs (ids, or prefixes of them).")],
    dataset: Annotated[
        Path, typer.Option(help="The dataset file to write (cases are added if it exists).")
    ],
) -> None:
    """Write stored runs as cases of a dataset, to edit by hand and check with `baton eval`.

    Each case is a run's task and entry agent; its expectations are what the run did: its
    status, its answer, the agents involved and its interaction (who asked whom, how deep).
    """
    from orchestrator.evals.export import case_of  # (the evaluations' stack, only here)

    settings = Settings()
    cases = [case_of(_stored(settings, run_id, spans=False)[0]) for run_id in run_ids]
    existing: dict[str, Any] = {"name": dataset.stem, "cases": []}
    if dataset.exists():
        existing = yaml.safe_load(dataset.read_text(encoding="utf-8")) or existing
    existing.setdefault("cases", []).extend(cases)
    dataset.write_text(
        yaml.safe_dump(existing, sort_keys=False, allow_unicode=True, width=100), encoding="utf-8"
    )
    err.print(f"{len(cases)} cases written to {dataset} (check them: baton eval {dataset})")


@app.command()
def prune(
    older_than: Annotated[
        float | None,
        typer.Option(
            "--older-than",
            min=0,
            help="Remove finished runs older than this many days (default: BATON_RETENTION_DAYS).",
        ),
    ] = None,
    keep: Annotated[
        int | None,
        typer.Option(
            min=1, help="Keep only the newest this many finished runs (BATON_RETENTION_MAX_RUNS)."
        ),
    ] = None,
    memory_older_than: Annotated[
        float | None,
        typer.Option(
            "--memory-older-than",
            min=0,
            help="Remove memory items not written for this many days "
            "(default: BATON_MEMORY_RETENTION_DAYS).",
        ),
    ] = None,
) -> None:
    """Remove finished runs from the store, with their spans, events and steps.

    Runs still going are never removed. Without options, the retention settings decide.
    """
    settings = Settings()
    days = older_than if older_than is not None else settings.retention_days
    keep = keep if keep is not None else settings.retention_max_runs
    forget = memory_older_than
    if forget is None:
        forget = settings.memory_retention_days
    if days is None and keep is None and forget is None:
        err.print(
            "nothing to prune by: give --older-than DAYS, --keep N or --memory-older-than DAYS",
            style="red",
        )
        raise typer.Exit(2)

    async def run() -> tuple[int, int]:
        store = await open_store(settings.store_url)
        try:
            forgotten = 0
            if forget is not None:
                forgotten = await store.memory.prune(time.time() - forget * 86400)
            cutoff = time.time() - days * 86400 if days is not None else None
            return await store.prune(older_than=cutoff, keep=keep), forgotten
        finally:
            await store.close()

    removed, forgotten = asyncio.run(run())
    echo(f"removed {removed} finished run{'' if removed == 1 else 's'}")
    if forget is not None:
        echo(f"removed {forgotten} memory item{'' if forgotten == 1 else 's'}")


@app.command()
def show(run_id: RunIdArgument) -> None:
    """Print a stored run: its answer or error, usage, and delegation tree."""
    stored, _ = _stored(Settings(), run_id, spans=False)
    print_run_view(console, run_view(stored))


def _stored(
    settings: Settings, run_id: str, *, spans: bool = True
) -> tuple[StoredRun, list[SpanRecord]]:
    """A stored run (by its id, or a prefix of it) and its spans; else exit saying why."""

    async def fetch() -> tuple[StoredRun | None, list[SpanRecord]]:
        store = await open_store(settings.store_url)
        try:
            run = await store.find(run_id)
            return run, await store.spans(run.id) if run is not None and spans else []
        finally:
            await store.close()

    try:
        stored, found = asyncio.run(fetch())
    except AmbiguousRunId as exc:
        err.print(str(exc), style="red")
        raise typer.Exit(2) from None
    if stored is None:
        err.print(f"no run {run_id!r} in the store", style="red")
        raise typer.Exit(1)
    return stored, found


@app.command("trace")
def trace_(run_id: RunIdArgument) -> None:
    """Print a stored run's span tree with timings, status and tokens."""
    _, spans = _stored(Settings(), run_id)
    print_trace(console, spans)


@app.command()
def compare(
    run_id: RunIdArgument,
    other: Annotated[
        str | None,
        typer.Argument(
            help="The run to compare with (default: the run RUN_ID replays or forks).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Say where a run's steps differ from another's (a fork from its original, say)."""
    settings = Settings()
    run, spans = _stored(settings, run_id)
    if other is None and run.replay_of is None:
        err.print(
            f"run {run.id} is no replay or fork: say which run to compare it with", style="red"
        )
        raise typer.Exit(2)
    before, before_spans = _stored(settings, other or str(run.replay_of))
    said = differences(before_spans, spans)
    console.print(f"run {run.id[:12]} compared with run {before.id[:12]}:", style="bold")
    if not said:
        console.print("the same steps, one for one (timings and tokens aside)")
    for sentence in said:
        console.print(f"- {sentence}", soft_wrap=True, highlight=False)


@app.command()
def diagram(
    run_id: RunIdArgument,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write to this file: .mmd (Mermaid text), .svg or .png (rendered in headless "
            "Chromium with the npm mermaid package, or by $MERMAID_INK_SERVER when set). "
            "Default: the text on stdout.",
        ),
    ] = None,
    detail: Annotated[
        str, typer.Option(help="agents; tools: function tools too; full: models too.")
    ] = "agents",
    page: Annotated[int, typer.Option(min=1, help="Page of a run too large for one.")] = 1,
) -> None:
    """Draw a stored run as a Mermaid sequence diagram, from its spans."""
    from orchestrator.render import RenderError, render_diagram
    from tracing.sequence import Detail, sequence_diagram

    if detail not in ("agents", "tools", "full"):
        err.print(f"--detail must be agents, tools or full, not {detail!r}", style="red")
        raise typer.Exit(2)
    settings = Settings()
    stored, spans = _stored(settings, run_id)
    drawn = sequence_diagram(
        spans, detail=cast("Detail", detail), page=page, title=f"Run {stored.id[:12]}"
    )
    for fold in drawn.folded:
        err.print(f"note: {fold}", style="dim")
    suffix = output.suffix.lower() if output is not None else ""
    if output is None:
        echo(drawn.text, nl=False)
        return
    if suffix in (".mmd", ".mermaid"):
        output.write_text(drawn.text, encoding="utf-8")
    elif suffix in (".svg", ".png"):
        try:
            picture = render_diagram(
                drawn.text,
                "svg" if suffix == ".svg" else "png",
                ink_server=settings.mermaid_ink_server,
                chromium=settings.chromium,
                mermaid_dist=settings.mermaid_dist,
            )
        except RenderError as exc:
            err.print(f"cannot render {output}: {exc}", style="red")
            raise typer.Exit(2) from None
        output.write_bytes(picture)
    else:
        err.print(f"{output}: write .mmd, .svg or .png", style="red")
        raise typer.Exit(2)
    err.print(f"wrote {output} (page {drawn.page} of {drawn.pages})")
