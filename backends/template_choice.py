"""Which chat template an engine runs, and where later system messages go, decided
from the template's own text (never from a file name).

The Qwen3.5 family's template (Qwen3.8-27B carries it; llama.cpp keeps a copy as
models/templates/Qwen3.5-4B.jinja) raises `System message must be at the
beginning.` on any system message after the first. That assertion serves no
purpose at inference: ChatML has a `<|im_start|>system` block for any turn. dspine
runs a corrected copy in which that one branch renders the message as such a block
where it stands; every other branch is the original's, so a conversation the
original accepts renders byte for byte the same (tests/unit/test_template_choice.py
checks it on many sequences, with Python's Jinja and llama-server's own).

Keeping the later message in place keeps the prompt before it unchanged, so the
server's prefix cache holds (benchmarks/system_message_cache.py measures what
merging it into the leading system message would cost instead)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from .chat_template import render
from .errors import ChatTemplateError
from .message_order import IN_PLACE, MERGE, SystemRule

# The assertion as the Qwen3.5 family writes it, inside the loop's system branch;
# whitespace, trim marks and quotes may vary between the family's releases.
_QWEN35_ASSERTION = re.compile(
    r"(?P<head>\{%-?\s*if\s+message\.role\s*==\s*(?P<q1>['\"])system(?P=q1)\s*-?%\}\s*)"
    r"(?P<check>\{%-?\s*if\s+not\s+loop\.first\s*-?%\}\s*"
    r"\{\{-?\s*raise_exception\(\s*(?P<q2>['\"])System message must be at the beginning\.(?P=q2)\s*\)\s*-?\}\}\s*"
    r"\{%-?\s*endif\s*-?%\})"
)
# `content` is what the loop computed for this message (render_content(...)|trim).
_IN_PLACE_BLOCK = (
    "{%- if not loop.first %}\n"
    "            {{- '<|im_start|>system\\n' + content + '<|im_end|>\\n' }}\n"
    "        {%- endif %}"
)
CORRECTED_MARK = (
    "{#- dspine: a later system message is rendered where it stands (see backends/template_choice.py) -#}\n"
)

_PROBE = [
    {"role": "system", "content": "You are a coding assistant."},
    {"role": "user", "content": "Write hello world in C."},
    {"role": "assistant", "content": 'int main(void) { puts("hello"); }'},
    {"role": "system", "content": "dspine-probe: a later system message."},
    {"role": "user", "content": "Thanks."},
]


@dataclass(frozen=True)
class TemplateChoice:
    text: str | None  # the template to run; None: the engine's own default (ChatML)
    rule: SystemRule  # where a later system message goes
    corrected: bool  # dspine's corrected copy of the model's template is in force
    original_sha256: str | None  # of the model file's template
    why: str  # one line for `dspine doctor --model` and serve's start

    @property
    def summary(self) -> str:
        where = "rendered where they stand" if self.rule == IN_PLACE else "merged into the leading system message"
        return f"{self.why}; later system/developer messages are {where}"


def sha256_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def corrected_qwen35(template: str) -> str | None:
    """The Qwen3.5-family template with its system-position assertion turned into an
    in-place system block; None when the template is not of that family."""
    if "<|im_start|>" not in template:
        return None
    found = list(_QWEN35_ASSERTION.finditer(template))
    if len(found) != 1:
        return None
    match = found[0]
    return CORRECTED_MARK + template[: match.start("check")] + _IN_PLACE_BLOCK + template[match.end("check") :]


def renders_in_place(template: str | None) -> bool:
    """Whether the template renders a later system message, text and all, after the turn
    before it (not dropped, not hoisted to the top)."""
    try:
        text = render(template, _PROBE, enable_thinking=False, source="probe")
    except ChatTemplateError:
        return False
    later = text.find("dspine-probe: a later system message.")
    return later > text.find("puts(") >= 0


def choose(template: str | None) -> TemplateChoice:
    if template is None:
        return TemplateChoice(None, IN_PLACE, False, None, "no chat template in the GGUF: ChatML")
    digest = sha256_of(template)
    short = digest[:12]
    fixed = corrected_qwen35(template)
    if fixed is not None and renders_in_place(fixed):
        return TemplateChoice(
            fixed,
            IN_PLACE,
            True,
            digest,
            f"the model's Qwen3.5-family template (sha256 {short}), corrected by dspine: its "
            "'System message must be at the beginning.' assertion renders an <|im_start|>system block instead "
            "(identical output for every conversation the original accepts)",
        )
    return for_original(template)


def for_original(template: str | None, note: str = "") -> TemplateChoice:
    """The model's own template as it is (`note`: why not the corrected copy)."""
    if template is None:
        return choose(None)
    short = sha256_of(template)[:12]
    extra = f" ({note})" if note else ""
    if renders_in_place(template):
        return TemplateChoice(
            template, IN_PLACE, False, sha256_of(template), f"the model's own template (sha256 {short}){extra}"
        )
    return TemplateChoice(
        template,
        MERGE,
        False,
        sha256_of(template),
        f"the model's own template (sha256 {short}), which rejects or drops a later system message{extra}",
    )
