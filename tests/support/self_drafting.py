"""The real SmolLM2 Q8_0 target on dspine's patched llama-server, with itself as drafter or
none, and a raw `/completion` against it: the pair the drafter's exactness tests compare
(a copy of the target as drafter should keep every draft and write what plain writes)."""

from __future__ import annotations

from pathlib import Path

from backends.llama_server import LlamaServerEngine, ServerConfig


def launch(binary: Path, real: dict[str, Path], tmp_path: Path, drafter: bool, *extra: str) -> LlamaServerEngine:
    """The target alone, or drafting for itself eight tokens a step (`extra`: more flags)."""
    config = ServerConfig(
        model=str(real["target"]),
        draft_model=str(real["target"]) if drafter else None,
        drafter_kind="draft" if drafter else None,
        n_ctx=2048,
        gpu_layers=0,
        draft_gpu_layers=0,
        n_max=8 if drafter else None,
        extra_args=extra,
    )
    return LlamaServerEngine(config, binary=str(binary), log_dir=tmp_path).start()


def complete(engine: LlamaServerEngine, request: dict) -> tuple[str, dict]:
    """The text and timings of one `/completion` request."""
    assert engine._running is not None
    response = engine._running.client.post("/completion", json=request)
    assert response.status_code == 200, response.text
    reply = response.json()
    return reply["content"], reply["timings"]
