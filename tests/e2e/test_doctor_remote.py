"""`dspine doctor --url`: a remote server described as checks, and each failure as one."""

from __future__ import annotations

import json

from tests.support.remote_servers import shaped_server


def _checks(result) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads(result.stdout)}


def test_doctor_describes_a_vllm_server_and_what_would_report_more(dspine):
    with shaped_server(key="sk-v") as upstream:
        done = dspine("doctor", "--url", upstream.url, "--json", extra_env={"DSPINE_API_KEY": "sk-v"})
    assert done.returncode == 0, done.stderr
    checks = _checks(done)
    assert "vLLM" in checks["remote server"]["detail"] and "Qwen/Qwen3-8B" in checks["remote server"]["detail"]
    assert checks["remote window"]["detail"].startswith("32,768 tokens")
    assert "/metrics" in checks["remote acceptance"]["detail"]
    assert "--per-request-spec-decode-metrics" in checks["remote acceptance"]["fix"]
    assert not checks["remote plain rows"]["ok"]


def test_doctor_fails_on_a_wrong_key_and_a_model_name_is_shown_as_text(dspine):
    with shaped_server(key="sk-v") as upstream:
        refused = dspine("doctor", "--url", upstream.url, "--json", extra_env={"DSPINE_API_KEY": "sk-nope"})
        assert refused.returncode == 1
        assert "refused the API key" in _checks(refused)["remote server"]["detail"]
        table = dspine("doctor", "--url", upstream.url, extra_env={"DSPINE_API_KEY": "sk-v", "COLUMNS": "200"})
    assert table.returncode == 0 and "Qwen/Qwen3-8B" in table.stdout


def test_a_served_name_with_markup_is_printed_as_it_is(dspine):
    with shaped_server(kind="generic", model_id="[red]m[/red]") as upstream:
        done = dspine("doctor", "--url", upstream.url, extra_env={"COLUMNS": "200"})
    assert done.returncode == 0 and "serving [red]m[/red]" in done.stdout
