"""DSpine on dspine's patched llama-server against the authors' own reference.

The golden files (tests/engines/golden/dspine/server/, made by scripts/dspine_golden/) hold
what SpecForge's `DSpineDraftModel` drafts, through its own forward, `transition_scores` and
`select_cached`, for a tiny target's prompt: the taps and the anchor are what llama-server
computes for that target, the weights are the reference's checkpoint. Here the checkpoint goes
through dspine's converter (both layouts the reference knows) into an F32 GGUF, the server runs
the target and the drafter on the same prompt, and its first draft must be the reference's,
position by position, at blocks of 15, 3 and 1.

Positions are compared up to the first call closer than TIE in the reference's own scores (a
walk step or the top-k boundary): float32 in another order can flip those, and the golden cases
were chosen with few of them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.support.draft_log_server import DraftLogServer, by_request
from tests.support.dspine_golden_target import GOLDEN, SEEDS, write_target
from tests.support.dspine_published import Drafter, Parts, walk
from tests.support.gguf_copies import rewritten_copy

pytestmark = pytest.mark.slow  # llama-server launches, and the patched build the first time

TIE = 1e-3  # every cache in f32: the server's scores agree with the reference to about 1e-5
# Both caches in f32 (the target's f16 cache moves its taps by about 1e-3) and attention without
# flash attention (which reads K and V in f16 on the CPU).
EXACT = ("-fa", "off", "-ctk", "f32", "-ctv", "f32", "-ctkd", "f32", "-ctvd", "f32")


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    path = write_target(tmp_path_factory.mktemp("target") / "target.gguf")
    # the golden files were made against this very target: a change to the target's writer shows here
    from tests.support.llama_reference import LlamaReference

    weights = LlamaReference(path).w
    for seed in SEEDS:
        data = np.load(GOLDEN / f"dspine-s{seed}.npz")
        assert np.array_equal(weights["token_embd.weight"], data["embed"]), "the golden target changed: remake it"
        assert np.array_equal(weights["output.weight"], data["head"])
    return path


def golden(seed: int, case: str = "") -> tuple[Drafter, dict[str, np.ndarray], list[int]]:
    """`case`: "" for the full-attention drafters, "w8-" for the same inputs through a drafter
    whose every layer slides over 8 positions."""
    drafter, data = Drafter.from_golden(GOLDEN / f"dspine-{case}s{seed}.npz")
    return drafter, data, list(json.loads(str(data["config_json"]))["prompt"])


def converted(checkpoint: Path, target: Path, out: Path) -> Path:
    """The reference's checkpoint folder through dspine's converter, F32 throughout."""
    from app.hub.convert_run import convert_checkpoint

    shards = sorted(checkpoint.glob("*.safetensors"))
    convert_checkpoint(checkpoint / "config.json", shards, target, out, "F32")
    return out


def independent_layout(checkpoint: Path, folder: Path) -> Path:
    """The same checkpoint as model + config + a file whose one key is `codes` (the code table
    not in the model file): the layout of the reference's packager."""
    from app.hub.safetensors import load, read_header
    from tests.support.safetensors_drafters import write_safetensors

    folder.mkdir(parents=True, exist_ok=True)
    weights = {name: (info.dtype, load(info)) for name, info in read_header(checkpoint / "model.safetensors").items()}
    codes = weights.pop("transfer_codes")
    weights.pop("transfer_ready", None)
    write_safetensors(folder / "model.safetensors", weights)
    write_safetensors(folder / "transfer.safetensors", {"codes": codes})
    shutil.copy(checkpoint / "config.json", folder / "config.json")
    return folder


def walk_gaps(scores: np.ndarray) -> np.ndarray:
    """At each position, how far the walk's pick is ahead of the runner-up."""
    index, gaps = 0, []
    for row in scores:
        ordered = np.sort(row[index])
        gaps.append(ordered[-1] - ordered[-2])
        index = int(np.argmax(row[index]))
    return np.array(gaps)


def boundary_gaps(logits: np.ndarray, k: int) -> np.ndarray:
    ordered = -np.sort(-logits, axis=-1)
    return ordered[:, k - 1] - ordered[:, k]


def comparable(gaps: np.ndarray) -> int:
    """How many positions from the first are clear of near ties."""
    close = np.flatnonzero(gaps < TIE)
    return int(close[0]) if close.size else len(gaps)


def first_drafts(server: DraftLogServer, prompt: list[int], lengths: tuple[int, ...]) -> list[list[int]]:
    """The first draft of one request per block length."""
    for n in lengths:
        server.complete(prompt, 20, **{"speculative.n_max": n})
    runs = by_request(server.steps())
    assert len(runs) == len(lengths), runs
    for run in runs:
        assert run[0].pos0 == len(prompt), run[0]
    return [run[0].drafted for run in runs]


@pytest.mark.parametrize("layout", ["save_pretrained", "independent"])
@pytest.mark.parametrize("seed", SEEDS)
def test_the_server_drafts_what_the_reference_drafts(server_binary, target, tmp_path, seed, layout):
    drafts_as_the_reference(server_binary, target, tmp_path, seed, layout)


