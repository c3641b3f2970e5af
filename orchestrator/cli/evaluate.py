"""`baton eval`: run a dataset's cases through the team and say which hold."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import httpx
import typer
from rich.progress import Progress
from rich.table import Table

from agents.core.errors import ConfigError
from orchestrator.cli.client import ApiError, BatonClient
from orchestrator.cli.common import (
    ConfigOption,
    JsonOption,
    app,
    console,
    err,
    load_system,
    open_store,
    print_table,
)
from orchestrator.cli.run import local_service
from orchestrator.errors import ExperimentNotFound
from orchestrator.settings import Settings
from orchestrator.system.config import AgentSystem

if TYPE_CHECKING:  # the evaluations' stack (jsonschema: 0.1 s) is loaded by `baton eval` only
    from orchestrator.evals import CaseResult, Dataset, Door, LoadedCase

__all__ = ["eval_dataset"]

_STYLE = {"pass": "green", "fail": "red", "error": "yellow"}
_CHANGE = {"better": "green", "worse": "red", "same": "dim", "new": "cyan", "gone": "yellow"}


@app.command("eval")
def eval_dataset(
    dataset: Annotated[
        Path | None,
        typer.Argument(help="The dataset of cases (YAML, or JSON Lines).", show_default=False),
    ] = None,
    config: ConfigOption = None,
    repeat: Annotated[int, typer.Option(min=1, help="Run each case this many times.")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Cases running at once.")] = 4,
    junit: Annotated[
        Path | None, typer.Option(help="Write the results as JUnit XML to this file.")
    ] = None,
    as_json: JsonOption = False,
    server: Annotated[
        str | None,
        typer.Option(help="Run the cases on the Baton service at this URL (default: here)."),
    ] = None,
    replay: Annotated[
        str | None,
        typer.Option(
            help="An experiment's id: fork each case's run of it instead of running the case "
            "anew. Model and tool calls come from the record for as long as their requests are "
            "the same; only where the config's change makes one differ is it made live.",
        ),
    ] = None,
    compare: Annotated[
        tuple[str, str] | None,
        typer.Option(help="Compare two experiments (ids) case by case, then exit.", metavar="A B"),
    ] = None,
) -> None:
    """Run every case of a dataset through the team and check each run's expectations.

    Prints a table (case, outcome, cost, latency, tokens, the run's id) and what each failed
    expectation saw. Run here, the results are kept as an experiment in the run store (its id
    is printed: `--compare` and `--replay` take it). Exit code 0 when every case passed, 1 when
    one failed or could not be run, 2 when the dataset is wrong (every mistake is listed first,
    before any run starts).
    """
    from orchestrator.evals import write_junit
    from orchestrator.evals.experiment import kept

    settings = Settings()
    server = server or settings.server
    if compare is not None:
        asyncio.run(_compare(settings, server, *compare))
        return
    if dataset is None:
        err.print("give a DATASET to run (or --compare A B)", style="red")
        raise typer.Exit(2)
    if server and config is not None:
        err.print(
            f"--config names a team here, but --server runs the cases on {server}'s team: drop "
            "--config, or roll the file in on the server first (POST /v1/service/versions, or "
            "SIGHUP) and run again",
            style="red",
            markup=False,
        )
        raise typer.Exit(2)
    if server:
        name, results = asyncio.run(
            _there(server, settings.api_key, dataset, repeat, concurrency, replay)
        )
    else:
        system = load_system(config, settings)
        read, cases = _load(dataset, list(system.topology.graph))
        name = read.name
        digest = hashlib.sha256(dataset.read_bytes()).hexdigest()
        results = asyncio.run(
            _here(settings, system, digest, read, cases, repeat, concurrency, replay)
        )
    if junit is not None:
        write_junit(junit, name, results)
    if as_json:
        console.print_json(json.dumps([kept(r) for r in results]))
    else:
        _print(results, replayed=replay is not None)
    if any(r.outcome != "pass" for r in results):
        raise typer.Exit(1)


async def _here(
    settings: Settings,
    system: AgentSystem,
    digest: str,
    dataset: Dataset,
    cases: list[LoadedCase],
    repeat: int,
    concurrency: int,
    replay: str | None,
) -> list[CaseResult]:
    """The cases run by a service in this process; the results kept as an experiment."""
    from orchestrator.evals import ServiceDoor
    from orchestrator.evals.experiment import kept
    from orchestrator.service import ServiceLimits  # Ray: a slow import

    limits = ServiceLimits(max_concurrent_runs=concurrency, max_queued_runs=len(cases) * repeat)
    async with local_service(settings, system, "eval", limits) as service:
        recorded = None
        if replay is not None:
            try:
                experiment = await service.experiments.get(replay)
            except ExperimentNotFound:
                err.print(f"no experiment {replay!r} in {settings.store_url}", style="red")
                raise typer.Exit(2) from None
            recorded = _recorded(experiment.results)
        door = ServiceDoor(service)
        results = await _run(door, dataset, cases, repeat, concurrency, recorded)
        kept_as = await service.experiments.add(
            dataset.name, digest, system.config.name, system.version, [kept(r) for r in results]
        )
    err.print(f"experiment {kept_as.id} (compare it: baton eval --compare OTHER {kept_as.id[:12]})")
    return results


async def _experiments(
    settings: Settings, server: str | None, ids: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Experiments by id (or prefix): from the server's store, or this one's (exit 2 if not)."""
    found: list[dict[str, Any] | None] = []
    if server:
        async with BatonClient(server, settings.api_key) as client:
            for given in ids:
                try:
                    found.append(await client.experiment(given))
                except ApiError as exc:
                    if exc.status != 404:
                        err.print(f"{server}: {exc}", style="red")
                        raise typer.Exit(2) from None
                    found.append(None)
    else:
        store = await open_store(settings.store_url)
        try:
            for given in ids:
                kept = await store.experiments.get(given)
                found.append(vars(kept) if kept is not None else None)
        finally:
            await store.close()
    for given, one in zip(ids, found, strict=True):
        if one is None:
            err.print(f"no experiment {given!r} (or several begin so)", style="red")
            raise typer.Exit(2)
    return [e for e in found if e is not None]


async def _compare(settings: Settings, server: str | None, first: str, second: str) -> None:
    """Print what got better or worse from one experiment to the other."""
    from orchestrator.evals.experiment import compare as compare_experiments
    from orchestrator.evals.experiment import summary

    a, b = await _experiments(settings, server, (first, second))
    table = Table("case", a["id"][:12], b["id"][:12], "", "cost", "latency")
    for change in compare_experiments(a["results"], b["results"]):
        before, after = change.before or {}, change.after or {}
        name = change.case if change.repeat == 0 else f"{change.case} #{change.repeat + 1}"
        table.add_row(
            name,
            before.get("outcome", "-"),
            after.get("outcome", "-"),
            f"[{_CHANGE[change.verdict]}]{change.verdict}[/]",
            _delta(before.get("cost_usd"), after.get("cost_usd"), "${:.4f}"),
            _delta(before.get("duration_s"), after.get("duration_s"), "{:.2f}s"),
        )
    print_table(table)
    for label, kept_as in (("A", a), ("B", b)):
        s = summary(kept_as["results"])
        console.print(
            f"{label} {kept_as['id'][:12]} ({kept_as['config']} {kept_as['config_digest']}): "
            f"{s.passed}/{s.total} passed ({s.pass_rate:.0%}), ${s.cost_usd:.4f}, "
            f"p50 {s.p50_s:.2f}s, p95 {s.p95_s:.2f}s"
        )


def _delta(before: float | None, after: float | None, form: str) -> str:
    if before is None or after is None:
        return "-"
    return f"{form.format(before)} → {form.format(after)}"


def _load(path: Path, agents: list[str]) -> tuple[Dataset, list[LoadedCase]]:
    """The dataset, checked against the team's agents (or exit 2 listing every mistake)."""
    from orchestrator.evals import load_dataset

    try:
        return load_dataset(path, agents)
    except ConfigError as exc:
        for issue in exc.issues:
            style = "red" if issue.severity == "error" else "yellow"
            err.print(str(issue), style=style, soft_wrap=True)  # one line each, for editors
        raise typer.Exit(2) from None


async def _there(
    server: str,
    key: str | None,
    path: Path,
    repeat: int,
    concurrency: int,
    replay: str | None,
) -> tuple[str, list[CaseResult]]:
    """The cases run by a server; the results kept there as an experiment (with its runs)."""
    from orchestrator.evals import ServerDoor
    from orchestrator.evals.experiment import kept

    digest = await asyncio.to_thread(lambda: hashlib.sha256(path.read_bytes()).hexdigest())
    async with BatonClient(server, key) as client:
        try:
            read, cases = _load(path, await client.agents())
            recorded = None
            if replay is not None:
                experiment = await client.experiment(replay)
                recorded = _recorded(experiment["results"])
            door = ServerDoor(client)
            results = await _run(door, read, cases, repeat, concurrency, recorded)
            served = await client.service()
            made = await client.add_experiment(
                {
                    "dataset": read.name,
                    "dataset_digest": digest,
                    "config": served["system"],
                    # The server's version of the team ran the cases: experiments of two
                    # versions tell apart.
                    "config_digest": served["system_version"],
                    "results": [kept(r) for r in results],
                }
            )
        except (ApiError, httpx.TransportError) as exc:
            err.print(f"{server}: {exc}", style="red")
            raise typer.Exit(2) from None
    err.print(f"experiment {made['id']} (compare it: baton eval --compare OTHER {made['id'][:12]})")
    return read.name, results


def _recorded(results: list[dict[str, Any]]) -> dict[tuple[str, int], str]:
    """Each case's (and repeat's) run in an experiment's results."""
    return {(r["case"], r["repeat"]): r["run_id"] for r in results if r["run_id"]}


async def _run(
    door: Door,
    dataset: Dataset,
    cases: list[LoadedCase],
    repeat: int,
    concurrency: int,
    recorded: dict[tuple[str, int], str] | None = None,
) -> list[CaseResult]:
    from orchestrator.evals import evaluate
    from orchestrator.evals.judge import Judge
    from tracing.redaction import secret_values_from_env

    with Progress(console=err, transient=True) as bar:
        task = bar.add_task("cases", total=len(cases) * repeat)
        advance: Callable[[CaseResult], None] = lambda _: bar.advance(task)  # noqa: E731
        running: Awaitable[list[CaseResult]] = evaluate(
            cases,
            door,
            dataset=dataset.name,
            # (Its verdicts never say a secret of this environment's, nor the judge's own.)
            judge=Judge(dataset.judge, secret_values_from_env(os.environ)),
            repeat=repeat,
            concurrency=concurrency,
            done=advance,
            recorded=recorded,
        )
        return await running


def _print(results: list[CaseResult], replayed: bool = False) -> None:
    columns = ["case", "outcome", "cost", "latency", "tokens", "run"]
    table = Table(*columns, *(["went live"] if replayed else []))
    for r in results:
        name = r.case.name if r.repeat == 0 else f"{r.case.name} #{r.repeat + 1}"
        run = r.run
        row = [
            name,
            f"[{_STYLE[r.outcome]}]{r.outcome}[/]",
            f"${run.cost_usd:.4f}" if run else "-",
            f"{run.duration_s:.2f}s" if run else "-",
            str(run.tokens) if run else "-",
            run.run_id[:12] if run else "-",
        ]
        if replayed:  # which agents' model calls were made live (the rest came from the record)
            live = Counter(run.live_calls) if run else Counter()
            row.append(", ".join(f"{a} ({n})" for a, n in live.items()) or "none")
        table.add_row(*row)
    print_table(table)
    for r in results:
        if r.outcome == "pass":
            continue
        console.print(f"[bold]{r.case.name}[/] ({r.outcome})")
        if r.error:
            console.print(f"  could not run: {r.error}", markup=False)
        for verdict in r.failed:
            console.print(f"  ✗ {verdict.name}: {verdict.detail}", markup=False)
    for r in results:
        if r.untraced and r.run is not None:
            err.print(
                f"{r.case.name}: its verdicts are not on run {r.run.run_id[:12]}'s trace: "
                f"{r.untraced}",
                style="yellow",
                markup=False,
            )
    passed = sum(r.outcome == "pass" for r in results)
    console.print(f"{passed}/{len(results)} passed")
