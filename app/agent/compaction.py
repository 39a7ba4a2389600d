"""Compaction: the conversation made to fit its context again, in two steps, each only
when it gains something.

1. Prune: tool results older than the newest rounds become one-line stubs saying what
   was read or run and how to get it again.
2. Summarise: the older part of the conversation becomes one summary written by the
   same engine (think off, a short preset of its own), asked to keep the goal,
   decisions, every file path, commands and their outcomes, and open problems. The
   paths and commands are also listed by dspine itself above the summary, so a small
   model that drops them loses nothing: from its own records, kept as data and never
   read back from the summary's text (records.py), each entry and list bounded.

The system prompt (with AGENTS.md) is never part of the history handed here: the
session re-inserts it as it was. The summary request is the conversation as the engine
last read it, with the chat's own system prompt and tool list, and the request to
summarise as a last user message: the engine reads only that message anew, its prefix
cache holding the rest (a request of its own, with another system prompt, would make it
read the whole conversation again, and evict the chat's prefix from a one-slot cache).

The newest turns stay verbatim, except a tool result too large for the context even
then (its cap was set for a larger context than the engine turned out to have): it
keeps its head and tail, the cut saying how to get the rest, as any capped result does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from backends.base import estimate_tokens
from backends.events import Delta, Error
from backends.sampling import NON_THINKING

from .capture import head_tail, saved_hint
from .records import FACTS_KEY, OUTCOME_CHARS, Facts, bounded
from .toolbox import DECLINED

KEEP_ROUNDS = 2  # the tool results of this many newest assistant rounds are never pruned
STUB_MIN_CHARS = 200  # a result shorter than this costs less than the stub that would replace it
RECORDS_CHARS = 3000  # an earlier summary's records, in the summariser's text, are never cut shorter
CUT_CHARS = 1500  # a long text cut to fit the summary request keeps this much, head and tail
# The summary goes to the engine as a user message: chat templates want the first message
# after the system prompt to be the user's and the roles to alternate (an assistant message
# first, or a second system message, is refused by strict templates), and ACK answers it to
# keep them alternating. So the role says "user" while the words say whose they are: the
# assistant's notes and dspine's records, not the user's request.
SUMMARY_PREFIX = (
    "[dspine: the assistant's notes of the earlier conversation, compacted to fit the context. "
    "Not a message from the user: first what dspine recorded, then the summary the assistant wrote.]"
)
# dspine's records come before the model's summary, each under its title: a list the model
# writes in its summary sits under the assistant's title, never in dspine's part.
RECORDS_TITLE = "Recorded by dspine:"
NOTES_TITLE = "The assistant's summary:"
ACK = "Understood: these are my notes of the earlier conversation; I go on from them."
SUMMARY_PROMPT = """Stop the work here for a moment: this coding session is being compacted so that it
can go on in a smaller context. Answer with text only (call no tool): a summary of the
conversation so far that another assistant can continue the work from, under these headings:

## Goal
## Decisions
## Files (every path read, changed or created, and what was learned or changed in it)
## Commands (every command run and its outcome: pass, fail, the error)
## Open problems and next steps

