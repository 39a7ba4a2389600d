"""Small MCP servers for tests, written as stdlib-only Python scripts: newline-delimited
JSON-RPC on stdin/stdout, one behaviour each (answers, exits at start, hangs on
initialize, writes garbage, dies on its first call). Each writes its pid (and its
child's, when it starts one) to a file, so tests can assert by pid that it is gone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import wait_for

SERVER = r"""
import json, os, subprocess, sys, time
behaviour, pidfile = sys.argv[1], sys.argv[2]
pids = [os.getpid()]
if "child" in behaviour:  # a grandchild of the chat: it must die with the server
    pids.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]).pid)
with open(pidfile + ".tmp", "w") as f:
    f.write(" ".join(map(str, pids)))
os.replace(pidfile + ".tmp", pidfile)
if "secret" in behaviour:
    print("my token is " + os.environ.get("SECRET_TOKEN", "(none)"), file=sys.stderr, flush=True)
if behaviour.endswith("exit"):
    if behaviour == "exit":
        print("fatal: no database configured", file=sys.stderr, flush=True)
    sys.exit(3)
TOOLS = [{"name": "echo", "description": "Say the text back.",
          "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
         {"name": "picture", "description": "A small image.", "inputSchema": {"type": "object"}}]
def send(message):
    sys.stdout.write(json.dumps(message) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    request = json.loads(line)
    method, rid = request.get("method"), request.get("id")
    if rid is None:
        continue  # a notification
    if behaviour == "hang":
        time.sleep(600)
    if behaviour == "garbage":
        sys.stdout.write("Welcome to my server! v1.0\n"); sys.stdout.flush(); time.sleep(600)
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": request["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "test-server", "version": "1.0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        if behaviour == "garbage-later":
            sys.stdout.write("Traceback (most recent call last): oops\n"); sys.stdout.flush(); time.sleep(600)
        if "die" in behaviour:
            print("segfault (pretend)", file=sys.stderr, flush=True)
            os._exit(1)
        name, args = request["params"]["name"], request["params"].get("arguments") or {}
        if name == "echo":
            content = [{"type": "text", "text": "echo: " + str(args.get("text"))}]
        else:
            content = [{"type": "image", "data": "QUJD" * 200, "mimeType": "image/png"}]
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": content, "isError": False}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}})
"""


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return fields[0] != "Z"


def pids(pidfile: Path) -> list[int]:
    wait_for(pidfile.exists, 20, f"{pidfile.name}")
    return [int(p) for p in pidfile.read_text().split()]


def write_server(folder: Path) -> Path:
    path = folder / "mcp_test_server.py"
    path.write_text(SERVER)
    return path


def entry(script: Path, behaviour: str, pidfile: Path, **extra) -> dict:
    """An `.mcp.json` entry that runs the script with one behaviour."""
    return {"command": sys.executable, "args": [str(script), behaviour, str(pidfile)], **extra}


def write_mcp_json(root: Path, servers: dict[str, dict]) -> Path:
    path = root / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    return path


HTTP_SERVER = r"""
import sys
import uvicorn
from mcp.server.mcpserver import MCPServer

port, token = int(sys.argv[1]), sys.argv[2]
server = MCPServer("http-test")


@server.tool(name="shout", description="Upper-case the text.")
def shout(text: str) -> str:
    return text.upper()


app = server.streamable_http_app()


async def guarded(scope, receive, send):
    # Only a client that sends the right bearer token gets in.
    if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != f"Bearer {token}".encode():
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": b"unauthorized"})
        return
    await app(scope, receive, send)


uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning")
"""


def write_http_server(folder: Path) -> Path:
    path = folder / "mcp_http_server.py"
    path.write_text(HTTP_SERVER)
    return path
