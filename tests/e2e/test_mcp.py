"""MCP servers without the TUI: the config files and their order, a real server from the
package index (mcp-server-time) listed with its cost and called, servers that fail in
every way as notices while the rest goes on, secrets kept to the server, and no server
left behind when the process that runs the chat is killed (asserted by pid)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.agent.mcp import results
from app.agent.mcp.config import SETTINGS_SOURCE, ConfigProblem, ServerSpec, discover, expand
from app.agent.mcp.manager import McpManager, tool_name
from app.agent.mcp.switches import Switches
from app.errors import ConfigError
from tests.conftest import ROOT, wait_for
from tests.support.mcp_servers import alive, pids, write_http_server, write_mcp_json, write_server
from tests.support.signals import default_sigint

TIME_SERVER = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))


def settled(manager: McpManager, timeout: float = 30) -> None:
    wait_for(lambda: all(s.status != "starting" for s in manager.servers.values()), timeout, "the servers to settle")


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


def test_config_files_are_read_in_order_and_each_server_knows_its_file(project):
    write_mcp_json(
        project,
        {
            "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {"TOKEN": "${GIT_TOKEN}"}},
            "docs": {"type": "http", "url": "https://docs.example/mcp", "headers": {"Authorization": "Bearer x"}},
            "broken": {"args": ["no command"]},
        },
    )
    (project / "opencode.json").write_text(
        json.dumps(
            {
                "mcp": {
                    "git": {"type": "local", "command": ["other-git"]},
                    "fs": {
                        "type": "local",
                        "command": ["npx", "-y", "fs"],
                        "environment": {"A": "1"},
                        "enabled": False,
                    },
                    "remote": {"type": "remote", "url": "http://127.0.0.1:9/mcp", "timeout": 2500},
                }
            }
        )
    )
    specs, problems = discover(project, {"time": {"command": "mcp-server-time"}, "fs": {"command": "late"}})
    by_name = {s.name: s for s in specs}
    # The user's own servers first: a project's server of the same name never replaces one.
    assert list(by_name) == ["time", "fs", "git", "docs", "remote"]
    assert by_name["git"].source == str(project / ".mcp.json") and by_name["git"].command == "uvx"
    assert by_name["docs"].transport == "http" and by_name["docs"].headers == {"Authorization": "Bearer x"}
    assert by_name["fs"].source == SETTINGS_SOURCE and by_name["fs"].command == "late" and not by_name["fs"].project
    assert by_name["remote"].transport == "http" and by_name["remote"].timeout_s == 2.5
    assert by_name["time"].source == SETTINGS_SOURCE and not by_name["time"].project
    assert by_name["git"].project and by_name["docs"].project and by_name["remote"].project
    said = [str(p) for p in problems]
    assert any("'broken' left out" in p and '"command"' in p for p in said)
    assert any("'git' (other-git) is not used: .mcp.json" in p.replace(str(project) + "/", "") for p in said)
    assert any("'fs' (npx -y fs) is not used: your own server of that name is used" in p for p in said)


def test_a_broken_file_is_a_notice_and_the_other_files_still_count(project):
    (project / ".mcp.json").write_text('{"mcpServers": {"a": ')
    (project / "opencode.json").write_text(json.dumps({"mcp": {"b": {"type": "local", "command": ["b"]}}}))
    specs, problems = discover(project)
    assert [s.name for s in specs] == ["b"]
    assert len(problems) == 1 and ".mcp.json" in str(problems[0]) and "not valid JSON (line 1" in str(problems[0])


def test_variables_expand_with_defaults_and_a_missing_one_is_named():
    environ = {"HOME": "/home/me", "EMPTY": ""}
    assert expand("${HOME}/x ${NOPE:-fallback} ${EMPTY:-d} {env:HOME}", environ) == "/home/me/x fallback d /home/me"
    with pytest.raises(ConfigProblem, match=r"\$\{API_KEY\} is not set"):
        expand("Bearer ${API_KEY}", environ)


def test_tool_names_are_server__tool_in_the_allowed_characters():
    assert tool_name("time", "get_current_time") == "time__get_current_time"
    assert tool_name("my server", "do.it/now") == "my_server__do_it_now"
    assert len(tool_name("s" * 50, "t" * 50)) == 64


@pytest.mark.skipif(TIME_SERVER is None, reason="mcp-server-time is not installed (pip install -e .[test])")
def test_the_real_time_server_is_listed_with_its_cost_and_answers(project):
    notices: list[str] = []
    spec = ServerSpec("time", "test", "stdio", command=TIME_SERVER, args=("--local-timezone", "UTC"))
    manager = McpManager([spec], project, on_notice=lambda text, warning: notices.append(text))
    started = time.monotonic()
    manager.start()
    assert time.monotonic() - started < 1  # in the background: the chat is usable at once
    try:
        settled(manager)
        assert [t.name for t in manager.tools()] == ["time__get_current_time", "time__convert_time"]
        assert manager.servers["time"].server_info.startswith("mcp-time")
        estimate, exact = manager.cost("time")
        assert not exact and 150 < estimate < 1000
        counted, exact = manager.cost("time", lambda tools: 100 + len(json.dumps(tools).split()))
        assert (
            exact and counted == len(json.dumps([t.schema for t in manager.tools()]).split()) - 1
        )  # less the empty list
        answer = json.loads(manager.call("time__get_current_time", {"timezone": "Asia/Kathmandu"}))
        assert answer["timezone"] == "Asia/Kathmandu" and answer["datetime"].endswith("+05:45")
        assert "Invalid timezone" in manager.call("time__get_current_time", {"timezone": "Nowhere/Land"})
        assert notices == [f"MCP time (test): ready, 2 tools (~{estimate:,} tokens of definitions; /mcp counts them)"]
    finally:
        manager.close()


def test_servers_that_fail_are_notices_and_the_rest_goes_on(project, tmp_path):
    script = write_server(tmp_path)
    specs = [
        ServerSpec(name, "test", "stdio", command=sys.executable, args=(str(script), behaviour, str(tmp_path / name)))
        for name, behaviour in (("good", "ok"), ("exits", "exit"), ("hangs", "hang"), ("garbage", "garbage"))
    ] + [ServerSpec("nowhere", "test", "stdio", command=str(tmp_path / "no-such-server"))]
    notices: list[str] = []
    manager = McpManager(specs, project, start_timeout_s=2, on_notice=lambda text, warning: notices.append(text))
    manager.start()
    try:
        settled(manager)
        status = {s.name: (s.status, s.reason) for s in manager.servers.values()}
        assert status["good"] == ("ready", "")
        assert status["exits"] == ("failed", "left out: it exited at start · it said: fatal: no database configured")
        assert status["hangs"] == ("failed", "left out: no answer to initialize within 2 s")
        assert status["garbage"][0] == "failed" and "'Welcome to my server! v1.0' (not JSON)" in status["garbage"][1]
        assert status["nowhere"][0] == "failed" and "No such file or directory" in status["nowhere"][1]
        assert [t.name for t in manager.tools()] == ["good__echo", "good__picture"]
        assert manager.call("good__echo", {"text": "hi"}) == "echo: hi"
        assert manager.call("hangs__anything", {}).startswith("error: the MCP tool hangs__anything is not available")
        assert len(notices) == 5 and any(n.startswith("MCP hangs (test): left out") for n in notices)
        # The hung and the garbage servers were stopped, not left running.
        for name in ("hangs", "garbage"):
            wait_for(lambda name=name: not alive(pids(tmp_path / name)[0]), 10, f"{name} to be stopped")
    finally:
        manager.close()


def test_a_server_that_dies_later_loses_its_tools_with_a_notice(project, tmp_path):
    script = write_server(tmp_path)
    spec = ServerSpec(
        "fragile", "test", "stdio", command=sys.executable, args=(str(script), "die", str(tmp_path / "p"))
    )
    notices: list[str] = []
    changes: list[int] = []
    manager = McpManager(
        [spec], project, on_notice=lambda text, warning: notices.append(text), on_change=lambda: changes.append(1)
    )
    manager.start()
    try:
        settled(manager)
        assert [t.name for t in manager.tools()] == ["fragile__echo", "fragile__picture"]
        result = manager.call("fragile__echo", {"text": "x"})
        assert result == "error: the MCP server fragile stopped during the call; its tools are gone"
        wait_for(lambda: len(changes) == 2, 10, "the death to be noticed")
        assert manager.servers["fragile"].status == "stopped" and manager.tools() == []
        assert notices[-1] == (
            "MCP fragile (test): stopped: the server exited · it said: segfault (pretend); "
            "its tools are left out from the next turn"
        )
    finally:
        manager.close()


def test_garbage_after_start_ends_the_server_and_the_call_with_notices(project, tmp_path):
    script = write_server(tmp_path)
    spec = ServerSpec(
        "odd", "test", "stdio", command=sys.executable, args=(str(script), "garbage-later", str(tmp_path / "p"))
    )
    notices: list[str] = []
    manager = McpManager([spec], project, on_notice=lambda text, warning: notices.append(text))
    manager.start()
    try:
        settled(manager)
        started = time.monotonic()
        answer = manager.call("odd__echo", {"text": "x"})
        assert answer == "error: the MCP server odd stopped during the call; its tools are gone"
        assert time.monotonic() - started < 10  # the call ends with the server, it does not hang
        wait_for(lambda: manager.servers["odd"].status == "stopped", 10, "the server to be dropped")
        assert notices[-1].startswith(
            "MCP odd (test): stopped: it wrote something that is not MCP on stdout: "
            "'Traceback (most recent call last): oops' (not JSON)"
        )
        wait_for(lambda: not alive(pids(tmp_path / "p")[0]), 10, "the server process to be stopped")
    finally:
        manager.close()


def test_results_keep_text_describe_images_and_are_capped(project, tmp_path):
    script = write_server(tmp_path)
    spec = ServerSpec("t", "test", "stdio", command=sys.executable, args=(str(script), "ok", str(tmp_path / "p")))
    manager = McpManager([spec], project)
    manager.start()
    try:
        settled(manager)
        assert manager.call("t__picture", {}) == "[image image/png, 600 bytes: not shown to the model]"
    finally:
        manager.close()
    long = results.head_tail("a" * 10_000 + "END", 1000)
    assert len(long) < 1100 and long.endswith("END") and "characters cut here" in long


def test_the_environment_reaches_the_server_only(project, tmp_path):
    script = write_server(tmp_path)
    secret = "s3cr3t-value-123"
    spec = ServerSpec(
        "keyed",
        "test",
        "stdio",
        command=sys.executable,
        args=(str(script), "secret-exit", str(tmp_path / "p")),
        env={"SECRET_TOKEN": "${MY_TOKEN}"},
    )
    notices: list[str] = []
    manager = McpManager(
        [spec], project, environ={"MY_TOKEN": secret}, on_notice=lambda text, warning: notices.append(text)
    )
    manager.start()
    try:
        settled(manager)
    finally:
        manager.close()
    # The server printed it (so it got it); the notice shows *** in its place.
    (notice,) = notices
    assert "my token is ***" in notice and secret not in notice
    assert secret not in spec.describe() and secret not in repr(manager.servers["keyed"].reason)


def test_a_missing_variable_leaves_the_server_out_and_names_it(project):
    spec = ServerSpec("api", "test", "http", url="https://x.example/mcp", headers={"Authorization": "Bearer ${NO_KEY}"})
    notices: list[str] = []
    manager = McpManager([spec], project, environ={}, on_notice=lambda text, warning: notices.append(text))
    manager.start()
    try:
        settled(manager)
    finally:
        manager.close()
    assert notices == ["MCP api (test): ${NO_KEY} is not set: export it, or write ${NO_KEY:-default}"]


def test_switches_are_remembered_per_project_in_a_private_file(project, tmp_path):
    path = tmp_path / "data" / "mcp-switches.json"
    switches = Switches(path, project)
    switches.set("time", False)
    assert Switches(path, project).get() == {"time": False}
    assert Switches(path, tmp_path).get() == {}  # another project
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    script = write_server(tmp_path)
    spec = ServerSpec("t", "test", "stdio", command=sys.executable, args=(str(script), "ok", str(tmp_path / "p")))
    manager = McpManager([spec], project, switches=Switches(path, project))
    Switches(path, project).set("t", False)
    manager.start()
    try:
        assert manager.servers["t"].status == "off" and not (tmp_path / "p").exists()
        manager.set_enabled("t", True)
        settled(manager)
        assert manager.servers["t"].status == "ready" and Switches(path, project).get()["t"] is True
        manager.set_enabled("t", False)
        assert manager.tools() == []
        wait_for(lambda: not alive(pids(tmp_path / "p")[0]), 10, "the switched-off server to stop")
    finally:
        manager.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_http_server_gets_its_headers_with_variables_filled_in(project, tmp_path):
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(write_http_server(tmp_path)), str(port), "tok-123"], stdin=subprocess.DEVNULL
    )
    try:

        def listening() -> bool:
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.1", port)) == 0

        wait_for(listening, 30, "the HTTP server to listen")
        url = f"http://127.0.0.1:{port}/mcp"
        specs = [
            ServerSpec("web", "test", "http", url=url, headers={"Authorization": "Bearer ${WEB_TOKEN}"}),
            ServerSpec("wrong", "test", "http", url=url, headers={"Authorization": "Bearer nope"}),
        ]
        notices: list[str] = []
        manager = McpManager(
            specs,
            project,
            environ={"WEB_TOKEN": "tok-123"},
            start_timeout_s=10,
            on_notice=lambda text, warning: notices.append(text),
        )
        manager.start()
        try:
            settled(manager)
            assert [t.name for t in manager.tools()] == ["web__shout"]
            assert manager.call("web__shout", {"text": "hello"}) == "HELLO"
            assert manager.servers["wrong"].status == "failed" and manager.servers["wrong"].reason == (
                "left out: it answered HTTP 401 (check its headers: a token?)"
            )
            assert not any("tok-123" in n for n in notices)
        finally:
            manager.close()
    finally:
        server.kill()
        server.wait()


HOST = """
import sys, time
from pathlib import Path
from app.agent.mcp.config import ServerSpec
from app.agent.mcp.manager import McpManager
script, pidfile = sys.argv[1], sys.argv[2]
spec = ServerSpec("kid", "test", "stdio", command=sys.executable, args=(script, "ok-child", pidfile))
manager = McpManager([spec], Path.cwd())
manager.start()
try:
    while True:
        time.sleep(0.1)
