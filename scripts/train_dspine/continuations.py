"""The target's greedy continuations, kept in the repository (issue 70): what took 2.5 CPU-hours
must outlive the machine that made it.

`continuations/chunk-NNN.jsonl.gz`: CHUNK prompts of corpus.py's order each (chunk k holds
prompts k*CHUNK .. k*CHUNK+CHUNK-1 of `build(seed)`), a header line first saying what made
them (this generator's version, the target file's sha256, the llama-server's version, the
corpus seed, the continuation length, the Python version whose stdlib the code prompts are
cut from), then one JSON line a prompt: its category, family, whether held out, its key text,
the prompt's tokens and the continuation's. A chunk is written whole (a temporary file, then
renamed) and committed as it finishes; a later run makes only the chunks that are missing and
refuses chunks made another way rather than mixing them. Needs no JAX: dspine's own venv runs
it. `sequences()` gives the rest of the recipe the `sequences.jsonl` it reads."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .corpus import Prompt, chat

GENERATOR = 1  # changes when what a chunk holds, or how it is made, changes
CHUNK = 100
FOLDER = Path(__file__).resolve().parent / "continuations"


class Mismatch(Exception):
    """A chunk in the folder was made another way (target, server, seed, length, Python)."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def server_version(binary: Path) -> str:
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    lines = (done.stdout + done.stderr).splitlines()
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("version:")), "?")


def header(target_sha256: str, server: str, seed: int, n_predict: int) -> dict:
    return {
        "generator": GENERATOR,
        "target_sha256": target_sha256,
        "server_version": server,
        "seed": seed,
        "n_predict": n_predict,
        "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
        "chunk": CHUNK,
    }


def chunk_path(folder: Path, index: int) -> Path:
    return folder / f"chunk-{index:03d}.jsonl.gz"


def read_chunk(path: Path) -> tuple[dict, list[dict]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    return lines[0], lines[1:]


def write_chunk(path: Path, made: dict, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part")
    # mtime=0: the same records make the same bytes on any machine, at any time.
    with part.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        for line in [made, *records]:
            f.write((json.dumps(line, separators=(",", ":")) + "\n").encode())
    part.replace(path)


def check_made_alike(path: Path, found: dict, made: dict) -> None:
    """The chunk was made the way this run makes them (the server's version aside: a greedy
    continuation is the same on another build of the same llama.cpp, and a chunk keeps its own)."""
    differ = [k for k in made if k != "server_version" and found.get(k) != made[k]]
    if differ:
        said = ", ".join(f"{k} {found.get(k)!r} (this run: {made[k]!r})" for k in differ)
        raise Mismatch(f"{path.name} was made another way: {said}; move the folder aside to start again")


def missing(prompts: list[Prompt], wanted: int, folder: Path, made: dict) -> list[int]:
    """The chunks of the first `wanted` prompts that are not in the folder yet."""
    todo = []
    for index in range((min(wanted, len(prompts)) + CHUNK - 1) // CHUNK):
        path = chunk_path(folder, index)
        if not path.is_file():
            todo.append(index)
            continue
        found, records = read_chunk(path)
        check_made_alike(path, found, made)
        expected = [p.text for p in prompts[index * CHUNK : (index + 1) * CHUNK]]
        if [r["text"] for r in records] != expected:
            raise Mismatch(f"{path.name} holds other prompts than corpus.py makes for seed {made['seed']}")
    return todo


def make_chunk(
    prompts: list[Prompt], index: int, tokenize: Callable[[str], list[int]], greedy, n_predict: int, slots: int
) -> list[dict]:
    """The records of chunk `index`, in the corpus's order."""

    def one(prompt: Prompt) -> dict:
        tokens = tokenize(chat(prompt.messages))
        return {"category": prompt.category, "family": prompt.family, "held_out": prompt.held_out,
                "text": prompt.text, "prompt": tokens, "continuation": greedy(tokens, n_predict)}  # fmt: skip

    with ThreadPoolExecutor(slots) as pool:
        return list(pool.map(one, prompts[index * CHUNK : (index + 1) * CHUNK]))


def records(folder: Path = FOLDER) -> Iterator[dict]:
    """Every record of every chunk, chunk by chunk."""
    for path in sorted(folder.glob("chunk-*.jsonl.gz")):
        yield from read_chunk(path)[1]


def sequences(out: Path, folder: Path = FOLDER) -> int:
    """The chunks as the `sequences.jsonl` the features and training read; how many lines."""
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with out.open("w") as sink:
        for record in records(folder):
            sink.write(json.dumps(record) + "\n")
            count += 1
    return count
