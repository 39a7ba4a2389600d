"""A models folder or chats database the user cannot write is a clear error with a
non-zero exit, not "unexpected ... report it" (issue 14, item 9).

Tests run as root here, where file modes do not stop a write; /sys refuses every
mkdir even to root, and a file where a folder should be refuses it to anyone.
"""

from __future__ import annotations

import pytest


@pytest.fixture(params=["sysfs", "file-in-the-way"])
def unwritable_dir(request, tmp_path):
    if request.param == "sysfs":
        return "/sys/dspine-test-models"
    (tmp_path / "blocker").write_text("a file, not a folder")
    return str(tmp_path / "blocker" / "models")


def test_pull_into_an_unwritable_models_folder(dspine, hub, unwritable_dir):
    result = dspine("pull", "qwen3.8-27b", extra_env={"DSPINE_MODELS_DIR": unwritable_dir})
    assert result.returncode == 8, result.stderr
    assert "unexpected" not in result.stderr and "Traceback" not in result.stderr
    assert unwritable_dir in result.stderr and "models_dir" in result.stderr


def test_list_with_an_unwritable_models_folder(dspine, hub, unwritable_dir):
    listed = dspine("list", extra_env={"DSPINE_MODELS_DIR": unwritable_dir})
    assert "unexpected" not in listed.stderr and "Traceback" not in listed.stderr
    if listed.returncode == 0:  # nothing there to read: nothing pulled
        assert "nothing pulled yet" in listed.stdout
    else:  # a file where the folder should be
        assert listed.returncode == 8 and "models_dir" in listed.stderr


def test_chat_with_an_unwritable_chats_db(dspine, tmp_path, unwritable_dir):
    config = tmp_path / "settings.toml"
    config.write_text(f'chats_db = "{unwritable_dir}/chats.db"\n')
    result = dspine("chat", extra_env={"DSPINE_CONFIG": str(config)})
    assert result.returncode == 8, result.stderr
    assert "unexpected" not in result.stderr and "Traceback" not in result.stderr
    assert "chats_db" in result.stderr


def test_a_repository_folder_that_cannot_be_made_is_a_clear_error(dspine, hub, models_dir):
    models_dir.mkdir(parents=True)
    (models_dir / "unsloth").write_text("a file where the repository's folder goes")
    result = dspine("pull", "qwen3.8-27b")
    assert result.returncode == 8, result.stderr
    assert "unexpected" not in result.stderr
    assert "unsloth" in result.stderr and "models_dir" in result.stderr
