"""Whether llama.cpp's CPU weight repacking is safe on this machine.

llama.cpp repacks Q4_0/Q8_0 weights for its AMX kernels where the CPU advertises AMX. Some
virtual machines advertise AMX that those kernels then crash on (SIGSEGV in the first batch,
so the whole process dies: for the in-process engine, dspine itself). Nothing cheap tells
such a machine apart (the kernel grants the tile permission either way), so a tiny Q8_0 model
is loaded once, with repacking on, in a child process: if the child dies by a signal,
repacking is turned off (`LLAMA_ARG_REPACK=false`, the variable llama-server reads for
--no-repack and the in-process engine follows). The answer is remembered per CPU and per
llama.cpp build by the caller; a user's own LLAMA_ARG_REPACK always wins."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, MutableMapping
from pathlib import Path

import httpx2

REPACK_VARIABLE = "LLAMA_ARG_REPACK"
_OFF_WORDS = ("0", "false", "off", "no", "disabled")
PROBE_TIMEOUT_S = 120.0


def asked_by_user(environ: Mapping[str, str]) -> bool | None:
    """The user's own LLAMA_ARG_REPACK (on or off), or None when it is not set."""
    value = environ.get(REPACK_VARIABLE)
    if value is None or not value.strip():
        return None
    return value.strip().lower() not in _OFF_WORDS


def forget_empty(environ: MutableMapping[str, str]) -> None:
    """An empty LLAMA_ARG_REPACK reads as not set here (asked_by_user), but llama-server refuses
    to start on it ("invalid boolean value"): it goes, so both read it alike."""
    if not environ.get(REPACK_VARIABLE, "x").strip():
        del environ[REPACK_VARIABLE]


def advertises_amx(cpuinfo: str | None = None) -> bool:
    """Whether the CPU says it has AMX tiles: the only case where repacking picks the kernels
    that crash on some machines (elsewhere it needs no probe)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return False
    return any(line.startswith("flags") and " amx_tile" in f" {line}" for line in cpuinfo.splitlines())


def cpu_name(cpuinfo: str | None = None) -> str:
    """The CPU's model name, the machine half of the remembered answer's key."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return "unknown CPU"
    for line in cpuinfo.splitlines():
        if line.startswith("model name") and ":" in line:
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def write_probe_model(path: Path) -> Path:
    """A one-layer llama model with Q8_0 weights (about 100 KB): enough for repacking to pick
    the AMX kernels and for one batch to run them."""
    import gguf
    import numpy as np

    n_embd, n_ff, n_vocab, n_head = 64, 128, 64, 4
    q8 = gguf.GGMLQuantizationType.Q8_0
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(64)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(1)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_tokenizer_model("llama")
    writer.add_token_list([f"<{i}>" for i in range(n_vocab)])
    writer.add_token_scores([0.0] * n_vocab)
    writer.add_token_types([1] * n_vocab)
    rng = np.random.default_rng(0)

    def tensor(name: str, *ne: int, quantized: bool = True) -> None:
        values = (rng.standard_normal(tuple(reversed(ne))) * 0.02).astype(np.float32)
        if quantized:
            writer.add_tensor(name, gguf.quants.quantize(values, q8), raw_dtype=q8)
        else:
            writer.add_tensor(name, values)

    tensor("token_embd.weight", n_embd, n_vocab)
    tensor("output_norm.weight", n_embd, quantized=False)
    tensor("output.weight", n_embd, n_vocab)
    tensor("blk.0.attn_norm.weight", n_embd, quantized=False)
    tensor("blk.0.ffn_norm.weight", n_embd, quantized=False)
    for part in ("q", "k", "v", "output"):
        tensor(f"blk.0.attn_{part}.weight", n_embd, n_embd)
    tensor("blk.0.ffn_gate.weight", n_embd, n_ff)
    tensor("blk.0.ffn_up.weight", n_embd, n_ff)
    tensor("blk.0.ffn_down.weight", n_ff, n_embd)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _repacking_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop(REPACK_VARIABLE, None)  # llama.cpp's default: repacking on
    return env


def _verdict(returncode: int) -> bool | None:
    """Survived (True), died by a signal (False), or failed some other way (None: no answer,
    nothing to remember)."""
    if returncode == 0:
        return True
    if returncode < 0 or returncode >= 128 + 1:  # a signal, or a shell's 128 + signal
        return False
    return None


def library_survives_repacking(timeout_s: float = PROBE_TIMEOUT_S) -> bool | None:
    """llama-cpp-python (the in-process engine's library) loads the probe model with
    repacking on and runs one batch, in a child process."""
    with tempfile.TemporaryDirectory(prefix="dspine-repack-") as folder:
        model = write_probe_model(Path(folder) / "probe-q8_0.gguf")
        try:
            # -P and a folder of its own: a project's `llama_cpp.py` or `numpy/` in the folder
            # dspine was started in must never be imported (nothing a project carries runs).
            done = subprocess.run(
                [sys.executable, "-P", "-c", _CHILD, str(model)],
                env=_repacking_env(),
                cwd=folder,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            return None
        return _verdict(done.returncode)


def server_survives_repacking(binary: Path, timeout_s: float = PROBE_TIMEOUT_S) -> bool | None:
    """This llama-server loads the probe model with repacking on (its warm-up runs a batch)
    and answers /health, or dies first."""
    from .llama_server import free_port

    with tempfile.TemporaryDirectory(prefix="dspine-repack-") as folder:
        model = write_probe_model(Path(folder) / "probe-q8_0.gguf")
        port = free_port()
        process = subprocess.Popen(
            [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", "64", "-np", "1"],
            env=_repacking_env(),
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                returncode = process.poll()
                if returncode is not None:
                    return _verdict(returncode) if returncode != 0 else None
                try:
                    if httpx2.get(f"http://127.0.0.1:{port}/health", timeout=1.0).status_code == 200:
                        return True
                except httpx2.HTTPError:
                    pass
                time.sleep(0.1)
            return None
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


# The child's side: load with llama.cpp's defaults (repacking on) and run one batch. Exit 0:
# it ran; 2: it could not load (no answer); a signal: repacking crashed it.
_CHILD = """
import sys
import llama_cpp as L
L.llama_backend_init()
model = L.llama_model_load_from_file(sys.argv[1].encode(), L.llama_model_default_params())
if not model:
    sys.exit(2)
params = L.llama_context_default_params()
params.n_ctx = params.n_batch = params.n_ubatch = 64
context = L.llama_init_from_model(model, params)
if not context:
    sys.exit(2)
tokens = (L.llama_token * 8)(*range(1, 9))
sys.exit(0 if L.llama_decode(context, L.llama_batch_get_one(tokens, 8)) == 0 else 2)
"""
