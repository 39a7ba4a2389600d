"""`dspine list` and `dspine rm`: what is pulled, and removing it."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

import typer
from rich.table import Table

from ..cli_views import list_table, orphans_table, shown
from ..errors import ConfigError, UsageError
from ..hub.store import Manifest, apply_removal, file_state, plan_removal, record_status
from ..models.catalog import load_catalog
from ..settings import Settings, load_settings
from ..terminal_text import controls_shown
from ..units import format_bytes
from .base import (
    _open_manifest,
    app,
    out,
)


@app.command("list")
def list_models(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
    catalog: bool = typer.Option(False, "--catalog", help="List the catalog's bundles instead of what is pulled."),
) -> None:
    """Show pulled models: files, sizes, where on disk, complete or partial; and files no pull owns."""
    from ..hub.orphans import find_orphans

    settings = load_settings()
    if catalog:
        _print_catalog(load_catalog(settings.catalog), as_json)
        return
    manifest = _open_manifest(settings)
    orphans = find_orphans(manifest, settings.models_dir)
    if as_json:
        payload = {
            name: {
                **{k: v for k, v in asdict(record).items() if k != "files"},
                "status": record_status(record),
                "files": [
                    {**asdict(f), "status": state.status, "on_disk": state.on_disk}
                    for f, state in ((f, file_state(f)) for f in record.files)
                ],
            }
            for name, record in manifest.records.items()
        }
        unowned = [{"file": o.name, "path": str(o.final), "size": o.size} for o in orphans]
        out.print_json(json.dumps({"models_dir": str(settings.models_dir), "pulls": payload, "orphans": unowned}))
        return
    if manifest.records:
        out.print(list_table(manifest))
    elif not orphans:
        from ..fit.hardware import detect
        from ..run.engines import DEFAULT_MODEL
        from ..run.first_run_offer import starting_model

        first = starting_model(load_catalog(settings.catalog), detect(), DEFAULT_MODEL)
        out.print(f"nothing pulled yet into {settings.models_dir}; try `dspine pull {first}`")
        return
    if orphans:
        out.print(orphans_table(orphans))


def _print_catalog(catalog, as_json: bool) -> None:
    if as_json:
        out.print_json(json.dumps({name: asdict(bundle) for name, bundle in catalog.bundles.items()}))
        return
    table = Table(title="Catalog", title_justify="left")
    for column in ("name", "target from", "quants", "drafters (kind)", "description"):
        table.add_column(column, overflow="fold")
    for bundle in catalog.bundles.values():
        quants = ", ".join(q + ("*" if q == bundle.default_quant else "") for q in bundle.quants)
        drafters = ", ".join(
            f"{v}{'*' if v == bundle.default_drafter else ''} ({d.kind})" for v, d in bundle.drafters.items()
        )
        table.add_row(bundle.name, bundle.source_label, quants, drafters, bundle.description)
    out.print(table)
    out.print("[dim]* default[/]")


@app.command()
def rm(
    name: str | None = typer.Argument(
        None, help="A name as `dspine list` shows it, or the file name of a file no pull owns."
    ),
    orphans: bool = typer.Option(False, "--orphans", help="Delete every file that no pull owns (see `dspine list`)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
) -> None:
    """Delete a pulled model's files, or files no pull owns (asks first unless --yes)."""
    from ..hub.orphans import find_orphans, match_orphans, why_orphans_cannot_be_told

    settings = load_settings()
    manifest = Manifest(settings.manifest_path)
    if orphans or (name is not None and not manifest.has(name)):
        if orphans and name is not None:
            raise UsageError("rm takes a name or --orphans, not both", "run `dspine rm --orphans` or `dspine rm NAME`")
        reason = why_orphans_cannot_be_told(manifest)
        if reason is not None:
            raise ConfigError(
                f"rm deletes no file as unowned now: {reason}, so pulled models would look unowned too",
                "pull your models again (files already here are re-hashed, not downloaded), "
                "or delete the files you no longer want yourself",
            )
        found = find_orphans(manifest, settings.models_dir)
        chosen = found if orphans else match_orphans(found, name or "", settings.models_dir)
        if name is not None and not chosen:
            manifest.find(name)  # raises: names what is pulled
        _remove_orphans(chosen, settings, yes)
        return
    if name is None:
        raise UsageError("rm needs a name or --orphans", "see `dspine list` for what is on disk")
    record, removal = plan_removal(manifest, name, settings.models_dir)
    for path in removal.deleted:
        out.print(f"  delete {shown(path)}")
    for path in removal.kept_shared:
        out.print(f"  keep   {shown(path)} [dim](another pull uses it)[/]")
    for path in removal.kept_foreign:
        out.print(f"  keep   {shown(path)} [dim](in your Hugging Face cache; remove it with `hf cache` if you wish)[/]")
    _confirm(f"{controls_shown(record.name)} ({format_bytes(removal.freed)})", yes)
    apply_removal(manifest, record, removal, settings.models_dir)
    out.print(f"removed {shown(record.name)}, freed {format_bytes(removal.freed)}")


def _confirm(what: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"rm asks before deleting {what} and there is no terminal to ask", "add --yes")
    if not typer.confirm(f"Delete {what}?", default=False):
        out.print("nothing deleted")
        raise typer.Exit(1)


def _remove_orphans(orphans, settings: Settings, yes: bool) -> None:
    from ..hub.orphans import remove_orphans

    if not orphans:
        out.print(f"no files without a pull in {settings.models_dir}; nothing to delete")
        return
    total = sum(o.size for o in orphans)
    for orphan in orphans:
        out.print(f"  delete {shown(orphan.final)}  {format_bytes(orphan.size)}")
    _confirm(f"{len(orphans)} file(s) no pull owns ({format_bytes(total)})", yes)
    removal = remove_orphans(orphans, settings.models_dir, settings.manifest_path)
    for path in removal.busy:
        out.print(f"  keep   {shown(path)} [dim](a pull is fetching it right now)[/]")
    for path in removal.owned:
        out.print(f"  keep   {shown(path)} [dim](a pull recorded it meanwhile)[/]")
    out.print(f"removed {len(removal.deleted)} file(s), freed {format_bytes(removal.freed)}")
