"""The training and held-out prompts: code, math, agent (tool-call-like) and prose.

Made from small tables so that a few hundred prompts differ in what they ask without
anyone writing them by hand; the split is fixed by a seed, so a resumed or repeated run
trains and measures on the same prompts."""

from __future__ import annotations

import random
from dataclasses import dataclass

CATEGORIES = ("code", "math", "agent", "prose")

_CODE_TASKS = [
    "reverses a linked list",
    "checks whether a string is a palindrome",
    "returns the n-th Fibonacci number",
    "merges two sorted lists",
    "counts the words in a text file",
    "parses a CSV line into fields",
    "computes the factorial of a number",
    "finds the largest element in a list",
    "removes duplicates from a list while keeping order",
    "converts Celsius to Fahrenheit",
    "implements binary search",
    "flattens a nested list",
    "groups words by their first letter",
    "validates an email address with a regular expression",
    "computes the greatest common divisor of two numbers",
    "sorts a list of dictionaries by a key",
    "reads a JSON file and prints its keys",
    "implements a stack with push and pop",
    "checks whether a number is prime",
    "transposes a matrix",
    "counts the vowels in a string",
    "returns the running sum of a list",
    "implements bubble sort",
    "splits a list into chunks of size n",
]
_CODE_LANGUAGES = ["Python", "JavaScript", "C", "Rust", "Go"]
_CODE_FORMS = [
    "Write a {lang} function that {task}.",
    "Show me {lang} code that {task}, with a short explanation.",
    "Implement a {lang} program that {task}.",
]

_MATH_FORMS = [
    "What is {a} times {b}? Show your steps.",
    "Solve for x: {a}x + {b} = {c}. Explain each step.",
    "A shop sells pens at {a} dollars each. How much do {b} pens cost?",
    "What is {a} plus {b} minus {c}? Work it out step by step.",
    "A train travels {a} kilometers in {b} hours. What is its average speed?",
    "Tom has {a} apples and gives away {b}. How many are left?",
    "What is {a} percent of {c}? Show the calculation.",
    "The sides of a rectangle are {a} and {b}. What are its area and perimeter?",
]

_AGENT_TOOLS = (
    "You can call these tools by answering with JSON of the form "
    '{"tool": NAME, "arguments": {...}}: read_file(path), write_file(path, content), '
    "run(command), search(pattern)."
)
_AGENT_TASKS = [
    "Find where the function parse_config is defined in this project.",
    "Run the test suite and tell me which tests fail.",
    "Read the file README.md and summarise it.",
    "Create a file hello.py that prints hello world.",
    "List the Python files in the src folder.",
    "Fix the typo in docs/index.md where 'teh' should be 'the'.",
    "Check which version of numpy is installed.",
    "Search the code for TODO comments.",
    "Rename the variable tmp to buffer in utils.py.",
    "Show the last five commits of the repository.",
    "Count the lines of code in main.py.",
    "Find the configuration file and print the database URL.",
    "Add a docstring to the function load_data in data.py.",
    "Install the requests package and check that it imports.",
    "Delete the build folder and rebuild the project.",
    "Open setup.cfg and tell me the package name.",
    "Run the linter on the whole project.",
    "Read app/main.py and explain what it does.",
    "Find all files larger than one megabyte.",
    "Write a unit test for the function add in calc.py.",
]
_AGENT_FORMS = [
    "{tools} Task: {task}",
    "{tools} The user says: {task} What is your first tool call?",
    "{tools} {task} Answer with a tool call, then explain it.",
    "{tools} Please help. {task}",
    "{tools} Step one of the plan: {task}",
]

_PROSE_TOPICS = [
    "the ocean at night",
    "a city waking up in the morning",
    "the history of the bicycle",
    "why people keep diaries",
    "a walk through an autumn forest",
    "the life of a honeybee",
    "learning to play the piano",
    "a small bakery in a village",
    "the first snow of winter",
    "how bridges are built",
    "a lighthouse keeper",
    "the importance of sleep",
    "a train journey through the mountains",
    "friendship between two neighbours",
    "the invention of the printing press",
    "a rainy afternoon in a library",
    "the moon and the tides",
    "growing tomatoes in a garden",
    "a visit to a museum",
    "the sound of a thunderstorm",
    "a cat that explores the house",
    "the job of a firefighter",
    "the desert at sunrise",
    "why music moves people",
    "a market on a Saturday morning",
]
_PROSE_FORMS = [
    "Write a short paragraph about {topic}.",
    "Tell a short story about {topic}.",
    "Describe {topic} in a few sentences.",
    "Write a short poem about {topic}.",
]


@dataclass(frozen=True)
class Prompt:
    category: str
    text: str
    held_out: bool


def _code(rng: random.Random) -> list[str]:
    return [
        form.format(lang=lang, task=task) for task in _CODE_TASKS for lang in _CODE_LANGUAGES for form in _CODE_FORMS
    ]


def _math(rng: random.Random, count: int) -> list[str]:
    out = []
    for i in range(count):
        form = _MATH_FORMS[i % len(_MATH_FORMS)]
        a, b = rng.randint(2, 99), rng.randint(2, 40)
        out.append(form.format(a=a, b=b, c=rng.randint(b + 1, 400)))
    return out


def _agent() -> list[str]:
    return [form.format(tools=_AGENT_TOOLS, task=task) for task in _AGENT_TASKS for form in _AGENT_FORMS]


def _prose() -> list[str]:
    return [form.format(topic=topic) for topic in _PROSE_TOPICS for form in _PROSE_FORMS]


def build_prompts(per_category: int = 100, held_out: int = 16, seed: int = 0) -> list[Prompt]:
    """`per_category` prompts of each category, the last `held_out` of each marked held out."""
    rng = random.Random(seed)
    pools = {"code": _code(rng), "math": _math(rng, per_category), "agent": _agent(), "prose": _prose()}
    prompts = []
    for category in CATEGORIES:
        pool = list(dict.fromkeys(pools[category]))
        rng.shuffle(pool)
        chosen = pool[:per_category]
        for i, text in enumerate(chosen):
            prompts.append(Prompt(category, text, held_out=i >= len(chosen) - held_out))
    return prompts


def chatml(text: str) -> str:
    """The prompt as SmolLM2's own chat template renders one user turn (default system prompt)."""
    return (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
    )
