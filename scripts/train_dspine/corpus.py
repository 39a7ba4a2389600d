"""Thousands of varied training prompts, in families, with a held-out split by family.

prompts.py's 400 prompts were a few templates filled from short tables: a drafter trained
on them drafted their held-out siblings (1.2-2.8 tokens a step) but not `dspine bench`'s
prompts (about 1.1). Here each family asks a different kind of thing, and the code that
edit and explain prompts show is real code: small functions of Python's own standard
library, read with `inspect`, so no two of those prompts show the same code.

A family is held out whole (`HELD_OUT`), so held-out acceptance measures prompts of a kind
the drafter never saw. `dspine bench`'s prompts (assets/prompts/*.jsonl) are never trained
on: any prompt that shares most of its words with one of them is dropped."""

from __future__ import annotations

import importlib
import inspect
import json
import random
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from . import corpus_tables as T

CATEGORIES = ("code", "edit", "math", "agent", "prose")
# One family per category is held out whole: its prompts are measured, never trained on.
HELD_OUT = frozenset({"code.convert", "edit.rename", "math.sequence", "agent.multi_turn", "prose.letter"})
BENCH_PROMPTS = Path(__file__).resolve().parents[2] / "assets" / "prompts"
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


@dataclass(frozen=True)
class Prompt:
    category: str
    family: str
    messages: tuple[tuple[str, str], ...]  # (role, content), the last one the user's
    held_out: bool = field(default=False)

    @property
    def text(self) -> str:
        """A stable key (generate.py keeps finished prompts by it)."""
        return json.dumps(self.messages)


def chat(messages: tuple[tuple[str, str], ...]) -> str:
    """ChatML as SmolLM2's template renders a chat: its default system turn unless one is given."""
    turns = list(messages)
    if turns[0][0] != "system":
        turns.insert(0, ("system", DEFAULT_SYSTEM))
    body = "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in turns)
    return body + "<|im_start|>assistant\n"


def _stdlib_functions(limit_lines: int = 28) -> list[tuple[str, str]]:
    """(qualified name, source) of short top-level functions of a few pure-Python stdlib modules."""
    found = []
    for name in T.STDLIB_MODULES:
        try:
            with warnings.catch_warnings():  # a few of them (uu, sndhdr, ...) are deprecated: only read
                warnings.simplefilter("ignore", DeprecationWarning)
                module = importlib.import_module(name)
        except ImportError:
            continue
        for attr, obj in sorted(vars(module).items()):
            if not inspect.isfunction(obj) or getattr(obj, "__module__", None) != name or attr.startswith("__"):
                continue
            try:
                source = inspect.getsource(obj)
            except (OSError, TypeError):
                continue
            lines = source.count("\n")
            if 4 <= lines <= limit_lines and source.startswith("def "):
                found.append((f"{name}.{attr}", source.rstrip()))
    return found


def _user(text: str) -> tuple[tuple[str, str], ...]:
    return (("user", text),)


def _code_families(rng: random.Random) -> dict[str, list]:
    write = [
        _user(rng.choice(T.CODE_WRITE_FORMS).format(lang=lang, task=task))
        for task in T.CODE_TASKS
        for lang in rng.sample(T.LANGUAGES, 3)
    ]
    test = [
        _user(rng.choice(T.CODE_TEST_FORMS).format(lang=lang, task=task))
        for task in rng.sample(T.CODE_TASKS, 60)
        for lang in rng.sample(T.LANGUAGES[:4], 1)
    ]
    convert = [
        _user(f"Translate this Python function into {lang}:\n```python\n{src}\n```")
        for (_, src), lang in zip(
            rng.sample(FUNCS, min(120, len(FUNCS))), rng.choices(T.LANGUAGES[1:], k=120), strict=False
        )
    ]
    explain = [
        _user(rng.choice(T.EXPLAIN_FORMS).format(name=name.split(".")[-1], code=src))
        for name, src in rng.sample(FUNCS, min(160, len(FUNCS)))
    ]
    shell = [_user(f"{form} {task}") for task in T.SHELL_TASKS for form in rng.sample(T.SHELL_FORMS, 2)]
    sql = [_user(rng.choice(T.SQL_FORMS).format(task=task)) for task in T.SQL_TASKS for _ in range(2)]
    return {"code.write": write, "code.test": test, "code.convert": convert, "code.explain": explain,
            "code.shell": shell, "code.sql": sql}  # fmt: skip


