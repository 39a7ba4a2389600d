"""The drafter recommendation's inputs, read here: the --spec-type names of the llama-server
dspine would run, and what is pulled of a bundle (the target's MTP head and the drafter
file's header against that server). The choosing itself is app/models/recommend.py."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from backends.base import EngineError
from backends.drafter_files import FileCheck, check_file, has_mtp_head
from backends.gguf_header import GgufError, read_local

from ..models.catalog import Bundle, Catalog, parse_repo_ref
from ..models.recommend import Pulled, Recommendation, recommend
from ..settings import Settings
from .pull import Request, make_request
from .store import Manifest, PullRecord, file_state


def server_spec_types(settings: Settings) -> tuple[str, ...] | None:
    """What the llama-server dspine would launch knows for --spec-type; None: none found."""
    from backends.llama_server import find_binary, probe

    try:
        return probe(find_binary(settings.llama_server, settings.llama_server_build)).spec_types
    except (EngineError, OSError):
        return None


def _complete(record: PullRecord, role: str) -> Path | None:
    stored = next((f for f in record.files if f.role == role), None)
    if stored is None or file_state(stored).status != "complete":
        return None
    return Path(stored.local)


@dataclass(frozen=True)
class PulledFiles:
    pulled: Pulled
    drafter_file: Path | None = None
    unreadable: str = ""  # why the drafter's header could not be read (a damaged file: pull fetches it again)


def read_pulled(record: PullRecord | None, spec_types: tuple[str, ...] | None) -> PulledFiles:
    """What the recommendation needs of a pull record, read from the files' headers."""
    if record is None:
        return PulledFiles(Pulled())
    mtp_head = None
    target = _complete(record, "target")
    if target is not None:
        try:
            mtp_head = has_mtp_head(read_local(target))
        except GgufError:
            mtp_head = None
    check: FileCheck | None = None
    unreadable = ""
    drafter = _complete(record, "drafter")
    if drafter is not None:
        try:
            check = check_file(read_local(drafter), spec_types or ())
        except GgufError as exc:
            unreadable = exc.cause
    return PulledFiles(Pulled(record.drafter, check, mtp_head), drafter, unreadable)


def choose_drafter(bundle: Bundle, settings: Settings) -> Recommendation:
    """The bundle's drafter for this machine and the llama-server dspine would run."""
    return choose_for(bundle, settings, server_spec_types(settings))


def choose_for(bundle: Bundle, settings: Settings, spec_types: tuple[str, ...] | None) -> Recommendation:
    """`recommend` on what is pulled of the bundle, for a server with these spec types."""
    record = Manifest(settings.manifest_path).records.get(bundle.name)
    return recommend(bundle, spec_types, read_pulled(record, spec_types).pulled)


def pull_request(
    spec: str,
    catalog: Catalog,
    quant: str | None,
    drafter: str | None,
    settings: Settings,
    keep_sources: bool = False,
) -> tuple[Request, Recommendation | None]:
    """`dspine pull`'s request: a catalog bundle without --drafter gets the recommended one,
    and the request's notes say which and why."""
    if drafter is not None or parse_repo_ref(spec) is not None:
        return make_request(spec, catalog, quant, drafter, keep_sources), None
    chosen = choose_drafter(catalog.find(spec), settings)
    request = make_request(spec, catalog, quant, chosen.drafter, keep_sources)
    note = f"drafter {chosen.drafter}: {chosen.why} (--drafter to choose another)"
    return replace(request, notes=(note, *request.notes)), chosen
