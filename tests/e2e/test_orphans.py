"""Pulling a bundle again with another quant or drafter leaves the earlier files; `dspine list`
shows them and `dspine rm` deletes them (issue 14, item 2)."""

from __future__ import annotations

import json
from pathlib import Path

from app.hub.locks import held
from app.hub.orphans import find_orphans, remove_orphans
from app.hub.store import Manifest
from tests.conftest import DRAFTER_Q4, DSPINE_REPO, TARGET_Q4, TARGET_REPO

TARGET_Q8 = "Qwen3.8-27B-Q8_0.gguf"


def _orphans(dspine) -> list[dict]:
    listed = dspine("list", "--json")
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)["orphans"]


def test_another_quant_leaves_the_old_target_listed_and_removable(dspine, hub, models_dir):
    assert dspine("pull", "qwen3.8-27b").returncode == 0
    old = models_dir / TARGET_REPO / TARGET_Q4
    again = dspine("pull", "qwen3.8-27b", "--quant", "Q8_0")
    assert again.returncode == 0, again.stderr
    assert old.exists()
    assert "dspine rm --orphans" in again.stdout and str(old) in again.stdout

    orphans = _orphans(dspine)
    assert [(o["file"], o["size"]) for o in orphans] == [(TARGET_Q4, old.stat().st_size)]
    table = dspine("list")
    assert "owned by no pull" in table.stdout and TARGET_Q4 in table.stdout

    refused = dspine("rm", "--orphans")  # no terminal to ask on, no --yes
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert old.exists()

    removed = dspine("rm", "--orphans", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert not old.exists()
    assert (models_dir / TARGET_REPO / TARGET_Q8).exists()
    assert _orphans(dspine) == []
    assert "qwen3.8-27b" in json.loads(dspine("list", "--json").stdout)["pulls"]


def test_another_drafter_leaves_the_old_drafter_and_rm_takes_its_file_name(dspine, hub, models_dir):
    assert dspine("pull", "qwen3.8-27b", "--drafter", "dspine-gguf").returncode == 0
    assert dspine("pull", "qwen3.8-27b", "--drafter", "dflash2-q4").returncode == 0
    old = models_dir / DSPINE_REPO / DRAFTER_Q4
    assert [o["file"] for o in _orphans(dspine)] == [DRAFTER_Q4]
    removed = dspine("rm", DRAFTER_Q4, "--yes")
    assert removed.returncode == 0, removed.stderr
    assert not old.exists() and not old.parent.exists()
    assert (models_dir / TARGET_REPO / TARGET_Q4).exists()  # still owned by the new record


def test_rm_of_a_name_neither_pulled_nor_orphaned_names_what_is_pulled(dspine, hub):
    assert dspine("pull", "qwen3.8-27b").returncode == 0
    missing = dspine("rm", "nothing-like-it.gguf", "--yes")
    assert missing.returncode == 2
    assert "has not been pulled" in missing.stderr and "qwen3.8-27b" in missing.stderr


def test_orphans_group_companions_and_skip_the_manifest_and_lone_locks(tmp_path):
    models = tmp_path / "models"
    folder = models / "org" / "repo"
    folder.mkdir(parents=True)
    (folder / "a.gguf.part").write_bytes(b"x" * 10)
    (folder / "a.gguf.part.json").write_text("{}")
    (folder / "a.gguf.lock").write_text("1")
    (folder / "b.gguf.lock").write_text("2")  # a finished pull's lock: not an orphan
    (folder / "c.gguf").write_bytes(b"GGUF")  # another tool's model: never written by a pull
    written = [str(folder / "a.gguf"), str(folder / "b.gguf")]
    (models / "manifest.json").write_text(json.dumps({"version": 1, "pulls": {}, "written": written}))
    (models / "manifest.json.lock").write_text("")
    (models / "manifest.json.damaged-20260101-000000").write_text("junk")
    (folder / "notes.txt").write_text("another tool's file")  # not a GGUF: not dspine's
    (models / "loose.gguf").write_text("not at ORG/REPO/")  # outside dspine's layout
    orphans = find_orphans(Manifest(models / "manifest.json"), models)
    assert [o.name for o in orphans] == ["a.gguf"]
    assert orphans[0].size == 10 + 2


def test_an_orphan_a_pull_is_fetching_is_kept(tmp_path):
    models = tmp_path / "models"
    final = models / "org" / "repo" / "a.gguf"
    final.parent.mkdir(parents=True)
    final.with_name("a.gguf.part").write_bytes(b"x" * 10)
    (models / "manifest.json").write_text(json.dumps({"version": 1, "pulls": {}, "written": [str(final)]}))
    orphans = find_orphans(Manifest(models / "manifest.json"), models)
    with held(final):
        removal = remove_orphans(orphans, models)
    assert removal.busy == [final.resolve()] and removal.deleted == []
    assert final.with_name("a.gguf.part").exists()
    removal = remove_orphans(orphans, models)
    assert removal.freed == 10 and not Path(final.parent).exists()


def test_a_manifest_field_from_a_newer_dspine_does_not_disown_the_pulled_files(dspine, hub, models_dir):
    assert dspine("pull", "qwen3.8-27b").returncode == 0
    path = models_dir / "manifest.json"
    data = json.loads(path.read_text())
    record = next(iter(data["pulls"].values()))
    record["files"][0]["added_by_a_newer_dspine"] = 1
    record["also_new"] = "x"
    path.write_text(json.dumps(data))
    assert Manifest(path).set_aside is None
    assert _orphans(dspine) == []
    assert dspine("rm", "--orphans", "--yes").returncode == 0
    assert (models_dir / TARGET_REPO / TARGET_Q4).exists()


def test_rm_deletes_nothing_as_unowned_when_the_manifest_cannot_say_what_is_owned(dspine, hub, models_dir):
    assert dspine("pull", "qwen3.8-27b").returncode == 0
    pulled = models_dir / TARGET_REPO / TARGET_Q4
    path = models_dir / "manifest.json"
    good = path.read_text()

    path.write_text("{ not json")  # damaged: set aside on reading
    refused = dspine("rm", "--orphans", "--yes")
    assert refused.returncode == 8 and "set aside" in refused.stderr and "Traceback" not in refused.stderr
    assert pulled.exists()

    for leftover in models_dir.glob("manifest.json*"):
        leftover.unlink()  # no manifest at all
    refused = dspine("rm", TARGET_Q4, "--yes")  # nothing is recorded as written: not an orphan
    assert refused.returncode == 2 and "has not been pulled" in refused.stderr
    assert dspine("rm", "--orphans", "--yes").returncode == 0
    assert pulled.exists()

    moved = json.loads(good)  # the manifest names files elsewhere (the models folder was moved)
    for record in moved["pulls"].values():
        for stored in record["files"]:
            stored["local"] = str(Path("/nonexistent-old-models") / Path(stored["local"]).name)
    path.write_text(json.dumps(moved))
    refused = dspine("rm", "--orphans", "--yes")
    assert refused.returncode == 8 and "not where it says" in refused.stderr
    assert pulled.exists()


def test_rm_of_a_file_name_two_orphans_share_asks_for_its_path(dspine, hub, models_dir):
    assert dspine("pull", "qwen3.8-27b").returncode == 0
    first, second = models_dir / "a" / "b" / "dup.gguf", models_dir / "c" / "d" / "dup.gguf"
    for path in (first, second):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"GGUF" + b"\0" * 60)
    manifest = models_dir / "manifest.json"  # as if earlier pulls had written both
    data = json.loads(manifest.read_text())
    data["written"] += [str(first), str(second)]
    manifest.write_text(json.dumps(data))
    ambiguous = dspine("rm", "dup.gguf", "--yes")
    assert ambiguous.returncode == 2 and "a/b/dup.gguf" in ambiguous.stderr and "c/d/dup.gguf" in ambiguous.stderr
    assert first.exists() and second.exists()
    chosen = dspine("rm", "c/d/dup.gguf", "--yes")
    assert chosen.returncode == 0, chosen.stderr
    assert first.exists() and not second.exists()