def _edit_families(rng: random.Random) -> dict[str, list]:
    out: dict[str, list] = {}
    pool = rng.sample(FUNCS, len(FUNCS))
    for i, (family, forms) in enumerate(T.EDIT_FAMILIES.items()):
        chosen = pool[i :: len(T.EDIT_FAMILIES)][:130]
        out[f"edit.{family}"] = [
            _user(rng.choice(forms).format(name=name.split(".")[-1], code=src, new=rng.choice(T.NEW_NAMES)))
            for name, src in chosen
        ]
    return out


def _math_families(rng: random.Random) -> dict[str, list]:
    def n(lo: int = 2, hi: int = 99) -> int:
        return rng.randint(lo, hi)

    fams: dict[str, list] = {}
    for family, forms in T.MATH_FAMILIES.items():
        items = []
        for _ in range(140):
            form = rng.choice(forms)
            a, b = n(), n(2, 40)
            items.append(_user(form.format(a=a, b=b, c=n(b + 1, 500), d=n(2, 12), name=rng.choice(T.NAMES),
                                           item=rng.choice(T.ITEMS), unit=rng.choice(T.UNITS))))  # fmt: skip
        fams[f"math.{family}"] = items
    return fams


def _agent_families(rng: random.Random) -> dict[str, list]:
    first, multi, plan = [], [], []
    for task in T.AGENT_TASKS:
        for tools in T.TOOLSETS:
            first.append((("system", tools), ("user", task)))
        for form in T.PLAN_FORMS:
            plan.append((("system", rng.choice(T.TOOLSETS)), ("user", f"{form} {task}")))
    for task, call, result, follow in T.AGENT_DIALOGUES:
        for tools in T.TOOLSETS:
            multi.append((("system", tools), ("user", task), ("assistant", call), ("user", f"Tool result: {result}"),
                          ("user", follow)))  # fmt: skip
    return {"agent.first_call": first, "agent.plan": plan, "agent.multi_turn": multi}


def _prose_families(rng: random.Random) -> dict[str, list]:
    fams: dict[str, list] = {}
    for family, forms in T.PROSE_FAMILIES.items():
        topics = rng.sample(T.TOPICS, min(len(T.TOPICS), 110))
        fams[f"prose.{family}"] = [
            _user(rng.choice(forms).format(topic=t, name=rng.choice(T.NAMES), item=rng.choice(T.ITEMS))) for t in topics
        ]
    return fams


def _bench_texts() -> list[set[str]]:
    words = []
    for path in sorted(BENCH_PROMPTS.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                for message in json.loads(line)["messages"]:
                    if message["role"] == "user":
                        words.append(_words(message["content"]))
    return words


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9_]+", text.lower()))


def near_bench(text: str, bench: list[set[str]], threshold: float = 0.5) -> bool:
    """True when the text shares at least `threshold` (Jaccard) of its words with a bench prompt."""
    mine = _words(text)
    return any(len(mine & b) / max(len(mine | b), 1) >= threshold for b in bench)


FUNCS: list[tuple[str, str]] = []


def build(seed: int = 0) -> list[Prompt]:
    """Every family's prompts, bench look-alikes dropped, in a fixed order for the seed."""
    rng = random.Random(seed)
    if not FUNCS:
        FUNCS.extend(_stdlib_functions())
    families: dict[str, list] = {}
    for maker in (_code_families, _edit_families, _math_families, _agent_families, _prose_families):
        families.update(maker(rng))
    bench = _bench_texts()
    prompts, seen = [], set()
    for family, items in families.items():
        for messages in items:
            user = " ".join(c for r, c in messages if r == "user")
            if messages in seen or near_bench(user, bench):
                continue
            seen.add(messages)
            prompts.append(Prompt(family.split(".")[0], family, messages, family in HELD_OUT))
    rng.shuffle(prompts)
    return prompts
