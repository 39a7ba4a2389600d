"""A repository id or a listed file path never leads out of the models folder (issue 14, item 9)."""

from __future__ import annotations

import pytest

from app.errors import ConfigError, UsageError
from app.hub.store import local_path
from app.models.catalog import parse_catalog, parse_repo_ref
from app.models.selection import RemoteFile

CATALOG = """
[bundles.evil]
[bundles.evil.target]
repo = "{repo}"
[bundles.evil.target.quants]
Q4_K_M = "*Q4_K_M*.gguf"
"""


@pytest.mark.parametrize("repo", ["../../x", "a/..", "./x", "x/.", "/etc/passwd"])
def test_a_catalog_repo_that_leaves_the_folder_is_refused(repo):
    with pytest.raises(ConfigError) as caught:
        parse_catalog(CATALOG.format(repo=repo), "my-catalog.toml")
    assert "my-catalog.toml" in caught.value.cause and "bundles.evil.target" in caught.value.cause


@pytest.mark.parametrize("ref", ["a/..", "a/..:Q4_K_M", "hf.co/../x", "./x:Q8_0"])
def test_a_repo_ref_with_dot_parts_is_refused(ref):
    with pytest.raises(UsageError):
        parse_repo_ref(ref)


@pytest.mark.parametrize(
    "path", ["../../escape.gguf", "/tmp/escape.gguf", "sub/../../../escape.gguf", "../sibling.gguf"]
)
def test_a_listed_file_path_that_leaves_the_folder_is_refused(tmp_path, path):
    models = tmp_path / "models"
    with pytest.raises(UsageError) as caught:
        local_path(models, RemoteFile("org/repo", path, 1, None, "main"))
    assert "outside the models folder" in caught.value.cause
    assert not models.exists()


def test_an_ordinary_path_is_kept(tmp_path):
    remote = RemoteFile("org/repo", "sub/model-Q4_K_M.gguf", 1, None, "main")
    assert local_path(tmp_path, remote) == tmp_path / "org" / "repo" / "sub" / "model-Q4_K_M.gguf"


def test_pull_with_such_a_catalog_exits_8_and_writes_nothing(dspine, tmp_path, models_dir):
    catalog = tmp_path / "evil.toml"
    catalog.write_text(CATALOG.format(repo="../../x"))
    result = dspine("pull", "evil", extra_env={"DSPINE_CATALOG": str(catalog)})
    assert result.returncode == 8, result.stderr
    assert "evil.toml" in result.stderr and "not a repository id" in result.stderr
    assert "unexpected" not in result.stderr
    assert not models_dir.exists()


# Issue 34: a name from the hub listing is a file name on disk and text on the terminal.
ESCAPING = ["model-\x1b]52;c;aGk=\x07-Q4_K_M.gguf", "model-\x1b[2J-Q4_K_M.gguf", "model-\nQ4_K_M.gguf", "a\x9bb.gguf"]


@pytest.mark.parametrize("path", ESCAPING)
def test_a_listed_file_name_with_a_control_character_is_refused(tmp_path, path):
    models = tmp_path / "models"
    with pytest.raises(UsageError) as caught:
        local_path(models, RemoteFile("org/repo", path, 1, None, "main"))
    assert "control character" in caught.value.cause
    assert "\x1b" not in caught.value.cause and "\n" not in caught.value.cause
    assert not models.exists()


def test_pull_of_a_repository_listing_an_escape_writes_nothing_and_prints_no_escape(dspine, hub, models_dir):
    hub.add_repo("org/escape-GGUF", {"model-\x1b]52;c;aGk=\x07\x1b[2J-Q4_K_M.gguf": b"x" * 100})
    result = dspine("pull", "org/escape-GGUF:Q4_K_M")
    assert result.returncode == 2, result.stderr
    assert "control character" in result.stderr
    assert "\x1b" not in result.stdout + result.stderr and "\x07" not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert not [p for p in models_dir.rglob("*") if p.is_file() and "escape" in str(p)]


def _manifest_naming(models_dir, name: str) -> None:
    import json

    local = models_dir / "org" / "repo" / name
    local.parent.mkdir(parents=True)
    local.write_bytes(b"x" * 10)
    record = {
        "name": name,
        "source": "repo",
        "quant": None,
        "drafter": None,
        "drafter_kind": None,
        "files": [
            {"role": "target", "repo": "org/repo", "path": name, "size": 10, "sha256": None, "commit": "c"}
            | {"local": str(local)}
        ],
    }
    manifest = {"version": 1, "pulls": {name: record}, "written": [str(local)]}
    (models_dir / "manifest.json").write_text(json.dumps(manifest))


def test_list_and_rm_show_a_recorded_escape_as_a_symbol(dspine, models_dir):
    # A manifest written before names were checked (or by hand) may hold one.
    name = "evil\x1b]0;pwned\x07[red]\x1b[2J.gguf"
    _manifest_naming(models_dir, name)
    listed = dspine("list")
    assert listed.returncode == 0, listed.stderr
    assert "\x1b" not in listed.stdout and "\x07" not in listed.stdout
    assert "␛" in listed.stdout
    removed = dspine("rm", name, "--yes")
    assert removed.returncode == 0, removed.stderr
    assert "\x1b" not in removed.stdout + removed.stderr and "\x07" not in removed.stdout + removed.stderr
    assert "␛" in removed.stdout and "[red]" in removed.stdout  # text, not Rich markup
    assert not (models_dir / "org" / "repo" / name).exists()
