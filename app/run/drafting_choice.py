"""Which drafting setup a run starts with when the user did not say (no --draft): the one
place chat, run, serve and bench ask.

- A fresh `dspine tune` for this model pair, engine, build and device: what it picked.
- Else with no GPU: plain decoding with n-gram drafts. On a CPU a draft model mostly loses
  (people's figures and this project's: 0.43x-0.79x plain here), while copying from the
  context costs almost nothing where it finds no copy and pays on edits.
- Else the pair's drafter, with n-gram drafts chained before it (the setting's default).

A stale tune (another build, device or model files) is said, and not used."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..settings import Settings
from .build_identity import binary_identity, device_identity, file_identity, library_identity
from .engines import ModelFiles, llama_server_binary
from .tune_record import Conditions, Pick, TuneRecords, tune_key

CPU_DEFAULT_NOTE = "no GPU: plain decoding with n-gram drafts; `dspine tune` measures what pays here"


@dataclass(frozen=True)
class Drafting:
    files: ModelFiles  # the drafter dropped where the choice runs without it
    ngram: bool | None  # None: the `ngram_drafting` setting decides
    n_max: int | None  # None: the engine's (adaptive where it learns one)
    label: str | None  # what the readout names ("tuned: n-gram"); None: the drafter as usual
    note: str | None = None  # a line to say once before the reply (a stale tune, the CPU default)


def conditions_now(engine: str, files: ModelFiles, settings: Settings) -> Conditions:
    build = binary_identity(llama_server_binary(settings)) if engine == "server" else library_identity()
    pair = f"{file_identity(files.target)} + {file_identity(files.drafter)}"
    return Conditions(build=build, device=device_identity(), files=pair)


def apply_pick(files: ModelFiles, pick: Pick) -> ModelFiles:
    return files if pick.drafter else replace(files, drafter=None, drafter_kind=None)


def choose(
    files: ModelFiles,
    asked_draft: str | None,
    engine: str,
    settings: Settings,
    on_gpu: bool,
    conditions: Conditions | None = None,
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
            label = f"tuned: {pick.label}" if pick.drafter or pick.ngram else "tuned: plain, no drafter pays here"
            return Drafting(apply_pick(files, pick), pick.ngram, pick.n_max, label)
        note = f"the tune for {files.label} was measured with {changed}: run `dspine tune` again"
    if on_gpu:
        return Drafting(files, None, None, None, note)
    ngram = settings.ngram_drafting != "off"
    label = "plain + n-gram (no GPU)" if ngram else "plain (no GPU)"
    if files.drafter is not None:
        note = note or CPU_DEFAULT_NOTE  # the drafter it was pulled with is left out: say so
    return Drafting(apply_pick(files, Pick(drafter=False, ngram=ngram)), ngram, None, label, note)


def drafting_for(files: ModelFiles, draft: str | None, engine: str, settings: Settings) -> Drafting:
    """The choice above for files `resolve_files` gave, on this machine's device: what chat,
    run, serve and headless start with."""
    if draft is not None or engine == "remote" or files.target is None:
        return Drafting(files, None, None, None)
    from ..fit.hardware import detect

    return choose(files, draft, engine, settings, on_gpu=bool(detect().gpus))


def with_drafting(options, drafting: Drafting):
    """EngineOptions as the choice says (the user's own --n-max stays)."""
    return replace(
        options,
        ngram=drafting.ngram if drafting.ngram is not None else options.ngram,
        n_max=options.n_max if options.n_max is not None else drafting.n_max,
    )
