"""The chat's llama-server takes the DSpine code table's place from the fit plan when the
setting is auto, and never passes "auto" to llama-server."""

from __future__ import annotations

from types import SimpleNamespace

from app.run.engines import _planned
from backends.llama_server import ServerConfig, server_args


def config(device: str | None) -> ServerConfig:
    return ServerConfig(
        model="/m/t.gguf", draft_model="/m/d.gguf", drafter_kind="dspine", gpu_layers=99, draft_gpu_layers=99,
        code_table_device=device,
    )  # fmt: skip


def plan(device: str | None):
    return SimpleNamespace(gpu_layers=65, drafter_gpu_layers=6, kv="f16", draft_n_max=15, code_table_device=device)


def test_auto_takes_the_plans_place_for_the_code_table():
    assert _planned(config("auto"), plan("CUDA0")).code_table_device == "CUDA0"
    assert _planned(config("auto"), plan(None)).code_table_device is None
    args = server_args(_planned(config("auto"), plan("CUDA0")))
    assert args[args.index("--override-tensor-draft") + 1] == r"dspine_codes\.weight=CUDA0"


def test_without_a_plan_auto_keeps_the_table_on_the_host_and_a_named_device_stays():
    assert _planned(config("auto"), None).code_table_device is None
    assert "--override-tensor-draft" not in server_args(_planned(config("auto"), None))
    assert _planned(config("CUDA1"), None).code_table_device == "CUDA1"