finally:
    manager.close()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_no_server_or_its_child_outlives_the_chat_process(project, tmp_path, how):
    script, pidfile = write_server(tmp_path), tmp_path / "pids"
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(script), str(pidfile)],
        cwd=project,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))},
        stdin=subprocess.DEVNULL,
        preexec_fn=default_sigint,
    )
    try:
        server, child = pids(pidfile)
        assert alive(server) and alive(child)
        host.send_signal(how)
        host.wait(timeout=20)
        wait_for(lambda: not alive(server) and not alive(child), 10, "the server and its child to be gone")
    finally:
        host.kill()


def test_a_servers_stderr_is_kept_to_its_tail_in_memory(project, tmp_path):
    # 20 MB on stderr, then the last word: nothing on disk, a few KiB in memory, the line shown.
    noisy = tmp_path / "noisy.py"
    noisy.write_text(
        "import sys\nfor _ in range(20_000):\n    sys.stderr.write('x' * 1000 + '\\n')\n"
        "sys.exit('gave up: no API key')\n"
    )
    spec = ServerSpec("noisy", "test", "stdio", command=sys.executable, args=(str(noisy),))
    notices: list[str] = []
    manager = McpManager([spec], project, on_notice=lambda text, warning: notices.append(text))
    manager.start()
    try:
        settled(manager)
        run = manager.servers["noisy"]._run
        tail = run.tail if run is not None else None
        assert tail is not None and len(tail._kept) <= 4096
    finally:
        manager.close()
    assert notices == ["MCP noisy (test): left out: it exited at start · it said: gave up: no API key"]