Keep paths, names, numbers and error messages exactly as they were. No preamble."""
ARGUMENT_CHARS = 1000  # a call's argument shown in a stub or transcript is cut after this much
_KEPT_ARGUMENTS = ("path", "command", "pattern", "glob", "start_line", "end_line")


@dataclass(frozen=True)
class Compaction:
    """What a compaction did: the new history and what it cost and gained."""

    history: list[dict[str, Any]]
    before: int  # prompt tokens before
    after: int  # and after
    pruned: int = 0  # tool results made stubs
    summarised: int = 0  # messages folded into the summary
    summary: str = ""  # the summary message's text, for the user to open
    summary_input: str = ""  # what the summariser was given (tests check it keeps every path)
    note: str = ""  # something the user should know (the summariser failed, ...)
    shrunk: int = 0  # tool results of the newest rounds cut to head and tail to fit

    @property
    def gained(self) -> bool:
        return self.after < self.before


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    raw = call.get("function", {}).get("arguments", "")
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def calls_by_id(history: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {call.get("id", ""): call for m in history for call in m.get("tool_calls") or []}


def call_line(call: dict[str, Any] | None) -> str:
    """`read_file path=src/a.py`: a call in one line, its main arguments whole up to a bound (a
    stub of a 60 KB command must not be 60 KB)."""
    if call is None:
        return "a tool"
    args = _arguments(call)
    shown = " ".join(
        f"{k}={bounded(args[k] if isinstance(args[k], str) else json.dumps(args[k]), ARGUMENT_CHARS)}"
        for k in _KEPT_ARGUMENTS
        if k in args
    )
    return f"{call.get('function', {}).get('name', '?')} {shown}".strip()


def stub(call: dict[str, Any] | None, content: str) -> str:
    """One line in place of an old tool result: what it was and how to get it again."""
    first = content.split("\n", 1)[0][:120]
    name = (call or {}).get("function", {}).get("name", "")
    outcome = f" (it began: {first})" if name == "run_command" or first.startswith("error") else ""
    return (
        f"[pruned to save context: the result of {call_line(call)}, {len(content):,} characters{outcome}; "
        "call the tool again if you need it]"
    )


def is_stub(content: str) -> bool:
    return content.startswith("[pruned to save context:")


def prune(history: list[dict[str, Any]], keep_rounds: int = KEEP_ROUNDS) -> tuple[list[dict[str, Any]], int]:
    """Tool results before the newest `keep_rounds` assistant rounds become stubs."""
    rounds = [i for i, m in enumerate(history) if m.get("role") == "assistant" and m.get("tool_calls")]
    keep_from = rounds[-keep_rounds] if len(rounds) >= keep_rounds else 0
    if keep_rounds and len(rounds) < keep_rounds:
        return list(history), 0
    calls = calls_by_id(history)
    pruned = 0
    out = []
    for index, message in enumerate(history):
        content = message.get("content") or ""
        if (
            index < keep_from
            and message.get("role") == "tool"
            and len(content) > STUB_MIN_CHARS
            and not is_stub(content)
        ):
            message = {**message, "content": stub(calls.get(message.get("tool_call_id", "")), content)}
            pruned += 1
        out.append(message)
    return out, pruned


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    return text[:head] + f"\n… ({len(text) - limit:,} characters left out) …\n" + text[-(limit - head) :]


def transcript(history: list[dict[str, Any]], per_item: int) -> str:
    """The older part as plain text for the summariser: every call's paths and commands whole,
    long texts cut to `per_item` characters (head and tail)."""
    calls = calls_by_id(history)
    lines = []
    for message in history:
        role = message.get("role", "?")
        content = message.get("content") or ""
        if role == "tool":
            call = calls.get(message.get("tool_call_id", ""))
            lines.append(f"TOOL RESULT of {call_line(call)}:\n{_cut(content, per_item)}")
            continue
        if FACTS_KEY in message:
            # An earlier summary: dspine's records cut no shorter than RECORDS_CHARS (the paths and
            # commands matter most to the next summary), the assistant's notes like any text.
            records = Facts.from_data(message[FACTS_KEY]).text()
            notes = content.split(NOTES_TITLE, 1)[-1].strip()
            head = f"EARLIER NOTES, {RECORDS_TITLE}\n{_cut(records, max(per_item, RECORDS_CHARS))}\n" if records else ""
            lines.append(f"{head}EARLIER NOTES, {NOTES_TITLE}\n{_cut(notes, per_item)}")
            continue
        if content:
            lines.append(f"{role.upper()}:\n{_cut(content, per_item)}")
        for call in message.get("tool_calls") or []:
            lines.append(f"TOOL CALL {call_line(call)}")
    return "\n\n".join(lines)


def _began(stub_text: str) -> str:
    """The first line of a pruned result, as its stub says it (the last "(it began: ...)": a
    command shown earlier in the stub may hold those words too)."""
    start, end = stub_text.rfind("(it began: "), stub_text.rfind("); call the tool again")
    return stub_text[start + len("(it began: ") : end] if 0 <= start < end else ""


def outcome(result: str) -> str:
    """How a command ended, from its result: declined, or the result's first line (dspine's own:
    "exit code 1", "the command timed out ...")."""
    if result == DECLINED:
        return "declined"
    first = (_began(result) if is_stub(result) else result).split("\n", 1)[0]
    return bounded(first, OUTCOME_CHARS) if first else "no result"


def facts(history: list[dict[str, Any]]) -> Facts:
    """The files and commands of `history`, from its tool calls and results, and from the
    records an earlier compaction kept as data (never from a summary's text, which the model
    wrote: see records.py)."""
    found = Facts()
    results = {m.get("tool_call_id", ""): m.get("content") or "" for m in history if m.get("role") == "tool"}
    for message in history:
        if FACTS_KEY in message:
            found.merge(Facts.from_data(message[FACTS_KEY]))
        for call in message.get("tool_calls") or []:
            name = call.get("function", {}).get("name", "")
            args = _arguments(call)
            path = bounded(str(args.get("path") or ""))
            result = results.get(call.get("id", ""), "")
            if name == "read_file":
                found.add("read", path)
            elif name in ("edit_file", "write_file") and result.startswith("applied"):
                found.add("changed", path)  # a change declined or refused changed nothing
            elif name == "run_command" and args.get("command"):
                found.add("commands", f"`{bounded(str(args['command']))}`: {outcome(result)}")
    return found


def split_point(history: list[dict[str, Any]], tail_budget: int, sizes: list[int]) -> int:
    """Where the verbatim tail begins: as many of the newest messages as fit in `tail_budget`,
    starting at a message that is not a tool result (a call keeps its results). At least the
    newest round stays."""
    starts = [i for i, m in enumerate(history) if m.get("role") != "tool"]
    if not starts:
        return 0
    best = starts[-1]
    total = 0
    index = len(history)
    for start in reversed(starts):
        total += sum(sizes[start:index])
        index = start
        if total > tail_budget:
            break
        best = start
    return best


# The summary request's history (without the system prompt and tools, which the session adds
# as in every request) and the reply's limit, to the summary's text.
Summariser = Callable[[list[dict[str, Any]], int], str]
# A history to the whole prompt it makes, counted in tokens.
Counter = Callable[[list[dict[str, Any]]], int]


def summary_message(summary: str, found: Facts) -> str:
    listed = found.text()
    records = f"{RECORDS_TITLE}\n{listed}\n\n" if listed else ""
    return f"{SUMMARY_PREFIX}\n\n{records}{NOTES_TITLE}\n{summary.strip()}"


def is_summary(message: dict[str, Any]) -> bool:
    """A compaction's summary message: it carries dspine's records (one saved before they did
    is known by its opening words)."""
    return FACTS_KEY in message or (
        message.get("role") == "user" and str(message.get("content") or "").startswith(SUMMARY_PREFIX)
    )


def is_summary_request(messages: list[dict[str, Any]]) -> bool:
    """A request the summariser sent: its last message asks for the summary."""
    last = messages[-1] if messages else {}
    return last.get("role") == "user" and str(last.get("content") or "").startswith(SUMMARY_PROMPT)


def engine_summariser(
    engine: Any, framed: Callable[[list[dict[str, Any]]], tuple[list[dict[str, Any]], list[dict[str, Any]] | None]]
) -> Summariser:
    """The chat's own engine as summariser: think off, a short preset. `framed` gives the
    request the chat's system prompt and tools, as every request of the chat has them."""

    def summarise(request: list[dict[str, Any]], max_tokens: int) -> str:
        messages, tools = framed(request)
        sampling = NON_THINKING.with_(max_tokens=max_tokens, temperature=0.3, presence_penalty=0.0)
        answer: list[str] = []
        for event in engine.stream(messages, think=False, sampling=sampling, tools=tools):
            if isinstance(event, Delta) and event.kind == "answer":
                answer.append(event.text)
            elif isinstance(event, Error):
                raise RuntimeError(event.message)
        return "".join(answer)

    return summarise


