"""Which drafting setup a run starts with when the user did not say (no --draft): the one
place chat, run, serve and bench ask.

- A fresh `dspine tune` for this model pair, engine, build and device: what it picked.
- Else with no GPU: plain decoding, with n-gram drafts on edit turns. On a CPU a draft model
  mostly loses (people's figures and this project's: 0.43x-0.79x plain here), and copies from
  the context pay on edits (1.2-1.4x) but cost 7-9% on some new text.
- Else the pair's drafter, with n-gram drafts chained before it (the setting's default).

A stale tune (another build, device or model files) is said, and not used."""

from __future__ import annotations

from dataclasses import dataclass, replace

from backends.sampling import presets_identity
from backends.turn_kind import TurnDrafting

from ..settings import Settings
from .build_identity import binary_identity, device_identity, file_identity, library_identity
from .engines import ModelFiles, llama_server_binary
from .tune_record import Conditions, Pick, TuneRecords, tune_key

CPU_DEFAULT_NOTE = "no GPU: plain decoding, n-gram drafts on edits; `dspine tune` measures what pays here"


@dataclass(frozen=True)
class Drafting:
    files: ModelFiles  # the drafter dropped where the choice runs without it
    ngram: bool | None  # None: the `ngram_drafting` setting decides
    n_max: int | None  # None: the engine's (adaptive where it learns one)
    label: str | None  # what the readout names ("tuned: n-gram"); None: the drafter as usual
    note: str | None = None  # a line to say once before the reply (a stale tune, the CPU default)
    turns: TurnDrafting | None = None  # which kinds of turn draft (None: both)


def conditions_now(engine: str, files: ModelFiles, settings: Settings) -> Conditions:
    build = binary_identity(llama_server_binary(settings)) if engine == "server" else library_identity()
    pair = f"{file_identity(files.target)} + {file_identity(files.drafter)}"
    return Conditions(build=build, device=device_identity(), files=pair, sampling=presets_identity(files.sampling))


def apply_pick(files: ModelFiles, pick: Pick) -> ModelFiles:
    return files if pick.drafter else replace(files, drafter=None, drafter_kind=None)


def choose(
    files: ModelFiles,
    asked_draft: str | None,
    engine: str,
    settings: Settings,
    on_gpu: bool,
    conditions: Conditions | None = None,
    per_turn: bool = True,
) -> Drafting:
    """`engine`: the resolved one (server, inproc, remote). `conditions`: now's, when the
    caller has them (computed here otherwise)."""
    if asked_draft is not None or engine == "remote" or files.target is None:
        return Drafting(files, None, None, None)
    record = TuneRecords(settings.tune_file).get(tune_key(engine, files.target, files.drafter))
    note = None
    if record is not None:
        now = conditions or conditions_now(engine, files, settings)
        changed = record.conditions.changed(now)
        if changed is None:
            pick = record.pick
            if settings.ngram_drafting == "off" and pick.ngram:
                pick = replace(pick, ngram=False)  # the user's setting wins over what was measured
            if not per_turn and not (pick.new_text and pick.edit) and pick.drafts:
                # This engine cannot switch per request (serve's proxy, another llama-server):
                # the setup on every turn, its own break-even judging it.
                pick = replace(pick, new_text=True, edit=True)
            label = f"tuned: {pick.label}" if pick.drafts else "tuned: plain, no drafting pays here"
            return Drafting(apply_pick(files, pick), pick.ngram, pick.n_max, label, turns=pick.turn_drafting())
        note = f"the tune for {files.label} was measured with {changed}: run `dspine tune` again"
    if on_gpu:
        return Drafting(files, None, None, None, note)
    ngram = settings.ngram_drafting != "off"
    # With the setting `on`, copies on every turn; by default on edits only (they cost on new text),
    # where the engine can switch per request (`per_turn`), else on every turn with their own
    # break-even judge.
    pick = Pick(drafter=False, ngram=ngram, new_text=settings.ngram_drafting == "on" or not per_turn)
    label = f"{pick.label} (no GPU)"
    if files.drafter is not None:
        note = note or CPU_DEFAULT_NOTE  # the drafter it was pulled with is left out: say so
    return Drafting(apply_pick(files, pick), ngram, None, label, note, pick.turn_drafting() if ngram else None)


def drafting_for(
    files: ModelFiles, draft: str | None, engine: str, settings: Settings, per_request: bool = True
) -> Drafting:
    """The choice above for files `resolve_files` gave, on this machine's device: what chat,
    run, serve and headless start with. `per_request` False: requests reach the engine without
    dspine's engine in between (serve's proxy), so drafting cannot change per turn."""
    if draft is not None or engine == "remote" or files.target is None:
        return Drafting(files, None, None, None)
    from backends.base import EngineError
    from backends.server_draft import honoured_by_binary

    from ..fit.hardware import detect

    try:
        per_turn = per_request and (engine == "inproc" or honoured_by_binary(llama_server_binary(settings)))
    except EngineError:
        per_turn = False  # no llama-server: the engine's start says so
    return choose(files, draft, engine, settings, on_gpu=bool(detect().gpus), per_turn=per_turn)


def with_drafting(options, drafting: Drafting):
    """EngineOptions as the choice says (the user's own --n-max stays)."""
    return replace(
        options,
        ngram=drafting.ngram if drafting.ngram is not None else options.ngram,
        n_max=options.n_max if options.n_max is not None else drafting.n_max,
        turn_drafting=drafting.turns,
    )