@pytest.mark.parametrize("seed", SEEDS)
def test_with_a_sliding_window_the_server_drafts_what_the_reference_drafts(server_binary, target, tmp_path, seed):
    """Every layer slides over 8 positions of the 12-token prompt's features and the block (the
    reference's config: use_sliding_window, sliding_window 8, layer_types; its mask cut to the
    window): the server's first drafts are the reference's, and the window changes them."""
    drafts_as_the_reference(server_binary, target, tmp_path, seed, "save_pretrained", case="w8-")
    _, windowed, _ = golden(seed, "w8-")
    _, full, _ = golden(seed)
    # Same weights and inputs: the window decides, within the first positions compared (all 15 here).
    assert list(windowed["selected"][:7]) != list(full["selected"][:7])


def drafts_as_the_reference(server_binary, target, tmp_path, seed: int, layout: str, case: str = "") -> None:
    drafter, data, prompt = golden(seed, case)
    checkpoint = GOLDEN / f"ckpt-{case}s{seed}"
    if layout == "independent":
        checkpoint = independent_layout(checkpoint, tmp_path / "independent")
    gguf_file = converted(checkpoint, target, tmp_path / "drafter.gguf")
    k = drafter.top_k
    clear = min(
        comparable(walk_gaps(data["scores"])),
        comparable(boundary_gaps(data["base_logits"], k)),
    )
    assert clear >= 7, f"seed {seed}: only {clear} positions clear of ties; choose another golden case"
    want = [int(t) for t in data["selected"]]
    with DraftLogServer(server_binary, target, gguf_file, tmp_path / "server.log", n_max=15, extra=EXACT) as server:
        drafts = first_drafts(server, prompt, (15, 3, 1))
    assert [len(d) for d in drafts] == [15, 3, 1]
    for got in drafts:
        n = min(len(got), clear)
        assert got[:n] == want[:n], (case, seed, layout, got, want)


def test_without_refinement_the_base_logits_draft(server_binary, target, tmp_path):
    """`dflash.dspine.top_k` 0 turns the last-write refinement off (the paper's ablation): the
    server then drafts the top-1 of the base logits, as the reading without refinement does."""
    import gguf

    seed = 2  # the case where the refinement changes most positions
    drafter, data, prompt = golden(seed)
    full = converted(GOLDEN / f"ckpt-s{seed}", target, tmp_path / "full.gguf")
    plain = tmp_path / "no-refinement.gguf"
    rewritten_copy(full, plain, {"dflash.dspine.top_k": (0, gguf.GGUFValueType.UINT32)})

    base = data["base_logits"]
    want = [int(t) for t in np.argmax(base, axis=-1)]
    assert want != [int(t) for t in data["selected"]]  # the refinement matters on this case
    clear = comparable(boundary_gaps(base, 1))
    assert clear >= 7
    with DraftLogServer(server_binary, target, plain, tmp_path / "server.log", n_max=15, extra=EXACT) as server:
        (got,) = first_drafts(server, prompt, (15,))
    assert got[:clear] == want[:clear]


@pytest.mark.parametrize(
    "dropped", ["codes", "gate", "rms_scale", "shared_message", "refinement"], ids=lambda name: f"without-{name}"
)
def test_each_part_of_dspine_changes_these_drafts(dropped):
    """The server drafts the golden tokens (above); a reading without any one of DSpine's parts
    drafts other tokens within the compared positions of some case, so the server has each part."""
    differs = []
    for seed in SEEDS:
        drafter, data, _ = golden(seed)
        clear = min(
            comparable(walk_gaps(data["scores"])),
            comparable(boundary_gaps(data["base_logits"], drafter.top_k)),
        )
        out = drafter.block(
            data["target_hidden"],
            data["block_ids"],
            data["position_ids"],
            data["embed"],
            data["head"],
            Parts(**{dropped: False}),
        )
        differs.append(list(out["selected"][:clear]) != list(data["selected"][:clear]))
    assert any(differs), f"dropping {dropped} changes no compared draft"


def test_the_walk_reads_the_reference_lattice():
    """The lattice walk the server does on its CPU side is the reference's select_cached."""
    for seed in SEEDS:
        _, data, _ = golden(seed)
        assert list(walk(data["scores"], data["candidates"])) == list(data["selected"])


def test_the_walk_draws_under_the_requests_sampler(server_binary, target, tmp_path):
    """The refinement's walk draws each step from its candidates under the request's sampler, as
    the other kinds' drafts do: a token the request bans (logit bias false) is never drafted,
    though the reference's walk drafts it first, and the draft goes on with the next candidate."""
    drafter, data, prompt = golden(0)
    banned = int(data["selected"][0])
    gguf_file = converted(GOLDEN / "ckpt-s0", target, tmp_path / "drafter.gguf")
    with DraftLogServer(server_binary, target, gguf_file, tmp_path / "server.log", n_max=15, extra=EXACT) as server:
        (free,) = first_drafts(server, prompt, (15,))
        assert free[0] == banned  # unbiased, the walk drafts it
        seen = len(server.steps())
        server.complete(prompt, 20, logit_bias=[[banned, False]], **{"speculative.n_max": 15})
        steps = server.steps()[seen:]
    assert steps and steps[0].pos0 == len(prompt)
    assert all(banned not in step.drafted for step in steps), [s.drafted for s in steps]
    assert len(steps[0].drafted) > 0  # the walk takes the next candidate rather than stopping
