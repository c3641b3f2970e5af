"""`baton keys`: the access file's keys (names, tenants, roles; hashes only)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, cast

import typer
from pydantic import ValidationError

from orchestrator.access import ROLES, AccessFile, AccessFileError, Role, new_key
from orchestrator.cli.common import app, echo, err
from orchestrator.settings import Settings

__all__ = ["keys"]

keys = typer.Typer(help="API keys with a tenant and roles, kept as hashes in an access file.")
app.add_typer(keys, name="keys")

FileOption = Annotated[
    Path | None,
    typer.Option("--file", help="The access file (default: BATON_ACCESS_FILE)."),
]


def _file(path: Path | None) -> Path:
    found = path or Settings().access_file
    if found is None:
        err.print("name the access file: --file keys.yaml, or set BATON_ACCESS_FILE", style="red")
        raise typer.Exit(2)
    return found


def _read(path: Path) -> AccessFile:
    try:
        return AccessFile.read(path)
    except AccessFileError as exc:
        err.print(str(exc), style="red")
        raise typer.Exit(2) from None


@keys.command("new")
def new(
    name: Annotated[str, typer.Option(help="Who the key is (in runs, events and spans).")],
    tenant: Annotated[str, typer.Option(help="Whose runs and threads it sees.")] = "default",
    role: Annotated[
        list[str] | None,
        typer.Option(
            help=f"A role ({', '.join(ROLES)}); repeat it for several (default: submit, read)."
        ),
    ] = None,
    file: FileOption = None,
) -> None:
    """Make a key: print it once (it is not kept) and add its hash to the access file."""
    path = _file(file)
    roles = role or ["submit", "read"]
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        err.print(f"unknown role {unknown[0]!r}: the roles are {', '.join(ROLES)}", style="red")
        raise typer.Exit(2)
    access = _read(path)
    if any(e.name == name for e in access.keys):
        err.print(f"{path} has a key named {name!r} already (revoke it first)", style="red")
        raise typer.Exit(2)
    try:
        key, entry = new_key(name, tenant, cast(list[Role], roles))
    except ValidationError as exc:
        problem = exc.errors()[0]
        err.print(f"invalid {problem['loc'][0]}: {problem['msg']}", style="red")
        raise typer.Exit(2) from None
    access.keys.append(entry)
    access.write(path)
    said = f"tenant {tenant!r}; {', '.join(entry.roles)}"
    err.print(f"added {name!r} ({said}) to {path}; the key, shown this once:")
    echo(key)


@keys.command("list")
def list_keys(file: FileOption = None) -> None:
    """The access file's keys: name, tenant, roles (never the keys)."""
    for entry in _read(_file(file)).keys:
        echo(f"{entry.name}\t{entry.tenant}\t{','.join(entry.roles)}\tbaton_{entry.id}_...")


@keys.command("revoke")
def revoke(
    name: Annotated[str, typer.Argument(help="The key's name.")], file: FileOption = None
) -> None:
    """Remove a key from the access file (a running service stops taking it within a second)."""
    path = _file(file)
    access = _read(path)
    kept = [e for e in access.keys if e.name != name]
    if len(kept) == len(access.keys):
        err.print(f"{path} has no key named {name!r}", style="red")
        raise typer.Exit(1)
    access.keys = kept
    access.write(path)
    err.print(f"revoked {name!r}")
