from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.fake_hub import FakeHub

# Fixtures that live with their helpers in tests/support/, visible to every layer.
pytest_plugins = ["tests.support.fit_hub", "tests.support.pilot"]

ROOT = Path(__file__).resolve().parent.parent


def _advertises_amx() -> bool:
    try:
        return " amx_tile" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


# Some machines of this workplace (Firecracker VMs on Sapphire Rapids) advertise AMX, and
# llama.cpp's AMX kernels, which its weight repacking picks for Q4_0/Q8_0 weights, crash there
# (SIGSEGV at ldtilecfg while the first batch runs): every llama-server the tests start would
# die while loading. Repacking off leaves the ordinary CPU kernels; results are the same.
if _advertises_amx():
    os.environ.setdefault("LLAMA_ARG_REPACK", "false")

TARGET_REPO = "unsloth/Qwen3.8-27B-GGUF"
DSPINE_REPO = "aj9o9/Qwen3.8-27B-DSpine-b16-GGUF"
DFLASH_REPO = "incoai/Qwen3.8-27B-DFlash2-GGUF"
TARGET_Q4 = "Qwen3.8-27B-Q4_K_M.gguf"
DRAFTER_Q4 = "Qwen3.8-27B-DSpine-b16-Q4_K_M.gguf"


def blob(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


@pytest.fixture
def hub():
    server = FakeHub()
    server.add_repo(
        TARGET_REPO,
        {
            TARGET_Q4: blob(3 * 1024 * 1024 + 123, 1),
            "Qwen3.8-27B-UD-Q4_K_M.gguf": blob(4096, 2),
            "Qwen3.8-27B-Q8_0.gguf": blob(8192, 3),
            "mmproj-Q4_K_M.gguf": blob(1000, 4),
            "README.md": b"# Qwen3.8-27B GGUF\n",
        },
        lfs=True,
    )
    server.add_repo(
        DSPINE_REPO,
        {DRAFTER_Q4: blob(512 * 1024 + 7, 5), "Qwen3.8-27B-DSpine-b16-BF16.gguf": blob(2048, 6)},
    )
    server.add_repo(DFLASH_REPO, {"Qwen3.8-27B-DFlash2-Q4_K_M.gguf": blob(4096, 7)})
    server.start()
    yield server
    server.stop()


@pytest.fixture
def env(tmp_path, hub, monkeypatch) -> dict[str, str]:
    """An isolated user: own config, data and HF cache, the test hub as endpoint."""
    values = {
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(tmp_path / "hf"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "DSPINE_MODELS_DIR": str(tmp_path / "models"),
        # No package index unless a test serves one: nothing here reaches the network's.
        "DSPINE_PACKAGE_INDEX": (tmp_path / "no-package-index").as_uri(),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_XET": "1",
        "COLUMNS": "200",
    }
    for key in (
        "HF_TOKEN",
        "HF_HUB_OFFLINE",
        "HF_HUB_CACHE",
        "DSPINE_CONFIG",
        "DSPINE_CATALOG",
        "DSPINE_DEBUG",
        "FAKE_NVML",
        "DSPINE_API_KEY",
    ):
        monkeypatch.delenv(key, raising=False)
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    full = dict(os.environ)
    full.update(values)
    return full


@pytest.fixture
def models_dir(env) -> Path:
    return Path(env["DSPINE_MODELS_DIR"])


def dspine_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "app", *args]


@pytest.fixture
def dspine(env):
    """Run the real CLI in a subprocess, as a user would."""

    def run(*args: str, extra_env: dict[str, str] | None = None, timeout: float = 120, **kwargs):
        return subprocess.run(
            dspine_cmd(*args),
            env={**env, **(extra_env or {})},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            **kwargs,
        )

    return run


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """Generated target/drafter families, written once per test run."""
    from tests.support.engine_models import write_family

    folder = tmp_path_factory.mktemp("engine-models")
    return {kind: write_family(folder, kind) for kind in ("dense", "hybrid", "sharp-dense", "sharp-hybrid")}


@pytest.fixture(scope="session")
def real(tmp_path_factory):
    """SmolLM2-135M as a Q8_0 target with its Q4_1 and Q2_K quants as drafters."""
    from tests.support.real_models import smollm2_pair

    return smollm2_pair(tmp_path_factory.mktemp("smollm2"))


def wait_for(predicate, timeout: float = 30.0, what: str = "condition"):
    """Poll with a deadline (tests never sleep a fixed time to wait for something)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="session")
def patched_server() -> Path:
    """dspine's patched llama-server (per-request draft length), built once per machine."""
    from tests.support.patched_server import build_folder

    return build_folder() / "bin" / "llama-server"


@pytest.fixture(scope="module")
def server_binary(request) -> Path:
    """The patched llama-server, or one built from a dev tree of the same patches
    (DSPINE_TEST_LLAMA_SERVER): it spares the rebuild while the patch is being written."""
    dev = os.environ.get("DSPINE_TEST_LLAMA_SERVER")
    return Path(dev) if dev else request.getfixturevalue("patched_server")


@pytest.fixture(scope="module")
def keyed_llama(server_binary, real, tmp_path_factory):
    """The real SmolLM2 pair on the patched llama-server as a remote engine: its key in a 0600
    file, /metrics on. Yields (OpenAI base URL, key)."""
    from tests.support.remote_servers import keyed_llama_server

    with keyed_llama_server(server_binary, real["target"], real["q4"], tmp_path_factory.mktemp("remote")) as running:
        yield running


# Fixtures that make a test take minutes the first time on a machine (llama-quantize on the real
# model, the patched llama-server's build) or seconds every time after: their tests are `slow`,
# so `-m "not slow"` leaves them out without each test saying so.
SLOW_FIXTURES = frozenset({"real", "patched_server"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
