"""`dspine fit` as a user runs it: local files, a catalog bundle read over HTTP
Range from the test hub before any pull, NVML faked at its call boundary."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import TARGET_REPO
from tests.support.gguf_models import QTYPE, qwen38_27b, write_header_only
from tests.support.nvml import RTX_3090, GiB, fake_pynvml, nvml_env


def test_fit_local_files_for_a_24gb_card(dspine, headers):
    target = headers["Qwen3.8-27B-Q4_K_M.gguf"]
    drafter = headers["Qwen3.8-27B-DSpine-b16-BF16.gguf"]
    result = dspine("fit", str(target), "--draft", str(drafter), "--vram", "24GiB", "--json", "--no-measure")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data["memory"]) >= {
        "target_weights",
        "target_kv",
        "recurrent_state",
        "compute",
        "overhead",
        "drafter_weights",
        "drafter_kv",
        "drafter_compute",
        "total",
    }
    assert data["fits"] is True and data["budget"] == 24 * GiB
    assert data["memory"]["total"] <= data["budget"]
    settings = data["settings"]
    assert settings["drafter_kind"] == "dspine"  # from the file's architecture
    assert settings["context"] >= 16384 and settings["kv_type"] == "f16" and settings["flash_attention"]
    assert settings["gpu_layers"] == 65 and settings["drafter_gpu_layers"] == 6
    # DSpine drafts 15 a step (in place): llama-server keeps the live state and 15 snapshots (need_n_rs_seq).
    assert settings["draft_n_max"] == 15 and settings["recurrent_state_copies"] == 16
    assert data["memory"]["recurrent_state"] == 16 * 156_893_184
    assert any("16 copies of that state" in r for r in data["reasons"])
    # The code table: on the GPU, where the plan has room (the setting code_table_device = auto).
    assert settings["code_table"] == "CUDA0"
    assert any(r.startswith("The DSpine code table") and "goes on the GPU (CUDA0)" in r for r in data["reasons"])
    assert "dspine_codes\\.weight=CUDA0" in data["llama_server_args"]


def test_fit_table_names_every_line(dspine, headers):
    result = dspine("fit", str(headers["Qwen3.8-27B-Q4_K_M.gguf"]), "--vram", "24GiB", "--no-measure")
    assert result.returncode == 0, result.stderr
    for line in ("target weights", "target KV cache", "recurrent state", "compute buffer", "safety margin", "headroom"):
        assert line in result.stdout
    assert "llama-server -m" in result.stdout


def test_fit_catalog_bundle_over_http_range_before_pull(dspine, gguf_hub, headers, tmp_path):
    cache = {"DSPINE_CACHE_DIR": str(tmp_path / "moved-cache")}  # the setting cache_dir
    result = dspine("fit", "qwen3.8-27b", "--json", "--no-measure", extra_env={**nvml_env(RTX_3090), **cache})
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["budget"] == 23 * GiB
    assert data["reasons"][0].startswith("GPU 0: NVIDIA GeForce RTX 3090")
    assert data["settings"]["target_quant"] == "Q4_K_M"
    assert data["settings"]["drafter"] in {"dspine-bf16", "dspine", "dspine-gguf"}
    assert any("dflash2-q4 left out" in r for r in data["reasons"])  # not in the test hub: skipped, said
    # Only headers travelled, each with Range requests.
    gets = [(path, r) for method, path, r in gguf_hub.requests if method == "GET" and "/resolve/" in path]
    assert gets and all(r and r.startswith("bytes=") for _, r in gets)
    # The plan names where the files will be after a pull.
    assert data["settings"]["target_file"].endswith(f"{TARGET_REPO}/Qwen3.8-27B-Q4_K_M.gguf")
    # The headers are kept under cache_dir, and nowhere else.
    assert len(list((tmp_path / "moved-cache" / "headers").glob("*.gguf"))) == len({path for path, _ in gets})
    assert not (tmp_path / "cache" / "dspine").exists()

    gguf_hub.reset_counts()
    again = dspine("fit", "qwen3.8-27b", "--json", "--no-measure", extra_env={**nvml_env(RTX_3090), **cache})
    assert again.returncode == 0
    assert not [p for m, p, _ in gguf_hub.requests if "/resolve/" in p]  # headers cached


def test_fit_goal_context_and_fixed_context(dspine, headers):
    target = str(headers["Qwen3.8-27B-Q4_K_M.gguf"])
    longest = json.loads(dspine("fit", target, "--vram", "32GiB", "--goal", "context", "--json", "--no-measure").stdout)
    assert longest["settings"]["context"] == 262144
    fixed = json.loads(dspine("fit", target, "--vram", "24GiB", "--ctx", "32768", "--json", "--no-measure").stdout)
    assert fixed["settings"]["context"] == 32768


def test_fit_without_a_gpu_is_a_cpu_plan(dspine, headers):
    result = dspine("fit", str(headers["Qwen3.8-27B-Q4_K_M.gguf"]), "--json", "--no-measure", extra_env=nvml_env([]))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["settings"]["gpu_layers"] == 0 and data["settings"]["drafter"] is None
    assert "No NVIDIA GPU found" in " ".join(data["reasons"])


def test_fit_without_a_gpu_reads_as_one_cpu_line_not_a_table_of_zeros(dspine, headers):
    result = dspine("fit", str(headers["Qwen3.8-27B-Q4_K_M.gguf"]), "--no-measure", extra_env=nvml_env([]))
    assert result.returncode == 0, result.stderr
    assert "on the CPU (no NVIDIA GPU found)" in result.stdout and "in system RAM" in result.stdout
    assert "on the GPU" not in result.stdout and "headroom" not in result.stdout
    assert result.stdout.count("No NVIDIA GPU found") == 0  # said once, in the verdict's own words
    negative = dspine("fit", str(headers["Qwen3.8-27B-Q4_K_M.gguf"]), "--gpu", "-1", "--no-measure")
    assert negative.returncode == 2 and "--gpu -1 is not a GPU's number" in negative.stderr  # was taken silently


def test_fit_on_a_small_card_spills_to_ram_and_says_so(dspine, headers):
    target = str(headers["Qwen3.8-27B-Q4_K_M.gguf"])
    result = dspine("fit", target, "--vram", "8GiB", "--ctx", "8192", "--json", "--no-measure")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert 0 < data["settings"]["gpu_layers"] < 65 and data["settings"]["drafter"] is None
    assert any("does not fit whole" in r for r in data["reasons"])
    assert data["ram"]["target_weights"] > 0


def test_fit_bad_inputs(dspine, tmp_path):
    text = tmp_path / "notes.gguf"
    text.write_text("not a model at all")
    bad = dspine("fit", str(text), "--vram", "24GiB")
    assert bad.returncode == 9 and "not a GGUF file" in bad.stderr and "Traceback" not in bad.stderr
    assert dspine("fit", str(text), "--vram", "lots").returncode == 2
    assert dspine("fit", str(text), "--goal", "fastest").returncode == 2
    assert dspine("fit", str(text), "--kv", "q2").returncode == 2
    missing = dspine("fit", str(tmp_path / "none.gguf"), "--vram", "24GiB")
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_fit_measures_compute_with_llama_cpp(dspine, tmp_path):
    """A real (sparse) model file: the compute buffer comes from llama.cpp's dry run."""
    path = write_header_only(tmp_path / "q4.gguf", qwen38_27b(QTYPE.Q4_K))
    os.truncate(path, 17 * GiB)  # sparse: the weights' room without the weights
    result = dspine("fit", str(path), "--vram", "24GiB", "--json", timeout=300)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert any("measured by llama.cpp" in r for r in data["reasons"])
    # llama-server reserves one row of logits without a drafter, not a whole ubatch's
    # (which alone would be 485 MiB): one block's activations plus the f16 mask remain.
    mask = data["settings"]["context"] * 512 * 2
    assert 120 * 2**20 < data["memory"]["compute"] - mask < 150 * 2**20