def _shared(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> int:
    """How many leading messages two histories share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _cut_from_the_end(
    shape: list[dict[str, Any]], ask: dict[str, Any], count: Counter, room: int
) -> list[dict[str, Any]] | None:
    """`shape` with its newest long texts cut to head and tail, newest first, until it fits
    beside `ask` in `room`: the messages before the first cut stay as the engine read them,
    so its cache still holds them. None when even cutting every long text does not fit."""
    out = list(shape)
    for index in range(len(out) - 1, -1, -1):
        content = out[index].get("content")
        if not isinstance(content, str) or len(content) <= CUT_CHARS:
            continue
        out[index] = {**out[index], "content": _cut(content, CUT_CHARS)}
        if count([*out, ask]) <= room:
            return out
    return None


def summary_request(
    shapes: list[list[dict[str, Any]]],
    sent: list[dict[str, Any]],
    older: list[dict[str, Any]],
    focus: str,
    count: Counter,
    room: int,
) -> tuple[list[dict[str, Any]], str]:
    """The summariser's request (a history ending in the request to summarise) within `room`
    tokens, and the conversation it shows as text (what tests check for paths).

    Of the `shapes` the older part can go in (as the engine last read it, `sent`; pruned;
    without the request being worked on, which stays verbatim anyway), each whole or with
    its newest long texts cut until it fits, the one that shares the most leading
    messages with `sent`: the engine's prefix cache holds those, so it reads little more
    than the request to summarise. When none fits, `older` as a transcript in one
    message, its long texts cut shorter until it fits; paths and commands are cut only past
    ARGUMENT_CHARS."""
    ask = {"role": "user", "content": SUMMARY_PROMPT + (f"\n\nFocus on: {focus}" if focus else "")}
    unique = [shape for i, shape in enumerate(shapes) if shape and shape not in shapes[:i]]
    fitting: list[list[dict[str, Any]]] = []
    for shape in sorted(unique, key=lambda shape: (-_shared(shape, sent), len(shape))):
        if fitting and _shared(shape, sent) <= _shared(fitting[0], sent):
            break  # no shape left can share more than one that fits
        if count([*shape, ask]) <= room:
            fitting.append(shape)
            break
        cut = _cut_from_the_end(shape, ask, count, room)
        if cut is not None:
            fitting.append(cut)
            fitting.sort(key=lambda shape: -_shared(shape, sent))
    if fitting:
        return [*fitting[0], ask], transcript(fitting[0], 1 << 30)
    per_item = 4000
    while True:
        text = transcript(older, per_item)
        request = [{"role": "user", "content": f"{ask['content']}\n\n<conversation>\n{text}\n</conversation>"}]
        if per_item <= 100 or count(request) <= room:
            return request, text
        per_item //= 2


_SAVED = re.compile(r"the whole output is in (\S+): read_file it")
SHRINK_ROUNDS = 6  # cuts tried before giving up (each recounts the prompt)


def shrink_results(history: list[dict[str, Any]], count: Counter, limit: int) -> tuple[list[dict[str, Any]], int]:
    """The largest tool results cut to their head and tail until the prompt is within `limit`
    tokens: the last resort when the newest rounds alone do not fit. The cut says where the
    whole of it is (a command's saved output) or how to read it again."""
    out = list(history)
    calls = calls_by_id(out)
    shrunk: set[int] = set()
    for _ in range(SHRINK_ROUNDS):
        total = count(out)
        if total <= limit:
            break
        results = [
            i
            for i, m in enumerate(out)
            if m.get("role") == "tool"
            and len(m.get("content") or "") > STUB_MIN_CHARS * 2
            and not is_stub(m["content"])
        ]
        if not results:
            break
        index = max(results, key=lambda i: len(out[i]["content"]))
        content = out[index]["content"]
        tokens = max(estimate_tokens([out[index]]), 1)
        keep = max(1 - (total - limit) / tokens, 0.0)
        limit_chars = max(STUB_MIN_CHARS * 2, int(len(content) * keep * 0.9))
        if limit_chars >= len(content):
            limit_chars = len(content) * 3 // 4
        saved = _SAVED.search(content)
        call = calls.get(out[index].get("tool_call_id", ""))
        if saved is not None:
            hint = saved_hint(saved.group(1))
        elif (call or {}).get("function", {}).get("name") == "read_file":
            hint = "read the lines you need with read_file start_line and end_line"
        else:
            hint = f"cut to fit the context; call {call_line(call)} again for the part you need"
        out[index] = {**out[index], "content": head_tail(content, limit_chars, hint)}
        shrunk.add(index)
    return out, len(shrunk)


def compact(
    history: list[dict[str, Any]],
    count: Counter,
    target: int,
    summariser: Summariser | None,
    n_ctx: int,
    focus: str = "",
    force: bool = False,
    limit: int | None = None,
) -> Compaction:
    """Bring `history` under `target` tokens (as `count` counts the whole prompt it makes).
    `force`: summarise even when pruning alone would do (the user asked, or the engine
    overflowed though the count said it fits). `limit`: what the request may take at most;
    when the compacted history is still over it, the largest tool results are cut."""
    done = _compact(history, count, target, summariser, n_ctx, focus, force)
    if limit is None or done.after <= limit:
        return done
    shrunk, n_shrunk = shrink_results(done.history, count, limit)
    if not n_shrunk:
        return done
    after = count(shrunk)
    if after >= done.after:
        return done
    note = "; ".join(
        n for n in (done.note, f"cut {n_shrunk} large tool result(s) to their head and tail to fit the context") if n
    )
    return Compaction(
        shrunk, done.before, after, done.pruned, done.summarised, done.summary, done.summary_input, note, n_shrunk
    )


def _compact(
    history: list[dict[str, Any]],
    count: Counter,
    target: int,
    summariser: Summariser | None,
    n_ctx: int,
    focus: str = "",
    force: bool = False,
) -> Compaction:
    before = count(history)
    pruned, n_pruned = prune(history)
    after_prune = count(pruned) if n_pruned else before
    if not force and after_prune <= target:
        return Compaction(pruned, before, after_prune, n_pruned)
    if summariser is None:
        return Compaction(pruned, before, after_prune, n_pruned)
    # Sizes by estimate, scaled to the counter's own total: cheap to sum for any split.
    raw = [estimate_tokens([m]) for m in pruned]
    scale = after_prune / max(sum(raw), 1)
    sizes = [int(r * scale) + 1 for r in raw]
    cut = split_point(pruned, target // 2, sizes)
    older, tail = pruned[:cut], pruned[cut:]
    sent = history[:cut]  # the same messages as the engine last read them (prune keeps positions)
    shapes = [sent, older]
    if not older:
        return Compaction(pruned, before, after_prune, n_pruned, note="nothing older than the newest turn to summarise")
    # The request being worked on stays verbatim, after the summary, even when its turn's older
    # tool rounds are summarised.
    index = next((i for i in range(len(older) - 1, -1, -1) if older[i].get("role") == "user"), None)
    current: list[dict[str, Any]] = []
    if index is not None and not any(m.get("role") == "user" for m in tail) and not is_summary(older[index]):
        current = [older[index]]
        older = older[:index] + older[index + 1 :]
        shapes += [sent[:index] + sent[index + 1 :], older]
    max_tokens = max(128, min(1024, n_ctx // 6))
    request, text = summary_request(shapes, sent, older, focus, count, n_ctx - max_tokens - 64)
    note = ""
    try:
        summary = summariser(request, max_tokens).strip()
    except Exception as exc:  # the summary is a help, not a must: the listed facts still carry on
        summary, note = "", f"the summary could not be written ({exc}); kept the list of files and commands"
    if not summary:
        firsts = [m.get("content", "") for m in older if m.get("role") == "user"][:1]
        summary = "The user's first request: " + _cut(firsts[0], 1500) if firsts else "(no summary)"
        note = note or "the model wrote no summary; kept the first request and the list of files and commands"
    found = facts(older)
    message = summary_message(summary, found)
    following = current + tail
    # The records go with the message as data, for the next compaction (see records.py).
    compacted: list[dict[str, Any]] = [{"role": "user", "content": message, FACTS_KEY: found.to_data()}]
    if not following or following[0].get("role") != "assistant":
        # The acknowledgement keeps the roles alternating; before a kept assistant turn it would
        # make two in a row, which strict templates refuse.
        compacted.append({"role": "assistant", "content": ACK})
    compacted += following
    after = count(compacted)
    if after >= after_prune:  # the summary gained nothing over pruning alone
        return Compaction(pruned, before, after_prune, n_pruned, summary_input=text, note=note)
    return Compaction(compacted, before, after, n_pruned, len(older), message, text, note)
