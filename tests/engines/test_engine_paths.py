"""The engines write where the settings say (issue 26, item 4): llama-server's logs under
log_dir (0700, each log 0600), learned draft lengths in adaptive_draft_file; nothing
in the default folders."""

from __future__ import annotations

import json


def test_engines_write_logs_and_learned_lengths_where_the_settings_say(dspine, models, tmp_path):
    files = models["dense"]
    logs = tmp_path / "deep" / "logs"
    learned = tmp_path / "learned" / "draft.json"
    moved = {"DSPINE_LOG_DIR": str(logs), "DSPINE_ADAPTIVE_DRAFT_FILE": str(learned)}
    for engine in ("server", "inproc"):
        done = dspine(
            "run", str(files["target"]), "hello", "--draft", str(files["same"]), "--engine", engine,
            "--temp", "0", "-n", "8", "--json", extra_env=moved,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    server_logs = list(logs.glob("llama-server-*.log"))
    assert server_logs and all(log.stat().st_mode & 0o777 == 0o600 for log in server_logs)
    assert logs.stat().st_mode & 0o777 == 0o700 and logs.parent.stat().st_mode & 0o777 == 0o700
    assert any(key.startswith(files["target"].name) for key in json.loads(learned.read_text()))
    default_place = tmp_path / "data" / "dspine"  # XDG_DATA_HOME of the test user
    assert not (default_place / "adaptive-draft.json").exists()
    assert not list((tmp_path / "state").rglob("llama-server-*.log"))
