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