def test_a_file_a_pull_recorded_after_it_was_listed_is_kept(dspine, hub, models_dir):
    assert dspine("pull", "qwen3.8-27b").returncode == 0
    assert dspine("pull", "qwen3.8-27b", "--quant", "Q8_0").returncode == 0
    manifest_path = models_dir / "manifest.json"
    listed = find_orphans(Manifest(manifest_path), models_dir)
    old = models_dir / TARGET_REPO / TARGET_Q4
    assert [o.final for o in listed] == [old.resolve()]
    # While the user reads rm's question, the Q4 is pulled again: it is owned once more.
    assert dspine("pull", "qwen3.8-27b").returncode == 0
    removal = remove_orphans(listed, models_dir, manifest_path)
    assert removal.owned == [old.resolve()] and removal.deleted == []
    assert old.exists()


def test_another_tools_models_in_a_shared_folder_are_never_orphans(dspine, hub, models_dir):
    assert dspine("pull", "qwen3.8-27b").returncode == 0
    theirs = models_dir / "lmstudio-community" / "SomeModel-GGUF" / "SomeModel-Q4_K_M.gguf"
    theirs.parent.mkdir(parents=True)
    theirs.write_bytes(b"GGUF" + b"\0" * 60)
    assert _orphans(dspine) == []
    assert dspine("rm", "--orphans", "--yes").returncode == 0
    assert dspine("rm", theirs.name, "--yes").returncode == 2  # not dspine's: "has not been pulled"
    assert theirs.exists()
