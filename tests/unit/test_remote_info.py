"""What a remote server says about itself, read from its recorded answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backends.remote_info import (
    GENERIC,
    choose_model,
    kind_of,
    props_context,
    props_per_request_draft,
    props_speculation,
    served_models,
)
from backends.remote_probe import plain_http_warning, root_of

SHAPES = Path(__file__).parents[1] / "support" / "remote_shapes"


def _shape(name: str):
    return json.loads((SHAPES / name).read_text())


def test_vllms_listing_gives_the_model_its_window_and_the_kind():
    models = served_models(_shape("vllm_v1_models.json"))
    assert [(m.id, m.window) for m in models] == [("Qwen/Qwen3-8B", 32768)]
    assert kind_of(models) == "vLLM"


def test_llama_servers_listing_and_props_give_its_slots_window():
    models = served_models(_shape("llamacpp_v1_models.json"))
    assert kind_of(models) == "llama-server" and models[0].window == 4096
    props = _shape("llamacpp_props.json")
    assert props_context(props) == 4096
    assert props_per_request_draft(props)  # dspine's patch says so
    assert props_speculation(props) is None  # "none" even with a drafter loaded: it says nothing


def test_an_unknown_owner_is_a_generic_server():
    assert kind_of(served_models({"data": [{"id": "m", "owned_by": "someone"}]})) == GENERIC


@pytest.mark.parametrize(
    "answer",
    [{"models": []}, {"data": "m"}, {"data": [{"object": "model"}]}, {"data": [{"id": ""}]}, ["m"]],
)
def test_a_listing_of_another_shape_is_refused(answer):
    with pytest.raises(ValueError):
        served_models(answer)


def test_the_model_asked_for_must_be_served():
    models = served_models({"data": [{"id": "a"}, {"id": "b"}]})
    assert choose_model(models, "b").id == "b"
    assert choose_model(models, "c") == "it does not serve 'c'; it serves: a, b"
    assert "say which" in choose_model(models, None)
    assert choose_model(models[:1], None).id == "a"


def test_the_root_and_the_plain_http_warning():
    assert root_of("http://box:8000/v1/") == "http://box:8000"
    assert root_of("https://box/api/v1") == "https://box/api"
    assert plain_http_warning("http://127.0.0.1:8000/v1") is None
    assert plain_http_warning("http://localhost:8000/v1") is None
    assert plain_http_warning("https://gpu-box:8000/v1") is None
    warning = plain_http_warning("http://gpu-box:8000/v1")
    assert warning and "unencrypted" in warning and "ssh" in warning