def test_fit_after_pull_works_offline_from_the_files_on_disk(dspine, gguf_hub, models_dir):
    assert dspine("pull", "qwen3.8-27b", "--drafter", "dspine-gguf").returncode == 0
    gguf_hub.reset_counts()
    result = dspine(
        "fit", "qwen3.8-27b", "--draft", "dspine-gguf", "--vram", "24GiB", "--json", "--no-measure",
        extra_env={"HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert gguf_hub.requests == []
    assert data["settings"]["target_file"] == str(models_dir / TARGET_REPO / "Qwen3.8-27B-Q4_K_M.gguf")
    assert data["settings"]["drafter"] == "dspine-gguf"
    assert any("planned from the files" in r for r in data["reasons"])


def test_bench_depths_get_their_memory_from_the_fit_plan(headers, monkeypatch, env):
    """`dspine bench --depth`: a depth runs only where the plan keeps the whole target and the
    drafter on this GPU (NVML faked: a 3090); otherwise it is skipped with the plan's reason."""
    import app.fit.hardware as hardware
    from app.run.depth import fitting
    from app.run.depth_fit import plan_check
    from app.settings import load_settings

    fake_pynvml(monkeypatch, RTX_3090)
    target = headers["Qwen3.8-27B-Q4_K_M.gguf"]
    drafter = headers["Qwen3.8-27B-DSpine-b16-BF16.gguf"]
    why_not = plan_check(target, [drafter], load_settings(), hardware.detect(), measure=False)
    assert why_not(32768) is None
    deep = why_not(262144)
    assert deep is not None and deep.startswith("at a 262,144-token context the fit plan ")
    assert "GPU" in deep or drafter.name in deep
    assert "trained for" in (why_not(300000) or "")
    fits, skipped, run_ctx = fitting([0, 32768, 200000], 4096, 100, 64, why_not)
    assert fits == [0, 32768] and run_ctx == 32932
    assert [s.depth for s in skipped] == [200000] and "the fit plan" in skipped[0].reason
    # Without the drafter the same card holds more context: the reason is the drafter's.
    alone = plan_check(target, [], load_settings(), hardware.detect(), measure=False)
    assert alone(131072) is None
    crowded = why_not(131072) or ""
    # 31K, not 68K: DSpine at 15 keeps 15 more copies of the recurrent state (2.2 GiB), and its
    # fc (262 MB in BF16) sits on the GPU with its head, where llama.cpp puts it.
    assert f"no room for the drafter {drafter.name}" in crowded and "leaves 31K" in crowded


def test_fit_a_catalog_bundle_offline_with_nothing_pulled(dspine, gguf_hub):
    """`dspine fit qwen3.8-27b --vram 24GiB` before any download and without the network: from
    the catalog's shapes and sizes, the recurrent state counted as llama-server allocates it."""
    result = dspine(
        "fit", "qwen3.8-27b", "--vram", "24GiB", "--json", "--no-measure", extra_env={"HF_HUB_OFFLINE": "1"}
    )
    assert result.returncode == 0, result.stderr
    assert gguf_hub.requests == []
    data = json.loads(result.stdout)
    settings = data["settings"]
    assert data["fits"] and settings["target_quant"] == "Q4_K_M" and settings["drafter"] is not None
    # The catalog's Q4_K_M file: its bytes are the weights, on the GPU and (the embedding) in RAM.
    weights = data["memory"]["target_weights"] + data["ram"]["target_weights"]
    assert 16_000_000_000 < weights <= 16_464_440_224
    copies = settings["recurrent_state_copies"]
    assert copies == 1 + settings["draft_n_max"] and data["memory"]["recurrent_state"] == copies * 156_893_184
    assert any("planned from the catalog's shapes and file sizes" in r for r in data["reasons"])


def test_pull_checks_the_file_against_the_catalogs_figures(dspine, gguf_hub, tmp_path):
    """The test hub's Qwen3.8-27B header has the catalog's shape but not its size: pull says so.
    A catalog whose shape is wrong is named key by key."""
    done = dspine("pull", "qwen3.8-27b", "--drafter", "none")
    assert done.returncode == 0, done.stderr
    assert "is not what the catalog says of qwen3.8-27b (size: catalog 16,464,440,224 B" in " ".join(
        done.stdout.split()
    )
    assert "block_count" not in done.stdout
    wrong = tmp_path / "catalog.toml"
    builtin = (Path(__file__).parents[2] / "assets" / "catalog.toml").read_text()
    wrong.write_text(builtin.replace("block_count = 65 ", "block_count = 49 "))
    again = dspine("pull", "qwen3.8-27b", "--drafter", "none", extra_env={"DSPINE_CATALOG": str(wrong)})
    assert again.returncode == 0, again.stderr
    assert "block_count: catalog 49, file 65" in " ".join(again.stdout.split())


AUTHORS_REPO = "tencent/Qwen3.8-27B-DSpine-b16"


def authors_config() -> bytes:
    from tests.support.safetensors_drafters import config, real_dspine

    return json.dumps(config(real_dspine())).encode()


def test_fit_sizes_the_authors_drafter_from_its_config_before_the_pull(dspine, gguf_hub, tmp_path):
    """Only config.json travels (no GGUF exists on the hub to read a header of): the plan counts
    the drafter as `dspine pull` will convert it, Q4_K_M with its code table at Q8_0, and its
    window's KV cache; a second fit reads the kept copy."""
    gguf_hub.add_repo(AUTHORS_REPO, {"config.json": authors_config(), "README.md": b"# DSpine\n"})
    cache = {"DSPINE_CACHE_DIR": str(tmp_path / "cache")}
    args = ("fit", "qwen3.8-27b", "--draft", "dspine", "--json", "--no-measure")
    result = dspine(*args, extra_env={**nvml_env(RTX_3090), **cache})
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert any(r.startswith(f"dspine: sized from {AUTHORS_REPO}/config.json") for r in data["reasons"])
    settings = data["settings"]
    assert settings["drafter"] == "dspine" and settings["drafter_kind"] == "dspine"
    assert settings["drafter_file"].endswith("Qwen3.8-27B-DSpine-b16-Q4_K_M.gguf")
    # 2.03B parameters: 1.315 GB at Q4_K_M with its 270 MB code table at Q8_0, which fit puts
    # on the GPU where the plan has room (or says why not).
    table = 248320 * 1024 // 32 * 34
    on_gpu = data["memory"]["drafter_weights"] + (0 if settings["code_table"] == "CUDA0" else table)
    assert abs(on_gpu - 1.315e9) < 0.005e9, data["memory"]
    assert settings["code_table"] == "CUDA0"  # on a 3090 beside the 27B target, at 4K of context
    assert any("capped by its 8K sliding window" in r for r in data["reasons"])
    gets = [path for method, path, _ in gguf_hub.requests if method == "GET" and AUTHORS_REPO in path]
    assert [p for p in gets if "/resolve/" in p] and all(p.endswith("config.json") for p in gets if "/resolve/" in p)

    gguf_hub.reset_counts()
    again = dspine(*args, extra_env={**nvml_env(RTX_3090), **cache})
    assert again.returncode == 0 and json.loads(again.stdout)["memory"] == data["memory"]
    assert gguf_hub.served_bytes(AUTHORS_REPO, "config.json") == 0  # kept under cache_dir


def test_fit_says_when_its_plan_drafts_with_another_variant_than_the_one_pulled(dspine, gguf_hub, headers, env):
    """A user who pulled `dspine` read a plan for `dspine-bf16` with no word that it is not what
    they have: fit names both, and the command for each."""
    from app.hub.store import Manifest, PullRecord, StoredFile
    from app.settings import load_settings

    target = headers["Qwen3.8-27B-Q4_K_M.gguf"]
    stored = StoredFile("target", TARGET_REPO, target.name, target.stat().st_size, None, "main", str(target))
    Manifest(load_settings().manifest_path).put(
        PullRecord("qwen3.8-27b", "catalog", "Q4_K_M", "dspine-gguf", "dspine", [stored])
    )
    planned = dspine("fit", "qwen3.8-27b", "--json", "--no-measure", extra_env=nvml_env(RTX_3090))
    assert planned.returncode == 0, planned.stderr
    data = json.loads(planned.stdout)
    drafter = data["settings"]["drafter"]
    said = [r for r in data["reasons"] if "is the one pulled" in r]
    assert drafter != "dspine-gguf", "the plan drafts with what is pulled: nothing to say, nothing tested"
    assert said == [
        f"This plan drafts with {drafter}, the best of qwen3.8-27b's drafters that fits here; dspine-gguf is the one "
        "pulled: `dspine fit qwen3.8-27b --draft dspine-gguf` plans it, "
        f"`dspine pull qwen3.8-27b --drafter {drafter}` fetches this one."
    ]
    asked = dspine(
        "fit", "qwen3.8-27b", "--draft", "dspine-gguf", "--json", "--no-measure", extra_env=nvml_env(RTX_3090)
    )
    data = json.loads(asked.stdout)
    assert data["settings"]["drafter"] == "dspine-gguf" and not [r for r in data["reasons"] if "is the one pulled" in r]


def test_fit_with_no_name_and_no_gpu_says_which_model_chat_starts_with_here(dspine, gguf_hub):
    """A new user's `dspine fit` on a CPU planned the 27B target without a word of the small
    model chat and run start with there, nor the target's name in its first line."""
    offline = {**nvml_env([]), "HF_HUB_OFFLINE": "1"}
    result = dspine("fit", "--no-measure", extra_env=offline)
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("No NVIDIA GPU here: chat and run start with smollm2-135m"), result.stderr
    first = result.stdout.splitlines()[0]
    assert "on the CPU" in first and "qwen3.8-27b Q4_K_M" in first, first
    as_json = dspine("fit", "--no-measure", "--json", extra_env=offline)
    assert json.loads(as_json.stdout)["settings"]["target_quant"] == "Q4_K_M"  # the note stays off stdout