def test_the_chat_ends_at_once_while_a_server_hangs_on_initialize(project, tmp_path):
    script = write_server(tmp_path)
    spec = ServerSpec("stuck", "test", "stdio", command=sys.executable, args=(str(script), "hang", str(tmp_path / "p")))
    notices: list[str] = []
    manager = McpManager([spec], project, start_timeout_s=60, on_notice=lambda text, warning: notices.append(text))
    manager.start()
    (server,) = pids(tmp_path / "p")
    started = time.monotonic()
    manager.close()
    # The SDK's own shutdown (stdin closed, a 2 s grace, then the group terminated), no more.
    assert time.monotonic() - started < 5
    wait_for(lambda: not alive(server), 5, "the stuck server to be gone")
    assert notices == []  # an end that was asked for is not a failure


def test_dspine_settings_hold_servers_and_config_shows_only_their_names(tmp_path, monkeypatch, project):
    from rich.console import Console

    from app.cli_views import config_table
    from app.settings import load_settings

    path = tmp_path / "config.toml"
    path.write_text('[mcp_servers.time]\ncommand = "mcp-server-time"\nenv = { API_KEY = "secret-in-file" }\n')
    monkeypatch.setenv("DSPINE_CONFIG", str(path))
    monkeypatch.delenv("DSPINE_MCP_SERVERS", raising=False)
    settings = load_settings()
    specs, problems = discover(project, settings.mcp_servers)
    assert [(s.name, s.source, s.env) for s in specs] == [("time", SETTINGS_SOURCE, {"API_KEY": "secret-in-file"})]
    console = Console(record=True, width=300)
    console.print(config_table(settings))
    shown = console.export_text()
    assert "mcp_servers" in shown and "secret-in-file" not in shown
    monkeypatch.setenv("DSPINE_MCP_SERVERS", '{"web": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}')
    assert list(load_settings().mcp_servers) == ["web"]
    monkeypatch.setenv("DSPINE_MCP_SERVERS", "[1, 2]")
    with pytest.raises(ConfigError, match="mcp_servers"):
        load_settings()
